// Matmul through cuBLAS (cublasGemmStridedBatchedEx): broadcast batch dims become stride-0
// batches and transposed views become op flags, so neither is copied. f32 runs in full f32
// unless TF32 is allowed (ember::cuda::set_allow_tf32), f16/bf16 accumulate in f32, f64 in f64.
// Integer matmuls run in a plain kernel (cuBLAS has no int64 GEMM).
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string_view>
#include <tuple>

#include "ember/backend/cuda.hpp"
#include "gemm.hpp"
#include "lt.hpp"
#include "ops.hpp"

namespace ember::detail::cuda {

namespace {
std::atomic<bool> g_allow_tf32{false};

/// A matrix operand as cuBLAS sees it: `trans` when the last dim is not the unit-stride one.
struct MatView {
    bool ok = false, trans = false;
    std::int64_t ld = 0, batch_stride = 0;
};

/// Whether the last two dims of `t` (shape [..., r, c]) form a BLAS matrix, and the batch dims
/// a single stride (broadcast dims have stride 0).
MatView mat_view(const CudaTensor& t, std::size_t nb, std::int64_t batch) {
    MatView v;
    const std::size_t R = t.shape.rank();
    const auto r = static_cast<std::int64_t>(t.shape[R - 2]),
               c = static_cast<std::int64_t>(t.shape[R - 1]);
    const std::int64_t sr = t.strides[R - 2], sc = t.strides[R - 1];
    if ((c == 1 || sc == 1) && (r == 1 || sr >= c)) {
        v.ok = true;
        v.ld = r == 1 ? std::max<std::int64_t>(c, 1) : sr;
    } else if ((r == 1 || sr == 1) && (c == 1 || sc >= r)) {
        v.ok = true;
        v.trans = true;
        v.ld = c == 1 ? std::max<std::int64_t>(r, 1) : sc;
    }
    if (!v.ok) return v;
    // Batch dims: one stride for all, so that batch i sits at i·stride.
    std::int64_t stride = -1, expect = -1;
    for (std::size_t i = nb; i-- > 0;) {
        if (t.shape[i] == 1) continue;
        const std::int64_t s = t.strides[i];
        if (stride < 0) {
            stride = s;
            expect = s * static_cast<std::int64_t>(t.shape[i]);
        } else if (s == expect || (s == 0 && stride == 0)) {
            expect = s * static_cast<std::int64_t>(t.shape[i]);
        } else {
            v.ok = false;
            return v;
        }
    }
    v.batch_stride = stride < 0 ? 0 : stride;
    (void)batch;
    return v;
}

/// `t` as a BLAS matrix, copied to a dense one first where its strides describe none.
MatView blas_operand(CudaTensor& t, std::size_t nb, std::int64_t batch) {
    MatView v = mat_view(t, nb, batch);
    if (!v.ok) {
        t = fresh_copy(t);
        v = mat_view(t, nb, batch);
    }
    return v;
}
/// How many slices of k a single f32/f64 GEMM is split into (1: not split). Split where the
/// output is small (≤ 64K elements: few of cuBLAS's tiles) and k long (≥ 8192), into slices of
/// at least 512 that divide k exactly, at most 64 of them. EMBER_CUDA_SPLIT_K=0 turns it off.
std::int64_t split_k(DType dt, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch) {
    static const bool enabled = [] {
        const char* e = std::getenv("EMBER_CUDA_SPLIT_K");
        return !(e && std::string_view(e) == "0");
    }();
    if (!enabled || batch != 1 || (dt != DType::F32 && dt != DType::F64)) return 1;
    if (k < 8192 || m * n > 65536) return 1;
    for (std::int64_t s = std::min<std::int64_t>(64, k / 512); s > 1; --s)
        if (k % s == 0) return s;
    return 1;
}
}  // namespace

void gemm(int device, DType dt, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
          const void* a, std::int64_t lda, std::int64_t sa, const void* b, std::int64_t ldb,
          std::int64_t sb, void* c, std::int64_t ldc, std::int64_t sc, std::int64_t batch,
          double beta) {
    EMBER_CHECK(m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX && batch <= INT32_MAX, Shape,
                "matmul: dims ", m, "x", k, "x", n, " exceed cuBLAS's 32-bit limits");
    cublasHandle_t h = cublas(device);
    cudaDataType_t type;
    cublasComputeType_t compute;
    switch (dt) {
        case DType::F64:
            type = CUDA_R_64F;
            compute = CUBLAS_COMPUTE_64F;
            break;
        case DType::F16:
            type = CUDA_R_16F;
            compute = CUBLAS_COMPUTE_32F;
            break;
        case DType::BF16:
            type = CUDA_R_16BF;
            compute = CUBLAS_COMPUTE_32F;
            break;
        default:
            type = CUDA_R_32F;
            compute = tf32_allowed() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    }
    const double alpha_d = 1.0;
    const float alpha_f = 1.0f, beta_f = static_cast<float>(beta);
    const void* alpha = dt == DType::F64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
    const void* betap = dt == DType::F64 ? static_cast<const void*>(&beta) : &beta_f;
    // A single product with a long k and a small output (a convolution's weight gradient: k is
    // N·H·W, the output a few thousand weights) leaves most of the GPU idle: cuBLAS runs few
    // tiles, each looping over all of k. Split k into `splits` slices computed as one batched
    // GEMM into partial products, then summed in a fixed order (deterministic, replayable).
    if (const std::int64_t splits = split_k(dt, m, n, k, batch); splits > 1) {
        const std::int64_t kc = k / splits;
        CudaTensor parts = empty(Shape{static_cast<std::size_t>(splits * m * n)}, dt, device);
        const std::int64_t ska = ta ? kc * lda : kc, skb = tb ? kc : kc * ldb;
        const double zero_d = 0.0;
        const float zero_f = 0.0f;
        const void* zero = dt == DType::F64 ? static_cast<const void*>(&zero_d) : &zero_f;
        EMBER_CUBLAS_CHECK(blas().cublasGemmStridedBatchedEx(
            h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
            static_cast<int>(m), static_cast<int>(kc), alpha, b, type, static_cast<int>(ldb), skb,
            a, type, static_cast<int>(lda), ska, zero, parts.ptr(), type, static_cast<int>(n),
            m * n, static_cast<int>(splits), compute, CUBLAS_GEMM_DEFAULT));
        launch_sum_partials(dt, parts.ptr(), splits, m, n, c, ldc, beta, stream(device));
        return;
    }
    // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: swap the operands.
    EMBER_CUBLAS_CHECK(blas().cublasGemmStridedBatchedEx(
        h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
        static_cast<int>(m), static_cast<int>(k), alpha, b, type, static_cast<int>(ldb), sb, a,
        type, static_cast<int>(lda), sa, betap, c, type, static_cast<int>(ldc), sc,
        static_cast<int>(batch), compute, CUBLAS_GEMM_DEFAULT));
}

bool tf32_allowed() {
    return g_allow_tf32.load(std::memory_order_relaxed);
}

CudaTensor matmul(CudaTensor a, CudaTensor b) {
    const check::Matmul g = check::matmul(a, b);
    check_same_device("matmul", a, b);
    const std::size_t ra = a.shape.rank(), rb = b.shape.rank();
    const std::size_t m = g.m, n = g.n, k = g.k;
    const Shape& batch = g.batch;
    const std::size_t nb = batch.rank();
    const Shape& out_shape = g.out;
    const int dev = a.device();
    if (out_shape.num_elements() == 0) return empty(out_shape, a.dtype, dev);
    if (k == 0) return full(out_shape, Scalar(0), a.dtype, dev);

    // Both operands as [batch..., rows, cols] views broadcast to the common batch shape.
    Shape as = batch, bs = batch;
    as.push_back(m);
    as.push_back(k);
    bs.push_back(k);
    bs.push_back(n);
    if (ra == 1) a = reshape(std::move(a), Shape{1, k});
    if (rb == 1) b = reshape(std::move(b), Shape{k, 1});
    a = expand(std::move(a), as);
    b = expand(std::move(b), bs);
    const auto nbatch = static_cast<std::int64_t>(batch.num_elements());
    Shape full_out = batch;
    full_out.push_back(m);
    full_out.push_back(n);

    if (is_int(a.dtype)) {
        const DType result = a.dtype;
        a = contiguous(fresh_copy(cast(std::move(a), DType::I64)));
        b = contiguous(fresh_copy(cast(std::move(b), DType::I64)));
        CudaTensor out = empty(full_out, DType::I64, dev);
        launch_int_matmul(
            nbatch, static_cast<std::int64_t>(m), static_cast<std::int64_t>(n),
            static_cast<std::int64_t>(k), static_cast<const std::int64_t*>(a.ptr()),
            static_cast<std::int64_t>(m * k), static_cast<const std::int64_t*>(b.ptr()),
            static_cast<std::int64_t>(k * n), static_cast<std::int64_t*>(out.ptr()), stream(dev));
        return reshape(cast(std::move(out), result), out_shape);
    }

    const MatView va = blas_operand(a, nb, nbatch);
    const MatView vb = blas_operand(b, nb, nbatch);
    CudaTensor out = empty(full_out, a.dtype, dev);
    // b shared by every batch (a Linear's weight) and a's batches one after another in rows:
    // the batches are the rows of one taller product, which cuBLAS tiles better than a batch.
    if (nbatch > 1 && vb.batch_stride == 0 && !va.trans &&
        va.batch_stride == static_cast<std::int64_t>(m) * va.ld &&
        static_cast<std::int64_t>(m) * nbatch <= INT32_MAX) {
        gemm(dev, a.dtype, false, vb.trans, static_cast<std::int64_t>(m) * nbatch,
             static_cast<std::int64_t>(n), static_cast<std::int64_t>(k), a.ptr(), va.ld, 0, b.ptr(),
             vb.ld, 0, out.ptr(), static_cast<std::int64_t>(n), 0, 1, 0.0);
        return reshape(std::move(out), out_shape);
    }
    gemm(dev, a.dtype, va.trans, vb.trans, static_cast<std::int64_t>(m),
         static_cast<std::int64_t>(n), static_cast<std::int64_t>(k), a.ptr(), va.ld,
         va.batch_stride, b.ptr(), vb.ld, vb.batch_stride, out.ptr(), static_cast<std::int64_t>(n),
         static_cast<std::int64_t>(m * n), nbatch, 0.0);
    return reshape(std::move(out), out_shape);
}

namespace {

// The largest power of two (up to 256) that divides the address: cuBLASLt picks algorithms for
// the alignment it is told, and assumes 256 bytes otherwise.
std::uint32_t alignment(const void* p) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    std::uint32_t al = 256;
    while (al > 4 && a % al != 0) al /= 2;
    return al;
}

/// A prepared cuBLASLt matmul with epilogue: descriptors and the algorithm chosen for them,
/// kept per shape, layout, epilogue and alignment (the search costs more than the product at
/// the sizes of a small MLP). `ok` is false when cuBLASLt offers no algorithm.
struct EpiloguePlan {
    LtPlan lt;
    cublasLtMatmulAlgo_t algo{};
    bool ok = false;
};
using EpilogueKey = std::tuple<int, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                               std::int64_t, bool, bool, int, bool, std::uint32_t, DType>;

// cuBLASLt's name for a float dtype.
cudaDataType_t lt_type(DType d) {
    return d == DType::BF16 ? CUDA_R_16BF : d == DType::F16 ? CUDA_R_16F : CUDA_R_32F;
}

EpiloguePlan& epilogue_plan(const EpilogueKey& key) {
    // Guarded by epilogue_mutex(); never destroyed, like the handles the plans belong to.
    static auto* plans = new std::map<EpilogueKey, EpiloguePlan>;
    auto [it, fresh] = plans->try_emplace(key);
    EpiloguePlan& p = it->second;
    if (!fresh) return p;
    const auto [dev, m, n, k, lda, ldb, ta, tb, ep_int, tf32, align, dtype] = key;
    const auto ep = static_cast<cublasLtEpilogue_t>(ep_int);
    const cudaDataType_t t = lt_type(dtype);
    // f16/bf16 operands accumulate in f32 (as every product here does); the bias is in the
    // output's dtype (cuBLASLt's default), added to the f32 sum before the one rounding.
    EMBER_CUBLAS_CHECK(blas().cublasLtMatmulDescCreate(
        &p.lt.desc, tf32 && dtype == DType::F32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
        CUDA_R_32F));
    // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: cuBLASLt's A is our B, its B our A.
    const cublasOperation_t opa = tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                            opb = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    EMBER_CUBLAS_CHECK(blas().cublasLtMatmulDescSetAttribute(p.lt.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                             &opa, sizeof opa));
    EMBER_CUBLAS_CHECK(blas().cublasLtMatmulDescSetAttribute(p.lt.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                             &opb, sizeof opb));
    EMBER_CUBLAS_CHECK(blas().cublasLtMatmulDescSetAttribute(
        p.lt.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
    EMBER_CUBLAS_CHECK(tb ? blas().cublasLtMatrixLayoutCreate(&p.lt.a, t, k, n, ldb)
                          : blas().cublasLtMatrixLayoutCreate(&p.lt.a, t, n, k, ldb));
    EMBER_CUBLAS_CHECK(ta ? blas().cublasLtMatrixLayoutCreate(&p.lt.b, t, m, k, lda)
                          : blas().cublasLtMatrixLayoutCreate(&p.lt.b, t, k, m, lda));
    EMBER_CUBLAS_CHECK(blas().cublasLtMatrixLayoutCreate(&p.lt.c, t, n, m, n));
    std::size_t ws_bytes = 0;
    cublas_workspace(dev, &ws_bytes);
    EMBER_CUBLAS_CHECK(blas().cublasLtMatmulPreferenceCreate(&p.lt.pref));
    EMBER_CUBLAS_CHECK(blas().cublasLtMatmulPreferenceSetAttribute(
        p.lt.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
    for (auto attr :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
        EMBER_CUBLAS_CHECK(
            blas().cublasLtMatmulPreferenceSetAttribute(p.lt.pref, attr, &align, sizeof align));
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    const cublasStatus_t hs = blas().cublasLtMatmulAlgoGetHeuristic(
        cublas_lt(dev), p.lt.desc, p.lt.a, p.lt.b, p.lt.c, p.lt.c, p.lt.pref, 1, &heur, &found);
    if (hs == CUBLAS_STATUS_NOT_SUPPORTED || found == 0) return p;
    EMBER_CUBLAS_CHECK(hs);
    p.algo = heur.algo;
    p.ok = true;
    return p;
}

std::mutex& epilogue_mutex() {
    static std::mutex mu;
    return mu;
}

/// a · b into a new [m, n] tensor through cuBLASLt with epilogue `ep`, whose vector is `vec`
/// (the bias it adds, or the bias gradient it writes; null for none): nothing where the
/// operands are not 2-D f32/f16/bf16 of one dtype, or cuBLASLt has no algorithm for them.
std::optional<CudaTensor> lt_product(const CudaTensor& a0, const CudaTensor& b0,
                                     cublasLtEpilogue_t ep, const void* vec) {
    const DType dt = a0.dtype;
    if ((dt != DType::F32 && dt != DType::F16 && dt != DType::BF16) || b0.dtype != dt ||
        a0.shape.rank() != 2 || b0.shape.rank() != 2 || a0.shape[1] != b0.shape[0])
        return std::nullopt;
    const auto m = static_cast<std::int64_t>(a0.shape[0]),
               k = static_cast<std::int64_t>(a0.shape[1]),
               n = static_cast<std::int64_t>(b0.shape[1]);
    if (m == 0 || n == 0 || k == 0 || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return std::nullopt;
    check_same_device("matmul", a0, b0);
    const int dev = a0.device();
    CudaTensor a = a0, b = b0;
    const MatView va = blas_operand(a, 0, 1);
    const MatView vb = blas_operand(b, 0, 1);
    CudaTensor out = empty(Shape{std::size_t(m), std::size_t(n)}, dt, dev);
    const std::uint32_t align =
        std::min({alignment(a.ptr()), alignment(b.ptr()), alignment(out.ptr())});
    const EpilogueKey key{
        dev,   m, n, k, va.ld, vb.ld, va.trans, vb.trans, static_cast<int>(ep), tf32_allowed(),
        align, dt};
    std::lock_guard lock(epilogue_mutex());
    EpiloguePlan& p = epilogue_plan(key);
    if (!p.ok) return std::nullopt;
    if (vec)
        EMBER_CUBLAS_CHECK(blas().cublasLtMatmulDescSetAttribute(
            p.lt.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vec, sizeof vec));
    std::size_t ws_bytes = 0;
    void* ws = cublas_workspace(dev, &ws_bytes);
    const float alpha = 1.0f, beta = 0.0f;
    // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: cuBLASLt's A is our B (the plan's layouts).
    EMBER_CUBLAS_CHECK(blas().cublasLtMatmul(cublas_lt(dev), p.lt.desc, &alpha, b.ptr(), p.lt.a,
                                             a.ptr(), p.lt.b, &beta, out.ptr(), p.lt.c, out.ptr(),
                                             p.lt.c, &p.algo, ws, ws_bytes, stream(dev)));
    return out;
}

}  // namespace

/// a · b (2-D; f32, f16 or bf16, all three operands of one dtype) with the bias row added
/// and/or relu applied by cuBLASLt's epilogue; nothing for other operands or where cuBLASLt
/// has no algorithm.
std::optional<CudaTensor> matmul_epilogue(const CudaTensor& a0, const CudaTensor& b0,
                                          const std::optional<CudaTensor>& bias, bool relu) {
    // The bias as n dense values on a 16-byte boundary.
    std::optional<CudaTensor> bv;
    if (bias) {
        if (b0.shape.rank() != 2 || bias->dtype != a0.dtype || bias->device() != a0.device() ||
            bias->shape.num_elements() != b0.shape[1])
            return std::nullopt;
        bv = contiguous(reshape(*bias, Shape{b0.shape[1]}));
        if (reinterpret_cast<std::uintptr_t>(bv->ptr()) % 16 != 0) bv = fresh_copy(*bv);
    }
    const cublasLtEpilogue_t ep = !bias  ? CUBLASLT_EPILOGUE_RELU
                                  : relu ? CUBLASLT_EPILOGUE_RELU_BIAS
                                         : CUBLASLT_EPILOGUE_BIAS;
    return lt_product(a0, b0, ep, bv ? bv->ptr() : nullptr);
}

/// {a · b, the sums of b's columns over its rows} (2-D; f32, f16 or bf16 of one dtype) in one
/// cuBLASLt call, its BGRADA epilogue summing b (cuBLASLt's A: the operands swap for row-major
/// storage) over the product's k while the product runs: a Linear's weight gradient xᵀ · g and
/// its bias gradient Σ_rows g, both in g's dtype. Nothing where cuBLASLt has no algorithm for
/// the operands (the caller then multiplies and sums apart), or with
/// EMBER_CUDA_BIAS_GRAD_EPILOGUE=0.
std::optional<std::array<CudaTensor, 2>> matmul_bias_grad(const CudaTensor& a0,
                                                          const CudaTensor& b0) {
    static const bool enabled = [] {
        const char* v = std::getenv("EMBER_CUDA_BIAS_GRAD_EPILOGUE");
        return v == nullptr || std::string_view(v) != "0";
    }();
    if (!enabled || b0.shape.rank() != 2 || b0.shape[1] == 0) return std::nullopt;
    // A fresh block: 256-byte aligned, as the epilogue's vector must be.
    CudaTensor db = empty(Shape{b0.shape[1]}, b0.dtype, b0.device());
    auto out = lt_product(a0, b0, CUBLASLT_EPILOGUE_BGRADA, db.ptr());
    if (!out) return std::nullopt;
    return std::array<CudaTensor, 2>{std::move(*out), std::move(db)};
}

}  // namespace ember::detail::cuda

namespace ember::cuda {
void set_allow_tf32(bool allow) {
    detail::cuda::g_allow_tf32.store(allow);
}
bool allow_tf32() {
    return detail::cuda::tf32_allowed();
}
}  // namespace ember::cuda

// ---- CudaBackend's ops on the functions above ----
namespace ember {
namespace k = detail::cuda;

auto CudaBackend::float_matmul(FT a, FT b) -> FT {
    return k::matmul(std::move(a), std::move(b));
}
auto CudaBackend::int_matmul(IT a, IT b) -> IT {
    return k::matmul(std::move(a), std::move(b));
}
auto CudaBackend::fused_matmul_epilogue(const FT& a, const FT& b, std::optional<FT> bias,
                                        fusion::MatmulEpilogue e) -> std::optional<FT> {
    return k::matmul_epilogue(a, b, bias, e.relu);
}
auto CudaBackend::fused_matmul_bias_grad(const FT& a, const FT& b)
    -> std::optional<std::array<FT, 2>> {
    return k::matmul_bias_grad(a, b);
}

}  // namespace ember
