// Fusion<Vulkan>: chains run as one generated SPIR-V kernel whose values match the unfused
// Vulkan kernels and the math; broadcasting, scalars, strided and unaligned inputs, every
// instruction kind, several outputs; the kernel cache (scalars never recompile, a training loop
// compiles only in its first iteration, SPIR-V reloaded from disk, corrupt files rewritten).
// (The shared suites also run on Fusion<Vulkan> and Autodiff<Fusion<Vulkan>>: harness.hpp.)
#ifdef EMBER_VULKAN
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <vector>

#include <ember/nn.hpp>
#include <ember/optim.hpp>

#include "fusion_common.hpp"
#include "harness.hpp"

namespace {

using ember::Int;
using ember::Tensor;
using ember::TensorData;
using F = ember::Fusion<ember::Vulkan>;
using V = ember::Vulkan;
namespace fusion = ember::fusion;
using ember::test::check_values;
using ember::test::gelu_custom;
using ember::test::ramp;

/// Fused against unfused Vulkan: within 1e-6 relative (of max(1, |unfused|)); NaN where NaN.
void check_same(const std::vector<float>& fused, const std::vector<float>& unfused) {
    REQUIRE(fused.size() == unfused.size());
    for (std::size_t i = 0; i < fused.size(); ++i) {
        INFO("element " << i << ": fused " << fused[i] << ", unfused " << unfused[i]);
        if (std::isnan(unfused[i])) {
            CHECK(std::isnan(fused[i]));
        } else if (std::isinf(unfused[i])) {
            CHECK(fused[i] == unfused[i]);
        } else {
            CHECK(std::abs(fused[i] - unfused[i]) <= 1e-6f * std::max(1.f, std::abs(unfused[i])));
        }
    }
}

std::size_t dispatches() {
    return ember::vulkan::execution_stats().dispatches;
}

/// Runs `chain` (a function of one float tensor) on Fusion<Vulkan> and on Vulkan over `v`.
template <typename Chain>
void check_chain(const std::vector<float>& v, Chain chain) {
    const std::size_t n = v.size();
    fusion::reset_stats();
    const auto fused =
        chain(Tensor<F, 1>::from_data(TensorData(v, {n}))).into_data().template to_vec<float>();
    CHECK(fusion::stats().fused_launches == 1);
    const auto unfused =
        chain(Tensor<V, 1>::from_data(TensorData(v, {n}))).into_data().template to_vec<float>();
    check_same(fused, unfused);
}

}  // namespace

TEST_CASE("fusion vulkan: gelu_custom is one dispatch with the unfused values and the math",
          "[fusion][vulkan]") {
    EMBER_SKIP_IF_UNAVAILABLE(F);
    const std::size_t n = 10007;  // not a multiple of 4: the vector loop and the scalar tail
    const auto v = ramp(n, -6.f, 6.f);
    auto x = Tensor<F, 1>::from_data(TensorData(v, {n}));
    F::sync({});
    fusion::reset_stats();
    const std::size_t before = dispatches();
    auto y = gelu_custom(x);
    CHECK(fusion::stats().kernels_launched == 0);  // recorded, not run
    const auto got = y.into_data().to_vec<float>();
    CHECK(dispatches() - before == 1);
    const auto s = fusion::stats();
    CHECK(s.kernels_launched == 1);
    CHECK(s.fused_launches == 1);
    CHECK(s.ops_fused == 5);
    std::vector<double> want(n);
    for (std::size_t i = 0; i < n; ++i)
        want[i] = v[i] * (std::erf(v[i] / std::numbers::sqrt2) + 1) / 2;
    check_values(got, want, 1e-5);  // erf_f's own error is 1.5e-7 absolute
    const auto ref =
        gelu_custom(Tensor<V, 1>::from_data(TensorData(v, {n}))).into_data().to_vec<float>();
    check_same(got, ref);
}

TEST_CASE("fusion vulkan: what a chain may hold", "[fusion][vulkan]") {
    EMBER_SKIP_IF_UNAVAILABLE(F);
    SECTION("broadcasting and scalars: one kernel over the broadcast shape") {
        auto a = Tensor<F, 2>::from_data(TensorData({1.f, 2.f, 3.f}, {3, 1}));
        auto b = Tensor<F, 2>::from_data(TensorData({10.f, 20.f, 30.f, 40.f}, {1, 4}));
        fusion::reset_stats();
        auto c = ((a + b) * 2 - 1).into_data().to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        std::vector<double> want;
        for (double ai : {1., 2., 3.})
            for (double bi : {10., 20., 30., 40.}) want.push_back((ai + bi) * 2 - 1);
        check_values(c, want, 0);
    }
    SECTION("a strided (transposed) input") {
        auto x = Tensor<F, 2>::from_data(TensorData({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3}));
        auto t = x.transpose();  // [3, 2], not contiguous
        fusion::reset_stats();
        const auto got = (t.exp() + t).into_data().to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        std::vector<double> want;
        for (double e : {1., 4., 2., 5., 3., 6.}) want.push_back(std::exp(e) + e);
        check_values(got, want, 1e-6);
    }
    SECTION("a dense view at an unaligned offset takes the scalar path") {
        const auto v = ramp(1001, -3.f, 3.f);
        auto x = Tensor<F, 1>::from_data(TensorData(v, {1001}));
        auto s = x.narrow(0, 1, 1000);  // contiguous, offset 1
        fusion::reset_stats();
        const auto got = (s.tanh() * s + 0.25).into_data().to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        std::vector<double> want;
        for (std::size_t i = 1; i < v.size(); ++i)
            want.push_back(std::tanh(double(v[i])) * v[i] + 0.25);
        check_values(got, want, 1e-5);
    }
    SECTION("comparisons, where, mask_fill and clamp") {
        auto x = Tensor<F, 1>::from_data(TensorData({-2.f, -0.5f, 0.f, 0.5f, 3.f}, {5}));
        auto y = Tensor<F, 1>::from_data(TensorData({9.f, 9.f, 9.f, 9.f, 9.f}, {5}));
        fusion::reset_stats();
        auto pos = x.greater_elem(0.0);
        auto r = x.mask_where(pos, y).mask_fill(x.lower_elem(-1.0), 7.0).clamp(-1.0, 8.0);
        const auto got = r.into_data().to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        check_values(got, {7, -0.5, 0, 8, 8}, 0);
    }
    SECTION("casts, and int and bool chains (int64 and bool through the vector path)") {
        const std::vector<std::int64_t> iv{-3, 0, 2, 5, -7, 11, 4, 1, -1, 6, 9};
        auto i = Tensor<F, 1, Int>::from_data(TensorData(iv, {iv.size()}));
        fusion::reset_stats();
        auto m = (i * 2 + 1).greater_elem(2).bool_and(i.lower_elem(5));
        auto f = m.float_() * 0.5 + i.float_();
        auto c = (i * 3 - 2).clamp(-5, 20);
        const auto got = f.into_data().to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);  // m, f and c: one kernel, three outputs
        const auto ci = c.into_data().to_vec<std::int64_t>();
        const auto mi = m.int_().into_data().to_vec<std::int64_t>();
        for (std::size_t k = 0; k < iv.size(); ++k) {
            const bool mk = iv[k] * 2 + 1 > 2 && iv[k] < 5;
            CHECK(got[k] == static_cast<float>((mk ? 0.5 : 0.0) + double(iv[k])));
            CHECK(ci[k] == std::clamp<std::int64_t>(iv[k] * 3 - 2, -5, 20));
            CHECK(mi[k] == (mk ? 1 : 0));
        }
    }
    SECTION("float to int truncates toward zero") {
        auto x = Tensor<F, 1>::from_data(TensorData({-2.75f, -0.5f, 0.5f, 1.5f, 2.25f, 7.9f}, {6}));
        const auto got = (x * 2).int_().into_data().to_vec<std::int64_t>();
        CHECK(got == std::vector<std::int64_t>{-5, -1, 1, 3, 4, 15});
    }
    SECTION("several outputs: intermediates still held are written by the same kernel") {
        auto x = Tensor<F, 1>::from_data(TensorData({0.f, 1.f, 2.f, 3.f, 4.f}, {5}));
        fusion::reset_stats();
        auto t = x.exp();
        auto u = t + 1;
        auto w = t * 2;
        const auto tu = u.into_data().to_vec<float>();
        const auto tw = w.into_data().to_vec<float>();
        const auto tt = t.into_data().to_vec<float>();
        CHECK(fusion::stats().kernels_launched == 1);
        for (std::size_t k = 0; k < 5; ++k) {
            const double e = std::exp(static_cast<double>(k));
            CHECK(std::abs(tu[k] - (e + 1)) < 1e-5 * e + 1e-6);
            CHECK(std::abs(tw[k] - 2 * e) < 2e-5 * e);
            CHECK(std::abs(tt[k] - e) < 1e-5 * e);
        }
    }
    SECTION("more scalars than push constants hold go through the parameter block") {
        auto x = Tensor<F, 1>::from_data(TensorData({1.f, -2.f, 0.5f, 4.f, 3.f}, {5}));
        fusion::reset_stats();
        auto y = x * 1;
        for (int k = 1; k <= 40; ++k) y = (k % 2 ? y + k : y - k / 2);  // 41 scalar words
        const auto got = y.into_data().to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        double shift = 0;
        for (int k = 1; k <= 40; ++k) shift += k % 2 ? k : -(k / 2);
        check_values(got, {1 + shift, -2 + shift, 0.5 + shift, 4 + shift, 3 + shift}, 0);
    }
    SECTION("a program over 31 buffers runs op by op, with the same values") {
        std::vector<Tensor<F, 1>> xs;
        for (int k = 0; k < 33; ++k)
            xs.push_back(Tensor<F, 1>::from_data(TensorData({float(k), 1.f}, {2})));
        fusion::reset_stats();
        auto sum = xs[0] * 1;
        for (int k = 1; k < 33; ++k) sum = sum + xs[k];
        const auto got = sum.into_data().to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        check_values(got, {32 * 33 / 2, 33}, 0);
    }
}

TEST_CASE("fusion vulkan: every float op equals the unfused kernel", "[fusion][vulkan]") {
    EMBER_SKIP_IF_UNAVAILABLE(F);
    const auto v = ramp(263, -4.f, 4.f);  // crosses 0, integers, values past erf's and tanh's knees
    using ember::UnaryOp;
    for (int op = 0; op <= static_cast<int>(UnaryOp::Gelu); ++op) {
        INFO("unary op " << op);
        check_chain(v, [op]<typename BE>(Tensor<BE, 1> x) {
            return Tensor<BE, 1>(
                BE::float_unary(static_cast<UnaryOp>(op), (x * 1.5f).into_primitive()));
        });
    }
    using ember::BinaryOp;
    for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Rem,
                        BinaryOp::Pow, BinaryOp::Max, BinaryOp::Min, BinaryOp::RSub, BinaryOp::RDiv,
                        BinaryOp::RPow, BinaryOp::RRem}) {
        INFO("binary op " << static_cast<int>(op));
        check_chain(v, [op]<typename BE>(Tensor<BE, 1> x) {
            auto y = (x + 0.3f).into_primitive();
            auto s = BE::float_binary_scalar(op, y, ember::Scalar(1.75));
            if (op >= BinaryOp::RSub) return Tensor<BE, 1>(s);
            return Tensor<BE, 1>(BE::float_binary(op, s, y));
        });
    }
}

TEST_CASE("fusion vulkan: reductions along the last dim end the chain's kernel",
          "[fusion][vulkan]") {
    EMBER_SKIP_IF_UNAVAILABLE(F);
    ember::test::check_fused_reductions<F>();
}

TEST_CASE("fusion vulkan: the kernel cache", "[fusion][vulkan]") {
    EMBER_SKIP_IF_UNAVAILABLE(F);
    SECTION("scalars are push constants: a new value compiles nothing") {
        auto x = Tensor<F, 1>::from_data(TensorData({1.f, 2.f}, {2}));
        auto a = ((x * 2 + 1) * x).into_data().to_vec<float>();
        const auto vk0 = ember::vulkan::fusion_cache_stats();
        fusion::reset_stats();
        auto b = ((x * 3 + 5) * x).into_data().to_vec<float>();
        auto c = ((x * -1 + 0.5) * x).into_data().to_vec<float>();
        const auto vk1 = ember::vulkan::fusion_cache_stats();
        CHECK(fusion::stats().programs_compiled == 0);
        CHECK(fusion::stats().cache_hits == 2);
        CHECK(vk1.spirv_compiled == vk0.spirv_compiled);
        CHECK(vk1.pipelines == vk0.pipelines);
        CHECK(a == std::vector<float>{3, 10});
        CHECK(b == std::vector<float>{8, 22});
        CHECK(c == std::vector<float>{-0.5, -3});
    }
    SECTION("a training loop compiles only in its first iteration") {
        using AB = ember::Autodiff<F>;
        ember::Device<AB> device{};
        auto model = ember::nn::LinearConfig{8, 4}.init<AB>(device);
        auto optim = ember::optim::AdamConfig{}.init<decltype(model)>();
        auto x = Tensor<AB, 2>::random({16, 8}, ember::Distribution::Default, device);
        auto target = Tensor<AB, 2>::random({16, 4}, ember::Distribution::Default, device);
        std::uint64_t compiled_after_first = 0;
        std::size_t spirv_after_first = 0, pipelines_after_first = 0;
        float first_loss = 0, last_loss = 0;
        fusion::reset_stats();
        for (int it = 0; it < 5; ++it) {
            auto out = ember::activation::gelu(model.forward(x));
            auto loss = ((out - target) * (out - target)).mean();
            const float lv = loss.clone().into_scalar();
            auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
            model = optim.step(1e-2, std::move(model), std::move(grads));
            F::sync({});
            if (it == 0) {
                first_loss = lv;
                compiled_after_first = fusion::stats().programs_compiled;
                spirv_after_first = ember::vulkan::fusion_cache_stats().spirv_compiled;
                pipelines_after_first = ember::vulkan::fusion_cache_stats().pipelines;
                fusion::reset_stats();
            }
            last_loss = lv;
        }
        CHECK(compiled_after_first > 0);
        CHECK(fusion::stats().programs_compiled == 0);
        CHECK(fusion::stats().cache_hits > 0);
        CHECK(fusion::stats().cache_hits == fusion::stats().fused_launches);
        CHECK(ember::vulkan::fusion_cache_stats().spirv_compiled == spirv_after_first);
        CHECK(ember::vulkan::fusion_cache_stats().pipelines == pipelines_after_first);
        CHECK(last_loss < first_loss);
    }
    SECTION("SPIR-V is reloaded from disk; a corrupt file is ignored and rewritten") {
        // Other test processes may share the cache directory (ctest -j): only this program's
        // file is looked at, by the path the cache reports.
        const auto v = ramp(64, -2.f, 2.f);
        auto x = Tensor<F, 1>::from_data(TensorData(v, {64}));
        auto run = [&] { return ((x.sin() * x.cos() + 0.125) * 0.75).into_data().to_vec<float>(); };
        std::vector<double> want;
        for (float e : v)
            want.push_back((std::sin(double(e)) * std::cos(double(e)) + 0.125) * 0.75);
        namespace fs = std::filesystem;
        ember::vulkan::clear_fusion_cache(true);  // no SPIR-V in memory nor on disk
        auto s0 = ember::vulkan::fusion_cache_stats();
        check_values(run(), want, 1e-5);
        auto s1 = ember::vulkan::fusion_cache_stats();
        CHECK(s1.spirv_compiled == s0.spirv_compiled + 1);
        CHECK(s1.disk_writes == s0.disk_writes + 1);
        const fs::path file = s1.last_file;
        REQUIRE(fs::exists(file));
        CHECK(file.parent_path() == fs::path(ember::vulkan::cache_directory()));
        CHECK(file.filename().string().find("-fused-") != std::string::npos);

        ember::vulkan::clear_fusion_cache();  // a fresh load: memory forgotten, disk kept
        check_values(run(), want, 1e-5);
        auto s2 = ember::vulkan::fusion_cache_stats();
        CHECK(s2.spirv_compiled == s1.spirv_compiled);
        CHECK(s2.disk_loads == s1.disk_loads + 1);

        {  // same size, garbage inside
            const auto size = fs::file_size(file);
            std::ofstream(file, std::ios::binary) << std::string(size, '\x5a');
        }
        ember::vulkan::clear_fusion_cache();
        check_values(run(), want, 1e-5);
        auto s3 = ember::vulkan::fusion_cache_stats();
        CHECK(s3.disk_rejected == s2.disk_rejected + 1);
        CHECK(s3.spirv_compiled == s2.spirv_compiled + 1);
        CHECK(s3.disk_writes == s2.disk_writes + 1);

        ember::vulkan::clear_fusion_cache();  // the rewritten file is whole again
        check_values(run(), want, 1e-5);
        auto s4 = ember::vulkan::fusion_cache_stats();
        CHECK(s4.disk_loads == s3.disk_loads + 1);
        CHECK(s4.spirv_compiled == s3.spirv_compiled);
    }
}

TEST_CASE("fusion vulkan: errors", "[fusion][vulkan][errors]") {
    EMBER_SKIP_IF_UNAVAILABLE(F);
    auto a = Tensor<F, 2>::from_data(TensorData({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3}));
    auto b = Tensor<F, 2>::from_data(TensorData({1.f, 2.f}, {1, 2}));
    CHECK_THROWS_AS(a + b, ember::ShapeError);
    CHECK_THROWS_AS(a.clamp(2.0, 1.0), ember::ArgumentError);
    fusion::Program p;
    p.inputs.push_back({ember::DType::F16, true});
    p.instrs.push_back({});
    p.outputs.push_back(1);
    CHECK_THROWS_AS(V::fused_compile(p), ember::DTypeError);
    p.inputs[0].dtype = ember::DType::F32;
    p.instrs[0].a = 1;  // reads its own result
    CHECK_THROWS_AS(V::fused_compile(p), ember::ArgumentError);
    p.instrs[0].a = 0;
    auto k = V::fused_compile(p);
    auto t = Tensor<V, 1>::from_data(TensorData({1.f, 2.f, 3.f}, {3}));
    CHECK_THROWS_AS(V::fused_launch(k, p, {t.into_primitive()}, {}, ember::Shape{4}),
                    ember::ShapeError);
}
#endif
