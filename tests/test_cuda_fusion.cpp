// Fusion<Cuda>: generated kernels compile through NVRTC (no GPU needed), and on a GPU: one
// launch per chain, the unfused kernels' values, strided and misaligned inputs, scalars outside
// the key, the program cache over a training loop, and the on-disk cache (written atomically,
// corrupt files ignored). Expected values come from the math or from the unfused backend.
#if defined(EMBER_CUDA)
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <vector>

#include <ember/backend/cuda.hpp>
#include <ember/nn.hpp>
#include <ember/optim.hpp>

#include "fusion_common.hpp"
#include "harness.hpp"

namespace {
using ember::Cuda;
using ember::DType;
using ember::Int;
using ember::Tensor;
using ember::TensorData;
using F = ember::Fusion<ember::Cuda>;
namespace fusion = ember::fusion;
using ember::test::gelu_custom;
using ember::test::ramp;
using fusion::OpKind;

#define REQUIRE_GPU()                        \
    do {                                     \
        if (!ember::cuda::is_available()) {  \
            WARN("skipped: no CUDA device"); \
            return;                          \
        }                                    \
    } while (0)

// |got - want| within `rel` of |want| (and 1e-30 absolute, for exact zeros).
void check_rel(const std::vector<float>& got, const std::vector<float>& want, double rel) {
    REQUIRE(got.size() == want.size());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
        if (!(std::abs(double(got[i]) - want[i]) <= 1e-30 + rel * std::abs(double(want[i]))) &&
            bad++ < 5)
            FAIL_CHECK("element " << i << ": " << got[i] << " vs " << want[i]);
    CHECK(bad == 0);
}

fusion::Instr instr(OpKind k, std::uint8_t code, DType d, std::uint16_t a, std::uint16_t b = 0,
                    std::uint16_t c = 0, std::uint16_t s0 = 0, std::uint16_t s1 = 0) {
    fusion::Instr in;
    in.kind = k;
    in.code = code;
    in.dtype = d;
    in.a = a;
    in.b = b;
    in.c = c;
    in.s0 = s0;
    in.s1 = s1;
    return in;
}

// gelu_custom as Fusion records it: x / √2, erf, + 1, x ·, / 2.
fusion::Program gelu_program(bool dense, std::size_t rank = 1) {
    fusion::Program p;
    p.rank = rank;
    p.inputs.push_back({DType::F32, dense});
    p.instrs = {instr(OpKind::BinaryScalar, 3, DType::F32, 0, 0, 0, 0),
                instr(OpKind::Unary, 9, DType::F32, 1),
                instr(OpKind::BinaryScalar, 0, DType::F32, 2, 0, 0, 1),
                instr(OpKind::Binary, 2, DType::F32, 0, 3),
                instr(OpKind::BinaryScalar, 3, DType::F32, 4, 0, 0, 2)};
    p.outputs = {5};
    return p;
}

// Every kind of instruction and register type: f32 and i64 inputs, a strided f64 input,
// comparisons, where, mask_fill, clamp, casts, bool logic, three outputs of three dtypes.
fusion::Program mixed_program(bool dense) {
    using U = std::uint8_t;
    fusion::Program p;
    p.rank = 3;
    p.inputs = {{DType::F32, true}, {DType::I64, dense}, {DType::F64, dense}};
    p.instrs = {
        instr(OpKind::Cast, 0, DType::F32, 1),                             // r3 = float(i)
        instr(OpKind::Binary, U(ember::BinaryOp::Rem), DType::F32, 0, 3),  // r4 = x % r3
        instr(OpKind::CompareScalar, U(ember::CompareOp::Gt), DType::Bool, 0, 0, 0, 0),  // r5
        instr(OpKind::Where, 0, DType::F32, 5, 4, 0),                                    // r6
        instr(OpKind::Clamp, 0, DType::F32, 6, 0, 0, 1, 2),                              // r7
        instr(OpKind::BinaryScalar, U(ember::BinaryOp::Mul), DType::I64, 1, 0, 0, 3),    // r8
        instr(OpKind::CompareScalar, U(ember::CompareOp::Le), DType::Bool, 8, 0, 0, 4),  // r9
        instr(OpKind::Binary, U(ember::BinaryOp::Xor), DType::Bool, 9, 5),               // r10
        instr(OpKind::MaskFill, 0, DType::I64, 8, 10, 0, 5),                             // r11
        instr(OpKind::Unary, U(ember::UnaryOp::Sigmoid), DType::F64, 2),                 // r12
        instr(OpKind::Cast, 0, DType::F64, 7),                                           // r13
        instr(OpKind::Binary, U(ember::BinaryOp::Pow), DType::F64, 12, 13),              // r14
        instr(OpKind::Unary, U(ember::UnaryOp::Not), DType::Bool, 10),                   // r15
    };
    p.outputs = {11, 14, 15};
    return p;
}

bool is_elf(const std::string& s) {
    return s.size() > 4 && s.compare(0, 4,
                                     "\x7f"
                                     "ELF") == 0;
}

}  // namespace

TEST_CASE("cuda fusion: generated kernels compile with NVRTC (no GPU needed)", "[cuda][fusion]") {
    SECTION("gelu_custom: vector, dense and strided kernels") {
        const std::string dense = ember::cuda::fused_source(gelu_program(true));
        CHECK(dense.find("_vec4(") != std::string::npos);
        CHECK(dense.find("float4") != std::string::npos);
        CHECK(dense.find("erff(") != std::string::npos);
        CHECK(is_elf(ember::cuda::nvrtc_compile(dense, 90, true)));
        const std::string ptx = ember::cuda::nvrtc_compile(dense, 90, false);
        CHECK(ptx.find(".entry ember_fused_") != std::string::npos);
        CHECK(ptx.find("ld.global.nc.v4.f32") != std::string::npos);  // the vector loads
        const std::string strided = ember::cuda::fused_source(gelu_program(false, 4));
        CHECK(strided.find("_strided(") != std::string::npos);
        CHECK(is_elf(ember::cuda::nvrtc_compile(strided, 90, true)));
    }
    SECTION("every instruction kind and register type") {
        for (bool dense : {true, false}) {
            const std::string src = ember::cuda::fused_source(mixed_program(dense));
            CHECK(is_elf(ember::cuda::nvrtc_compile(src, 90, true)));
            CHECK(!ember::cuda::nvrtc_compile(src, 80, false).empty());
        }
    }
    SECTION("a program that ends in a reduction: the rows kernel alone") {
        for (bool dense : {true, false}) {
            auto p = gelu_program(dense, dense ? 1 : 4);
            p.reduce = ember::fusion::RowReduce{ember::ReduceOp::Max, p.outputs[0]};
            p.outputs.clear();
            const std::string src = ember::cuda::fused_source(p);
            CHECK(src.find("_rows(") != std::string::npos);
            CHECK(src.find("_vec4(") == std::string::npos);
            CHECK(is_elf(ember::cuda::nvrtc_compile(src, 90, true)));
        }
        auto p = gelu_program(true);
        p.reduce = ember::fusion::RowReduce{ember::ReduceOp::Prod, p.outputs[0]};
        CHECK_THROWS_AS(ember::cuda::fused_source(p), ember::ArgumentError);
    }
    SECTION("scalars are parameters, not part of the source") {
        const std::string src = ember::cuda::fused_source(gelu_program(true));
        CHECK(src.find("double s0") != std::string::npos);
        CHECK(src.find("1.41421") == std::string::npos);
    }
    SECTION("bad programs and bad source are ember errors") {
        auto p = gelu_program(true);
        p.inputs[0].dtype = DType::F16;
        CHECK_THROWS_AS(ember::cuda::fused_source(p), ember::DTypeError);
        p = gelu_program(true);
        p.instrs[0].a = 1;  // reads its own result
        CHECK_THROWS_AS(ember::cuda::fused_source(p), ember::ArgumentError);
        p = gelu_program(true);
        p.instrs[1] = instr(OpKind::Unary, std::uint8_t(ember::UnaryOp::Exp), DType::I64, 0);
        p.inputs[0].dtype = DType::I64;
        p.instrs[0].dtype = DType::I64;
        CHECK_THROWS_AS(ember::cuda::fused_source(p), ember::DTypeError);
        try {
            (void)ember::cuda::nvrtc_compile("extern \"C\" __global__ void k() { undeclared(); }",
                                             90, false);
            FAIL("no error");
        } catch (const ember::DeviceError& e) {
            const std::string m = e.what();
            CHECK(m.find("nvrtcCompileProgram") != std::string::npos);
            CHECK(m.find("undeclared") != std::string::npos);  // NVRTC's log
        }
    }
}

TEST_CASE("cuda fusion: reductions along the last dim end the chain's kernel", "[cuda][fusion]") {
    REQUIRE_GPU();
    ember::test::check_fused_reductions<F>();
}

TEST_CASE("cuda fusion: a matmul's bias add and relu run in cuBLASLt's epilogue",
          "[cuda][fusion][epilogue]") {
    REQUIRE_GPU();
    ember::test::check_matmul_epilogues<F>();
}

TEST_CASE("cuda fusion: epilogues on transposed and offset operands, and a Linear layer",
          "[cuda][fusion][epilogue]") {
    REQUIRE_GPU();
    ember::test::RestoreEpilogues restore;
    const std::size_t m = 33, k = 70, n = 45;  // odd sizes: the alignments cuBLASLt is told
    const auto xv = ramp(m * k, -1.f, 1.f), wv = ramp(n * k, 0.5f, -0.5f), bv = ramp(n, -1.f, 1.f);
    auto x = Tensor<F, 2>::from_data(TensorData(xv, {m, k}));
    auto wt = Tensor<F, 2>::from_data(TensorData(wv, {n, k}));  // used transposed
    auto b = Tensor<F, 2>::from_data(TensorData(bv, {1, n}));
    std::vector<float> w(k * n);
    for (std::size_t q = 0; q < k; ++q)
        for (std::size_t j = 0; j < n; ++j) w[q * n + j] = wv[j * k + q];
    fusion::reset_stats();
    auto y = ember::activation::relu(x.matmul(wt.transpose()) + b);
    ember::test::check_values(y.into_data().to_vec<float>(),
                 ember::test::linear_reference(xv, w, &bv, true, m, k, n), 1e-5);
    // Rows 1.. of x: an operand that starts past its buffer's first element.
    auto rows = x.slice({{1, m}, {0, k}});
    auto z = rows.matmul(wt.transpose()) + b;
    const auto want = ember::test::linear_reference(xv, w, &bv, false, m, k, n);
    ember::test::check_values(z.into_data().to_vec<float>(),
                 std::vector<double>(want.begin() + n, want.end()), 1e-5);
    CHECK(fusion::stats().epilogues == 2);
}

TEST_CASE("cuda fusion: gelu_custom is one kernel with the unfused values", "[cuda][fusion]") {
    REQUIRE_GPU();
    const std::size_t n = (1 << 20) + 3;  // a tail past the vector loads
    const auto v = ramp(n, -8.f, 8.f);
    auto x = Tensor<F, 1>::from_data(TensorData(v, {n}));
    F::sync({});
    fusion::reset_stats();
    auto y = gelu_custom(x);
    CHECK(fusion::stats().kernels_launched == 0);
    const auto got = y.into_data().to_vec<float>();
    const auto s = fusion::stats();
    CHECK(s.kernels_launched == 1);
    CHECK(s.fused_launches == 1);
    CHECK(s.ops_fused == 5);
    const auto ref =
        gelu_custom(Tensor<Cuda, 1>::from_data(TensorData(v, {n}), {})).into_data().to_vec<float>();
    check_rel(got, ref, 1e-6);
    std::vector<float> math(n);
    for (std::size_t i = 0; i < n; ++i)
        math[i] = static_cast<float>(v[i] * (std::erf(v[i] / std::numbers::sqrt2) + 1) / 2);
    for (std::size_t i = 0; i < n; i += 997)
        CHECK(std::abs(got[i] - math[i]) <= 1e-6 + 1e-5 * std::abs(math[i]));
}

TEST_CASE("cuda fusion: strided, broadcast and misaligned inputs", "[cuda][fusion]") {
    REQUIRE_GPU();
    SECTION("a transposed input takes the strided kernel") {
        const std::size_t r = 37, c = 53;
        const auto v = ramp(r * c, -3.f, 3.f);
        auto x = Tensor<F, 2>::from_data(TensorData(v, {r, c}));
        auto t = x.transpose();
        fusion::reset_stats();
        const auto got = (t.exp() * t + 1).into_data().to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        auto xc = Tensor<Cuda, 2>::from_data(TensorData(v, {r, c}), {}).transpose();
        check_rel(got, (xc.exp() * xc + 1).into_data().to_vec<float>(), 1e-6);
    }
    SECTION("a view one element in: dense but not 16-byte aligned") {
        const std::size_t n = 4099;
        const auto v = ramp(n + 1, -2.f, 2.f);
        auto x =
            Tensor<F, 1>::from_data(TensorData(v, {n + 1})).slice({ember::Slice{1, long(n + 1)}});
        fusion::reset_stats();
        const auto got = gelu_custom(x).into_data().to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        auto xc = Tensor<Cuda, 1>::from_data(TensorData(v, {n + 1}), {})
                      .slice({ember::Slice{1, long(n + 1)}});
        check_rel(got, gelu_custom(xc).into_data().to_vec<float>(), 1e-6);
    }
    SECTION("broadcasting, comparisons, where, mask_fill, clamp, ints and bools") {
        auto a = Tensor<F, 2>::from_data(TensorData({1.f, -2.f, 3.f}, {3, 1}));
        auto b = Tensor<F, 2>::from_data(TensorData({10.f, -20.f, 30.f, 0.5f}, {1, 4}));
        fusion::reset_stats();
        auto s = a + b;
        auto r = (s * 2 - 1)
                     .mask_where(s.lower_elem(0.0), s)
                     .mask_fill(s.greater_elem(30.0), 7.0)
                     .clamp(-30.0, 40.0);
        const auto got = r.into_data().to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        std::vector<float> want;
        for (double ai : {1., -2., 3.})
            for (double bi : {10., -20., 30., 0.5}) {
                const double si = ai + bi;
                double w = si < 0 ? si : si * 2 - 1;
                if (si > 30) w = 7;
                want.push_back(static_cast<float>(std::clamp(w, -30.0, 40.0)));
            }
        check_rel(got, want, 0);
        auto i =
            Tensor<F, 1, Int>::from_data(TensorData(std::vector<std::int64_t>{-3, 0, 2, 5}, {4}));
        fusion::reset_stats();
        auto m = (i * 2 + 1).greater_elem(2).bool_and(i.lower_elem(5));
        const auto f = (m.float_() * 0.5 + i.float_()).into_data().to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        check_rel(f, {-3, 0, 2.5f, 5}, 0);
    }
}

TEST_CASE("cuda fusion: compiled kernels are reused", "[cuda][fusion]") {
    REQUIRE_GPU();
    SECTION("scalars do not recompile") {
        auto x = Tensor<F, 1>::from_data(TensorData({1.f, 2.f, 3.f, 4.f, 5.f}, {5}));
        F::sync({});
        fusion::reset_stats();
        const auto before = ember::cuda::fusion_compile_stats();
        auto a = ((x * 2 + 1) * x).into_data().to_vec<float>();
        const auto mid = ember::cuda::fusion_compile_stats();
        auto b = ((x * 3 + 5) * x).into_data().to_vec<float>();
        auto c = ((x * -1.5 + 0.25) * x).into_data().to_vec<float>();
        const auto after = ember::cuda::fusion_compile_stats();
        const auto s = fusion::stats();
        CHECK(s.programs_compiled + s.cache_hits == 3);
        CHECK(s.cache_hits >= 2);
        CHECK(after.nvrtc_compiles == mid.nvrtc_compiles);
        CHECK(after.disk_hits == mid.disk_hits);
        CHECK(after.module_loads == mid.module_loads);
        CHECK(mid.module_loads - before.module_loads <= 1);
        CHECK(a == std::vector<float>{3, 10, 21, 36, 55});
        CHECK(b == std::vector<float>{8, 22, 42, 68, 100});
        check_rel(c, {-1.25f, -5.5f, -12.75f, -23.f, -36.25f}, 0);
    }
    SECTION("an Autodiff<Fusion<Cuda>> MLP loop compiles only in its first iteration") {
        using AB = ember::Autodiff<F>;
        ember::Device<AB> device{};
        auto l1 = ember::nn::LinearConfig{16, 32}.init<AB>(device);
        auto model = ember::nn::LinearConfig{32, 4}.init<AB>(device);
        auto optim = ember::optim::AdamConfig{}.init<decltype(model)>();
        auto x = Tensor<AB, 2>::random({64, 16}, ember::Distribution::Default, device);
        auto h = ember::activation::gelu(l1.forward(x)).detach();
        auto target = Tensor<AB, 2>::random({64, 4}, ember::Distribution::Default, device);
        float first_loss = 0, last_loss = 0;
        std::uint64_t compiled_first = 0;
        ember::cuda::FusionCompileStats loads{};
        for (int it = 0; it < 6; ++it) {
            auto out = ember::activation::gelu(model.forward(h));
            auto loss = ((out - target) * (out - target)).mean();
            const float lv = loss.clone().into_scalar();
            auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
            model = optim.step(1e-2, std::move(model), std::move(grads));
            F::sync({});
            if (it == 0) {
                first_loss = lv;
                compiled_first = fusion::stats().programs_compiled;
                loads = ember::cuda::fusion_compile_stats();
                fusion::reset_stats();
            }
            last_loss = lv;
        }
        CHECK(compiled_first > 0);
        CHECK(fusion::stats().programs_compiled == 0);
        CHECK(fusion::stats().cache_hits > 0);
        CHECK(ember::cuda::fusion_compile_stats().module_loads == loads.module_loads);
        CHECK(last_loss < first_loss);
    }
}

TEST_CASE("cuda fusion: the on-disk cache", "[cuda][fusion]") {
    REQUIRE_GPU();
    const auto dir =
        std::filesystem::temp_directory_path() / ("ember-cuf-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    ::setenv("EMBER_CACHE_DIR", dir.c_str(), 1);
    // A program no other case builds (a rank-2 gelu_custom over dense input).
    const auto prog = gelu_program(true, 2);
    const auto v = ramp(64, -1.f, 1.f);
    auto run = [&] {
        auto x = Cuda::float_from_data(TensorData(v, {8, 8}), {});
        const std::vector<ember::Scalar> sc{std::numbers::sqrt2, 1.0, 2.0};
        auto kern = Cuda::fused_compile(prog);
        auto outs = Cuda::fused_launch(kern, prog, {x}, sc, ember::Shape{8, 8});
        REQUIRE(outs.size() == 1);
        return Cuda::float_into_data(outs[0]).to_vec<float>();
    };
    auto want = gelu_custom(Tensor<Cuda, 2>::from_data(TensorData(v, {8, 8}), {}))
                    .into_data()
                    .to_vec<float>();
    const auto s0 = ember::cuda::fusion_compile_stats();
    check_rel(run(), want, 1e-6);
    const auto s1 = ember::cuda::fusion_compile_stats();
    CHECK(s1.nvrtc_compiles == s0.nvrtc_compiles + 1);
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
        if (e.is_regular_file()) files.push_back(e.path());
    REQUIRE(files.size() == 1);    // no temporary left behind
    check_rel(run(), want, 1e-6);  // a new module: the image comes from the disk
    const auto s2 = ember::cuda::fusion_compile_stats();
    CHECK(s2.nvrtc_compiles == s1.nvrtc_compiles);
    CHECK(s2.disk_hits == s1.disk_hits + 1);
    {
        std::ofstream corrupt(files[0], std::ios::binary | std::ios::trunc);
        corrupt << "EMBCUFS1 not an image";
    }
    check_rel(run(), want, 1e-6);  // ignored: compiled again, and rewritten
    const auto s3 = ember::cuda::fusion_compile_stats();
    CHECK(s3.nvrtc_compiles == s2.nvrtc_compiles + 1);
    CHECK(s3.disk_hits == s2.disk_hits);
    ::unsetenv("EMBER_CACHE_DIR");
    std::filesystem::remove_all(dir);
}
#endif
