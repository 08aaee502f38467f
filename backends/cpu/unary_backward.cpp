// The gradients of ReLU, GELU, Erf, Tanh and Sigmoid in one pass (CpuBackend::
// float_unary_backward, the optional capability Autodiff's unary rules look for). Composed, each
// is a chain of elementwise ops: ReLU's a compare and a masked fill (two passes and a byte
// mask), GELU's eleven passes; a ResNet-18 step runs 17 ReLU gradients, a GPT layer one GELU
// gradient over its widest activation. The formulas and the functions (f32 exp and erf) are the
// composed forms' own, so the values agree with them to rounding.
#include <cmath>
#include <cstdint>
#include <optional>

#include "elementwise_fns.hpp"
#include "unary_backward.hpp"

#include "iter.hpp"
#include "kernels.hpp"
#include "parallel.hpp"

namespace ember::detail::cpu {
namespace {

constexpr std::size_t kGrain = std::size_t{1} << 15;

template <typename T, typename F>
void map2(const CpuTensor& g, const CpuTensor& v, CpuTensor& out, F f) {
    const T* G = g.data<T>();
    const T* V = v.data<T>();
    T* O = out.data<T>();
    parallel_for(g.shape.num_elements(), kGrain, [&](std::size_t i0, std::size_t i1) {
        for (std::size_t i = i0; i < i1; ++i) O[i] = f(G[i], V[i]);
    });
}

template <typename T>
bool run(UnaryOp op, const CpuTensor& g, const CpuTensor& v, CpuTensor& out) {
    switch (op) {
        case UnaryOp::Relu:  // v is the output: the gradient passes where it is not <= 0
            map2<T>(g, v, out, [](T gi, T y) { return select(y <= T(0), T(0), gi); });
            return true;
        case UnaryOp::Tanh:  // v is the output: 1 − y²
            map2<T>(g, v, out, [](T gi, T y) { return gi * (T(1) - y * y); });
            return true;
        case UnaryOp::Sigmoid:  // v is the output: y·(1 − y)
            map2<T>(g, v, out, [](T gi, T y) { return gi * (y * (T(1) - y)); });
            return true;
        case UnaryOp::Erf:  // v is the input: 2/√π · exp(−x²)
            map2<T>(g, v, out,
                    [](T gi, T x) { return gi * (exp_fn(-(x * x)) * T(1.12837916709551257390)); });
            return true;
        case UnaryOp::Gelu:  // v is the input: Φ(x) + x·φ(x), exact (erf) form
            map2<T>(g, v, out, [](T gi, T x) {
                const T cdf = (erf_fn(x * T(0.70710678118654752440)) + T(1)) * T(0.5);
                const T pdf = exp_fn((x * x) * T(-0.5)) * T(0.39894228040143267794);
                return gi * (cdf + x * pdf);
            });
            return true;
        default:
            return false;
    }
}

}  // namespace

std::optional<CpuTensor> unary_backward(UnaryOp op, const CpuTensor& grad, const CpuTensor& v) {
    // Dense operands of one shape and float dtype only; anything else composes.
    if (grad.shape != v.shape || grad.dtype != v.dtype ||
        (grad.dtype != DType::F32 && grad.dtype != DType::F64) || !grad.is_contiguous() ||
        !v.is_contiguous())
        return std::nullopt;
    CpuTensor out = empty(grad.shape, grad.dtype);
    if (grad.shape.num_elements() == 0) {
        switch (op) {
            case UnaryOp::Relu:
            case UnaryOp::Tanh:
            case UnaryOp::Sigmoid:
            case UnaryOp::Erf:
            case UnaryOp::Gelu:
                return out;
            default:
                return std::nullopt;
        }
    }
    bool done = false;
    by_float_type(grad.dtype, [&]<typename T>(TypeTag<T>) { done = run<T>(op, grad, v, out); });
    if (!done) return std::nullopt;
    return out;
}

}  // namespace ember::detail::cpu
