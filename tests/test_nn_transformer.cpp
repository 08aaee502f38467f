// Attention, transformers and position encodings (ember/nn/attention.hpp, transformer.hpp,
// positional.hpp) against PyTorch (tests/fixtures/gen_nn_transformer.py), finite differences,
// and the identities the autoregressive caches must keep.
#include <ember/nn/attention.hpp>
#include <ember/nn/positional.hpp>
#include <ember/nn/transformer.hpp>

#include "grad_check.hpp"
#include "module_check.hpp"

namespace test_nn_transformer {

namespace {

using AD = ember::Autodiff<ember::Cpu>;
using F64 = ember::test::AutodiffF64;
using ember::Bool;
using ember::Tensor;
using ember::test::check_close;
using ember::test::Fixture;
using ember::test::load_params;
namespace nn = ember::nn;

const std::string kFile = "nn_transformer";
// f32 results against float64 torch.
const ember::Tolerance kTol{1e-5, 1e-4};

// Every parameter's gradient against the fixture's "grad.<path>".
template <ember::module::Module M, typename G>
void check_param_grads(const M& model, const G& grads, const Fixture& f) {
    std::size_t n = 0;
    model.visit([&](std::string_view path, const auto& p) {
        INFO("gradient of " << path);
        auto g = p.val().grad(grads);
        REQUIRE(g.has_value());
        check_close(g->to_data(), f.named("grad." + std::string(path)), kTol);
        ++n;
    });
    CHECK(n > 0);
}

template <typename B, std::size_t D>
Tensor<B, D> input(const Fixture& f, const std::string& name) {
    return f.named_tensor<B, D>(name).require_grad();
}

template <typename B, std::size_t D>
std::optional<Tensor<B, D, Bool>> mask(const Fixture& f, const std::string& name) {
    if (!f.has(name)) return std::nullopt;
    return f.named_tensor<B, D, Bool>(name);
}

// Module outputs on the plain CPU backend are compared exactly-ish: same ops, same order.
const ember::Tolerance kSame{1e-5, 1e-5};

// A TransformerEncoderConfig or TransformerDecoderConfig of the fixture's sizes, without dropout.
template <typename Config>
Config stack_config(const Fixture& f) {
    return Config{std::size_t(f.param("d_model")), std::size_t(f.param("d_ff")),
                  std::size_t(f.param("n_heads")), std::size_t(f.param("n_layers"))}
        .with_dropout(0.0)
        .with_norm_first(f.param("norm_first") != 0);
}

// The output y of `model` against the fixture's "output", and with L = sum(y * gout) the
// gradients of the parameters and of the named `inputs` against "grad.<name>".
template <ember::module::Module M, typename B>
void check_output_and_grads(const M& model, const Tensor<B, 3>& y, const Fixture& f,
                            const std::vector<std::pair<std::string, Tensor<B, 3>>>& inputs) {
    check_close(y.to_data(), f.named("output"), kTol);
    auto grads = (y * f.named_tensor<B, 3>("gout")).sum().backward();
    check_param_grads(model, grads, f);
    for (const auto& [name, x] : inputs) {
        INFO("gradient of " << name);
        check_close(x.grad(grads)->to_data(), f.named("grad." + name), kTol);
    }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("MultiHeadAttention matches torch.nn.MultiheadAttention", "[nn][transformer]", ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;  // every autodiff stack
    for (const std::string name :
         {"mha_self_masks", "mha_cross_masks", "mha_nomask", "mha_quiet"}) {
        SECTION(name) {
            Fixture f(kFile, name);
            const auto d = std::size_t(f.param("d_model"));
            const auto h = std::size_t(f.param("n_heads"));
            auto model = load_params(nn::MultiHeadAttentionConfig{d, h}
                                         .with_dropout(0.0)
                                         .with_quiet_softmax(name == "mha_quiet")
                                         .init<AD>(),
                                     f);
            auto q = input<AD, 3>(f, "query");
            const bool self_attn = !f.has("key");
            auto k = self_attn ? q : input<AD, 3>(f, "key");
            auto v = self_attn ? q : input<AD, 3>(f, "value");
            auto in = nn::MhaInput<AD>::new_(q, k, v)
                          .mask_pad(mask<AD, 2>(f, "mask_pad"))
                          .mask_attn(mask<AD, 3>(f, "mask_attn"));
            // Without the weights: module::attention (the fused kernel where there is one).
            check_close(model.forward(in).context.to_data(), f.named("output"), kTol);
            auto out = model.forward(in.need_weights());
            check_close(out.context.to_data(), f.named("output"), kTol);
            REQUIRE(out.weights.has_value());
            check_close(out.weights->to_data(), f.named("output1"), kTol);

            auto loss = (out.context * f.named_tensor<AD, 3>("gout")).sum() +
                        (*out.weights * f.named_tensor<AD, 4>("gout1")).sum();
            auto grads = loss.backward();
            check_param_grads(model, grads, f);
            check_close(q.grad(grads)->to_data(), f.named("grad.query"), kTol);
            if (!self_attn) {
                check_close(k.grad(grads)->to_data(), f.named("grad.key"), kTol);
                check_close(v.grad(grads)->to_data(), f.named("grad.value"), kTol);
            }
        }
    }
}

TEMPLATE_LIST_TEST_CASE("TransformerEncoder matches torch.nn.TransformerEncoder", "[nn][transformer]", ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;  // every autodiff stack
    for (const std::string name : {"encoder_post", "encoder_pre"}) {
        SECTION(name) {
            Fixture f(kFile, name);
            auto model = load_params(stack_config<nn::TransformerEncoderConfig>(f).init<AD>(), f);
            auto x = input<AD, 3>(f, "input");
            auto in = nn::TransformerEncoderInput<AD>(x)
                          .mask_pad(*mask<AD, 2>(f, "mask_pad"))
                          .mask_attn(*mask<AD, 3>(f, "mask_attn"));
            check_output_and_grads(model, model.forward(in), f, {{"input", x}});
        }
    }
}

TEMPLATE_LIST_TEST_CASE("TransformerDecoder matches torch.nn.TransformerDecoder", "[nn][transformer]", ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;  // every autodiff stack
    for (const std::string name : {"decoder_post", "decoder_pre"}) {
        SECTION(name) {
            Fixture f(kFile, name);
            auto model = load_params(stack_config<nn::TransformerDecoderConfig>(f).init<AD>(), f);
            auto target = input<AD, 3>(f, "target");
            auto memory = input<AD, 3>(f, "memory");
            auto in = nn::TransformerDecoderInput<AD>(target, memory)
                          .target_mask_pad(*mask<AD, 2>(f, "target_mask_pad"))
                          .target_mask_attn(*mask<AD, 3>(f, "target_mask_attn"))
                          .memory_mask_pad(*mask<AD, 2>(f, "memory_mask_pad"));
            if (auto m = mask<AD, 3>(f, "memory_mask_attn")) in = in.memory_mask_attn(*m);
            check_output_and_grads(model, model.forward(in), f,
                                   {{"target", target}, {"memory", memory}});
        }
    }
}

TEST_CASE("PositionalEncoding and RotaryEncoding match their formulas", "[nn][transformer]") {
    SECTION("PositionalEncoding adds the sinusoids") {
        for (const std::string name : {"positional_default", "positional_small"}) {
            INFO(name);
            Fixture f(kFile, name);
            auto pe = nn::PositionalEncodingConfig{std::size_t(f.param("d_model"))}
                          .with_max_sequence_size(std::size_t(f.param("max_sequence_size")))
                          .with_max_timescale(std::size_t(f.param("max_timescale")))
                          .init<ember::Cpu>();
            auto y = pe.forward(f.named_tensor<ember::Cpu, 3>("input"));
            check_close(y.to_data(), f.named("output"), {1e-6, 1e-5});
        }
    }
    SECTION("the default table covers 5000 positions and is not a parameter") {
        auto pe = nn::PositionalEncodingConfig{8}.init<AD>();
        CHECK(pe.sinusoids.dims() == std::array<std::size_t, 3>{1, 5000, 8});
        CHECK(pe.num_params() == 0);
        // Row 0 is sin(0) = 0, cos(0) = 1 alternately.
        check_close(pe.sinusoids.narrow(1, 0, 1).to_data(),
                    ember::TensorData({0.f, 1.f, 0.f, 1.f, 0.f, 1.f, 0.f, 1.f}, {1, 1, 8}));
    }
    SECTION("RotaryEncoding rotates interleaved pairs, with an offset start") {
        for (const std::string name : {"rotary_3d", "rotary_4d_offset"}) {
            INFO(name);
            Fixture f(kFile, name);
            auto rope = nn::RotaryEncodingConfig{std::size_t(f.param("max_sequence_length")),
                                                 std::size_t(f.param("d_model"))}
                            .with_theta(f.param("theta"))
                            .init<AD>();
            const auto start = std::size_t(f.param("start"));
            auto check = [&]<std::size_t D>() {
                auto x = input<AD, D>(f, "input");
                auto y = start == 0 ? rope.forward(x) : rope.apply(x, start);
                check_close(y.to_data(), f.named("output"), {1e-6, 1e-5});
                auto grads = (y * f.named_tensor<AD, D>("gout")).sum().backward();
                check_close(x.grad(grads)->to_data(), f.named("grad.input"), {1e-6, 1e-5});
            };
            if (f.named("input").shape().rank() == 3)
                check.template operator()<3>();
            else
                check.template operator()<4>();
        }
    }
    SECTION("RotaryEncoding keeps the norm of each pair") {
        auto rope = nn::RotaryEncodingConfig{8, 4}.init<ember::Cpu>();
        auto x = Tensor<ember::Cpu, 3>::random({1, 8, 4}, ember::Distribution::Normal(0, 1));
        auto y = rope.forward(x);
        auto pair_norm = [](const Tensor<ember::Cpu, 3>& t) {
            auto p = t.reshape<4>({1, 8, 2, 2});
            return (p * p).sum_dim(3);
        };
        check_close(pair_norm(y).to_data(), pair_norm(x).to_data(), {1e-5, 1e-5});
    }
}

TEST_CASE("MultiHeadAttention: the op path, the weights path and the causal flag agree",
          "[nn][transformer][attention]") {
    using AD = ember::Autodiff<ember::Cpu>;
    const std::size_t batch = 2, seq = 6, d = 8;
    AD::seed(11);
    auto dist = ember::Distribution::Normal(0, 1);
    auto x = Tensor<AD, 3>::random({batch, seq, d}, dist);
    auto mem = Tensor<AD, 3>::random({batch, 4, d}, dist);
    auto g = Tensor<AD, 3>::random({batch, seq, d}, dist);
    auto mha = nn::MultiHeadAttentionConfig{d, 2}.with_dropout(0.0).init<AD>();
    auto causal = nn::generate_autoregressive_mask<AD>(batch, seq);
    auto pad =
        nn::generate_padding_mask<AD>(0, {{1, 1, 1, 1, 1, 1}, {1, 1, 1, 1}}, std::nullopt).mask;
    // Each input against the same attention with the weights asked for (the composed path):
    // context and every parameter's gradient.
    auto same = [&](const nn::MhaInput<AD>& in, const nn::MhaInput<AD>& ref) {
        auto a = mha.forward(in);
        auto b = mha.forward(ref.need_weights());
        CHECK_FALSE(a.weights.has_value());
        REQUIRE(b.weights.has_value());
        check_close(a.context.to_data(), b.context.to_data(), {1e-5, 1e-4});
        auto ga = (a.context * g.narrow(1, 0, a.context.dims()[1])).sum().backward();
        auto gb = (b.context * g.narrow(1, 0, b.context.dims()[1])).sum().backward();
        check_close(mha.query.weight.val().grad(ga)->to_data(),
                    mha.query.weight.val().grad(gb)->to_data(), {1e-5, 1e-4});
        check_close(mha.value.weight.val().grad(ga)->to_data(),
                    mha.value.weight.val().grad(gb)->to_data(), {1e-5, 1e-4});
    };
    auto self = nn::MhaInput<AD>::self_attn(x);
    SECTION("no mask") {
        same(self, self);
    }
    SECTION("causal flag and causal mask") {
        same(self.causal(), self.mask_attn(causal));
        same(self.causal(), self.causal());
    }
    SECTION("padding and causal") {
        same(self.mask_pad(pad).causal(), self.mask_pad(pad).mask_attn(causal));
    }
    SECTION("cross-attention with padding of the memory") {
        auto mpad = nn::generate_padding_mask<AD>(0, {{1, 1, 1, 1}, {1, 1}}, std::nullopt).mask;
        auto in = nn::MhaInput<AD>::new_(x, mem, mem).mask_pad(mpad);
        same(in, in);
    }
    SECTION("the causal flag on incremental steps lines the new queries up with the last keys") {
        auto full = mha.forward(self.causal());
        auto cache = nn::MhaCache<AD>::autoregressive();
        auto first =
            mha.forward_incremental(nn::MhaInput<AD>::self_attn(x.narrow(1, 0, 4)).causal(), cache);
        auto rest =
            mha.forward_incremental(nn::MhaInput<AD>::self_attn(x.narrow(1, 4, 2)).causal(), cache);
        check_close(Tensor<AD, 3>::cat({first.context, rest.context}, 1).to_data(),
                    full.context.to_data(), {1e-5, 1e-4});
    }
    SECTION("TransformerEncoderInput::causal against the causal mask") {
        auto enc = nn::TransformerEncoderConfig{d, 16, 2, 2}.with_dropout(0.0).init<AD>();
        auto with_mask = enc.forward(nn::TransformerEncoderInput<AD>(x).mask_attn(causal));
        auto with_flag = enc.forward(nn::TransformerEncoderInput<AD>(x).causal());
        check_close(with_flag.to_data(), with_mask.to_data(), {1e-5, 1e-4});
        auto cache = enc.new_autoregressive_cache();
        enc.forward_autoregressive_inference(
            nn::TransformerEncoderInput<AD>(x.narrow(1, 0, 4)).causal(), cache);
        auto all = enc.forward_autoregressive_inference(nn::TransformerEncoderInput<AD>(x).causal(),
                                                        cache);
        check_close(all.to_data(), with_mask.to_data(), {1e-5, 1e-4});
    }
}

TEST_CASE("attention caches reproduce the causal forward", "[nn][transformer]") {
    using C = ember::Cpu;  // inference: dropout (left at its default 0.1) is the identity here
    const std::size_t batch = 2, seq = 5, d = 8;
    C::seed(7);
    auto x = Tensor<C, 3>::random({batch, seq, d}, ember::Distribution::Normal(0, 1));
    auto causal = nn::generate_autoregressive_mask<C>(batch, seq);

    SECTION("MultiHeadAttention::forward_cache fed the growing sequence") {
        auto mha = nn::MultiHeadAttentionConfig{d, 2}.init<C>();
        auto full = mha.forward(nn::MhaInput<C>::self_attn(x).mask_attn(causal).need_weights());
        auto cache = nn::MhaCache<C>::autoregressive();
        Tensor<C, 3> out = x;
        for (std::size_t i = 1; i <= seq; ++i) {
            auto step = mha.forward_cache(
                nn::MhaInput<C>::self_attn(x.narrow(1, 0, i)).need_weights(), cache);
            out = step.context;
            REQUIRE(step.weights.has_value());
            CHECK(step.weights->dims() == std::array<std::size_t, 4>{batch, 2, 1, i});
            check_close(step.weights->to_data(),
                        full.weights->narrow(2, i - 1, 1).narrow(3, 0, i).to_data(), kSame);
        }
        CHECK(cache.len() == seq);
        check_close(out.to_data(), full.context.to_data(), kSame);
    }
    SECTION("forward_cache with a multi-position first step and the causal mask") {
        auto mha = nn::MultiHeadAttentionConfig{d, 4}.init<C>();
        auto full = mha.forward(nn::MhaInput<C>::self_attn(x).mask_attn(causal));
        auto cache = nn::MhaCache<C>::autoregressive();
        auto first = nn::generate_autoregressive_mask<C>(batch, 3);
        mha.forward_cache(nn::MhaInput<C>::self_attn(x.narrow(1, 0, 3)).mask_attn(first), cache);
        auto out = mha.forward_cache(nn::MhaInput<C>::self_attn(x).mask_attn(causal).need_weights(),
                                     cache);
        REQUIRE(out.weights.has_value());
        CHECK(out.weights->dims() == std::array<std::size_t, 4>{batch, 4, 2, seq});
        check_close(out.context.to_data(), full.context.to_data(), kSame);
    }
    SECTION("forward_incremental fed one token at a time") {
        auto mha = nn::MultiHeadAttentionConfig{d, 2}.init<C>();
        auto full = mha.forward(nn::MhaInput<C>::self_attn(x).mask_attn(causal));
        auto cache = nn::MhaCache<C>::autoregressive();
        std::vector<Tensor<C, 3>> rows;
        for (std::size_t i = 0; i < seq; ++i)
            rows.push_back(
                mha.forward_incremental(nn::MhaInput<C>::self_attn(x.narrow(1, i, 1)), cache)
                    .context);
        CHECK(cache.key_len() == seq);
        check_close(Tensor<C, 3>::cat(rows, 1).to_data(), full.context.to_data(), kSame);
    }
    SECTION("cross-attention caches project the memory once") {
        auto mha = nn::MultiHeadAttentionConfig{d, 2}.init<C>();
        auto memory = Tensor<C, 3>::random({batch, 3, d}, ember::Distribution::Normal(0, 1));
        auto full = mha.forward(nn::MhaInput<C>(x, memory, memory));
        auto cache = nn::MhaCache<C>::autoregressive_cross_attention();
        Tensor<C, 3> out = x;
        for (std::size_t i = 1; i <= seq; ++i)
            out = mha.forward_cache(nn::MhaInput<C>(x.narrow(1, 0, i), memory, memory), cache)
                      .context;
        CHECK(cache.key_len() == 3);
        check_close(out.to_data(), full.context.to_data(), kSame);
    }
    SECTION("TransformerEncoder::forward_autoregressive_inference") {
        for (bool norm_first : {false, true}) {
            INFO("norm_first " << norm_first);
            auto enc =
                nn::TransformerEncoderConfig{d, 16, 2, 3}.with_norm_first(norm_first).init<C>();
            auto pad =
                nn::generate_padding_mask<C>(0, {{1, 2, 3, 4, 5}, {1, 2, 3, 4}}, std::nullopt).mask;
            auto full =
                enc.forward(nn::TransformerEncoderInput<C>(x).mask_attn(causal).mask_pad(pad));
            auto cache = enc.new_autoregressive_cache();
            Tensor<C, 3> out = x;
            for (std::size_t i = 1; i <= seq; ++i) {
                auto in = nn::TransformerEncoderInput<C>(x.narrow(1, 0, i))
                              .mask_attn(nn::generate_autoregressive_mask<C>(batch, i))
                              .mask_pad(pad.narrow(1, 0, i));
                out = enc.forward_autoregressive_inference(in, cache);
                CHECK(out.dims()[1] == i);
            }
            check_close(out.to_data(), full.to_data(), kSame);
        }
    }
    SECTION("TransformerDecoder::forward_autoregressive_inference") {
        auto memory = Tensor<C, 3>::random({batch, 4, d}, ember::Distribution::Normal(0, 1));
        auto mem_pad = nn::generate_padding_mask<C>(0, {{1, 2, 3, 4}, {1, 2}}, std::nullopt).mask;
        for (bool norm_first : {false, true}) {
            INFO("norm_first " << norm_first);
            auto dec =
                nn::TransformerDecoderConfig{d, 16, 2, 2}.with_norm_first(norm_first).init<C>();
            auto full = dec.forward(
                nn::TransformerDecoderInput<C>(x, memory).target_mask_attn(causal).memory_mask_pad(
                    mem_pad));
            auto cache = dec.new_autoregressive_cache();
            Tensor<C, 3> out = x;
            for (std::size_t i = 1; i <= seq; ++i)
                out = dec.forward_autoregressive_inference(
                    nn::TransformerDecoderInput<C>(x.narrow(1, 0, i), memory)
                        .target_mask_attn(nn::generate_autoregressive_mask<C>(batch, i))
                        .memory_mask_pad(mem_pad),
                    cache);
            check_close(out.to_data(), full.to_data(), kSame);
        }
    }
}

TEST_CASE("attention masks", "[nn][transformer]") {
    using C = ember::Cpu;
    SECTION("generate_autoregressive_mask marks the future") {
        auto m = nn::generate_autoregressive_mask<C>(2, 3);
        CHECK(m.dims() == std::array<std::size_t, 3>{2, 3, 3});
        const std::vector<bool> row = {false, true, true, false, false, true, false, false, false};
        auto v = m.to_data().to_vec<bool>();
        CHECK(std::vector<bool>(v.begin(), v.begin() + 9) == row);
        CHECK(std::vector<bool>(v.begin() + 9, v.end()) == row);
    }
    SECTION("generate_padding_mask pads, truncates and marks the pad token") {
        auto p = nn::generate_padding_mask<C>(0, {{5, 6}, {7, 8, 9}, {3}}, std::nullopt);
        CHECK(p.tensor.to_data().to_vec<std::int64_t>() ==
              std::vector<std::int64_t>{5, 6, 0, 7, 8, 9, 3, 0, 0});
        CHECK(p.mask.to_data().to_vec<bool>() ==
              std::vector<bool>{false, false, true, false, false, false, false, true, true});
        auto t = nn::generate_padding_mask<C>(1, {{5, 6, 7, 8}, {2}}, 3);
        CHECK(t.tensor.to_data().to_vec<std::int64_t>() ==
              std::vector<std::int64_t>{5, 6, 7, 2, 1, 1});
    }
    SECTION("padded keys do not change the other outputs") {
        auto mha = nn::MultiHeadAttentionConfig{8, 2}.init<C>();
        auto x = Tensor<C, 3>::random({1, 4, 8}, ember::Distribution::Normal(0, 1));
        auto y = x.slice_assign({{0, 1}, {3, 4}}, Tensor<C, 3>::ones({1, 1, 8}) * 9.0);
        auto pad = nn::generate_padding_mask<C>(0, {{1, 1, 1, 0}}, std::nullopt).mask;
        auto a = mha.forward(nn::MhaInput<C>::self_attn(x).mask_pad(pad)).context.narrow(1, 0, 3);
        auto b = mha.forward(nn::MhaInput<C>::self_attn(y).mask_pad(pad)).context.narrow(1, 0, 3);
        check_close(a.to_data(), b.to_data(), kSame);
    }
}

TEST_CASE("transformer dropout is active only on autodiff backends", "[nn][transformer]") {
    const std::size_t d = 8;
    auto enc = nn::TransformerEncoderConfig{d, 16, 2, 2}.with_dropout(0.5).init<AD>();
    auto x = Tensor<AD, 3>::random({2, 4, d}, ember::Distribution::Normal(0, 1));
    auto in = nn::TransformerEncoderInput<AD>(x);
    auto a = enc.forward(in).to_data();
    auto b = enc.forward(in).to_data();
    CHECK_FALSE(a.all_close(b, {1e-6, 1e-6}));

    auto valid = enc.valid();
    static_assert(std::is_same_v<decltype(valid), nn::TransformerEncoder<ember::Cpu>>);
    auto vin = nn::TransformerEncoderInput<ember::Cpu>(x.inner());
    auto c = valid.forward(vin).to_data();
    check_close(valid.forward(vin).to_data(), c, kSame);
    // Without dropout the autodiff model gives the inference output.
    auto no_drop = enc;
    for (auto& layer : no_drop.layers) {
        layer.dropout.prob = 0.0;
        layer.mha.dropout.prob = 0.0;
        layer.pwff.dropout.prob = 0.0;
    }
    check_close(no_drop.forward(in).to_data(), c, kSame);
}

TEST_CASE("attention and transformer gradients match finite differences", "[nn][transformer]") {
    F64::seed(3);
    auto dist = ember::Distribution::Normal(0, 1);
    SECTION("MultiHeadAttention with masks and quiet softmax") {
        for (bool quiet : {false, true}) {
            INFO("quiet_softmax " << quiet);
            auto mha = nn::MultiHeadAttentionConfig{4, 2}
                           .with_dropout(0.0)
                           .with_quiet_softmax(quiet)
                           .init<F64>();
            auto q = Tensor<F64, 3>::random({2, 3, 4}, dist);
            auto kv = Tensor<F64, 3>::random({2, 4, 4}, dist);
            auto w = Tensor<F64, 3>::random({2, 3, 4}, dist);
            auto pad = nn::generate_padding_mask<F64>(0, {{1, 1, 1, 1}, {1, 1}}, std::nullopt).mask;
            auto in = nn::MhaInput<F64>(q, kv, kv).mask_pad(pad);
            ember::test::check_param_grads_fd(
                mha, [&](const auto& m) { return (m.forward(in).context * w).sum(); });
        }
    }
    SECTION("an encoder layer, post-norm and pre-norm") {
        for (bool norm_first : {false, true}) {
            INFO("norm_first " << norm_first);
            auto enc = nn::TransformerEncoderConfig{4, 6, 2, 1}
                           .with_dropout(0.0)
                           .with_norm_first(norm_first)
                           .init<F64>();
            // LayerNorm's gamma and beta start at 1 and 0: move them off so every path counts.
            enc = enc.map([&](std::string_view, const auto& p) {
                return p.map([&](auto t) {
                    return t + t.random_like(ember::Distribution::Uniform(-0.3, 0.3));
                });
            });
            auto x = Tensor<F64, 3>::random({2, 3, 4}, dist);
            auto w = Tensor<F64, 3>::random({2, 3, 4}, dist);
            auto in = nn::TransformerEncoderInput<F64>(x).mask_attn(
                nn::generate_autoregressive_mask<F64>(2, 3));
            ember::test::check_param_grads_fd(
                enc, [&](const auto& m) { return (m.forward(in) * w).sum(); });
        }
    }
    SECTION("a decoder layer") {
        auto dec = nn::TransformerDecoderConfig{4, 6, 2, 1}
                       .with_dropout(0.0)
                       .with_norm_first(true)
                       .init<F64>();
        auto target = Tensor<F64, 3>::random({1, 3, 4}, dist);
        auto memory = Tensor<F64, 3>::random({1, 2, 4}, dist);
        auto w = Tensor<F64, 3>::random({1, 3, 4}, dist);
        auto in = nn::TransformerDecoderInput<F64>(target, memory)
                      .target_mask_attn(nn::generate_autoregressive_mask<F64>(1, 3));
        ember::test::check_param_grads_fd(
            dec, [&](const auto& m) { return (m.forward(in) * w).sum(); }, 2);
    }
}

TEST_CASE("attention and transformer structure and display", "[nn][transformer]") {
    SECTION("MultiHeadAttention") {
        auto mha = nn::MultiHeadAttentionConfig{8, 2}.init<AD>();
        CHECK(mha.num_params() == 4 * (8 * 8 + 8));
        CHECK(mha.d_k == 4);
        std::vector<std::string> paths;
        mha.visit([&](std::string_view p, const auto&) { paths.emplace_back(p); });
        CHECK(paths == std::vector<std::string>{"query.weight", "query.bias", "key.weight",
                                                "key.bias", "value.weight", "value.bias",
                                                "output.weight", "output.bias"});
        std::ostringstream os;
        os << mha;
        CHECK(os.str() ==
              "MultiHeadAttention {d_model: 8, n_heads: 2, d_k: 4, dropout: 0.1, min_float: "
              "-10000, quiet_softmax: false, params: 288}");
    }
    SECTION("TransformerEncoder") {
        auto enc = nn::TransformerEncoderConfig{8, 16, 2, 2}.init<AD>();
        const std::size_t per_layer = 4 * (8 * 8 + 8) + (8 * 16 + 16) + (16 * 8 + 8) + 2 * 16;
        CHECK(enc.num_params() == 2 * per_layer);
        CHECK(enc.layers.size() == 2);
        std::ostringstream os;
        os << enc;
        CHECK(os.str() ==
              "TransformerEncoder {d_model: 8, d_ff: 16, n_heads: 2, n_layers: 2, dropout: 0.1, "
              "norm_first: false, quiet_softmax: false, params: " +
                  std::to_string(2 * per_layer) + "}");
    }
    SECTION("TransformerDecoder and records") {
        auto config = nn::TransformerDecoderConfig{8, 16, 2, 1};
        auto dec = config.init<AD>();
        auto loaded = config.init<AD>().load_record(dec.into_record());
        CHECK(loaded.layers[0].cross_attn.query.weight.val().to_data() ==
              dec.layers[0].cross_attn.query.weight.val().to_data());
        CHECK(loaded.layers[0].norm_3.gamma.id() == dec.layers[0].norm_3.gamma.id());
    }
    SECTION("position encodings display their sizes") {
        std::ostringstream os;
        os << nn::PositionalEncodingConfig{4}.with_max_sequence_size(10).init<AD>() << ' '
           << nn::RotaryEncodingConfig{6, 4}.init<AD>();
        CHECK(os.str() ==
              "PositionalEncoding {max_sequence_size: 10, d_model: 4} "
              "RotaryEncoding {max_sequence_length: 6, d_model: 4, theta: 10000}");
    }
}

TEST_CASE("attention and transformers reject bad configs and inputs", "[nn][transformer]") {
    using C = ember::Cpu;
    using Catch::Contains;
    SECTION("d_model not divisible by n_heads") {
        REQUIRE_THROWS_AS((nn::MultiHeadAttentionConfig{6, 4}.init<C>()), ember::ArgumentError);
        REQUIRE_THROWS_WITH((nn::MultiHeadAttentionConfig{6, 4}.init<C>()),
                            Contains("d_model 6") && Contains("n_heads 4"));
        REQUIRE_THROWS_AS((nn::TransformerEncoderConfig{6, 8, 4, 1}.init<C>()),
                          ember::ArgumentError);
        REQUIRE_THROWS_AS((nn::TransformerEncoderConfig{8, 8, 2, 0}.init<C>()),
                          ember::ArgumentError);
    }
    SECTION("odd d_model for position encodings") {
        REQUIRE_THROWS_AS(nn::PositionalEncodingConfig{5}.init<C>(), ember::ArgumentError);
        REQUIRE_THROWS_AS((nn::RotaryEncodingConfig{4, 3}.init<C>()), ember::ArgumentError);
    }
    auto mha = nn::MultiHeadAttentionConfig{8, 2}.init<C>();
    auto x = Tensor<C, 3>::zeros({2, 3, 8});
    SECTION("mask shapes") {
        auto bad_pad =
            Tensor<C, 2, Bool>::from_data(ember::TensorData::zeros({2, 4}, ember::DType::Bool));
        REQUIRE_THROWS_AS(mha.forward(nn::MhaInput<C>::self_attn(x).mask_pad(bad_pad)),
                          ember::ShapeError);
        REQUIRE_THROWS_WITH(mha.forward(nn::MhaInput<C>::self_attn(x).mask_pad(bad_pad)),
                            Contains("mask_pad") && Contains("[2, 4]") && Contains("[2, 3]"));
        auto bad_attn = nn::generate_autoregressive_mask<C>(2, 4);
        REQUIRE_THROWS_WITH(mha.forward(nn::MhaInput<C>::self_attn(x).mask_attn(bad_attn)),
                            Contains("mask_attn") && Contains("[2, 4, 4]"));
        auto enc = nn::TransformerEncoderConfig{8, 16, 2, 1}.init<C>();
        REQUIRE_THROWS_WITH(enc.forward(nn::TransformerEncoderInput<C>(x).mask_attn(bad_attn)),
                            Contains("TransformerEncoder") && Contains("mask_attn"));
        auto dec = nn::TransformerDecoderConfig{8, 16, 2, 1}.init<C>();
        REQUIRE_THROWS_WITH(
            dec.forward(nn::TransformerDecoderInput<C>(x, x).memory_mask_pad(bad_pad)),
            Contains("memory_mask_pad") && Contains("[2, 4]"));
    }
    SECTION("input sizes") {
        auto y = Tensor<C, 3>::zeros({2, 3, 6});
        REQUIRE_THROWS_AS(mha.forward(nn::MhaInput<C>::self_attn(y)), ember::ShapeError);
        REQUIRE_THROWS_AS(mha.forward(nn::MhaInput<C>(x, x, Tensor<C, 3>::zeros({2, 4, 8}))),
                          ember::ShapeError);
        auto pe = nn::PositionalEncodingConfig{8}.with_max_sequence_size(2).init<C>();
        REQUIRE_THROWS_WITH(pe.forward(x), Contains("max_sequence_size = 2"));
        auto rope = nn::RotaryEncodingConfig{4, 8}.init<C>();
        REQUIRE_THROWS_WITH(rope.apply(x, 2), Contains("max_sequence_length = 4"));
        REQUIRE_THROWS_AS(rope.forward(y), ember::ShapeError);
    }
    SECTION("caches fed sequences that do not grow") {
        auto cache = nn::MhaCache<C>::autoregressive();
        mha.forward_cache(nn::MhaInput<C>::self_attn(x), cache);
        REQUIRE_THROWS_WITH(mha.forward_cache(nn::MhaInput<C>::self_attn(x), cache),
                            Contains("already holds 3"));
        auto mixed = nn::MhaCache<C>::autoregressive();
        mha.forward_incremental(nn::MhaInput<C>::self_attn(x), mixed);
        REQUIRE_THROWS_AS(
            mha.forward_cache(nn::MhaInput<C>::self_attn(Tensor<C, 3>::zeros({2, 4, 8})), mixed),
            ember::ArgumentError);
        auto enc = nn::TransformerEncoderConfig{8, 16, 2, 1}.init<C>();
        auto other = nn::TransformerEncoderConfig{8, 16, 2, 2}.init<C>().new_autoregressive_cache();
        REQUIRE_THROWS_AS(
            enc.forward_autoregressive_inference(nn::TransformerEncoderInput<C>(x), other),
            ember::ArgumentError);
    }
}

}  // namespace test_nn_transformer
