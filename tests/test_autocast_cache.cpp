// ember::Autocast's weight-cast cache (<ember/tensor/autocast.hpp>): within one region a
// parameter (a leaf that keeps its gradient) is cast to the autocast dtype once, every later use
// reuses that cast, and the cache is emptied when the outermost guard goes. Checked on
// Autodiff<Cpu>, Autodiff<Fusion<Cpu>> and Dispatch ("cpu+autodiff"): the casts made (through
// autocast's cast counter), values and gradients against the uncached path (the guard's
// cache_enabled false) and against the math, the cache's lifetime across regions, optimizer
// steps and nested guards, several backward passes through one cached cast, threads, and the
// models of tests/fixtures/autocast.json (PyTorch's torch.autocast, whose cache is on).
#include <ember/dispatch/dispatch.hpp>
#include <ember/fusion/fusion.hpp>
#include <ember/optim.hpp>

#include <thread>
#include <vector>

#include "../examples/gpt/model.hpp"
#include "module_check.hpp"

namespace test_autocast_cache {

namespace {

using ember::DType;
using ember::Tensor;
using AD = ember::Autodiff<ember::Cpu>;
using ADF = ember::Autodiff<ember::Fusion<ember::Cpu>>;
namespace ac = ember::detail::autocast;
const ember::Tolerance kExact{0, 0};

// Small integers: every product, sum and gradient below is exact in bf16 (8 significant bits),
// so the cached and uncached paths, and the math, agree to the bit.
const std::vector<float> kA{1, -2, 0, 2, 1, -1};  // [2, 3]
const std::vector<float> kW{2, -1, 1, 0, -2, 1};  // [3, 2]

template <typename B>
struct Case {
    Tensor<B, 2> a0, w;  // leaves: the input's source and the weight
};
template <typename B>
Case<B> make_case(const ember::Device<B>& dev) {
    return {Tensor<B, 2>::from_data(ember::TensorData(kA, {2, 3}), dev).require_grad(),
            Tensor<B, 2>::from_data(ember::TensorData(kW, {3, 2}), dev).require_grad()};
}

// loss = 3·Σ(a·w) + Σ(a·w) with a = 2·a0 (an activation: a non-leaf), each product under the
// guard. Returns the loss and the casts the two products made.
template <typename B>
std::pair<Tensor<B, 1>, std::uint64_t> two_uses(const Case<B>& c, bool cache) {
    const ember::Autocast guard(DType::BF16, true, cache);
    const auto before = ac::cast_count();
    const auto a = c.a0 * 2.0;
    const auto y1 = a.matmul(c.w), y2 = a.matmul(c.w);
    CHECK(y1.dtype() == DType::BF16);
    CHECK(ac::cached_casts() == (cache ? 1u : 0u));  // the weight's cast; a is no leaf
    auto loss = (y1 * 3.0).sum() + y2.sum();
    return {std::move(loss), ac::cast_count() - before};
}

template <typename B>
void weight_used_twice(const ember::Device<B>& dev) {
    const auto c = make_case<B>(dev);
    auto [cached, n_cached] = two_uses(c, true);
    CHECK(ac::cached_casts() == 0);  // emptied with the guard
    auto [plain, n_plain] = two_uses(c, false);
    // Uncached: a and w cast for each product (4); cached: w once, a twice (3).
    CHECK(n_plain == 4);
    CHECK(n_cached == 3);
    ember::test::check_close(cached.to_data(), plain.to_data(), kExact);
    // The math: y = (2·a0)·w, loss = 4·Σy; dL/dw = 4·(2·a0)ᵀ·1, dL/da0 = 8·1·wᵀ.
    std::vector<float> gw(6), ga(6);
    double want = 0;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 2; ++j) {
            gw[i * 2 + j] = 4 * 2 * (kA[i] + kA[3 + i]);
            want += 4 * 2 * (kA[i] + kA[3 + i]) * kW[i * 2 + j];
        }
    for (int r = 0; r < 2; ++r)
        for (int i = 0; i < 3; ++i) ga[r * 3 + i] = 8 * (kW[i * 2] + kW[i * 2 + 1]);
    CHECK(cached.dtype() == DType::F32);
    const auto gc = cached.backward(), gp = plain.backward();
    CHECK(double(cached.into_scalar()) == want);
    for (const auto* leaf : {&c.w, &c.a0}) {
        const auto g1 = leaf->grad(gc), g2 = leaf->grad(gp);
        REQUIRE(g1.has_value());
        REQUIRE(g2.has_value());
        CHECK(g1->dtype() == DType::F32);  // back in the parameter's dtype
        ember::test::check_close(g1->to_data(), g2->to_data(), kExact);
        ember::test::check_close(g1->to_data(),
                                 ember::TensorData(leaf == &c.w ? gw : ga, leaf->shape()), kExact);
    }
}

// A Linear stepped by an optimizer between (and inside) regions is cast anew: the outputs are
// those of the stepped weights, cast explicitly.
template <typename B, typename Optim>
void updated_parameter(const ember::Device<B>& dev, Optim optim) {
    auto lin = ember::nn::LinearConfig{3, 2}.init<B>(dev);
    const auto x = Tensor<B, 2>::from_data(ember::TensorData(kA, {2, 3}), dev);
    const auto reference = [&](const ember::nn::Linear<B>& m) {
        const ember::Autocast off(DType::BF16, false);
        return ember::module::linear(x.cast(DType::BF16), m.weight.val().cast(DType::BF16),
                                     m.bias->val().cast(DType::BF16));
    };
    const auto step = [&](const Tensor<B, 2>& y) {
        auto grads = ember::optim::GradientsParams::from_grads(
            (y.cast(DType::F32) * y.cast(DType::F32)).sum().backward(), lin);
        lin = optim.step(0.1, std::move(lin), std::move(grads));
    };
    {
        const ember::Autocast guard(DType::BF16);
        const auto y = lin.forward(x);
        ember::test::check_close(y.to_data(), reference(lin).to_data(), kExact);
        CHECK(ac::cached_casts() == 2);  // weight and bias
        step(y);
        // A step inside the region makes new leaves: their casts are new entries.
        const auto before = ac::cast_count();
        const auto y2 = lin.forward(x);
        CHECK(ac::cast_count() - before == 3);  // x, the new weight, the new bias
        CHECK(ac::cached_casts() == 4);
        ember::test::check_close(y2.to_data(), reference(lin).to_data(), kExact);
        step(y2);
    }
    CHECK(ac::cached_casts() == 0);
    const ember::Autocast guard(DType::BF16);
    const auto y3 = lin.forward(x);
    CHECK(ac::cached_casts() == 2);
    ember::test::check_close(y3.to_data(), reference(lin).to_data(), kExact);
    CHECK(lin.weight.val().dtype() == DType::F32);  // the master weights stay f32
}

template <typename B>
void on_stack(const ember::Device<B>& dev) {
    SECTION("a weight used twice in one region is cast once, values and gradients equal") {
        weight_used_twice<B>(dev);
    }
    SECTION("a parameter updated by SGD between and inside regions is cast anew") {
        updated_parameter<B>(dev, ember::optim::SgdConfig{}.init<ember::nn::Linear<B>>());
    }
    SECTION("a parameter updated by AdamW's multi-tensor step is cast anew") {
        updated_parameter<B>(dev, ember::optim::AdamWConfig{}.init<ember::nn::Linear<B>>());
    }
}

}  // namespace

TEST_CASE("Autocast's cast cache on Autodiff<Cpu>", "[autocast][autocast_cache]") {
    on_stack<AD>({});
}

TEST_CASE("Autocast's cast cache on Autodiff<Fusion<Cpu>>", "[autocast][autocast_cache][fusion]") {
    on_stack<ADF>({});
}

TEST_CASE("Autocast's cast cache on Dispatch", "[autocast][autocast_cache][dispatch]") {
    on_stack<ember::Dispatch>(ember::Device<ember::Dispatch>::parse("cpu+autodiff"));
}

TEST_CASE("Autocast's cast cache lives as long as the outermost guard",
          "[autocast][autocast_cache]") {
    const auto c = make_case<AD>({});
    const auto x = Tensor<AD, 2>::from_data(ember::TensorData(kA, {2, 3}));  // untracked
    const auto w_bf16 = [&] { return c.w.inner().cast(DType::BF16).to_data(); };
    {
        const ember::Autocast outer(DType::BF16);
        const auto w1 = ac::lower(c.w);
        CHECK(ac::cached_casts() == 1);
        {
            // A nested guard of the same dtype reuses the outer region's cast and leaves it.
            const ember::Autocast inner(DType::BF16);
            const auto n = ac::cast_count();
            const auto w2 = ac::lower(c.w);
            CHECK(ac::cast_count() == n);
            CHECK(w2.primitive().node == w1.primitive().node);  // the same graph node
        }
        CHECK(ac::cached_casts() == 1);
        {
            // f16 is another entry; the parameter's f32 values are cast, not the bf16 copy.
            const ember::Autocast f16(DType::F16);
            const auto w3 = x.matmul(c.w);
            CHECK(w3.dtype() == DType::F16);
            CHECK(ac::cached_casts() == 2);
            const ember::Autocast off(DType::BF16, false);  // off: no casts at all
            const auto n = ac::cast_count();
            CHECK(x.matmul(c.w).dtype() == DType::F32);
            CHECK(ac::cast_count() == n);
        }
        {
            // cache_enabled false casts anew and stores nothing, the outer entries stay.
            const ember::Autocast nocache(DType::BF16, true, false);
            const auto n = ac::cast_count();
            const auto w4 = ac::lower(c.w);
            CHECK(ac::cast_count() == n + 1);
            CHECK(w4.primitive().node != w1.primitive().node);
            ember::test::check_close(w4.to_data(), w_bf16(), kExact);
        }
        CHECK(ac::cached_casts() == 2);
        // A refused guard changes nothing (it throws before counting itself).
        CHECK_THROWS_AS(ember::Autocast(DType::F32), ember::ArgumentError);
        CHECK(ac::cached_casts() == 2);
        CHECK(ac::current() == DType::BF16);
        // Tensors already in the target dtype, and untracked ones, are not cached; the former
        // are not cast at all.
        const auto n = ac::cast_count();
        const auto xb = x.cast(DType::BF16);
        CHECK(ac::lower(xb).primitive().node == xb.primitive().node);
        CHECK(ac::cast_count() == n);
        (void)ac::lower(x);
        (void)ac::lower(x);
        CHECK(ac::cast_count() == n + 2);
        CHECK(ac::cached_casts() == 2);
    }
    CHECK(ac::cached_casts() == 0);
    CHECK(!ac::current());
    // Tensor::cast to the dtype a tensor has is the tensor itself: no kernel, no node.
    CHECK(c.w.cast(DType::F32).primitive().node == c.w.primitive().node);
    CHECK(c.w.cast(DType::F32).is_require_grad());
}

TEST_CASE("several backward passes run through one cached cast", "[autocast][autocast_cache]") {
    // Two micro-steps in one region: forward, backward, forward, backward. The second backward
    // reaches the cached cast after the first ran through it; it must still run (and add).
    const auto c = make_case<AD>({});
    const ember::Autocast guard(DType::BF16);
    const auto g1 = (c.a0 * 2.0).matmul(c.w).sum().backward();
    const auto n = ac::cast_count();
    const auto g2 = ((c.a0 * 2.0).matmul(c.w) * 3.0).sum().backward();
    CHECK(ac::cast_count() == n + 1);  // a again (an activation), not w
    const auto w1 = c.w.grad(g1), w2 = c.w.grad(g2);
    REQUIRE(w1.has_value());
    REQUIRE(w2.has_value());
    ember::test::check_close((*w1 * 3.0).to_data(), w2->to_data(), kExact);
    std::vector<float> gw(6);
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 2; ++j) gw[i * 2 + j] = 2 * (kA[i] + kA[3 + i]);
    ember::test::check_close(w1->to_data(), ember::TensorData(gw, {3, 2}), kExact);
}

TEST_CASE("Autocast's cast cache is per thread", "[autocast][autocast_cache]") {
    const auto c = make_case<AD>({});
    const ember::Autocast guard(DType::BF16);
    (void)ac::lower(c.w);
    CHECK(ac::cached_casts() == 1);
    std::size_t other_cached = 99;
    bool other_policy = true;
    std::thread t([&] {
        // A replica's thread: no policy and an empty cache until it makes its own guard.
        other_policy = ac::current().has_value();
        const ember::Autocast own(DType::BF16);
        (void)ac::lower(c.w);
        (void)ac::lower(c.a0);
        other_cached = ac::cached_casts();
    });
    t.join();
    CHECK(!other_policy);
    CHECK(other_cached == 2);
    CHECK(ac::cached_casts() == 1);
}

TEST_CASE("the models under bf16 autocast give the uncached path's values with fewer casts",
          "[autocast][autocast_cache][models]") {
    // The GPT of tests/fixtures/autocast.json: its tied embedding is used twice (the lookup,
    // which casts nothing, and the scores); every Linear weight once per forward pass. Two
    // forward passes in one region (two micro-steps) cast each weight once.
    ember::test::Fixture f("autocast", "gpt");
    const auto tokens = f.named_tensor<AD, 2, ember::Int>("input");
    const auto targets = f.named_tensor<AD, 1, ember::Int>("targets");
    const gpt::GptConfig config{std::size_t(f.param("vocab_size")), std::size_t(f.param("context")),
                                std::size_t(f.param("d_model")),    std::size_t(f.param("n_heads")),
                                std::size_t(f.param("n_layers")),   0.0};
    const auto model = config.init<AD>();
    // The parameters autocast casts: the Linear layers' weights and biases (attention's four
    // projections and the MLP's two per block). The embeddings are looked up (the scores use
    // the token embedding's transpose, a view, cast at each use) and the LayerNorms are f32.
    std::size_t linear_params = 0;
    model.visit([&](std::string_view path, const auto&) {
        if ((path.ends_with(".weight") || path.ends_with(".bias")) &&
            path.find("embedding") == path.npos)
            ++linear_params;
    });
    CHECK(linear_params == 2 * 12);
    std::size_t entries = 0;
    auto run = [&](bool cache, int passes) {
        const ember::Autocast guard(DType::BF16, true, cache);
        const auto before = ac::cast_count();
        std::vector<Tensor<AD, 1>> losses;
        for (int i = 0; i < passes; ++i) losses.push_back(model.loss(tokens, targets));
        if (cache) entries = ac::cached_casts();
        return std::pair{std::move(losses), ac::cast_count() - before};
    };
    auto [cached, n_cached] = run(true, 2);
    auto [plain, n_plain] = run(false, 2);
    INFO("casts of two forward passes: " << n_plain << " uncached, " << n_cached << " cached");
    // The second pass reuses every parameter cast of the first.
    CHECK(entries == linear_params);
    CHECK(n_plain - n_cached == linear_params);
    for (int i = 0; i < 2; ++i)
        ember::test::check_close(cached[i].to_data(), plain[i].to_data(), kExact);
    // Gradients: a cached cast sums its uses' bf16 gradients before the cast back (as PyTorch's
    // engine does), the uncached path casts each use's gradient and sums in f32: equal up to
    // bf16 rounding of the sums.
    const auto gc = (cached[0] + cached[1]).backward(), gp = (plain[0] + plain[1]).backward();
    model.visit([&](std::string_view path, const auto& p) {
        INFO("gradient of " << path);
        const auto a = p.val().grad(gc), b = p.val().grad(gp);
        REQUIRE(a.has_value());
        REQUIRE(b.has_value());
        CHECK(a->dtype() == DType::F32);
        const auto av = a->to_data().template to_vec<double>();
        const auto bv = b->to_data().template to_vec<double>();
        double scale = 0, worst = 0;
        for (std::size_t i = 0; i < av.size(); ++i) {
            scale = std::max(scale, std::abs(bv[i]));
            worst = std::max(worst, std::abs(av[i] - bv[i]));
        }
        CHECK(worst <= 1e-2 * scale + 1e-6);
    });
}

TEST_CASE("self-attention casts its input once under autocast", "[autocast][autocast_cache][nn]") {
    // MhaInput::self_attn(x) projects one cast of x three times; MhaInput::new_(x, x, x) casts
    // x for each projection. The forward values are the same; backward sums the three bf16
    // input gradients before the one cast back, so x's gradient agrees up to bf16 rounding.
    const auto mha = ember::nn::MultiHeadAttentionConfig{8, 2}.with_dropout(0.0).init<AD>();
    const auto x0 =
        Tensor<AD, 3>::random({2, 3, 8}, ember::Distribution::Normal(0.0, 1.0)).require_grad();
    // x an activation (a leaf's casts come from the cache anyway), made anew for each graph.
    auto run = [&](bool self) {
        const auto x = x0 * 1.5;
        const auto in = self ? ember::nn::MhaInput<AD>::self_attn(x).causal()
                             : ember::nn::MhaInput<AD>::new_(x, x, x).causal();
        const ember::Autocast guard(DType::BF16);
        const auto before = ac::cast_count();
        auto out = mha.forward(in).context;
        CHECK(out.dtype() == DType::BF16);
        return std::pair{out.cast(DType::F32), ac::cast_count() - before};
    };
    auto [self_out, n_self] = run(true);
    auto [sep_out, n_sep] = run(false);
    INFO("casts: " << n_self << " self-attention, " << n_sep << " separate inputs");
    CHECK(n_sep - n_self == 2);  // x cast once instead of three times
    ember::test::check_close(self_out.to_data(), sep_out.to_data(), kExact);
    const auto g_self = (self_out * self_out).sum().backward();
    const auto g_sep = (sep_out * sep_out).sum().backward();
    const auto a = x0.grad(g_self), b = x0.grad(g_sep);
    REQUIRE(a.has_value());
    REQUIRE(b.has_value());
    CHECK(a->dtype() == DType::F32);
    const auto av = a->to_data().to_vec<double>(), bv = b->to_data().to_vec<double>();
    double scale = 0, worst = 0;
    for (std::size_t i = 0; i < av.size(); ++i) {
        scale = std::max(scale, std::abs(bv[i]));
        worst = std::max(worst, std::abs(av[i] - bv[i]));
    }
    CHECK(scale > 0);
    CHECK(worst <= 2e-2 * scale);
}

}  // namespace test_autocast_cache
