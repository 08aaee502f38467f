// Module ops composed from other ops (tensor/module_ops_composed.hpp: pixel_shuffle,
// pixel_unshuffle, unfold4d, fold4d, avg_pool3d, max_pool3d with indices, adaptive_avg_pool3d)
// and the layers of nn/utility.hpp, nn/pool3d.hpp and nn/rnn_elman.hpp (Identity, PixelShuffle,
// PixelUnshuffle, Unfold4d, Fold4d, pools 3-d, CosineSimilarity, PairwiseDistance,
// GaussianNoise, LocalResponseNorm, Rnn, BiRnn, BiGru) against torch
// (tests/fixtures/gen_nn_layers_ext.py), with gradients against torch and finite differences,
// and their errors.
#include <cmath>
#include <sstream>
#include <string>

#include <ember/nn/cross_attention.hpp>
#include <ember/nn/loss_ctc.hpp>
#include <ember/nn/pool3d.hpp>
#include <ember/nn/rnn_elman.hpp>
#include <ember/nn/utility.hpp>

#include "grad_check.hpp"
#include "module_check.hpp"

namespace test_nn_layers_ext {

namespace {

using Catch::Contains;
using ember::Tensor;
using ember::test::check_close;
using ember::test::Fixture;
using ember::test::In;
using ember::test::load_params;
namespace nn = ember::nn;
namespace mod = ember::module;

constexpr const char* kOps = "module_ops_composed";
constexpr const char* kLayers = "nn_layers_ext";

// Each case of module_ops_composed.json with its op, options as in the generator.
#define EMBER_OP_CASES(X)                                                                          \
    X("pixel_shuffle", 4, mod::pixel_shuffle(x, 2))                                                \
    X("pixel_shuffle_5d", 5, mod::pixel_shuffle(x, 3))                                             \
    X("pixel_unshuffle", 4, mod::pixel_unshuffle(x, 2))                                            \
    X("pixel_unshuffle_3d", 3, mod::pixel_unshuffle(x, 3))                                         \
    X("unfold", 4, mod::unfold4d(x, {2, 3}))                                                       \
    X("unfold_options", 4, mod::unfold4d(x, {3, 2}, ember::UnfoldOptions{{2, 1}, {1, 2}, {2, 1}})) \
    X("fold", 3, mod::fold4d(x, {5, 6}, {2, 3}))                                                   \
    X("fold_options", 3,                                                                           \
      mod::fold4d(x, {7, 7}, {2, 2}, ember::UnfoldOptions{{2, 1}, {1, 0}, {1, 2}}))                \
    X("avg_pool3d", 5, mod::avg_pool3d(x, {2, 3, 2}, {2, 2, 2}, {1, 1, 0}))                        \
    X("avg_pool3d_exclude_ceil", 5,                                                                \
      mod::avg_pool3d(x, {3, 2, 3}, {2, 2, 2}, {1, 1, 1}, false, true))                            \
    X("max_pool3d", 5, mod::max_pool3d(x, {2, 2, 3}, {2, 1, 2}, {1, 0, 1}, {1, 2, 1}))             \
    X("max_pool3d_ceil", 5, mod::max_pool3d(x, {2, 3, 2}, {2, 2, 2}, {0, 1, 1}, {1, 1, 1}, true))  \
    X("adaptive_avg_pool3d", 5, mod::adaptive_avg_pool3d(x, {3, 4, 2}))                            \
    X("adaptive_avg_pool3d_up", 5, mod::adaptive_avg_pool3d(x, {3, 2, 4}))

bool flag(const Fixture& f, const char* key) {
    return f.param(key) != 0.0;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("composed module ops match torch", "[module][composed]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
#define EMBER_FORWARD(name, rank, expr)                                                  \
    SECTION(name) {                                                                      \
        const Fixture f(kOps, name);                                                     \
        auto x = f.tensor<B, rank>(0);                                                   \
        check_close((expr).to_data(), f.output(0), ember::test::default_tolerance<B>()); \
    }
    EMBER_OP_CASES(EMBER_FORWARD)
#undef EMBER_FORWARD
}

TEMPLATE_LIST_TEST_CASE("composed module ops: gradients match torch and finite differences",
                        "[module][composed][autodiff]", ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
#define EMBER_GRAD(name, rank, expr)                                                               \
    SECTION(name) {                                                                                \
        ember::test::check_gradients<B, In<rank>>(kOps, name, [](const auto& x) { return expr; }); \
    }
    EMBER_OP_CASES(EMBER_GRAD)
#undef EMBER_GRAD
}

TEMPLATE_LIST_TEST_CASE("max_pool3d_with_indices matches torch's values and indices",
                        "[module][composed]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("padded, dilated") {
        const Fixture f(kLayers, "max_pool3d_indices");
        auto x = f.named_tensor<B, 5>("input");
        auto [v, i] = mod::max_pool3d_with_indices(x, {2, 2, 3}, {2, 1, 2}, {1, 0, 1}, {1, 2, 1});
        CHECK(i.to_data() == f.named("indices"));
        check_close(v.to_data(),
                    mod::max_pool3d(x, {2, 2, 3}, {2, 1, 2}, {1, 0, 1}, {1, 2, 1}).to_data());
    }
    SECTION("ceil mode") {
        const Fixture f(kLayers, "max_pool3d_ceil_indices");
        auto x = f.named_tensor<B, 5>("input");
        auto [v, i] =
            mod::max_pool3d_with_indices(x, {2, 3, 2}, {2, 2, 2}, {0, 1, 1}, {1, 1, 1}, true);
        CHECK(i.to_data() == f.named("indices"));
    }
}

TEMPLATE_LIST_TEST_CASE("composed module ops: bad arguments throw errors naming the op",
                        "[module][composed][errors]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto x4 = Tensor<B, 4>::zeros({1, 6, 4, 5});
    auto x5 = Tensor<B, 5>::zeros({1, 2, 3, 4, 5});
    CHECK_THROWS_AS(mod::pixel_shuffle(x4, 2), ember::ShapeError);
    CHECK_THROWS_WITH(mod::pixel_shuffle(x4, 2),
                      Contains("pixel_shuffle") && Contains("[1, 6, 4, 5]"));
    CHECK_THROWS_AS(mod::pixel_shuffle(x4, 0), ember::ArgumentError);
    CHECK_THROWS_WITH(mod::pixel_unshuffle(x4, 2),
                      Contains("pixel_unshuffle") && Contains("[1, 6, 4, 5]"));
    CHECK_THROWS_AS(mod::unfold4d(x4, {5, 2}), ember::ShapeError);
    CHECK_THROWS_WITH(mod::unfold4d(x4, {5, 2}), Contains("unfold4d") && Contains("(4, 5)"));
    CHECK_THROWS_AS(mod::unfold4d(x4, {0, 2}), ember::ArgumentError);
    // Huge sizes are refused with typed errors, never a wrapped product or a huge allocation.
    const std::size_t huge = std::size_t(1) << 40;
    CHECK_THROWS_AS(mod::unfold4d(x4, {huge, 1}), ember::Error);
    CHECK_THROWS_AS(mod::unfold4d(x4, {1, 1}, ember::UnfoldOptions{{1, 1}, {huge, huge}, {1, 1}}),
                    ember::ShapeError);
    CHECK_THROWS_AS(mod::pixel_shuffle(x4, huge), ember::ShapeError);
    CHECK_THROWS_AS(mod::avg_pool3d(x5, {huge, 1, 1}, {1, 1, 1}), ember::Error);
    auto cols = Tensor<B, 3>::zeros({1, 12, 7});
    CHECK_THROWS_AS(mod::fold4d(cols, {4, 5}, {2, 2}), ember::ShapeError);
    CHECK_THROWS_AS(mod::fold4d(cols, {4, 5}, {huge, huge}), ember::Error);
    CHECK_THROWS_WITH(mod::fold4d(cols, {4, 5}, {2, 2}),
                      Contains("fold4d") && Contains("[1, 12, 7]") && Contains("12"));
    CHECK_THROWS_WITH(mod::fold4d(Tensor<B, 3>::zeros({1, 10, 12}), {4, 5}, {2, 2}),
                      Contains("fold4d") && Contains("[1, 10, 12]"));
    CHECK_THROWS_AS(mod::avg_pool3d(x5, {2, 2, 2}, {1, 1, 1}, {2, 0, 0}), ember::ArgumentError);
    CHECK_THROWS_WITH(mod::avg_pool3d(x5, {2, 2, 2}, {1, 1, 1}, {2, 0, 0}),
                      Contains("avg_pool3d") && Contains("[1, 2, 3, 4, 5]"));
    CHECK_THROWS_AS(mod::max_pool3d(x5, {4, 1, 1}, {1, 1, 1}), ember::ShapeError);
    CHECK_THROWS_WITH(mod::max_pool3d(x5, {4, 1, 1}, {1, 1, 1}),
                      Contains("max_pool3d") && Contains("[1, 2, 3, 4, 5]"));
    CHECK_THROWS_AS(mod::max_pool3d_with_indices(x5, {1, 0, 1}, {1, 1, 1}), ember::ArgumentError);
    CHECK_THROWS_WITH(mod::adaptive_avg_pool3d(x5, {1, 0, 1}),
                      Contains("adaptive_avg_pool3d") && Contains("[1, 2, 3, 4, 5]"));
}

TEMPLATE_LIST_TEST_CASE("module::ctc_loss gives torch's per-sequence CTC losses and gradients",
                        "[module][loss]", ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;
    using ember::Int;
    // tests/fixtures/gen_nn_loss.py's reduction='none' cases.
    for (const char* name : {"ctc_none", "ctc_zero_infinity_none"}) {
        DYNAMIC_SECTION(name) {
            const Fixture f("nn_loss", name);
            const auto blank = std::size_t(f.param("blank"));
            const bool zero_inf = f.param("zero_infinity") != 0;
            ember::test::check_gradients<AD, In<3>, In<2, Int>, In<1, Int>, In<1, Int>>(
                "nn_loss", name, [&](const auto& x, const auto& y, const auto& il, const auto& tl) {
                    return mod::ctc_loss(ember::activation::log_softmax(x, 2), y, il, tl, blank,
                                         zero_inf);
                });
        }
    }
}

// ---- layers ------------------------------------------------------------------------------------

namespace {

template <typename T, typename G>
void check_grad(const T& t, const Fixture& f, const std::string& name, const G& grads) {
    INFO("gradient of " << name);
    auto g = t.grad(grads);
    REQUIRE(g.has_value());
    check_close(g->to_data(), f.named("grad." + name));
}

// An Rnn/BiRnn/BiGru case: output, final state and every gradient against torch.
template <typename B, std::size_t DS, typename M>
void recurrent_case(const M& config_model, const Fixture& f) {
    auto model = load_params(config_model, f);
    auto input = f.named_tensor<B, 3>("input").require_grad();
    std::optional<Tensor<B, DS>> state;
    if (flag(f, "with_state")) state = f.named_tensor<B, DS>("state").require_grad();
    auto [out, fin] = model.forward(input, state);
    check_close(out.to_data(), f.named("output"));
    check_close(fin.to_data(), f.named("final"));
    auto grads = ((out * f.named_tensor<B, 3>("gout")).sum() +
                  (fin * f.named_tensor<B, DS>("gout.final")).sum())
                     .backward();
    std::size_t n = 0;
    model.visit([&](std::string_view path, const auto& p) {
        check_grad(p.val(), f, std::string(path), grads);
        ++n;
    });
    CHECK(n > 0);
    check_grad(input, f, "input", grads);
    if (state) check_grad(*state, f, "state", grads);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("Rnn, BiRnn and BiGru match torch.nn.RNN and GRU", "[nn][rnn]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto act = [](const Fixture& f) {
        return flag(f, "relu") ? nn::RnnActivation::Relu : nn::RnnActivation::Tanh;
    };
    for (const std::string name : {"rnn_tanh", "rnn_relu_seq_first_state", "rnn_no_bias"}) {
        SECTION(name) {
            const Fixture f(kLayers, name);
            recurrent_case<B, 2>(nn::RnnConfig{3, 4}
                                     .with_bias(flag(f, "bias"))
                                     .with_nonlinearity(act(f))
                                     .with_batch_first(flag(f, "batch_first"))
                                     .template init<B>(),
                                 f);
        }
    }
    for (const std::string name : {"birnn", "birnn_relu_seq_first_state"}) {
        SECTION(name) {
            const Fixture f(kLayers, name);
            recurrent_case<B, 3>(nn::BiRnnConfig{3, 4}
                                     .with_nonlinearity(act(f))
                                     .with_batch_first(flag(f, "batch_first"))
                                     .template init<B>(),
                                 f);
        }
    }
    for (const std::string name : {"bigru", "bigru_seq_first_state"}) {
        SECTION(name) {
            const Fixture f(kLayers, name);
            recurrent_case<B, 3>(
                nn::BiGruConfig{3, 4}.with_batch_first(flag(f, "batch_first")).template init<B>(),
                f);
        }
    }
}

TEST_CASE("Rnn, BiRnn and BiGru: parameter gradients against finite differences",
          "[nn][rnn][autodiff]") {
    using F64 = ember::test::AutodiffF64;
    auto normal = [](ember::Shape s) {
        return Tensor<F64, 3>::random(s, ember::Distribution::Normal(0, 1));
    };
    auto x = normal({2, 4, 3});
    SECTION("Rnn (relu, with a state)") {
        auto model = nn::RnnConfig{3, 4}.with_nonlinearity(nn::RnnActivation::Relu).init<F64>();
        auto h0 = Tensor<F64, 2>::random({2, 4}, ember::Distribution::Normal(0, 1));
        auto gout = normal({2, 4, 4});
        ember::test::check_param_grads_fd(model, [&](const auto& m) {
            auto [out, fin] = m.forward(x, h0);
            return (out * gout).sum() + fin.sum();
        });
    }
    SECTION("BiRnn") {
        auto model = nn::BiRnnConfig{3, 2}.init<F64>();
        auto gout = normal({2, 4, 4});
        ember::test::check_param_grads_fd(model, [&](const auto& m) {
            auto [out, fin] = m.forward(x);
            return (out * gout).sum() + (fin * fin).sum();
        });
    }
    SECTION("BiGru") {
        auto model = nn::BiGruConfig{3, 2}.init<F64>();
        auto gout = normal({2, 4, 4});
        ember::test::check_param_grads_fd(model, [&](const auto& m) {
            auto [out, fin] = m.forward(x);
            return (out * gout).sum() + (fin * fin).sum();
        });
    }
}

TEST_CASE("Rnn, BiRnn and BiGru: structure, records and errors", "[nn][rnn][errors]") {
    using B = ember::Autodiff<ember::Cpu>;
    auto rnn = nn::RnnConfig{3, 5}.init<B>();
    CHECK(rnn.num_params() == 3 * 5 + 5 * 5 + 2 * 5);
    CHECK(nn::BiRnnConfig{3, 5}.init<B>().num_params() == 2 * rnn.num_params());
    CHECK(nn::BiGruConfig{3, 5}.init<B>().num_params() ==
          2 * nn::GruConfig{3, 5}.init<B>().num_params());
    std::vector<std::string> paths;
    nn::BiRnnConfig{3, 5}.init<B>().visit(
        [&](std::string_view p, const auto&) { paths.emplace_back(p); });
    REQUIRE(paths.size() == 8);
    CHECK(paths[0] == "forward_rnn.gate.input_transform.weight");
    CHECK(paths[7] == "reverse_rnn.gate.hidden_transform.bias");

    auto loaded = nn::RnnConfig{3, 5}.init<B>().load_record(rnn.into_record());
    CHECK(loaded.gate.hidden_transform.weight.val().to_data() ==
          rnn.gate.hidden_transform.weight.val().to_data());
    auto bigru = nn::BiGruConfig{3, 5}.init<B>();
    auto bigru2 = nn::BiGruConfig{3, 5}.init<B>().load_record(bigru.into_record());
    CHECK(bigru2.reverse_gru.new_gate.input_transform.weight.val().to_data() ==
          bigru.reverse_gru.new_gate.input_transform.weight.val().to_data());

    auto bad = Tensor<B, 3>::zeros({2, 5, 7});
    CHECK_THROWS_AS(rnn.forward(bad), ember::ShapeError);
    CHECK_THROWS_WITH(rnn.forward(bad), Contains("Rnn::forward") && Contains("[2, 5, 7]"));
    auto x = Tensor<B, 3>::zeros({2, 4, 3});
    CHECK_THROWS_WITH((nn::BiRnnConfig{3, 5}.init<B>().forward(x, Tensor<B, 3>::zeros({1, 2, 5}))),
                      Contains("BiRnn::forward") && Contains("[1, 2, 5]"));
    CHECK_THROWS_WITH(bigru.forward(bad), Contains("BiGru::forward") && Contains("[2, 5, 7]"));
    CHECK_THROWS_WITH(bigru.forward(x, Tensor<B, 3>::zeros({2, 2, 4})),
                      Contains("BiGru::forward") && Contains("[2, 2, 4]"));
    CHECK_THROWS_AS((nn::RnnConfig{0, 5}.init<B>()), ember::ArgumentError);
    CHECK_THROWS_WITH((nn::BiGruConfig{3, 0}.init<B>()), Contains("BiGruConfig::init"));
}

TEMPLATE_LIST_TEST_CASE("LocalResponseNorm, CosineSimilarity and PairwiseDistance match torch",
                        "[nn][layers]", ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    for (const std::string name : {"lrn", "lrn_even_3d"}) {
        SECTION(name) {
            const Fixture f(kLayers, name);
            auto lrn = nn::LocalResponseNormConfig{std::size_t(f.param("size"))}
                           .with_alpha(f.param("alpha"))
                           .with_beta(f.param("beta"))
                           .with_k(f.param("k"))
                           .init();
            auto run = [&]<std::size_t D>() {
                auto x = f.named_tensor<B, D>("input").require_grad();
                auto y = lrn.forward(x);
                check_close(y.to_data(), f.named("output"));
                check_grad(x, f, "input", (y * f.named_tensor<B, D>("gout")).sum().backward());
            };
            if (f.named("input").shape().rank() == 4)
                run.template operator()<4>();
            else
                run.template operator()<3>();
        }
    }
    auto pair_case = [&]<std::size_t D>(const std::string& name, const auto& layer) {
        const Fixture f(kLayers, name);
        auto x1 = f.named_tensor<B, D>("x1").require_grad();
        auto x2 = f.named_tensor<B, D>("x2").require_grad();
        auto y = layer.forward(x1, x2);
        check_close(y.to_data(), f.named("output"));
        auto grads = (y * f.named_tensor<B, D - 1>("gout")).sum().backward();
        check_grad(x1, f, "x1", grads);
        check_grad(x2, f, "x2", grads);
    };
    SECTION("cosine_similarity") {
        pair_case.template operator()<3>("cosine_similarity", nn::CosineSimilarityConfig{}.init());
    }
    SECTION("cosine_similarity over the last dim, broadcast") {
        pair_case.template operator()<2>("cosine_similarity_last",
                                         nn::CosineSimilarityConfig{}.with_dim(-1).init());
    }
    SECTION("pairwise_distance p = 2, 3, 1") {
        pair_case.template operator()<2>("pairwise_distance", nn::PairwiseDistanceConfig{}.init());
        pair_case.template operator()<3>("pairwise_distance_p3",
                                         nn::PairwiseDistanceConfig{}.with_p(3.0).init());
        pair_case.template operator()<2>("pairwise_distance_p1",
                                         nn::PairwiseDistanceConfig{}.with_p(1.0).init());
    }
}

TEST_CASE("LocalResponseNorm, CosineSimilarity and PairwiseDistance: finite differences",
          "[nn][layers][autodiff]") {
    using F64 = ember::test::AutodiffF64;
    using Inner = ember::CpuF64;
    // d/dx of sum(layer(x) * g) by central differences on Inner, against backward() on F64.
    auto fd_check = [](auto forward, const ember::TensorData& x0, const ember::TensorData& g) {
        auto x = Tensor<F64, 3>::from_data(x0).require_grad();
        auto grads = (forward(x) * Tensor<F64, 3>::from_data(g)).sum().backward();
        const auto analytic = x.grad(grads)->to_data().template to_vec<double>();
        auto v = x0.to_vec<double>();
        for (std::size_t i = 0; i < v.size(); i += 3) {
            auto at = [&](double d) {
                auto w = v;
                w[i] += d;
                auto xi = Tensor<Inner, 3>::from_data(ember::TensorData(w, x0.shape()));
                return double((forward(xi) * Tensor<Inner, 3>::from_data(g)).sum().into_scalar());
            };
            const double numeric = (at(1e-6) - at(-1e-6)) / 2e-6;
            INFO("element " << i);
            CHECK(std::abs(analytic[i] - numeric) <= 1e-6 * (1 + std::abs(numeric)));
        }
    };
    auto x0 = Tensor<Inner, 3>::random({2, 5, 4}, ember::Distribution::Normal(0, 1)).to_data();
    auto y0 = Tensor<Inner, 3>::random({2, 5, 4}, ember::Distribution::Normal(0, 1)).to_data();
    auto g3 = Tensor<Inner, 3>::random({2, 5, 4}, ember::Distribution::Normal(0, 1)).to_data();
    auto g2 = Tensor<Inner, 3>::random({2, 5, 1}, ember::Distribution::Normal(0, 1)).to_data();
    auto lrn = nn::LocalResponseNormConfig{4}.with_alpha(0.5).with_k(2.0).init();
    fd_check([&](const auto& x) { return lrn.forward(x); }, x0, g3);
    auto cos = nn::CosineSimilarityConfig{}.with_dim(-1).init();
    fd_check(
        [&](const auto& x) {
            using T = std::remove_cvref_t<decltype(x)>;
            auto y = T::from_data(y0);
            return cos.forward(x, y).template unsqueeze_dim<3>(2);
        },
        x0, g2);
    auto dist = nn::PairwiseDistanceConfig{}.with_p(3.0).with_keepdim(true).init();
    fd_check(
        [&](const auto& x) {
            using T = std::remove_cvref_t<decltype(x)>;
            return dist.forward_keepdim(x, T::from_data(y0));
        },
        x0, g2);
}

TEST_CASE("GaussianNoise adds N(0, std) noise while training only", "[nn][layers]") {
    using AD = ember::Autodiff<ember::Cpu>;
    auto noise = nn::GaussianNoiseConfig{0.5}.init();
    SECTION("an inference backend (a valid() model's) leaves the input unchanged") {
        auto x = Tensor<ember::Cpu, 2>::random({4, 5}, ember::Distribution::Default);
        CHECK(noise.forward(x).to_data() == x.to_data());
        CHECK(nn::GaussianNoiseConfig{0.0}.init().forward(Tensor<AD, 2>::from_inner(x)).to_data() ==
              x.to_data());
    }
    SECTION("training: zero-mean noise of the given deviation; the gradient passes through") {
        const std::size_t n = 40000;
        auto x = Tensor<AD, 2>::full({200, 200}, 3.0).require_grad();
        auto y = noise.forward(x);
        auto d = (y - 3.0).inner().reshape<1>({long(n)});
        const double mean = d.mean().into_scalar();
        const double sd = std::sqrt(double(((d - mean) * (d - mean)).mean().into_scalar()));
        // Standard error of the mean 0.5/200 = 0.0025; of the deviation about 0.5/283.
        CHECK(std::abs(mean) < 0.0125);
        CHECK(std::abs(sd - 0.5) < 0.01);
        auto g = x.grad((y * 2.0).sum().backward());
        REQUIRE(g.has_value());
        CHECK(g->to_data() == Tensor<ember::Cpu, 2>::full({200, 200}, 2.0).to_data());
    }
    SECTION("config errors") {
        CHECK_THROWS_AS(nn::GaussianNoiseConfig{-1.0}.init(), ember::ArgumentError);
        CHECK_THROWS_WITH(nn::GaussianNoiseConfig{NAN}.init(), Contains("GaussianNoiseConfig"));
    }
}

TEMPLATE_LIST_TEST_CASE("Identity, PixelShuffle, Unfold4d, Fold4d and the 3-d pools as modules",
                        "[nn][layers]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    const auto tol = ember::test::default_tolerance<B>();
    SECTION("Identity") {
        auto x = Tensor<B, 3>::random({2, 3, 4}, ember::Distribution::Default);
        CHECK(nn::Identity{}.forward(x).to_data() == x.to_data());
        auto i = Tensor<B, 1, ember::Int>::arange(0, 6).template reshape<2>({2, 3});
        CHECK(nn::Identity{}.forward(i).to_data() == i.to_data());
    }
    SECTION("PixelShuffle and PixelUnshuffle") {
        const Fixture f(kOps, "pixel_shuffle");
        auto x = f.tensor<B, 4>(0);
        auto y = nn::PixelShuffleConfig{2}.init().forward(x);
        check_close(y.to_data(), f.output(0), tol);
        CHECK(nn::PixelUnshuffleConfig{2}.init().forward(y).to_data() == x.to_data());
        CHECK_THROWS_AS(nn::PixelShuffleConfig{0}.init(), ember::ArgumentError);
    }
    SECTION("Unfold4d and Fold4d") {
        const Fixture f(kOps, "unfold_options");
        auto x = f.tensor<B, 4>(0);
        auto unfold = nn::Unfold4dConfig{{3, 2}}
                          .with_stride({2, 1})
                          .with_padding({1, 2})
                          .with_dilation({2, 1})
                          .init();
        check_close(unfold.forward(x).to_data(), f.output(0), tol);
        const Fixture g(kOps, "fold_options");
        auto fold = nn::Fold4dConfig{{7, 7}, {2, 2}}
                        .with_stride({2, 1})
                        .with_padding({1, 0})
                        .with_dilation({1, 2})
                        .init();
        check_close(fold.forward(g.tensor<B, 3>(0)).to_data(), g.output(0), tol);
        CHECK_THROWS_WITH((nn::Unfold4dConfig{{0, 2}}.init()), Contains("Unfold4dConfig::init"));
        CHECK_THROWS_WITH((nn::Fold4dConfig{{0, 3}, {2, 2}}.init()),
                          Contains("Fold4dConfig::init"));
    }
    SECTION("AvgPool3d, MaxPool3d, AdaptiveAvgPool3d") {
        const Fixture a(kOps, "avg_pool3d_exclude_ceil");
        auto avg = nn::AvgPool3dConfig{{3, 2, 3}}
                       .with_strides({2, 2, 2})
                       .with_padding(nn::PaddingConfig3d::Explicit(1, 1, 1))
                       .with_count_include_pad(false)
                       .with_ceil_mode(true)
                       .init();
        check_close(avg.forward(a.tensor<B, 5>(0)).to_data(), a.output(0), tol);
        const Fixture m(kOps, "max_pool3d");
        auto max = nn::MaxPool3dConfig{{2, 2, 3}}
                       .with_strides({2, 1, 2})
                       .with_padding(nn::PaddingConfig3d::Explicit(1, 0, 1))
                       .with_dilation({1, 2, 1})
                       .init();
        check_close(max.forward(m.tensor<B, 5>(0)).to_data(), m.output(0), tol);
        const Fixture p(kOps, "adaptive_avg_pool3d");
        check_close(
            nn::AdaptiveAvgPool3dConfig{{3, 4, 2}}.init().forward(p.tensor<B, 5>(0)).to_data(),
            p.output(0), tol);
        CHECK_THROWS_AS((nn::AvgPool3dConfig{{2, 0, 2}}.init()), ember::ArgumentError);
        CHECK_THROWS_WITH((nn::MaxPool3dConfig{{2, 2, 2}}
                               .with_padding(nn::PaddingConfig3d::Explicit(2, 0, 0))
                               .init()),
                          Contains("MaxPool3dConfig::init"));
        CHECK_THROWS_WITH((nn::AdaptiveAvgPool3dConfig{{1, 0, 1}}.init()),
                          Contains("AdaptiveAvgPool3dConfig::init"));
    }
}

TEST_CASE("layer configs: bad values and inputs throw errors naming the layer",
          "[nn][layers][errors]") {
    using B = ember::Cpu;
    CHECK_THROWS_AS(nn::LocalResponseNormConfig{0}.init(), ember::ArgumentError);
    CHECK_THROWS_WITH(nn::CosineSimilarityConfig{}.with_eps(0.0).init(),
                      Contains("CosineSimilarityConfig::init"));
    CHECK_THROWS_WITH(nn::PairwiseDistanceConfig{}.with_p(0.0).init(),
                      Contains("PairwiseDistanceConfig::init"));
    auto a = Tensor<B, 2>::zeros({3, 4}), b = Tensor<B, 2>::zeros({2, 4});
    CHECK_THROWS_AS(nn::PairwiseDistanceConfig{}.init().forward(a, b), ember::ShapeError);
    CHECK_THROWS_WITH(nn::PairwiseDistanceConfig{}.init().forward(a, b),
                      Contains("PairwiseDistance") && Contains("[3, 4]") && Contains("[2, 4]"));
    CHECK_THROWS_WITH(nn::CosineSimilarityConfig{}.init().forward(a, b),
                      Contains("cosine_similarity") && Contains("[3, 4]"));
    CHECK_THROWS_WITH(nn::PairwiseDistanceConfig{}.with_keepdim(true).init().forward(a, a),
                      Contains("forward_keepdim"));
    CHECK_THROWS_AS(nn::CosineSimilarityConfig{}.with_dim(3).init().forward(a, a), ember::Error);
}

// ---- CrossAttention ----------------------------------------------------------------------------

namespace {

template <typename B>
nn::CrossAttention<B> cross_attention_from(const Fixture& f, double dropout = 0.0) {
    auto config =
        nn::CrossAttentionConfig{std::size_t(f.param("d_model")), std::size_t(f.param("d_context")),
                                 std::size_t(f.param("n_heads")),
                                 std::size_t(f.param("n_heads_kv")), std::size_t(f.param("d_head"))}
            .with_dropout(dropout)
            .with_quiet_softmax(flag(f, "quiet_softmax"));
    return load_params(config.template init<B>(), f);
}

template <typename B>
std::optional<Tensor<B, 2, ember::Bool>> mask_of(const Fixture& f) {
    if (!flag(f, "masked")) return std::nullopt;
    return f.named_tensor<B, 2, ember::Bool>("mask");
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("CrossAttention matches a torch reference (MHA, GQA, MQA, masks)",
                        "[nn][attention]", ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    for (const std::string name :
         {"cross_attention_mha", "cross_attention_gqa_mask", "cross_attention_mqa_quiet_mask"}) {
        SECTION(name) {
            const Fixture f(kLayers, name);
            auto model = cross_attention_from<B>(f);
            auto x = f.named_tensor<B, 3>("query_in").require_grad();
            auto c = f.named_tensor<B, 3>("context").require_grad();
            auto y = model.forward(x, c, mask_of<B>(f));
            check_close(y.to_data(), f.named("output"));
            auto grads = (y * f.named_tensor<B, 3>("gout")).sum().backward();
            std::size_t n = 0;
            model.visit([&](std::string_view path, const auto& p) {
                check_grad(p.val(), f, std::string(path), grads);
                ++n;
            });
            CHECK(n == 8);
            check_grad(x, f, "query_in", grads);
            check_grad(c, f, "context", grads);
        }
    }
    SECTION("the composed path (attention dropout active, keeping everything) agrees") {
        const Fixture f(kLayers, "cross_attention_gqa_mask");
        auto model = cross_attention_from<B>(f, 1e-300);
        auto y = model.forward(f.named_tensor<B, 3>("query_in"), f.named_tensor<B, 3>("context"),
                               mask_of<B>(f));
        check_close(y.to_data(), f.named("output"));
    }
    SECTION("forward_cache projects the context once and reuses it") {
        const Fixture f(kLayers, "cross_attention_gqa_mask");
        auto model = cross_attention_from<B>(f);
        auto x = f.named_tensor<B, 3>("query_in");
        auto c = f.named_tensor<B, 3>("context");
        nn::CrossAttentionCache<B> cache;
        CHECK(!cache.filled());
        check_close(model.forward_cache(x, c, cache, mask_of<B>(f)).to_data(), f.named("output"));
        REQUIRE(cache.filled());
        // A later step reads the cache, not the context it is given.
        check_close(model.forward_cache(x, c.zeros_like(), cache, mask_of<B>(f)).to_data(),
                    f.named("output"));
        // One query row at a time (streaming) gives the rows of the full output.
        auto row = model.forward_cache(x.narrow(1, 1, 1), c, cache, mask_of<B>(f));
        check_close(row.to_data(),
                    Tensor<ember::Cpu, 3>::from_data(f.named("output")).narrow(1, 1, 1).to_data());
        cache.clear();
        CHECK(!cache.filled());
    }
}

TEST_CASE("CrossAttention: structure, records, display and errors", "[nn][attention][errors]") {
    using B = ember::Autodiff<ember::Cpu>;
    auto model = nn::CrossAttentionConfig{8, 5, 4, 2, 3}.init<B>();
    CHECK(model.num_params() == (8 * 12 + 12) + 2 * (5 * 6 + 6) + (12 * 8 + 8));
    CHECK(model.group_size() == 2);
    auto loaded =
        nn::CrossAttentionConfig{8, 5, 4, 2, 3}.init<B>().load_record(model.into_record());
    CHECK(loaded.key.weight.val().to_data() == model.key.weight.val().to_data());
    std::ostringstream os;
    os << model;
    CHECK_THAT(os.str(), Contains("n_heads_kv: 2") && Contains("d_context: 5"));
    // The default initialiser is Burn's: Kaiming-uniform with gain 1/sqrt(d_head), on fan_in.
    auto big = nn::CrossAttentionConfig{64, 64, 4, 4, 16}.init<B>();
    const double bound = std::sqrt(3.0) / std::sqrt(16.0) / std::sqrt(64.0);
    const double max = big.query.weight.val().inner().abs().max().into_scalar();
    CHECK(max <= bound * 1.0001);
    CHECK(max > bound * 0.9);

    auto q = Tensor<B, 3>::zeros({2, 3, 8}), c = Tensor<B, 3>::zeros({2, 4, 5});
    CHECK_THROWS_AS(model.forward(Tensor<B, 3>::zeros({2, 3, 7}), c), ember::ShapeError);
    CHECK_THROWS_WITH(model.forward(Tensor<B, 3>::zeros({2, 3, 7}), c),
                      Contains("CrossAttention::forward") && Contains("[2, 3, 7]"));
    CHECK_THROWS_WITH(model.forward(q, Tensor<B, 3>::zeros({2, 4, 6})),
                      Contains("CrossAttention::forward") && Contains("[2, 4, 6]"));
    CHECK_THROWS_WITH(model.forward(q, Tensor<B, 3>::zeros({1, 4, 5})),
                      Contains("batch") && Contains("[1, 4, 5]"));
    CHECK_THROWS_WITH(model.forward(q, c, Tensor<B, 2>::zeros({2, 3}).equal_elem(1.0)),
                      Contains("mask") && Contains("[2, 3]"));
    nn::CrossAttentionCache<B> cache;
    (void)model.forward_cache(q, c, cache);
    CHECK_THROWS_WITH(
        model.forward_cache(Tensor<B, 3>::zeros({1, 3, 8}), Tensor<B, 3>::zeros({1, 4, 5}), cache),
        Contains("CrossAttention::forward_cache") && Contains("clear()"));
    CHECK_THROWS_AS((nn::CrossAttentionConfig{8, 5, 4, 3, 3}.init<B>()), ember::ArgumentError);
    CHECK_THROWS_WITH((nn::CrossAttentionConfig{8, 5, 4, 3, 3}.init<B>()),
                      Contains("CrossAttentionConfig::init") && Contains("n_heads_kv 3"));
    CHECK_THROWS_AS((nn::CrossAttentionConfig{8, 0, 4, 2, 3}.init<B>()), ember::ArgumentError);
}

#undef EMBER_OP_CASES

}  // namespace test_nn_layers_ext
