// CudaBackend's quantized Linear (issue 11 on the GPU): x quantized to int8 on the device (its
// range reduced there, so nothing waits for the host), int8 × int8 → int32 by cublasLtMatmul,
// and one epilogue kernel for the zero points, scales and bias. Mirrors the CPU's q_linear
// (backends/cpu/quant.cpp): the same parameters, rounding and epilogue arithmetic.
//
// cuBLASLt's int8 GEMM with ordinary (column-major) layouts wants the "TN" form, leading
// dimensions that are multiples of 4 and 4-byte aligned pointers. ember's row-major
// y[M, N] = x[M, K] · w[K, N] is, column-major, yᵀ = wᵀ · xᵀ: so the weights are transposed once
// to [N, K] (kept in the primitive's packed slot) and passed as the transposed operand, x as the
// plain one, with M padded to a multiple of 4 by zero rows. K and N must be multiples of 4.
#include <mutex>
#include <vector>

#include "ember/backend/cuda.hpp"
#include "lt.hpp"
#include "ops.hpp"
#include "qlinear.hpp"

namespace ember {
namespace k = detail::cuda;

namespace detail::cuda {
namespace {

/// The weights as cuBLASLt's transposed operand, with what the epilogue needs of them.
struct PackedWeights {
    CudaTensor wt;                   ///< int8 [N, K]
    CudaTensor col_sum;              ///< int32 [N]
    CudaTensor scale;                ///< f32 [1] or [N], contiguous
    std::optional<CudaTensor> zero;  ///< int64 [1] or [N], contiguous
};

using QT = quant::QTensorPrimitive<CudaTensor, CudaTensor>;

const PackedWeights& packed(const QT& w) {
    ember::detail::call_once(w.packed->once, [&] {
        auto p = std::make_shared<PackedWeights>();
        const CudaTensor v = contiguous(w.values);
        const std::int64_t kk = static_cast<std::int64_t>(v.shape[0]),
                           n = static_cast<std::int64_t>(v.shape[1]);
        const int dev = v.device();
        p->wt = empty(Shape{v.shape[1], v.shape[0]}, DType::I8, dev);
        p->col_sum = empty(Shape{v.shape[1]}, DType::I32, dev);
        launch_q_prepare_weights(static_cast<const std::int8_t*>(v.ptr()), kk, n,
                                 static_cast<std::int8_t*>(p->wt.ptr()),
                                 static_cast<int*>(p->col_sum.ptr()), stream(dev));
        p->scale = contiguous(cast(w.scale, DType::F32));
        if (w.offset) p->zero = contiguous(cast(*w.offset, DType::I64));
        w.packed->data = std::move(p);
    });
    return *static_cast<const PackedWeights*>(w.packed->data.get());
}

/// acc [mp, n] (int32, row-major) = q [mp, k] · w [k, n] through the transposed weights.
/// Returns false when cuBLASLt offers no algorithm for the shape.
bool int8_gemm(int dev, std::int64_t mp, std::int64_t n, std::int64_t kk, const void* q,
               const void* wt, void* acc) {
    cublasLtHandle_t lt = cublas_lt(dev);
    LtPlan pl;
    EMBER_CUBLAS_CHECK(blas().cublasLtMatmulDescCreate(&pl.desc, CUBLAS_COMPUTE_32I, CUDA_R_32I));
    const cublasOperation_t t = CUBLAS_OP_T, nop = CUBLAS_OP_N;
    EMBER_CUBLAS_CHECK(
        blas().cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    EMBER_CUBLAS_CHECK(blas().cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                             &nop, sizeof nop));
    // Column-major: A = wt stored [K rows, N cols] (ld K), used transposed; B = q stored
    // [K, Mp] (ld K); C = accᵀ [N, Mp] (ld N).
    EMBER_CUBLAS_CHECK(blas().cublasLtMatrixLayoutCreate(&pl.a, CUDA_R_8I, kk, n, kk));
    EMBER_CUBLAS_CHECK(blas().cublasLtMatrixLayoutCreate(&pl.b, CUDA_R_8I, kk, mp, kk));
    EMBER_CUBLAS_CHECK(blas().cublasLtMatrixLayoutCreate(&pl.c, CUDA_R_32I, n, mp, n));
    std::size_t ws_bytes = 0;
    void* ws = cublas_workspace(dev, &ws_bytes);
    EMBER_CUBLAS_CHECK(blas().cublasLtMatmulPreferenceCreate(&pl.pref));
    EMBER_CUBLAS_CHECK(blas().cublasLtMatmulPreferenceSetAttribute(
        pl.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    const cublasStatus_t hs = blas().cublasLtMatmulAlgoGetHeuristic(
        lt, pl.desc, pl.a, pl.b, pl.c, pl.c, pl.pref, 1, &heur, &found);
    if (hs == CUBLAS_STATUS_NOT_SUPPORTED || found == 0) return false;
    EMBER_CUBLAS_CHECK(hs);
    const std::int32_t alpha = 1, beta = 0;
    EMBER_CUBLAS_CHECK(blas().cublasLtMatmul(lt, pl.desc, &alpha, wt, pl.a, q, pl.b, &beta, acc,
                                             pl.c, acc, pl.c, &heur.algo, ws, ws_bytes,
                                             stream(dev)));
    return true;
}

}  // namespace
}  // namespace detail::cuda

CudaBackend::FT CudaBackend::q_linear(FT x, QT w, std::optional<FT> bias,
                                      const quant::ActivationQuantization& act) {
    using Base = BackendBase<CudaBackend>;
    const Shape ws = w.values.shape;
    const bool per_row = w.scheme.is_per_channel() && w.scheme.axis == 0;
    const bool shapes_ok = ws.rank() == 2 && ws[0] % 4 == 0 && ws[1] % 4 == 0 && ws[0] > 0 &&
                           w.values.dtype == DType::I8;
    if (act.mode == quant::ActivationMode::Float || per_row || !shapes_ok || x.dtype != DType::F32)
        return Base::q_linear(std::move(x), std::move(w), std::move(bias), act);

    const Shape xs = x.shape;
    const std::size_t kdim = ws[0], n = ws[1];
    EMBER_CHECK(xs.rank() >= 1 && xs[xs.rank() - 1] == kdim, Shape, "q_linear: input ",
                xs.to_string(), " does not end in the weight's ", kdim, " input features");
    k::check_same_device("q_linear", x, w.values);
    const int dev = x.device();
    const auto m = static_cast<std::int64_t>(xs.num_elements() / kdim);
    const std::int64_t mp = (m + 3) / 4 * 4;
    const auto kk = static_cast<std::int64_t>(kdim), nn = static_cast<std::int64_t>(n);
    Shape ys = xs;
    ys[ys.rank() - 1] = n;
    FT y = k::empty(ys, DType::F32, dev);
    if (m == 0) return y;

    const k::PackedWeights& pw = k::packed(w);
    x = k::contiguous(std::move(x));
    std::optional<FT> b;
    if (bias) {
        EMBER_CHECK(bias->shape == Shape{n}, Shape, "q_linear: bias ", bias->shape.to_string(),
                    " does not match the weight's ", n, " output features");
        b = k::contiguous(k::cast(std::move(*bias), DType::F32));
    }
    cudaStream_t s = k::stream(dev);
    // Scratch: the range (2 words), the parameters (2 floats), q [mp, k], row sums, acc.
    FT scratch = k::empty(Shape{4}, DType::F32, dev);
    FT q = k::empty(Shape{static_cast<std::size_t>(mp), kdim}, DType::I8, dev);
    FT row_sum = k::empty(Shape{static_cast<std::size_t>(mp)}, DType::I32, dev);
    FT acc = k::empty(Shape{static_cast<std::size_t>(mp), n}, DType::I32, dev);
    auto* range = static_cast<unsigned*>(scratch.ptr());
    auto* params = static_cast<float*>(scratch.ptr()) + 2;
    const bool dynamic = act.mode == quant::ActivationMode::Dynamic;
    if (dynamic) k::launch_q_range(static_cast<const float*>(x.ptr()), m * kk, range, s);
    k::launch_q_rows(static_cast<const float*>(x.ptr()), m, mp, kk, dynamic ? range : nullptr,
                     act.scale, act.offset, static_cast<std::int8_t*>(q.ptr()),
                     static_cast<int*>(row_sum.ptr()), params, s);
    if (!k::int8_gemm(dev, mp, nn, kk, q.ptr(), pw.wt.ptr(), acc.ptr()))
        return Base::q_linear(std::move(x), std::move(w),
                              bias ? std::optional<FT>(*b) : std::nullopt, act);
    k::QEpilogue e;
    e.acc = static_cast<const int*>(acc.ptr());
    e.m = m;
    e.n = nn;
    e.k = kk;
    e.row_sum = static_cast<const int*>(row_sum.ptr());
    e.col_sum = static_cast<const int*>(pw.col_sum.ptr());
    e.w_scale = static_cast<const float*>(pw.scale.ptr());
    e.scale_count = static_cast<std::int64_t>(pw.scale.num_elements());
    if (pw.zero) {
        e.w_zero = static_cast<const std::int64_t*>(pw.zero->ptr());
        e.zero_count = static_cast<std::int64_t>(pw.zero->num_elements());
    }
    e.params = params;
    e.bias = b ? static_cast<const float*>(b->ptr()) : nullptr;
    e.y = static_cast<float*>(y.ptr());
    k::launch_q_epilogue(e, s);
    return y;
}

}  // namespace ember
