// Optimizer updates fused into one pass. Adam written as tensor ops walks the parameter-sized
// buffers about thirty times per step (each op reads and writes whole tensors); here each
// element of p, g, m and v is read once and p, m, v written once, which is what makes the
// optimizer cheap next to the matmuls of a small model.
#include <cmath>

#include "ember/tensor/error.hpp"
#include "isa.hpp"  // EMBER_CPU_ISA_BEGIN/END: one copy per instruction set (EMBER_CPU_ARCH)
#include "kernels.hpp"
#include "parallel.hpp"

namespace ember::detail::cpu {
EMBER_CPU_ISA_BEGIN

namespace {

constexpr std::size_t kGrain = 1 << 14;  // elements per parallel chunk

// The buffer a result goes to: the input's own when nothing else holds it.
CpuTensor destination(const CpuTensor& t) {
    return t.is_unique() ? t : empty(t.shape, t.dtype);
}

template <typename T>
struct AdamArgs {
    const T *p, *g, *m, *v;
    T *p_out, *m_out, *v_out;
    T b1, b2, one_b1, one_b2, inv_sqrt_c2, eps, step;
};

// Kept out of line: inlined into adam_step, GCC drops the ivdep below and the loop stays scalar.
// Outputs may be inputs (in-place reuse) but only ever at the same index, so no iteration
// depends on another; without ivdep the seven pointers need more runtime alias checks than GCC
// will emit. The operations are those of the composed update in ember/optim/adam.hpp, in the
// same order and precision, so that both give the same values.
template <typename T>
[[gnu::noinline]] void adam_range(const AdamArgs<T>& a, std::size_t b, std::size_t e) {
    const T b1 = a.b1, b2 = a.b2, one_b1 = a.one_b1, one_b2 = a.one_b2;
    const T inv_sqrt_c2 = a.inv_sqrt_c2, eps = a.eps, step = a.step;
    const T *pp = a.p, *gp = a.g, *mp = a.m, *vp = a.v;
    T *po = a.p_out, *mo = a.m_out, *vo = a.v_out;
#if defined(__clang__)
#pragma clang loop vectorize(assume_safety)
#else
#pragma GCC ivdep
#endif
    for (std::size_t k = b; k < e; ++k) {
        const T gk = gp[k];
        const T mk = mp[k] * b1 + gk * one_b1;
        const T vk = vp[k] * b2 + (gk * gk) * one_b2;
        const T denom = std::sqrt(vk) * inv_sqrt_c2 + eps;
        po[k] = pp[k] - step * (mk / denom);
        mo[k] = mk;
        vo[k] = vk;
    }
}

template <typename T>
void adam_kernel(const CpuTensor& p, const CpuTensor& g, const CpuTensor& m, const CpuTensor& v,
                 const CpuTensor& p_out, const CpuTensor& m_out, const CpuTensor& v_out,
                 const AdamStepScalars& s) {
    const AdamArgs<T> args{p.data<T>(),     g.data<T>(),
                           m.data<T>(),     v.data<T>(),
                           p_out.data<T>(), m_out.data<T>(),
                           v_out.data<T>(), T(s.beta_1),
                           T(s.beta_2),     T(1 - s.beta_1),
                           T(1 - s.beta_2), T(1 / std::sqrt(s.correction_2)),
                           T(s.epsilon),    T(s.lr / s.correction_1)};
    parallel_for(p.num_elements(), kGrain,
                 [&args](std::size_t b, std::size_t e) { adam_range(args, b, e); });
}

}  // namespace

std::array<CpuTensor, 3> adam_step(CpuTensor param, CpuTensor grad, CpuTensor m, CpuTensor v,
                                   const AdamStepScalars& s) {
    EMBER_CHECK(grad.shape == param.shape && m.shape == param.shape && v.shape == param.shape,
                Shape, "adam_step: the parameter ", param.shape.to_string(), ", gradient ",
                grad.shape.to_string(), " and moments ", m.shape.to_string(), ", ",
                v.shape.to_string(), " must have one shape");
    EMBER_CHECK(
        is_float(param.dtype) && is_float(grad.dtype) && is_float(m.dtype) && is_float(v.dtype),
        DType, "adam_step: needs float tensors, got ", dtype_name(param.dtype), ", ",
        dtype_name(grad.dtype), ", ", dtype_name(m.dtype), ", ", dtype_name(v.dtype));
    const DType dt = param.dtype;
    const bool one_pass = (dt == DType::F32 || dt == DType::F64) && grad.dtype == dt &&
                          m.dtype == dt && v.dtype == dt && param.is_contiguous() &&
                          grad.is_contiguous() && m.is_contiguous() && v.is_contiguous();
    if (!one_pass) {
        // Half precision, mixed dtypes or strided views: the update as separate ops.
        CpuTensor g2 = binary(BinaryOp::Mul, grad, grad);
        m = binary(BinaryOp::Add, binary_scalar(BinaryOp::Mul, std::move(m), Scalar(s.beta_1)),
                   binary_scalar(BinaryOp::Mul, grad, Scalar(1 - s.beta_1)));
        v = binary(BinaryOp::Add, binary_scalar(BinaryOp::Mul, std::move(v), Scalar(s.beta_2)),
                   binary_scalar(BinaryOp::Mul, std::move(g2), Scalar(1 - s.beta_2)));
        CpuTensor denom = binary_scalar(BinaryOp::Add,
                                        binary_scalar(BinaryOp::Mul, unary(UnaryOp::Sqrt, v),
                                                      Scalar(1 / std::sqrt(s.correction_2))),
                                        Scalar(s.epsilon));
        CpuTensor update = binary(BinaryOp::Div, m, std::move(denom));
        param =
            binary(BinaryOp::Sub, std::move(param),
                   binary_scalar(BinaryOp::Mul, std::move(update), Scalar(s.lr / s.correction_1)));
        return {std::move(param), std::move(m), std::move(v)};
    }
    CpuTensor p_out = destination(param), m_out = destination(m), v_out = destination(v);
    if (dt == DType::F32)
        adam_kernel<float>(param, grad, m, v, p_out, m_out, v_out, s);
    else
        adam_kernel<double>(param, grad, m, v, p_out, m_out, v_out, s);
    return {std::move(p_out), std::move(m_out), std::move(v_out)};
}

EMBER_CPU_ISA_END
}  // namespace ember::detail::cpu
