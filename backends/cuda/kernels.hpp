#pragma once
// The kernel launchers of the CUDA backend: plain host functions taking device pointers and
// iteration plans, defined in the .cu files by family and called by the host code (.cpp). Every
// launcher queues its work on `stream` and returns at once.
#include <cuda_runtime.h>

#include <array>
#include <cstdint>

#include "ember/backend/detail/cuda_tensor.hpp"
#include "ember/tensor/distribution.hpp"
#include "ember/tensor/ops.hpp"
#include "ember/tensor/sgd_step.hpp"

namespace ember::detail::cuda {

constexpr int kMaxDims = static_cast<int>(kMaxRank);

/// Streaming multiprocessors of device `device` (the current one when negative), asked once a
/// device (runtime.cpp): for grids sized to the blocks resident at once.
int multiprocessors(int device = -1);

/// An iteration over `n` elements of a shape with K operands, each with its own element strides
/// (operand 0 is the output). Dims that are contiguous for every operand are merged on the
/// host, so the common contiguous case runs as rank 1 and needs no index arithmetic.
template <int K>
struct Iter {
    int rank = 0;
    std::int64_t n = 0;
    std::int64_t shape[kMaxDims] = {};
    std::int64_t strides[K][kMaxDims] = {};
};

/// Builds an iteration plan over `shape` for the given operand strides, merging dims.
template <int K>
Iter<K> make_iter(const Shape& shape, std::array<const Strides*, K> strides) {
    Iter<K> it;
    it.n = static_cast<std::int64_t>(shape.num_elements());
    for (std::size_t d = 0; d < shape.rank(); ++d) {
        if (shape[d] == 1) continue;  // size-1 dims contribute no offset
        const auto size = static_cast<std::int64_t>(shape[d]);
        if (it.rank > 0) {
            bool merge = true;
            for (int k = 0; k < K; ++k)
                merge &= it.strides[k][it.rank - 1] == (*strides[k])[d] * size;
            if (merge) {
                it.shape[it.rank - 1] *= size;
                for (int k = 0; k < K; ++k) it.strides[k][it.rank - 1] = (*strides[k])[d];
                continue;
            }
        }
        it.shape[it.rank] = size;
        for (int k = 0; k < K; ++k) it.strides[k][it.rank] = (*strides[k])[d];
        ++it.rank;
    }
    return it;
}

/// make_iter for ops whose result does not depend on the order elements are visited in
/// (elementwise ops and copies): the dims are first ordered by the output's (operand 0's)
/// strides, largest first, so an output laid out as a permutation of its dims (channels-last
/// [N, C, H, W] data, stored as [N, H, W, C]) merges into one run like a contiguous one.
template <int K>
Iter<K> make_elementwise_iter(const Shape& shape, std::array<const Strides*, K> strides) {
    const Strides& out = *strides[0];
    // The dims of size > 1 (the others carry no offset), stably sorted by the output's stride.
    std::array<std::size_t, kMaxRank> order{};
    std::size_t r = 0;
    bool sorted = true;
    for (std::size_t d = 0; d < shape.rank(); ++d) {
        if (shape[d] == 1) continue;
        std::size_t j = r++;
        for (; j > 0 && out[order[j - 1]] < out[d]; --j) order[j] = order[j - 1];
        sorted &= j == r - 1;
        order[j] = d;
    }
    if (sorted) return make_iter<K>(shape, strides);
    Shape ps = Shape::filled(r, 1);
    std::array<Strides, K> pst{};
    for (std::size_t d = 0; d < r; ++d) {
        ps[d] = shape[order[d]];
        for (int k = 0; k < K; ++k) pst[k][d] = (*strides[k])[order[d]];
    }
    std::array<const Strides*, K> ptrs{};
    for (int k = 0; k < K; ++k) ptrs[k] = &pst[k];
    return make_iter<K>(ps, ptrs);
}

// ---- elementwise.cu ------------------------------------------------------------------------
/// dst = src converted (any dtypes; operand 0 dst, 1 src).
void launch_copy(const Iter<2>& it, void* dst, DType dd, const void* src, DType sd, cudaStream_t s);
/// out = op(in); cd ∈ {F32, F64, I64, Bool}; out has dtype cd (Bool for IsNan).
void launch_unary(UnaryOp op, DType cd, const Iter<2>& it, void* out, const void* in,
                  cudaStream_t s);
/// out = a op b (same compute dtype cd).
void launch_binary(BinaryOp op, DType cd, const Iter<3>& it, void* out, const void* a,
                   const void* b, cudaStream_t s);
/// out = op(in) for f16/bf16 `in` and `out` (dtype hd), computed in f32 and rounded once.
void launch_unary_half(UnaryOp op, DType hd, const Iter<2>& it, void* out, const void* in,
                       cudaStream_t s);
/// out = a op b for f16/bf16 operands and result (dtype hd), computed in f32 and rounded once.
void launch_binary_half(BinaryOp op, DType hd, const Iter<3>& it, void* out, const void* a,
                        const void* b, cudaStream_t s);
/// out = a op scalar for f16/bf16 `a` and `out` (dtype hd), computed in f32 and rounded once.
void launch_binary_scalar_half(BinaryOp op, DType hd, const Iter<2>& it, void* out, const void* a,
                               Scalar v, cudaStream_t s);
/// f32 out = a op b over dense operands where one is f32 and the other f16/bf16 (dtypes ad,
/// bd), the half read as it is; false (nothing queued) for other dtypes or layouts.
bool launch_binary_mixed(BinaryOp op, const Iter<3>& it, void* out, const void* a, DType ad,
                         const void* b, DType bd, cudaStream_t s);
/// out = g · f'(v) over n dense elements of dtype dt (F32, F64, F16, BF16), where v is what
/// Autodiff keeps for the unary op f: its input (Gelu, Erf) or output (Tanh, Sigmoid, Relu;
/// Relu's is a select: g where v > 0, else 0). One kernel instead of the composed backward's
/// chain; false (nothing queued) for other ops and dtypes.
bool launch_unary_backward(UnaryOp op, DType dt, std::int64_t n, void* out, const void* g,
                           const void* v, cudaStream_t s);
/// out (bool) = a cmp b.
void launch_compare(CompareOp op, DType cd, const Iter<3>& it, void* out, const void* a,
                    const void* b, cudaStream_t s);
/// out = a op scalar (the R* ops put the scalar on the left).
void launch_binary_scalar(BinaryOp op, DType cd, const Iter<2>& it, void* out, const void* a,
                          Scalar v, cudaStream_t s);
/// out (bool) = a cmp scalar (float tensors compare in f64).
void launch_compare_scalar(CompareOp op, DType cd, const Iter<2>& it, void* out, const void* a,
                           Scalar v, cudaStream_t s);
/// out = min(max(a, lo), hi), NaN kept.
void launch_clamp(DType cd, const Iter<2>& it, void* out, const void* a, Scalar lo, Scalar hi,
                  cudaStream_t s);
/// out = mask ? a : b (operands: out, mask, a, b).
void launch_where(DType cd, const Iter<4>& it, void* out, const void* mask, const void* a,
                  const void* b, cudaStream_t s);
/// n contiguous elements of dtype dt set to v.
void launch_fill(void* out, DType dt, std::int64_t n, Scalar v, cudaStream_t s);
/// out[i] = start + i·step (int64).
void launch_arange(std::int64_t* out, std::int64_t n, std::int64_t start, std::int64_t step,
                   cudaStream_t s);
/// n random elements of dtype dt (f32, f64 or i64) from a counter-based generator: element i
/// of draw `counter` depends only on (seed, counter, i). With `state` (a captured graph's
/// draw), the seed is state[0] and the counter `counter` + state[1], read on the device.
void launch_random(void* out, DType dt, std::int64_t n, const Distribution& d, std::uint64_t seed,
                   std::uint64_t counter, cudaStream_t s, const std::uint64_t* state = nullptr);
/// One Adam step over n contiguous elements (f32 or f64), written to the out pointers. With
/// `replayed` (a captured graph's update), lr and both corrections are read from those three
/// device doubles instead of `sc`.
void launch_adam(DType cd, std::int64_t n, void* p_out, void* m_out, void* v_out, const void* p,
                 const void* g, const void* m, const void* v, const AdamStepScalars& sc,
                 cudaStream_t s, const double* replayed = nullptr);
/// One SGD-with-momentum step over n contiguous elements (f32 or f64), written to the out
/// pointers. With `replayed` (a captured graph's update), lr is read from that device double.
void launch_sgd(DType cd, std::int64_t n, void* p_out, void* v_out, const void* p, const void* g,
                const void* v, const SgdStepScalars& sc, cudaStream_t s,
                const double* replayed = nullptr);
/// Sets *flag (device int) when any of the n int64 values (strided) is outside [0, limit) or,
/// with `zero_only`, equals zero; or, with `negative_only`, is negative.
void launch_check_range(const Iter<1>& it, const std::int64_t* v, std::int64_t limit, int mode,
                        int* flag, cudaStream_t s);

// ---- reduce.cu -----------------------------------------------------------------------------
/// Bytes of scratch launch_reduce_dim needs for n outputs of k inputs `stride` apart (0: none).
std::size_t reduce_dim_scratch(std::int64_t n, std::int64_t k, std::int64_t stride);
/// Reduces along one dim: for each output element (operands: out, in over the output shape),
/// folds k inputs `stride` apart. cd ∈ {F32, F64, I64}; Any/All write bytes. The input is of
/// dtype cd, or F16/BF16 with cd = F32 where reduce_dim_strided holds; `scratch` holds
/// reduce_dim_scratch bytes.
void launch_reduce_dim(ReduceOp op, DType cd, DType in_dtype, const Iter<2>& it, std::int64_t k,
                       std::int64_t stride, void* out, const void* in, void* scratch,
                       cudaStream_t s);
/// Whether launch_reduce_dim takes its strided path for k inputs `stride` apart (k ≥ 8): a
/// thread per output, or, for few outputs, 32 outputs a block with the reduced dim split over
/// threads. That path reads f16/bf16 inputs itself, so the caller need not cast them first.
inline bool reduce_dim_strided(std::int64_t k, std::int64_t stride) {
    return stride != 1 && k >= 8;
}
/// Reduces n contiguous elements into out[0] (two passes through `scratch`, 1024 accumulators
/// of 8 bytes).
void launch_reduce_all(ReduceOp op, DType cd, std::int64_t n, void* out, const void* in,
                       void* scratch, cudaStream_t s);
/// Index of the first max (min) along one dim, NaN counting as the extreme.
void launch_arg_reduce(ArgReduceOp op, DType cd, const Iter<2>& it, std::int64_t k,
                       std::int64_t stride, std::int64_t* out, const void* in, cudaStream_t s);
/// Layer norm of `rows` contiguous rows of `cols` elements (F32 or F64): y, and a mean and an
/// rstd a row; gamma and beta (`cols` each) may be null.
void launch_layer_norm(DType cd, std::int64_t rows, std::int64_t cols, const void* x,
                       const void* gamma, const void* beta, double eps, void* y, void* mean,
                       void* rstd, cudaStream_t s);
/// Scratch bytes launch_layer_norm_backward needs for [rows, cols] of dtype cd.
std::size_t layer_norm_backward_scratch(DType cd, std::int64_t rows, std::int64_t cols);
/// Whether launch_layer_norm_backward reads a gradient of dtype gd for x of dtype cd at these
/// addresses (always when gd is cd; an f16/bf16 gradient of f32 rows where its one-pass kernel
/// takes them).
bool layer_norm_backward_reads(DType cd, DType gd, std::int64_t cols, const void* x, const void* g,
                               const void* gamma, const void* dx);
/// Whether launch_layer_norm_backward adds `acc` (dense [rows, cols] of dtype cd) to dx in the
/// same pass for these operands (its one-pass f32 kernel, acc 16-byte aligned).
bool layer_norm_backward_adds(DType cd, DType gd, std::int64_t cols, const void* x, const void* g,
                              const void* gamma, const void* dx, const void* acc);
/// LayerNorm's backward over dense [rows, cols] of dtype cd (F32 or F64; mean and rstd [rows]),
/// the gradient g of dtype gd (layer_norm_backward_reads must hold):
/// dx = rstd·(g' − mean(g') − x̂·mean(g'·x̂)) with x̂ = (x − mean)·rstd, g' = g·gamma (gamma null:
/// g); with dgamma non-null also dgamma = Σ_rows g·x̂ and dbeta = Σ_rows g ([cols] each). With
/// `acc` non-null (layer_norm_backward_adds must hold) dx is that plus acc, added in f32 as the
/// row is written: the gradient an input had already collected from its other consumers.
void launch_layer_norm_backward(DType cd, DType gd, std::int64_t rows, std::int64_t cols,
                                const void* x, const void* g, const void* gamma, const void* mean,
                                const void* rstd, void* dx, void* dgamma, void* dbeta,
                                void* scratch, cudaStream_t s, const void* acc = nullptr);
/// Whether launch_add_layer_norm takes rows of `cols` f32 values x with a residual of dtype rd
/// at `res`, the normed rows stored as yd, and gamma and beta (f32, either null): rd and yd F32,
/// F16 or BF16, cols a multiple of 4 up to 8192, x, gamma and beta 16-byte aligned, res 16-byte
/// aligned in f32 and 8-byte in 16 bits.
bool add_layer_norm_fits(DType rd, DType yd, std::int64_t cols, const void* x, const void* res,
                         const void* gamma, const void* beta);
/// module::add_layer_norm over dense f32 rows [rows, cols] (add_layer_norm_fits must hold; sum
/// and y fresh allocations): sum = x + res (res of
/// dtype rd: F32, F16 or BF16), y = layer_norm(sum) stored as yd (F32, F16 or BF16), mean and
/// rstd [rows] f32.
void launch_add_layer_norm(DType rd, DType yd, std::int64_t rows, std::int64_t cols, const void* x,
                           const void* res, const void* gamma, const void* beta, double eps,
                           void* sum, void* y, void* mean, void* rstd, cudaStream_t s);
/// Softmax (or log-softmax) of `rows` contiguous rows of `cols` elements (F32 or F64).
void launch_softmax(bool log, DType cd, std::int64_t rows, std::int64_t cols, void* out,
                    const void* in, cudaStream_t s);

// ---- index.cu ------------------------------------------------------------------------------
/// out = t[..., idx, ...] (operands: out, idx, t with its `dim` stride zeroed; elem_bytes wide).
void launch_gather(int elem_bytes, const Iter<3>& it, std::int64_t dim_stride, void* out,
                   const std::int64_t* idx, const void* t, cudaStream_t s);
/// out[..., idx, ...] += values (operands: out with its dim stride zeroed, idx, values);
/// cd ∈ {F32, F64, I64}, through atomics.
void launch_scatter_add(DType cd, const Iter<3>& it, std::int64_t dim_stride, void* out,
                        const std::int64_t* idx, const void* values, cudaStream_t s);
/// Sorts `rows` contiguous rows of `cols` keys (cd ∈ {F32, F64, I64}) stably, with their
/// positions; scratch comes from the pool.
void launch_sort_rows(DType cd, std::int64_t rows, std::int64_t cols, const void* keys_in,
                      void* keys_out, std::int64_t* idx_out, bool descending, int device,
                      cudaStream_t s);
/// Nonzero flags → exclusive positions; returns through `count` (device int64) the total.
void launch_argwhere_scan(const Iter<1>& it, DType dt, const void* in, std::int64_t* pos,
                          std::int64_t* count, int device, cudaStream_t s);
/// Writes the coordinates of every nonzero element (rank entries per row).
void launch_argwhere_write(const Iter<1>& it, DType dt, const void* in, const std::int64_t* pos,
                           int rank, const std::int64_t* shape, std::int64_t* out, cudaStream_t s);

// ---- nn.cu ---------------------------------------------------------------------------------
/// Geometry of an N-d (N ≤ 3) convolution in 3-d form (leading unit dims).
struct ConvGeom {
    std::int64_t batch = 1, channels = 1;  ///< N and the channels im2col spans
    std::int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
    std::int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
};
/// col[c, kk, b, o] = x[b, c, o·s − p + kk·d] (0 outside); x is [B, C, in...] contiguous.
void launch_im2col(DType cd, const ConvGeom& g, const void* x, void* col, cudaStream_t s);
/// c[i, j] = beta·c[i, j] + Σ_s parts[s, i, j] for an [m, n] matrix c with row stride ldc:
/// the reduction of a split-K GEMM's partial products, in a fixed order (deterministic).
void launch_sum_partials(DType dt, const void* parts, std::int64_t splits, std::int64_t m,
                         std::int64_t n, void* c, std::int64_t ldc, double beta, cudaStream_t s);
/// x[b, c, i] = Σ col[c, kk, b, o] over the taps that land on i (the transpose of im2col).
void launch_col2im(DType cd, const ConvGeom& g, const void* col, void* x, cudaStream_t s);
/// Pooling geometry in 3-d form.
struct PoolGeom {
    std::int64_t planes = 1;
    std::int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
    std::int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
    bool count_include_pad = true;
};
void launch_max_pool(DType cd, const PoolGeom& g, const void* x, void* out, std::int64_t* idx,
                     cudaStream_t s);
void launch_avg_pool(DType cd, const PoolGeom& g, const void* x, void* out, cudaStream_t s);
/// dx (zeroed first by the launcher) from dout.
void launch_avg_pool_backward(DType cd, const PoolGeom& g, const void* grad, void* dx,
                              cudaStream_t s);
/// Adaptive average pooling (PyTorch's windows); `backward` maps dout to dx instead.
void launch_adaptive_avg_pool(DType cd, const PoolGeom& g, const void* in, void* out, bool backward,
                              cudaStream_t s);
/// Interpolation of [planes, ih, iw] to [planes, oh, ow]; `backward` maps dout to dx.
void launch_interpolate(DType cd, InterpolateMode mode, bool align_corners, std::int64_t planes,
                        std::int64_t ih, std::int64_t iw, std::int64_t oh, std::int64_t ow,
                        const void* in, void* out, bool backward, cudaStream_t s);
/// Deformable im2col (torchvision): col[(c·kh + i)·kw + j, b, oh, ow] sampled bilinearly.
struct DeformGeom {
    std::int64_t batch, channels, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, offset_groups;
};
void launch_deform_im2col(DType cd, const DeformGeom& g, const void* x, const void* offset,
                          const void* mask, void* col, cudaStream_t s);
/// Gradients of the deformable im2col: dx (atomics), doffset and dmask from dcol.
void launch_deform_col2im(DType cd, const DeformGeom& g, const void* x, const void* offset,
                          const void* mask, const void* dcol, void* dx, void* doffset, void* dmask,
                          cudaStream_t s);
/// C[b] = A[b] · B[b] for int64 row-major [m, k] · [k, n] with batch strides.
void launch_int_matmul(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                       const std::int64_t* a, std::int64_t sa, const std::int64_t* b,
                       std::int64_t sb, std::int64_t* c, cudaStream_t s);

}  // namespace ember::detail::cuda
