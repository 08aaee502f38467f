// Scaled dot-product attention (ember::module::attention): the forward on every backend and the
// gradients on every autodiff stack against PyTorch's definition (fixtures from
// tests/fixtures/gen_attention.py), with float64 finite differences; its errors; and, tagged
// [cuda][attention], the fused CUDA kernel against the composed path (skipped without a GPU).
#include <algorithm>
#include <cmath>
#include <ember/autodiff/attention.hpp>
#include <ember/fusion/attention.hpp>
#include <string>
#include <utility>
#include <vector>
#if defined(EMBER_CUDA)
#include <ember/backend/cuda_attention.hpp>

#include "cuda_harness.hpp"
#endif

#include "fixture_options.hpp"
#include "grad_check.hpp"

namespace test_attention {

namespace {

using ember::AttentionOptions;
using ember::Bool;
using ember::Float;
using ember::Tensor;
using namespace ember::test;  // Fixture, In, GradOptions, check_close

constexpr const char* kFile = "attention";

AttentionOptions options_of(const Fixture& f) {
    AttentionOptions o;
    o.causal = f.has_param("causal") && bparam(f, "causal");
    if (f.has_param("scale")) o.scale = f.param("scale");
    return o;
}

std::string mask_kind(const Fixture& f) {
    return f.has_param("mask") ? f.str("mask") : "";
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("attention: forward against PyTorch", "[attention]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    for (const auto& name : fixture_cases(kFile)) {
        DYNAMIC_SECTION(name) {
            const Fixture f(kFile, name);
            const auto o = options_of(f);
            const auto kind = mask_kind(f);
            auto q = f.tensor<B, 4>(0), k = f.tensor<B, 4>(1), v = f.tensor<B, 4>(2);
            Tensor<B, 4> out =
                kind == "bool"  ? ember::module::attention(q, k, v, f.tensor<B, 4, Bool>(3), o)
                : kind == "add" ? ember::module::attention(q, k, v, f.tensor<B, 4>(3), o)
                                : ember::module::attention(q, k, v, o);
            check_close(out.to_data(), f.output(0), {1e-5, 1e-4});
        }
    }
}

TEMPLATE_LIST_TEST_CASE("attention: gradients against PyTorch and finite differences",
                        "[attention][autodiff]", ember::test::AutodiffBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using X = In<4>;
    for (const auto& name : fixture_cases(kFile)) {
        DYNAMIC_SECTION(name) {
            const Fixture f(kFile, name);
            const auto o = options_of(f);
            const auto kind = mask_kind(f);
            auto plain = [o](auto q, auto k, auto v) {
                return ember::module::attention(q, k, v, o);
            };
            auto masked = [o](auto q, auto k, auto v, auto m) {
                return ember::module::attention(q, k, v, m, o);
            };
            if (kind == "bool")
                check_gradients<B, X, X, X, In<4, Bool>>(kFile, name, masked);
            else if (kind == "add")  // the mask is a constant here (no gradient asked of it)
                check_gradients<B, X, X, X, In<4, Float, false>>(kFile, name, masked);
            else
                check_gradients<B, X, X, X>(kFile, name, plain);
        }
    }
}

namespace {
/// q, k or v [B, H, L, E] side by side as module::attention_packed's qkv [B, L, 3·H·E].
template <typename B>
Tensor<B, 3> pack_heads(const Tensor<B, 4>& q, const Tensor<B, 4>& k, const Tensor<B, 4>& v) {
    auto merged = [](const Tensor<B, 4>& t) {
        const auto d = t.dims();
        return t.swap_dims(1, 2).template reshape<3>(
            std::array<std::size_t, 3>{d[0], d[2], d[1] * d[3]});
    };
    return Tensor<B, 3>::cat({merged(q), merged(k), merged(v)}, 2);
}

/// module::attention_packed's output [B, L, H·E] from qkv [B, L, 3·H·E], composed: the heads
/// split off, detail::attention::composed, the heads merged (the fused kernels' reference).
template <typename B>
Tensor<B, 3> composed_packed(const Tensor<B, 3>& qkv, std::size_t heads, bool causal) {
    const auto d = qkv.dims();
    const std::size_t b = d[0], l = d[1], e = d[2] / 3 / heads;
    auto parts = qkv.template reshape<5>(std::array<std::size_t, 5>{b, l, 3, heads, e}).chunk(3, 2);
    auto head = [&](const Tensor<B, 5>& t) {
        return t.template reshape<4>(std::array<std::size_t, 4>{b, l, heads, e}).swap_dims(1, 2);
    };
    return ember::detail::attention::composed<B>(head(parts[0]), head(parts[1]), head(parts[2]),
                                                 std::nullopt, std::nullopt, causal,
                                                 1.0 / std::sqrt(double(e)))
        .swap_dims(1, 2)
        .template reshape<3>(std::array<std::size_t, 3>{b, l, heads * e});
}

/// {output, dL/dqkv} in f32 of attention over qkv0 [B, L, 3·H·E] for L = Σ output·gout: through
/// module::attention_packed (the fused kernel, whose output must be one contiguous buffer) or
/// composed_packed.
template <typename B>
std::array<ember::TensorData, 2> packed_run(const Tensor<B, 3>& qkv0, const Tensor<B, 3>& gout,
                                            std::size_t heads, bool causal, bool fused) {
    auto qkv = qkv0.detach().require_grad();
    AttentionOptions o;
    o.causal = causal;
    const Tensor<B, 3> out = fused ? ember::module::attention_packed(qkv, heads, o)
                                   : composed_packed(qkv, heads, causal);
    auto grads = (out * gout).sum().backward();
    auto g = qkv.grad(grads);
    REQUIRE(g.has_value());
    if (fused) CHECK(out.primitive().primitive.is_contiguous());
    return {out.cast(ember::DType::F32).to_data(), g->cast(ember::DType::F32).to_data()};
}
}  // namespace

TEMPLATE_LIST_TEST_CASE(
    "attention_packed: forward and gradients against PyTorch and finite "
    "differences",
    "[attention][autodiff]", ember::test::AutodiffBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using X = In<4>;
    // The self-attention cases (Lq = Lk, one head dim, no mask): q, k, v packed, attended, and
    // the output's heads split again, so that values and gradients are the fixture's.
    for (const char* name : {"plain_e32", "causal_e32", "self_e64_causal", "self_e128_scale"}) {
        DYNAMIC_SECTION(name) {
            const Fixture f(kFile, name);
            const auto o = options_of(f);
            const std::size_t heads = f.input(0).shape()[1], e = f.input(0).shape()[3];
            check_gradients<B, X, X, X>(kFile, name, [o, heads, e](auto q, auto k, auto v) {
                using S = typename decltype(q)::BackendType;
                const auto out = ember::module::attention_packed(pack_heads<S>(q, k, v), heads, o);
                const auto d = out.dims();
                return out.template reshape<4>(std::array<std::size_t, 4>{d[0], d[1], heads, e})
                    .swap_dims(1, 2);
            });
        }
    }
}

TEST_CASE("attention: an additive mask that requires a gradient gets it", "[attention][autodiff]") {
    // dL/dmask is dL/dlogits: checked here against the same loss's gradient through q kᵀ.
    using AD = ember::Autodiff<ember::Cpu>;
    const Fixture f(kFile, "add_mask_e32");
    auto q = f.tensor<AD, 4>(0), k = f.tensor<AD, 4>(1), v = f.tensor<AD, 4>(2);
    auto bias = Tensor<AD, 4>::zeros({2, 2, 4, 5}).require_grad();
    auto g = Tensor<AD, 4>::from_data(f.input(4), {});
    auto grads = (ember::module::attention(q, k, v, bias) * g).sum().backward();
    auto db = bias.grad(grads);
    REQUIRE(db.has_value());
    // Each row of dL/dlogits sums to 0 (softmax's Jacobian rows do).
    check_close(db->sum_dim(3).to_data(),
                ember::TensorData(std::vector<float>(16, 0.f), ember::Shape{2, 2, 4, 1}),
                {1e-6, 0.0});
    // And it is nonzero.
    CHECK(db->abs().sum().into_scalar() > 1e-3f);
}

TEST_CASE("attention: bad shapes and options are errors that name the op", "[attention]") {
    using B = ember::Cpu;
    auto q = Tensor<B, 4>::zeros({2, 3, 4, 8});
    auto k = Tensor<B, 4>::zeros({2, 3, 5, 8});
    auto v = Tensor<B, 4>::zeros({2, 3, 5, 8});
    using ember::ArgumentError;
    using ember::ShapeError;
    CHECK_THROWS_AS(ember::module::attention(q, Tensor<B, 4>::zeros({2, 3, 5, 7}), v), ShapeError);
    CHECK_THROWS_AS(ember::module::attention(q, k, Tensor<B, 4>::zeros({2, 3, 6, 8})), ShapeError);
    CHECK_THROWS_AS(ember::module::attention(q, Tensor<B, 4>::zeros({1, 3, 5, 8}), v), ShapeError);
    CHECK_THROWS_WITH(ember::module::attention(q, k, v, Tensor<B, 4>::ones({2, 3, 4, 4}).bool_()),
                      Catch::Contains("attention") && Catch::Contains("[2, 3, 4, 5]"));
    AttentionOptions causal;
    causal.causal = true;
    CHECK_THROWS_AS(
        ember::module::attention(q, k, v, Tensor<B, 4>::ones({1, 1, 4, 5}).bool_(), causal),
        ArgumentError);
    AttentionOptions nan_scale;
    nan_scale.scale = std::nan("");
    CHECK_THROWS_AS(ember::module::attention(q, k, v, nan_scale), ArgumentError);
    // The packed form: qkv's last dim must hold 3 x heads equal parts.
    CHECK_THROWS_WITH(ember::module::attention_packed(Tensor<B, 3>::zeros({2, 4, 48}), 5),
                      Catch::Contains("attention_packed") && Catch::Contains("[2, 4, 48]"));
    CHECK_THROWS_AS(ember::module::attention_packed(Tensor<B, 3>::zeros({2, 4, 48}), 0),
                    ShapeError);
    CHECK_THROWS_AS(ember::module::attention_packed(Tensor<B, 3>::zeros({2, 4, 48}), 2, nan_scale),
                    ArgumentError);
    CHECK(ember::module::attention_packed(Tensor<B, 3>::zeros({2, 4, 48}), 2).dims() ==
          std::array<std::size_t, 3>{2, 4, 16});
    // A mask that broadcasts is fine, and the default scale is 1/sqrt(E).
    auto out = ember::module::attention(q, k, v, Tensor<B, 4>::ones({1, 1, 1, 5}).bool_());
    CHECK(out.dims() == std::array<std::size_t, 4>{2, 3, 4, 8});
}

#if defined(EMBER_CUDA)
namespace {

using ember::Cuda;

struct CudaCase {
    std::size_t b, h, lq, lk, e;
    bool causal;
    const char* mask;  // "", "bool" ([B, 1, Lq, Lk], some rows empty) or "add" ([1, 1, Lq, Lk])
};

std::string describe(const CudaCase& c) {
    return "b" + std::to_string(c.b) + " h" + std::to_string(c.h) + " lq" + std::to_string(c.lq) +
           " lk" + std::to_string(c.lk) + " e" + std::to_string(c.e) + (c.causal ? " causal" : "") +
           (c.mask[0] ? std::string(" mask ") + c.mask : "");
}

const CudaCase kCudaCases[] = {
    {2, 3, 77, 77, 32, false, ""},
    {1, 2, 130, 65, 64, true, ""},
    {1, 2, 65, 130, 64, true, ""},
    {2, 2, 64, 200, 128, false, "bool"},
    {1, 4, 100, 93, 64, false, "add"},
    {1, 1, 1, 1, 32, false, ""},
    {2, 2, 129, 129, 128, true, ""},
    {1, 2, 3, 300, 32, false, "bool"},
    // The bf16/f16 forward's 128-row blocks (head dims 32, 64): rows past a block's end, whole
    // warps past Lq or the causal diagonal, causal with Lq != Lk, masks.
    {1, 2, 1000, 1000, 64, true, ""},
    {1, 2, 257, 257, 32, true, ""},
    {1, 1, 130, 130, 128, true, ""},
    {1, 2, 300, 200, 64, true, ""},
    {1, 1, 200, 300, 32, true, ""},
    {1, 2, 300, 200, 64, false, "add"},
    {1, 1, 200, 300, 32, false, "bool"},
    {2, 1, 193, 193, 64, false, ""},
};

/// Runs `c` with the fused kernel (module::attention on Autodiff<Cuda>) and with the composed
/// path on the same stack, in dtype `dt`, and compares output and gradients.
void compare_fused(const CudaCase& c, ember::DType dt, ember::Tolerance tol, bool strided = false) {
    using AD = ember::Autodiff<Cuda>;
    INFO(describe(c) << " " << ember::dtype_name(dt) << (strided ? " strided" : ""));
    const auto dist = ember::Distribution::Uniform(-1.0, 1.0);
    auto make = [&](std::size_t len) {
        if (!strided) return Tensor<AD, 4>::random({c.b, c.h, len, c.e}, dist).cast(dt);
        // [B, L, H, E] viewed as [B, H, L, E]: a head-strided operand, as attention layers have.
        return Tensor<AD, 4>::random({c.b, len, c.h, c.e}, dist).cast(dt).swap_dims(1, 2);
    };
    auto q = make(c.lq), k = make(c.lk), v = make(c.lk);
    // Strided: the output gradient arrives as the heads of a [B, Lq, H, E] tensor too.
    auto gout = strided
                    ? Tensor<AD, 4>::random({c.b, c.lq, c.h, c.e}, dist).cast(dt).swap_dims(1, 2)
                    : Tensor<AD, 4>::random({c.b, c.h, c.lq, c.e}, dist).cast(dt);
    std::optional<Tensor<AD, 4, Bool>> keep;
    std::optional<Tensor<AD, 4>> bias;
    if (std::string(c.mask) == "bool") {
        auto r = Tensor<AD, 4>::random({c.b, 1, c.lq, c.lk}, ember::Distribution::Default);
        // The first query row attends to nothing: its output and gradients are 0.
        r = Tensor<AD, 4>::cat(
            {Tensor<AD, 4>::full({c.b, 1, 1, c.lk}, 2.0), r.narrow(2, 1, c.lq - 1)}, 2);
        keep = r.lower_elem(0.8);
    } else if (std::string(c.mask) == "add") {
        auto m = Tensor<AD, 4>::random({1, 1, c.lq, c.lk}, dist);
        bias = m.mask_fill(m.greater_elem(0.9), -std::numeric_limits<double>::infinity()).cast(dt);
    }
    AttentionOptions o;
    o.causal = c.causal;
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.e));
    {
        std::optional<Cuda::BoolTensorPrimitive> kp;
        std::optional<Cuda::FloatTensorPrimitive> bp;
        if (keep) kp = keep->primitive();
        if (bias) bp = bias->primitive().primitive;
        REQUIRE(ember::AttentionKernel<Cuda>::supports(
            q.primitive().primitive, k.primitive().primitive, v.primitive().primitive, kp, bp));
    }
    auto run = [&](bool fused) {
        auto qq = q.detach().require_grad(), kk = k.detach().require_grad(),
             vv = v.detach().require_grad();
        auto out =
            fused ? ember::module::attention<AD>(qq, kk, vv, keep, bias, o)
                  : ember::detail::attention::composed<AD>(qq, kk, vv, keep, bias, c.causal, scale);
        auto grads = (out * gout).sum().backward();
        if (fused && strided) {
            // The output and the gradients are laid out as the operands: merging the heads
            // back into [B, L, H·E] is a view, not a copy.
            CHECK(out.swap_dims(1, 2).primitive().primitive.is_contiguous());
            for (const auto* t : {&qq, &kk, &vv})
                CHECK(t->grad(grads)->swap_dims(1, 2).primitive().is_contiguous());
        }
        return std::array<ember::TensorData, 4>{out.cast(ember::DType::F32).to_data(),
                                                qq.grad(grads)->cast(ember::DType::F32).to_data(),
                                                kk.grad(grads)->cast(ember::DType::F32).to_data(),
                                                vv.grad(grads)->cast(ember::DType::F32).to_data()};
    };
    const auto fused = run(true), composed = run(false);
    const char* what[] = {"output", "dq", "dk", "dv"};
    for (int i = 0; i < 4; ++i) {
        INFO(what[i]);
        check_close(fused[i], composed[i], tol);
    }
}

}  // namespace

TEST_CASE("cuda attention: fused kernel against the composed path, f32", "[cuda][attention]") {
    REQUIRE_GPU();
    for (const auto& c : kCudaCases) compare_fused(c, ember::DType::F32, {2e-5, 2e-4});
}

TEST_CASE("cuda attention: fused kernel on strided heads and with TF32", "[cuda][attention]") {
    REQUIRE_GPU();
    compare_fused(kCudaCases[0], ember::DType::F32, {2e-5, 2e-4}, true);
    compare_fused(kCudaCases[3], ember::DType::F32, {2e-5, 2e-4}, true);
    const bool was = ember::cuda::allow_tf32();
    ember::cuda::set_allow_tf32(true);
    for (const auto& c : kCudaCases) compare_fused(c, ember::DType::F32, {5e-3, 2e-2});
    ember::cuda::set_allow_tf32(was);
}

TEST_CASE("cuda attention: fused kernel in bf16 and f16", "[cuda][attention]") {
    REQUIRE_GPU();
    // Both sides round q, k, v and the result to the dtype; the fused kernel also rounds the
    // probabilities to it before the second product, as flash attention does.
    for (const auto& c : kCudaCases) {
        compare_fused(c, ember::DType::BF16, {3e-2, 5e-2});
        compare_fused(c, ember::DType::F16, {5e-3, 2e-2});
    }
    // Head-strided operands (the layout attention layers pass) through the cp.async loads.
    compare_fused(kCudaCases[1], ember::DType::BF16, {3e-2, 5e-2}, true);
    compare_fused(kCudaCases[4], ember::DType::F16, {5e-3, 2e-2}, true);
}

TEST_CASE("cuda attention: the fused forward allocates nothing of size Lq x Lk",
          "[cuda][attention]") {
    REQUIRE_GPU();
    const std::size_t l = 4096, e = 64;
    auto q = Tensor<Cuda, 4>::random({1, 2, l, e}, ember::Distribution::Default);
    auto k = Tensor<Cuda, 4>::random({1, 2, l, e}, ember::Distribution::Default);
    auto v = Tensor<Cuda, 4>::random({1, 2, l, e}, ember::Distribution::Default);
    Cuda::sync({});
    ember::cuda::reset_peak_memory();
    const auto before = ember::cuda::memory_stats().bytes_in_use;
    auto out = ember::module::attention(q, k, v);
    Cuda::sync({});
    const auto peak = ember::cuda::memory_stats().peak_bytes_in_use - before;
    // The output and the log-sum-exp: 2 MiB + 32 KiB; one score matrix would be 128 MiB.
    CHECK(peak < 8u * 1024 * 1024);
    CHECK(out.dims() == std::array<std::size_t, 4>{1, 2, l, e});
}

TEST_CASE("cuda attention: the packed kernel against the composed path", "[cuda][attention]") {
    REQUIRE_GPU();
    using AD = ember::Autodiff<Cuda>;
    struct Case {
        std::size_t b, h, l, e;
        bool causal;
    };
    const Case cases[] = {{2, 3, 130, 64, true},
                          {1, 2, 77, 128, false},
                          {2, 4, 65, 32, true},
                          {1, 12, 256, 64, true}};
    const auto dist = ember::Distribution::Uniform(-1.0, 1.0);
    for (const auto& c : cases)
        for (const auto dt : {ember::DType::F32, ember::DType::BF16}) {
            INFO("b" << c.b << " h" << c.h << " l" << c.l << " e" << c.e
                     << (c.causal ? " causal " : " ") << ember::dtype_name(dt));
            const std::size_t w = c.h * c.e;
            const auto qkv0 = Tensor<AD, 3>::random({c.b, c.l, 3 * w}, dist).cast(dt);
            const auto gout = Tensor<AD, 3>::random({c.b, c.l, w}, dist).cast(dt);
            REQUIRE(ember::AttentionKernel<Cuda>::supports_packed(qkv0.primitive().primitive, c.h,
                                                                  c.e));
            const auto fused = packed_run(qkv0, gout, c.h, c.causal, true),
                       composed = packed_run(qkv0, gout, c.h, c.causal, false);
            const ember::Tolerance tol = dt == ember::DType::BF16 ? ember::Tolerance{3e-2, 5e-2}
                                                                  : ember::Tolerance{2e-5, 2e-4};
            check_close(fused[0], composed[0], tol);
            check_close(fused[1], composed[1], tol);
        }
}

TEST_CASE("cuda attention: fused kernel on Fusion<Cuda> under Autodiff", "[cuda][attention]") {
    REQUIRE_GPU();
    using F = ember::Autodiff<ember::Fusion<Cuda>>;
    using AD = ember::Autodiff<Cuda>;
    auto q0 = Tensor<AD, 4>::random({2, 2, 70, 64}, ember::Distribution::Uniform(-1, 1));
    auto k0 = Tensor<AD, 4>::random({2, 2, 50, 64}, ember::Distribution::Uniform(-1, 1));
    auto v0 = Tensor<AD, 4>::random({2, 2, 50, 64}, ember::Distribution::Uniform(-1, 1));
    AttentionOptions causal;
    causal.causal = true;
    auto on = [&](auto tag, const auto& t) {
        using S = typename decltype(tag)::type;
        return Tensor<S, 4>::from_data(t.to_data(), {}).require_grad();
    };
    auto q = on(std::type_identity<F>{}, q0), k = on(std::type_identity<F>{}, k0),
         v = on(std::type_identity<F>{}, v0);
    // A pending elementwise chain feeds the kernel: Fusion computes it first.
    auto out = ember::module::attention(q * 2.0, k, v, causal);
    auto grads = out.sum().backward();
    auto qa = on(std::type_identity<AD>{}, q0), ka = on(std::type_identity<AD>{}, k0),
         va = on(std::type_identity<AD>{}, v0);
    auto ref = ember::detail::attention::composed<AD>(qa * 2.0, ka, va, std::nullopt, std::nullopt,
                                                      true, 0.125);
    auto rgrads = ref.sum().backward();
    check_close(out.to_data(), ref.to_data(), {2e-5, 2e-4});
    check_close(q.grad(grads)->to_data(), qa.grad(rgrads)->to_data(), {2e-5, 2e-4});
    check_close(k.grad(grads)->to_data(), ka.grad(rgrads)->to_data(), {2e-5, 2e-4});
    check_close(v.grad(grads)->to_data(), va.grad(rgrads)->to_data(), {2e-5, 2e-4});
}
#endif

// The CPU's fused attention (backends/cpu/attention.cpp, f32, no mask) against the composed
// form on the same stack, forward and gradients, for shapes across its 64-row query blocks
// (causal with Lq ≠ Lk, head dims not a multiple of the 8-wide vectors, heads strided as
// attention layers pass them), and the packed entry points; and its results at 1 and 3 threads
// (bitwise: every head's rows are one task's, nothing is summed across threads).
namespace {

using CpuAd = ember::Autodiff<ember::Cpu>;

struct CpuCase {
    std::size_t b, h, lq, lk, e, ev;
    bool causal, strided;
};

std::string describe(const CpuCase& c) {
    return "b" + std::to_string(c.b) + " h" + std::to_string(c.h) + " lq" + std::to_string(c.lq) +
           " lk" + std::to_string(c.lk) + " e" + std::to_string(c.e) + " ev" +
           std::to_string(c.ev) + (c.causal ? " causal" : "") + (c.strided ? " strided" : "");
}

// {output, dq, dk, dv} of `c` through module::attention (fused: the kernel must take it) or the
// composed form, from seeded operands.
std::array<ember::TensorData, 4> cpu_attention(const CpuCase& c, bool fused) {
    using AD = CpuAd;
    CpuAd::seed(11);
    const auto dist = ember::Distribution::Uniform(-1.0, 1.0);
    auto make = [&](std::size_t len, std::size_t e) {
        if (!c.strided) return Tensor<AD, 4>::random({c.b, c.h, len, e}, dist);
        return Tensor<AD, 4>::random({c.b, len, c.h, e}, dist).swap_dims(1, 2);
    };
    auto q = make(c.lq, c.e).require_grad(), k = make(c.lk, c.e).require_grad(),
         v = make(c.lk, c.ev).require_grad();
    const auto gout = make(c.lq, c.ev);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.e));
    if (fused)
        REQUIRE(ember::AttentionKernel<ember::Cpu>::supports(
            q.primitive().primitive, k.primitive().primitive, v.primitive().primitive, std::nullopt,
            std::nullopt));
    AttentionOptions o;
    o.causal = c.causal;
    auto out = fused ? ember::module::attention(q, k, v, o)
                     : ember::detail::attention::composed<AD>(q, k, v, std::nullopt, std::nullopt,
                                                              c.causal, scale);
    auto grads = (out * gout).sum().backward();
    return {out.to_data(), q.grad(grads)->to_data(), k.grad(grads)->to_data(),
            v.grad(grads)->to_data()};
}

struct CpuThreads {
    std::size_t before = ember::cpu::num_threads();
    ~CpuThreads() { ember::cpu::set_num_threads(before); }
};

// The fused kernel on for a case whatever the environment says (EMBER_CPU_ATTENTION=0 turns it
// off, read at each call): the cases below test the kernel itself.
struct CpuAttentionOn {
    std::optional<std::string> before;
    CpuAttentionOn() {
        if (const char* e = std::getenv("EMBER_CPU_ATTENTION")) before = e;
        ::unsetenv("EMBER_CPU_ATTENTION");
    }
    ~CpuAttentionOn() {
        if (before) ::setenv("EMBER_CPU_ATTENTION", before->c_str(), 1);
    }
};

}  // namespace

TEST_CASE("cpu attention: fused kernel against the composed path", "[cpu][attention]") {
    const CpuAttentionOn on;
    const CpuCase cases[] = {
        {2, 3, 77, 77, 32, 32, false, false}, {1, 2, 130, 65, 64, 64, true, false},
        {1, 2, 65, 130, 64, 64, true, false}, {2, 2, 64, 200, 20, 12, false, false},
        {1, 1, 1, 1, 5, 3, false, false},     {2, 4, 129, 129, 64, 64, true, true},
        {1, 3, 3, 300, 16, 16, false, true},
    };
    for (const auto& c : cases) {
        INFO(describe(c));
        const auto fused = cpu_attention(c, true), composed = cpu_attention(c, false);
        const char* what[] = {"output", "dq", "dk", "dv"};
        for (int i = 0; i < 4; ++i) {
            INFO(what[i]);
            check_close(fused[i], composed[i], {2e-5, 2e-4});
        }
    }
}

TEST_CASE("cpu attention: results do not depend on the thread count", "[cpu][attention]") {
    const CpuAttentionOn on;
    const CpuThreads guard;
    const CpuCase c{2, 3, 150, 150, 64, 64, true, true};
    ember::cpu::set_num_threads(1);
    const auto one = cpu_attention(c, true);
    ember::cpu::set_num_threads(3);
    const auto three = cpu_attention(c, true);
    for (int i = 0; i < 4; ++i) CHECK(std::ranges::equal(one[i].bytes(), three[i].bytes()));
    // The packed entry points: output and qkv's gradient.
    CpuAd::seed(5);
    const auto dist = ember::Distribution::Uniform(-1.0, 1.0);
    const auto qkv0 = Tensor<CpuAd, 3>::random({2, 130, 3 * 4 * 20}, dist);
    const auto gout = Tensor<CpuAd, 3>::random({2, 130, 4 * 20}, dist);
    AttentionOptions o;
    o.causal = true;
    auto packed = [&](std::size_t threads) {
        ember::cpu::set_num_threads(threads);
        auto qkv = qkv0.detach().require_grad();
        auto out = ember::module::attention_packed(qkv, 4, o);
        auto grads = (out * gout).sum().backward();
        return std::array<ember::TensorData, 2>{out.to_data(), qkv.grad(grads)->to_data()};
    };
    const auto p1 = packed(1), p3 = packed(3);
    for (int i = 0; i < 2; ++i) CHECK(std::ranges::equal(p1[i].bytes(), p3[i].bytes()));
}

TEST_CASE("cpu attention: the packed kernel against the composed path", "[cpu][attention]") {
    const CpuAttentionOn on;
    using AD = CpuAd;
    struct Case {
        std::size_t b, h, l, e;
        bool causal;
    };
    const Case cases[] = {{2, 3, 130, 64, true}, {1, 2, 77, 20, false}, {1, 12, 256, 64, true}};
    const auto dist = ember::Distribution::Uniform(-1.0, 1.0);
    for (const auto& c : cases) {
        INFO("b" << c.b << " h" << c.h << " l" << c.l << " e" << c.e
                 << (c.causal ? " causal" : ""));
        const std::size_t w = c.h * c.e;
        const auto qkv0 = Tensor<AD, 3>::random({c.b, c.l, 3 * w}, dist);
        const auto gout = Tensor<AD, 3>::random({c.b, c.l, w}, dist);
        REQUIRE(ember::AttentionKernel<ember::Cpu>::supports_packed(qkv0.primitive().primitive, c.h,
                                                                    c.e));
        const auto fused = packed_run(qkv0, gout, c.h, c.causal, true),
                   composed = packed_run(qkv0, gout, c.h, c.causal, false);
        check_close(fused[0], composed[0], {2e-5, 2e-4});
        check_close(fused[1], composed[1], {2e-5, 2e-4});
    }
}

namespace {

// Attention by its definition in double for the finite-difference check: L = Σ out·w with
// out = softmax(q kᵀ · scale) v per (batch, head), query i attending to keys 0..i when causal.
// Operands are [B, H, L, E] row-major.
struct RefCase {
    std::size_t b, h, lq, lk, e, ev;
    bool causal;
};

double reference_loss(const RefCase& c, const std::vector<double>& q, const std::vector<double>& k,
                      const std::vector<double>& v, const std::vector<double>& w,
                      std::vector<double>* out = nullptr) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.e));
    double loss = 0;
    std::vector<double> p(c.lk);
    for (std::size_t bh = 0; bh < c.b * c.h; ++bh)
        for (std::size_t i = 0; i < c.lq; ++i) {
            const std::size_t n = c.causal ? std::min(c.lk, i + 1) : c.lk;
            double mx = -1e300, sum = 0;
            for (std::size_t j = 0; j < n; ++j) {
                double s = 0;
                for (std::size_t t = 0; t < c.e; ++t)
                    s += q[(bh * c.lq + i) * c.e + t] * k[(bh * c.lk + j) * c.e + t];
                p[j] = s * scale;
                mx = std::max(mx, p[j]);
            }
            for (std::size_t j = 0; j < n; ++j) sum += (p[j] = std::exp(p[j] - mx));
            for (std::size_t t = 0; t < c.ev; ++t) {
                double o = 0;
                for (std::size_t j = 0; j < n; ++j) o += p[j] / sum * v[(bh * c.lk + j) * c.ev + t];
                const std::size_t at = (bh * c.lq + i) * c.ev + t;
                if (out) (*out)[at] = o;
                loss += o * w[at];
            }
        }
    return loss;
}

std::vector<float> wave(std::size_t n, double phase) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = static_cast<float>(std::sin(static_cast<double>(i) * 1.37 + phase) * 1.5);
    return v;
}

}  // namespace

TEST_CASE("cpu attention: fused gradients against finite differences of the definition",
          "[cpu][attention][autodiff]") {
    const CpuAttentionOn on;
    // Tiny cases (causal with Lq < Lk and Lq > Lk, head dims not a multiple of 8): the fused
    // kernel's output against the definition in double, and its dq, dk, dv against central
    // differences of the double loss at each element (step 1e-3: truncation ~1e-7).
    using AD = CpuAd;
    const RefCase cases[] = {{1, 2, 3, 5, 4, 3, false},
                             {1, 2, 5, 3, 4, 3, true},
                             {2, 1, 4, 6, 3, 5, true},
                             {1, 1, 7, 7, 9, 2, true}};
    for (const auto& c : cases) {
        INFO("b" << c.b << " h" << c.h << " lq" << c.lq << " lk" << c.lk << " e" << c.e << " ev"
                 << c.ev << (c.causal ? " causal" : ""));
        const ember::Shape qs{c.b, c.h, c.lq, c.e}, ks{c.b, c.h, c.lk, c.e},
            vs{c.b, c.h, c.lk, c.ev}, os{c.b, c.h, c.lq, c.ev};
        const auto qf = wave(qs.num_elements(), 0.1), kf = wave(ks.num_elements(), 0.7),
                   vf = wave(vs.num_elements(), 1.9), wf = wave(os.num_elements(), 2.3);
        auto q = Tensor<AD, 4>::from_data(ember::TensorData(qf, qs), {}).require_grad();
        auto k = Tensor<AD, 4>::from_data(ember::TensorData(kf, ks), {}).require_grad();
        auto v = Tensor<AD, 4>::from_data(ember::TensorData(vf, vs), {}).require_grad();
        const auto w = Tensor<AD, 4>::from_data(ember::TensorData(wf, os), {});
        REQUIRE(ember::AttentionKernel<ember::Cpu>::supports(
            q.primitive().primitive, k.primitive().primitive, v.primitive().primitive, std::nullopt,
            std::nullopt));
        AttentionOptions o;
        o.causal = c.causal;
        const auto out = ember::module::attention(q, k, v, o);
        const auto grads = (out * w).sum().backward();
        std::vector<double> qd(qf.begin(), qf.end()), kd(kf.begin(), kf.end()),
            vd(vf.begin(), vf.end()), wd(wf.begin(), wf.end()), want(os.num_elements());
        reference_loss(c, qd, kd, vd, wd, &want);
        const auto got = out.to_data().convert(ember::DType::F64).to_vec<double>();
        for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(2e-6));
        const std::pair<std::vector<double>*, Tensor<AD, 4>*> operands[] = {
            {&qd, &q}, {&kd, &k}, {&vd, &v}};
        const char* names[] = {"dq", "dk", "dv"};
        for (std::size_t op = 0; op < 3; ++op) {
            INFO(names[op]);
            auto& x = *operands[op].first;
            const auto g = operands[op]
                               .second->grad(grads)
                               ->to_data()
                               .convert(ember::DType::F64)
                               .to_vec<double>();
            REQUIRE(g.size() == x.size());
            constexpr double h = 1e-3;
            for (std::size_t i = 0; i < x.size(); ++i) {
                const double x0 = x[i];
                x[i] = x0 + h;
                const double up = reference_loss(c, qd, kd, vd, wd);
                x[i] = x0 - h;
                const double down = reference_loss(c, qd, kd, vd, wd);
                x[i] = x0;
                CHECK(g[i] == Approx((up - down) / (2 * h)).margin(2e-5).epsilon(1e-4));
            }
        }
    }
}

}  // namespace test_attention
