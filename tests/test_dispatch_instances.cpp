// A model written against <ember/dispatch/nn.hpp>: the modules, losses and optimizers whose
// Dispatch instances ember_dispatch compiles (src/dispatch/instances_*.cpp) and this header
// declares extern. These cases link against those instances and check them on values from
// arithmetic: constant-initialised layers, and Adam's first step, which moves each parameter
// by the learning rate against the sign of its gradient.
#include <ember/dispatch/nn.hpp>

#include "harness.hpp"

namespace test_dispatch_instances {

using ember::Dispatch;
using ember::Tensor;
using ember::TensorData;
using ember::test::check_close;
using Dev = ember::Device<Dispatch>;
namespace nn = ember::nn;

TEST_CASE("dispatch instances: Linear and Conv2d with constant weights", "[dispatch]") {
    for (const auto* name : {"cpu", "cpu+autodiff", "cpu+fusion"}) {
        INFO(name);
        const Dev dev = Dev::parse(name);
        const auto half = nn::Initializer::Constant(0.5);
        // y = x·W + b with every weight and bias 0.5: 0.5 · (1 + 2 + 3) + 0.5 = 3.5.
        auto linear = nn::LinearConfig{3, 2}.with_initializer(half).init<Dispatch>(dev);
        auto x = Tensor<Dispatch, 2>::from_data(TensorData({1.f, 2.f, 3.f}, {1, 3}), dev);
        check_close(linear.forward(x).to_data(), TensorData({3.5f, 3.5f}, {1, 2}));
        // Rank 3 through the same layer: [2, 1, 3] → [2, 1, 2].
        auto x3 = Tensor<Dispatch, 3>::from_data(
            TensorData({1.f, 2.f, 3.f, 0.f, 0.f, 0.f}, {2, 1, 3}), dev);
        check_close(linear.forward(x3).to_data(), TensorData({3.5f, 3.5f, 0.5f, 0.5f}, {2, 1, 2}));
        // A 3×3 kernel of 0.5 over a 3×3 input of ones, bias 0.5: 9 · 0.5 + 0.5 = 5.
        auto conv = nn::Conv2dConfig{{1, 2}, {3, 3}}.with_initializer(half).init<Dispatch>(dev);
        auto ones = Tensor<Dispatch, 4>::ones({1, 1, 3, 3}, dev);
        check_close(conv.forward(ones).to_data(), TensorData({5.f, 5.f}, {1, 2, 1, 1}));
        // LayerNorm of [1, 2, 3]: mean 2, variance 2/3, so ±1/√(2/3 + ε).
        auto norm = nn::LayerNormConfig{3}.init<Dispatch>(dev);
        const float s = float(1.0 / std::sqrt(2.0 / 3.0 + 1e-5));
        check_close(norm.forward(x).to_data(), TensorData({-s, 0.f, s}, {1, 3}));
    }
}

TEST_CASE("dispatch instances: an Adam step of a Linear layer", "[dispatch]") {
    const Dev dev = Dev::parse("cpu+autodiff");
    auto model =
        nn::LinearConfig{2, 1}.with_initializer(nn::Initializer::Constant(0.5)).init<Dispatch>(dev);
    auto optim = ember::optim::AdamConfig{}.init<nn::Linear<Dispatch>>();
    auto x = Tensor<Dispatch, 2>::from_data(TensorData({1.f, -2.f}, {1, 2}), dev);
    // loss = x·W + b: dW = xᵀ = [1, -2], db = 1. Adam's first step is lr · g / (|g| + ε): each
    // parameter moves by (almost exactly) lr against its gradient's sign.
    auto loss = model.forward(x).sum();
    auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
    model = optim.step(0.1, std::move(model), std::move(grads));
    check_close(model.weight.val().to_data(), TensorData({0.4f, 0.6f}, {2, 1}), {1e-5, 1e-5});
    check_close(model.bias->val().to_data(), TensorData({0.4f}, {1}), {1e-5, 1e-5});
    // Cross-entropy through the loss's instance: a layer of zeros scores both classes 0, so the
    // loss of either target is log 2.
    auto two =
        nn::LinearConfig{2, 2}.with_initializer(nn::Initializer::Zeros()).init<Dispatch>(dev);
    auto targets = Tensor<Dispatch, 1, ember::Int>::from_ints({0}, dev);
    auto ce =
        nn::loss::CrossEntropyLossConfig{}.init<Dispatch>(dev).forward(two.forward(x), targets);
    check_close(ce.to_data(), TensorData({float(std::log(2.0))}, {1}), {1e-5, 1e-5});
}

// The module members a model calls are defined out of their classes and their Dispatch
// instances declared extern in <ember/dispatch/nn.hpp>: this file compiles calls to the copies in
// ember_dispatch, and these cases link against them and check them against each other.
TEST_CASE("dispatch instances: the modules' forwards and Param's members from the library",
          "[dispatch]") {
    const Dev dev = Dev::parse("cpu");  // inference: dropout is the identity
    const std::size_t batch = 2, seq = 5, d = 8;
    auto x = Tensor<Dispatch, 3>::random({batch, seq, d}, ember::Distribution::Normal(0, 1), dev);

    // The encoder's causal forward, stepped through its autoregressive cache, and one layer's
    // incremental forward, give the same outputs as the whole causal forward.
    auto enc = nn::TransformerEncoderConfig{d, 16, 2, 2}.init<Dispatch>(dev);
    auto full = enc.forward(nn::TransformerEncoderInput<Dispatch>(x).causal());
    auto cache = enc.new_autoregressive_cache();
    enc.forward_autoregressive_inference(
        nn::TransformerEncoderInput<Dispatch>(x.narrow(1, 0, 3)).causal(), cache);
    auto all = enc.forward_autoregressive_inference(
        nn::TransformerEncoderInput<Dispatch>(x).causal(), cache);
    check_close(all.to_data(), full.to_data(), {1e-5, 1e-4});
    const auto& layer = enc.layers[0];
    auto layer_full = layer.forward(x, std::nullopt, std::nullopt, true);
    auto layer_cache = nn::MhaCache<Dispatch>::autoregressive();
    auto first =
        layer.forward_incremental(x.narrow(1, 0, 3), std::nullopt, std::nullopt, layer_cache, true);
    auto rest =
        layer.forward_incremental(x.narrow(1, 3, 2), std::nullopt, std::nullopt, layer_cache, true);
    check_close(Tensor<Dispatch, 3>::cat({first, rest}, 1).to_data(), layer_full.to_data(),
                {1e-5, 1e-4});
    auto mha_full = layer.mha.forward(nn::MhaInput<Dispatch>::self_attn(x).causal());
    auto mha_cache = nn::MhaCache<Dispatch>::autoregressive();
    auto mha_first = layer.mha.forward_incremental(
        nn::MhaInput<Dispatch>::self_attn(x.narrow(1, 0, 3)).causal(), mha_cache);
    auto mha_rest = layer.mha.forward_incremental(
        nn::MhaInput<Dispatch>::self_attn(x.narrow(1, 3, 2)).causal(), mha_cache);
    check_close(Tensor<Dispatch, 3>::cat({mha_first.context, mha_rest.context}, 1).to_data(),
                mha_full.context.to_data(), {1e-5, 1e-4});

    // Embedding, Conv1d and ConvTranspose2d with constant weights.
    const auto half = nn::Initializer::Constant(0.5);
    auto embedding = nn::EmbeddingConfig{4, 3}.with_initializer(half).init<Dispatch>(dev);
    auto ids = Tensor<Dispatch, 1, ember::Int>::from_ints({0, 3}, dev).reshape<2>({1, 2});
    check_close(embedding.forward(ids).to_data(),
                TensorData(std::vector<float>(6, 0.5f), {1, 2, 3}));
    // A kernel of 3 taps of 0.5 over ones, bias 0.5: 3 · 0.5 + 0.5 = 2.
    auto conv1 = nn::Conv1dConfig{1, 1, 3}.with_initializer(half).init<Dispatch>(dev);
    check_close(conv1.forward(Tensor<Dispatch, 3>::ones({1, 1, 4}, dev)).to_data(),
                TensorData({2.f, 2.f}, {1, 1, 2}));
    // A 1×1 transposed kernel of 0.5 over ones, bias 0.5: 0.5 + 0.5 = 1.
    auto deconv =
        nn::ConvTranspose2dConfig{{1, 1}, {1, 1}}.with_initializer(half).init<Dispatch>(dev);
    check_close(deconv.forward(Tensor<Dispatch, 4>::ones({1, 1, 2, 2}, dev)).to_data(),
                TensorData(std::vector<float>(4, 1.f), {1, 1, 2, 2}));

    // Lstm and Gru: [batch, seq, hidden] outputs.
    auto lstm = nn::LstmConfig{d, 4}.init<Dispatch>(dev);
    auto [lstm_out, lstm_state] = lstm.forward(x);
    CHECK(lstm_out.dims() == std::array<std::size_t, 3>{batch, seq, 4});
    auto gru = nn::GruConfig{d, 4}.init<Dispatch>(dev);
    CHECK(gru.forward(x).dims() == std::array<std::size_t, 3>{batch, seq, 4});

    // Param's members.
    const auto& weight = embedding.weight;
    CHECK(weight.is_initialized());
    CHECK(weight.shape() == ember::Shape{4, 3});
    CHECK(weight.dtype() == ember::DType::F32);
    CHECK(weight.num_params() == 12);
    CHECK(weight.device() == dev);
    CHECK_FALSE(weight.set_require_grad(false).is_require_grad());
    auto moved = weight.to_device(dev).with_value(Tensor<Dispatch, 2>::zeros({4, 3}, dev));
    CHECK(moved.id() == weight.id());
    check_close(moved.val().to_data(), TensorData(std::vector<float>(12, 0.f), {4, 3}));
}

namespace {
// A model of library modules in a vector, an optional and a stateless module, with a plain
// field: on Dispatch its walks go through the per-module functions of ember_dispatch.
template <typename B>
struct WalkNet {
    nn::Linear<B> first;
    std::vector<nn::Linear<B>> blocks;
    std::optional<nn::LayerNorm<B>> norm;
    nn::Relu act;
    std::size_t width = 3;
    EMBER_MODULE(WalkNet, first, blocks, norm, act, width)
};
// A rank-5 parameter has no entry in ParamVisitor: this model keeps the direct walks, and its
// WalkNet goes through the per-module functions.
template <typename B>
struct WalkNet5 {
    ember::Param<Tensor<B, 5>> kernel;
    WalkNet<B> net;
    EMBER_MODULE(WalkNet5, kernel, net)
};

template <typename B>
WalkNet5<B> walk_net(const ember::Device<B>& dev) {
    const auto half = nn::Initializer::Constant(0.5);
    auto linear = [&] { return nn::LinearConfig{3, 3}.with_initializer(half).init<B>(dev); };
    return {nn::Initializer::Constant(0.25).init<B, 5>({1, 1, 1, 2, 2}, dev, std::nullopt,
                                                       std::nullopt),
            {linear(), {linear(), linear()}, nn::LayerNormConfig{3}.init<B>(dev), {}, 3}};
}

// What visit sees of `m`: each parameter's path and values.
template <typename M>
std::vector<std::pair<std::string, std::vector<float>>> visited(const M& m) {
    std::vector<std::pair<std::string, std::vector<float>>> out;
    m.visit([&](std::string_view path, const auto& p) {
        out.emplace_back(std::string(path), p.val().to_data().template to_vec<float>());
    });
    return out;
}
}  // namespace

TEST_CASE("dispatch instances: module walks through the per-module functions", "[dispatch]") {
    namespace md = ember::module::detail;
    using Concrete = ember::Autodiff<ember::Cpu>;
    static_assert(md::CompiledWalk<nn::Linear<Dispatch>>);
    static_assert(md::CompiledWalk<WalkNet<Dispatch>>);
    static_assert(!md::CompiledWalk<WalkNet5<Dispatch>>);  // the rank-5 parameter
    static_assert(!md::CompiledWalk<WalkNet<Concrete>>);   // the generic path: direct walks
    const Dev dev = Dev::parse("cpu+autodiff");
    const auto net = walk_net<Dispatch>(dev);
    const auto ref = walk_net<Concrete>(ember::Device<Concrete>{});
    // visit: the same paths, order and values as the direct walks of the concrete stack.
    const auto seen = visited(net);
    CHECK(seen == visited(ref));
    REQUIRE(seen.size() == 9);  // the kernel, 3 Linears' weight and bias, LayerNorm's γ and β
    CHECK(seen[0].first == "kernel");
    CHECK(seen[5].first == "net.blocks.1.weight");
    CHECK(seen[8].first == "net.norm.beta");
    CHECK(net.num_params() == ref.num_params());
    // map: every parameter doubled, ids kept, in every part of the model.
    const auto doubled =
        net.map([](std::string_view, const auto& p) { return p.with_value(p.val() * 2); });
    const auto twice = visited(doubled);
    for (std::size_t i = 0; i < seen.size(); ++i) {
        INFO(seen[i].first);
        CHECK(twice[i].first == seen[i].first);
        for (std::size_t j = 0; j < seen[i].second.size(); ++j)
            CHECK(twice[i].second[j] == 2 * seen[i].second[j]);
    }
    std::vector<ember::ParamId> ids, doubled_ids;
    net.visit([&](std::string_view, const auto& p) { ids.push_back(p.id()); });
    doubled.visit([&](std::string_view, const auto& p) { doubled_ids.push_back(p.id()); });
    CHECK(ids == doubled_ids);
    // valid(), no_grad(), to_device and fork keep the values; valid() leaves autodiff.
    const auto infer = net.valid();
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(infer)>, WalkNet5<Dispatch>>);
    CHECK(visited(infer) == seen);
    CHECK_FALSE(infer.net.blocks[1].weight.val().device().has_autodiff());
    CHECK(visited(net.no_grad()) == seen);
    bool any_trainable = false;
    net.no_grad().visit([&](std::string_view, const auto& p) {
        any_trainable = any_trainable || p.is_require_grad();
    });
    CHECK_FALSE(any_trainable);
    const Dev plain = Dev::parse("cpu");
    const auto moved = net.to_device(plain);
    CHECK(visited(moved) == seen);
    CHECK(moved.net.norm->gamma.val().device() == plain);
    CHECK(visited(net.fork(dev)) == seen);
    // Records: the doubled model's record loaded over the first, on each parameter's device and
    // onto another one, gives the doubled values.
    const auto record = doubled.into_record();
    CHECK(visited(net.load_record(record)) == twice);
    const auto loaded = ember::module::load_record(net, record, plain);
    CHECK(visited(loaded) == twice);
    CHECK(loaded.net.first.weight.val().device() == plain);
}

}  // namespace test_dispatch_instances
