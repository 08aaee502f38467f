// Scaled dot-product attention (ember::module::attention): the forward on every backend and the
// gradients on every autodiff stack against PyTorch's definition (fixtures from
// tests/fixtures/gen_attention.py), with float64 finite differences; its errors; and, tagged
// [cuda][attention], the fused CUDA kernel against the composed path (skipped without a GPU).
#include <ember/autodiff/attention.hpp>
#include <ember/fusion/attention.hpp>
#include <string>
#if defined(EMBER_CUDA)
#include <ember/backend/cuda_attention.hpp>
#endif

#include "fixture_options.hpp"
#include "grad_check.hpp"

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
#include "cuda_harness.hpp"

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
    {2, 3, 77, 77, 32, false, ""},     {1, 2, 130, 65, 64, true, ""},
    {1, 2, 65, 130, 64, true, ""},     {2, 2, 64, 200, 128, false, "bool"},
    {1, 4, 100, 93, 64, false, "add"}, {1, 1, 1, 1, 32, false, ""},
    {2, 2, 129, 129, 128, true, ""},   {1, 2, 3, 300, 32, false, "bool"},
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
            AttentionOptions o;
            o.causal = c.causal;
            auto run = [&](bool fused) {
                auto qkv = qkv0.detach().require_grad();
                Tensor<AD, 3> out = [&] {
                    if (fused) return ember::module::attention_packed(qkv, c.h, o);
                    auto parts =
                        qkv.template reshape<5>(std::array<std::size_t, 5>{c.b, c.l, 3, c.h, c.e})
                            .chunk(3, 2);
                    auto head = [&](const Tensor<AD, 5>& t) {
                        return t.template reshape<4>(std::array<std::size_t, 4>{c.b, c.l, c.h, c.e})
                            .swap_dims(1, 2);
                    };
                    return ember::detail::attention::composed<AD>(
                               head(parts[0]), head(parts[1]), head(parts[2]), std::nullopt,
                               std::nullopt, c.causal, 1.0 / std::sqrt(double(c.e)))
                        .swap_dims(1, 2)
                        .template reshape<3>(std::array<std::size_t, 3>{c.b, c.l, w});
                }();
                auto grads = (out * gout).sum().backward();
                auto g = qkv.grad(grads);
                REQUIRE(g.has_value());
                if (fused) CHECK(out.primitive().primitive.is_contiguous());
                return std::array<ember::TensorData, 2>{out.cast(ember::DType::F32).to_data(),
                                                        g->cast(ember::DType::F32).to_data()};
            };
            const auto fused = run(true), composed = run(false);
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
