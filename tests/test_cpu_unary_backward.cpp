// The CPU's one-pass unary gradients (backends/cpu/unary_backward.cpp: CpuBackend::
// float_unary_backward), which Autodiff's rules for Relu, Gelu, Erf, Tanh and Sigmoid now take on
// the CPU. Their PyTorch fixtures (test_autodiff_modules.cpp's act_* cases) run through them;
// here each against its derivative written out in double, at values around the kinks and in the
// tails, NaN passing through as the composed forms pass it, and the operands it declines.
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "harness.hpp"

namespace test_cpu_unary_backward {

namespace {

using ember::DType;
using ember::Shape;
using ember::Tensor;
using ember::TensorData;
using ember::UnaryOp;
using C = ember::Cpu;

const std::vector<float> kX{-9.f,  -4.5f, -3.f, -1.f, -0.5f, -1e-3f, 0.f, 1e-3f,
                            0.25f, 0.5f,  1.f,  2.f,  3.5f,  5.f,    9.f, 20.f};

// dL/dx for L = Σ g·op(x), in double, from x (g = 1 + i/8 at element i).
double derivative(UnaryOp op, double x) {
    const double phi = std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
    switch (op) {
        case UnaryOp::Relu:
            return x > 0 ? 1 : 0;
        case UnaryOp::Tanh:
            return 1 - std::tanh(x) * std::tanh(x);
        case UnaryOp::Sigmoid: {
            const double s = 1 / (1 + std::exp(-x));
            return s * (1 - s);
        }
        case UnaryOp::Erf:
            return 2 / std::sqrt(std::numbers::pi) * std::exp(-x * x);
        case UnaryOp::Gelu:
            return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * phi;
        default:
            return 0;
    }
}

bool uses_output(UnaryOp op) {
    return op == UnaryOp::Relu || op == UnaryOp::Tanh || op == UnaryOp::Sigmoid;
}

}  // namespace

TEST_CASE("cpu unary backward: one pass matches the derivative", "[cpu][autodiff]") {
    const std::size_t n = kX.size();
    std::vector<float> g(n);
    for (std::size_t i = 0; i < n; ++i) g[i] = 1.f + float(i) / 8.f;
    for (const UnaryOp op :
         {UnaryOp::Relu, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Erf, UnaryOp::Gelu}) {
        for (const DType dt : {DType::F32, DType::F64}) {
            INFO("op " << int(op) << " dtype " << ember::dtype_name(dt));
            auto x = Tensor<C, 1>::from_data(TensorData(kX, Shape{n})).cast(dt);
            auto gt = Tensor<C, 1>::from_data(TensorData(g, Shape{n})).cast(dt);
            auto v = uses_output(op) ? C::float_unary(op, x.into_primitive()) : x.into_primitive();
            auto r = C::float_unary_backward(op, gt.into_primitive(), v);
            REQUIRE(r.has_value());
            CHECK(C::float_dtype(*r) == dt);
            const auto got = C::float_into_data(*r).convert(DType::F64).to_vec<double>();
            const double tol = dt == DType::F32 ? 2e-6 : 1e-12;
            for (std::size_t i = 0; i < n; ++i) {
                INFO("x = " << kX[i]);
                CHECK(got[i] ==
                      Approx(double(g[i]) * derivative(op, kX[i])).margin(tol).epsilon(tol));
            }
        }
    }
}

TEST_CASE("cpu unary backward: NaN passes as the composed forms pass it", "[cpu][autodiff]") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> v{nan, 1.f}, g{2.f, nan};
    auto vt = Tensor<C, 1>::from_data(TensorData(v, Shape{2})).into_primitive();
    auto gt = Tensor<C, 1>::from_data(TensorData(g, Shape{2})).into_primitive();
    // ReLU's rule zeroes the gradient where the output is <= 0: NaN is not, so 2 passes.
    const auto relu =
        C::float_into_data(*C::float_unary_backward(UnaryOp::Relu, gt, vt)).to_vec<float>();
    CHECK(relu[0] == 2.f);
    CHECK(std::isnan(relu[1]));
    for (const UnaryOp op : {UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Erf, UnaryOp::Gelu}) {
        const auto d = C::float_into_data(*C::float_unary_backward(op, gt, vt)).to_vec<float>();
        CHECK(std::isnan(d[0]));
        CHECK(std::isnan(d[1]));
    }
}

TEST_CASE("cpu unary backward: other ops and operands are declined", "[cpu][autodiff]") {
    auto a = Tensor<C, 2>::ones({3, 4});
    auto b = Tensor<C, 2>::ones({3, 4});
    // An op without a one-pass form: Autodiff composes it.
    CHECK_FALSE(C::float_unary_backward(UnaryOp::Exp, a.into_primitive(), b.into_primitive()));
    // A transposed view, shapes that differ, dtypes that differ, an int-like dtype.
    auto t = Tensor<C, 2>::ones({4, 3}).transpose();
    CHECK_FALSE(C::float_unary_backward(UnaryOp::Relu, t.into_primitive(), a.into_primitive()));
    CHECK_FALSE(C::float_unary_backward(UnaryOp::Relu, Tensor<C, 2>::ones({4, 3}).into_primitive(),
                                        a.into_primitive()));
    CHECK_FALSE(C::float_unary_backward(UnaryOp::Relu, a.cast(DType::F64).into_primitive(),
                                        a.into_primitive()));
    CHECK_FALSE(C::float_unary_backward(UnaryOp::Relu, a.cast(DType::BF16).into_primitive(),
                                        b.cast(DType::BF16).into_primitive()));
    // An empty tensor: an empty gradient.
    auto e = Tensor<C, 2>::ones({0, 3}).into_primitive();
    auto r = C::float_unary_backward(UnaryOp::Gelu, e, e);
    REQUIRE(r.has_value());
    CHECK(C::float_shape(*r) == Shape{0, 3});
}

}  // namespace test_cpu_unary_backward
