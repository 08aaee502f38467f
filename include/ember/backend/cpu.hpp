#pragma once
// ember::Cpu — the CPU backend: strided views over shared aligned buffers, kernels compiled once
// in the ember_cpu library, matmul and convolutions through OpenBLAS (or a portable GEMM in
// freestanding builds), a thread pool sized by EMBER_NUM_THREADS.
#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../export.hpp"
#include "../tensor/backend.hpp"
#include "../tensor/fusion_program.hpp"
#include "detail/cpu_tensor.hpp"

namespace ember {

namespace detail::cpu {
struct FusedPlan;
}

/// The CPU device (there is one).
struct CpuDevice {
    friend bool operator==(const CpuDevice&, const CpuDevice&) = default;
    /// "Cpu".
    std::string to_string() const { return "Cpu"; }
};

/// The CPU backend with float element type `F` (float or double); int elements are int64.
template <typename F>
struct EMBER_API CpuBackend : BackendBase<CpuBackend<F>> {
    using Device = CpuDevice;
    using FloatTensorPrimitive = detail::cpu::CpuTensor;
    using IntTensorPrimitive = detail::cpu::CpuTensor;
    using BoolTensorPrimitive = detail::cpu::CpuTensor;
    using FloatElem = F;
    using IntElem = std::int64_t;
    using FT = FloatTensorPrimitive;
    using IT = IntTensorPrimitive;
    using BT = BoolTensorPrimitive;

    /// "cpu" or "cpu<f64>".
    static std::string name();
    /// Seeds the generator behind `random`.
    static void seed(std::uint64_t seed);
    /// Nothing to wait for: CPU ops run synchronously.
    static void sync(const Device&) {}

    // ---- float ----
    static FT float_from_data(const TensorData& data, const Device& d);
    static TensorData float_into_data(FT t);
    static Device float_device(const FT&) { return {}; }
    static FT float_to_device(FT t, const Device&) { return t; }
    static Shape float_shape(const FT& t) { return t.shape; }
    static DType float_dtype(const FT& t) { return t.dtype; }
    static FT float_empty(const Shape& shape, const Device& d);
    static FT float_full(const Shape& shape, Scalar value, const Device& d);
    static FT float_random(const Shape& shape, const Distribution& dist, const Device& d);
    static FT float_unary(UnaryOp op, FT t);
    /// dL/dx of Relu, Tanh, Sigmoid (given their output) or Gelu, Erf (given their input) in
    /// one pass, the optional capability Autodiff's unary rules use; nullopt for other ops or
    /// operands that are not dense f32/f64 of one shape (Autodiff then composes elementwise ops).
    static std::optional<FT> float_unary_backward(UnaryOp op, const FT& grad, const FT& v);
    static FT float_binary(BinaryOp op, FT a, FT b);
    static FT float_binary_scalar(BinaryOp op, FT a, Scalar s);
    static BT float_compare(CompareOp op, FT a, FT b);
    static BT float_compare_scalar(CompareOp op, FT a, Scalar s);
    static FT float_mask_where(FT t, BT mask, FT value);
    static FT float_mask_fill(FT t, BT mask, Scalar value);
    static FT float_clamp(FT t, Scalar lo, Scalar hi);
    /// One Adam update in a single pass over the four tensors (same shape): {param, m, v}
    /// updated, written in place into whichever inputs are unique.
    static std::array<FT, 3> float_adam_step(FT param, FT grad, FT moment_1, FT moment_2,
                                             const AdamStepScalars& s);
    static FT float_reduce(ReduceOp op, FT t);
    static FT float_reduce_dim(ReduceOp op, FT t, std::size_t dim);
    static IT float_arg_reduce(ArgReduceOp op, FT t, std::size_t dim);
    static FT float_reshape(FT t, const Shape& shape);
    static FT float_permute(FT t, std::span<const std::size_t> axes);
    static FT float_expand(FT t, const Shape& shape);
    static FT float_slice(FT t, std::span<const Slice> ranges);
    static FT float_slice_assign(FT t, std::span<const Slice> ranges, FT values);
    static FT float_flip(FT t, std::span<const std::size_t> axes);
    static FT float_cat(std::vector<FT> tensors, std::size_t dim);
    static FT float_repeat_dim(FT t, std::size_t dim, std::size_t times);
    static FT float_gather(std::size_t dim, FT t, IT indices);
    static FT float_scatter(std::size_t dim, FT t, IT indices, FT values);
    static FT float_select(FT t, std::size_t dim, IT indices);
    static FT float_select_assign(FT t, std::size_t dim, IT indices, FT values);
    static std::pair<FT, IT> float_sort_with_indices(FT t, std::size_t dim, bool descending);
    static std::pair<FT, IT> float_topk(FT t, std::size_t k, std::size_t dim, bool largest);
    static FT float_matmul(FT a, FT b);
    static IT float_into_int(FT t);
    static FT float_cast(FT t, DType dtype);
    static FT float_softmax(FT t, std::size_t dim);
    static FT float_log_softmax(FT t, std::size_t dim);
    /// Layer norm over the last dim, one pass over memory a row: {y, mean, rstd}.
    static std::array<FT, 3> float_layer_norm(FT x, std::optional<FT> gamma, std::optional<FT> beta,
                                              double eps);
    /// float_layer_norm has a kernel of its own (Fusion<Cpu> runs it rather than composing).
    static constexpr bool native_layer_norm = true;
    /// {dx, dgamma, dbeta} of float_layer_norm from dL/dy and the forward's mean and rstd, each
    /// row read once (dgamma and dbeta, empty without gamma, summed over fixed blocks of rows
    /// in order: the same at any thread count); nullopt unless every operand is f32 (Autodiff
    /// then composes the backward). With `acc` (x's shape) dx is the backward's plus acc, the
    /// gradient x had already collected (a residual stream's), added in the same pass.
    static std::optional<std::array<FT, 3>> float_layer_norm_backward(
        const FT& x, const FT& grad, const std::optional<FT>& gamma, const FT& mean, const FT& rstd,
        const std::optional<FT>& acc = std::nullopt);
    /// module::add_layer_norm in one pass over the rows: {x + residual, its layer norm, mean,
    /// rstd} for f32 x and residual of one shape and f32 gamma and beta (or none), `out` empty
    /// or f32; nothing otherwise (the caller composes).
    static std::optional<std::array<FT, 4>> float_add_layer_norm(FT x, FT residual,
                                                                 std::optional<FT> gamma,
                                                                 std::optional<FT> beta, double eps,
                                                                 std::optional<DType> out);
    /// Training-mode batch norm of x [N, C, ...] in one task per block of channels, each
    /// channel read while it sits in cache: {y, batch mean [C], 1/√(biased var + ε) [C], the
    /// running mean and (unbiased) variance updated with `s.momentum`}. f16/bf16 run in f32.
    /// Nothing when EMBER_CPU_BATCH_NORM=0 (nn::BatchNorm then composes tensor ops).
    static std::optional<std::array<FT, 5>> float_batch_norm(FT x, FT gamma, FT beta,
                                                             FT running_mean, FT running_var,
                                                             const BatchNormScalars& s);
    /// {dx, dgamma, dbeta} of float_batch_norm given dL/dy, from its mean and rstd.
    static std::array<FT, 3> float_batch_norm_backward(FT x, FT grad, FT gamma, FT mean, FT rstd);
    /// Eval-mode batch norm: (x − mean)/√(var + eps)·gamma + beta per channel, one pass.
    static std::optional<FT> float_batch_norm_eval(FT x, FT gamma, FT beta, FT mean, FT var,
                                                   double eps);
    /// float_batch_norm with the ReLU (and a residual added before it) in its normalising pass:
    /// y = max(bn(x) + residual, 0), x and the residual read once, y written once. Nothing
    /// for f16/bf16 data with a residual (the composed ops round bn(x) to the data's dtype
    /// before the addition), nor when EMBER_CPU_BATCH_NORM_RELU=0 or EMBER_CPU_BATCH_NORM=0.
    static std::optional<std::array<FT, 5>> float_batch_norm_relu(FT x, FT gamma, FT beta,
                                                                  FT running_mean, FT running_var,
                                                                  std::optional<FT> residual,
                                                                  const BatchNormScalars& s);
    /// The gradients of float_batch_norm_relu from its output y (the ReLU's mask: y > 0) and
    /// dL/dy, the residual's when `residual`; the masked gradient is formed in the first pass
    /// over each channel, not in a pass of its own. beta is not needed (y gives the mask).
    static BatchNormReluGrads<FT> float_batch_norm_relu_backward(FT x, FT y, FT grad, FT gamma,
                                                                 FT mean, FT rstd, bool residual,
                                                                 std::optional<FT> beta);

    // ---- int ----
    static IT int_from_data(const TensorData& data, const Device& d);
    static TensorData int_into_data(IT t);
    static Device int_device(const IT&) { return {}; }
    static IT int_to_device(IT t, const Device&) { return t; }
    static Shape int_shape(const IT& t) { return t.shape; }
    static DType int_dtype(const IT& t) { return t.dtype; }
    static IT int_empty(const Shape& shape, const Device& d);
    static IT int_full(const Shape& shape, Scalar value, const Device& d);
    static IT int_random(const Shape& shape, const Distribution& dist, const Device& d);
    static IT int_arange(std::int64_t start, std::int64_t end, std::int64_t step, const Device& d);
    static IT int_unary(UnaryOp op, IT t);
    static IT int_binary(BinaryOp op, IT a, IT b);
    static IT int_binary_scalar(BinaryOp op, IT a, Scalar s);
    static BT int_compare(CompareOp op, IT a, IT b);
    static BT int_compare_scalar(CompareOp op, IT a, Scalar s);
    static IT int_mask_where(IT t, BT mask, IT value);
    static IT int_mask_fill(IT t, BT mask, Scalar value);
    static IT int_clamp(IT t, Scalar lo, Scalar hi);
    static IT int_reduce(ReduceOp op, IT t);
    static IT int_reduce_dim(ReduceOp op, IT t, std::size_t dim);
    static IT int_arg_reduce(ArgReduceOp op, IT t, std::size_t dim);
    static IT int_reshape(IT t, const Shape& shape);
    static IT int_permute(IT t, std::span<const std::size_t> axes);
    static IT int_expand(IT t, const Shape& shape);
    static IT int_slice(IT t, std::span<const Slice> ranges);
    static IT int_slice_assign(IT t, std::span<const Slice> ranges, IT values);
    static IT int_flip(IT t, std::span<const std::size_t> axes);
    static IT int_cat(std::vector<IT> tensors, std::size_t dim);
    static IT int_repeat_dim(IT t, std::size_t dim, std::size_t times);
    static IT int_gather(std::size_t dim, IT t, IT indices);
    static IT int_scatter(std::size_t dim, IT t, IT indices, IT values);
    static IT int_select(IT t, std::size_t dim, IT indices);
    static IT int_select_assign(IT t, std::size_t dim, IT indices, IT values);
    static std::pair<IT, IT> int_sort_with_indices(IT t, std::size_t dim, bool descending);
    static std::pair<IT, IT> int_topk(IT t, std::size_t k, std::size_t dim, bool largest);
    static IT int_matmul(IT a, IT b);
    static FT int_into_float(IT t);
    static IT int_cast(IT t, DType dtype);

    // ---- bool ----
    static BT bool_from_data(const TensorData& data, const Device& d);
    static TensorData bool_into_data(BT t);
    static Device bool_device(const BT&) { return {}; }
    static BT bool_to_device(BT t, const Device&) { return t; }
    static Shape bool_shape(const BT& t) { return t.shape; }
    static DType bool_dtype(const BT& t) { return t.dtype; }
    static BT bool_empty(const Shape& shape, const Device& d);
    static BT bool_full(const Shape& shape, Scalar value, const Device& d);
    static BT bool_not(BT t);
    static BT bool_binary(BinaryOp op, BT a, BT b);
    static BT bool_compare(CompareOp op, BT a, BT b);
    static BT bool_mask_where(BT t, BT mask, BT value);
    static BT bool_reduce(ReduceOp op, BT t);
    static BT bool_reduce_dim(ReduceOp op, BT t, std::size_t dim);
    static BT bool_reshape(BT t, const Shape& shape);
    static BT bool_permute(BT t, std::span<const std::size_t> axes);
    static BT bool_expand(BT t, const Shape& shape);
    static BT bool_slice(BT t, std::span<const Slice> ranges);
    static BT bool_slice_assign(BT t, std::span<const Slice> ranges, BT values);
    static BT bool_flip(BT t, std::span<const std::size_t> axes);
    static BT bool_cat(std::vector<BT> tensors, std::size_t dim);
    static BT bool_repeat_dim(BT t, std::size_t dim, std::size_t times);
    static BT bool_gather(std::size_t dim, BT t, IT indices);
    static BT bool_select(BT t, std::size_t dim, IT indices);
    static IT bool_into_int(BT t);
    static FT bool_into_float(BT t);
    static IT bool_argwhere(BT t);

    // ---- quantized (the int8 GEMM; everything else comes from BackendBase) ----
    /// The quantized primitive: BackendBase's composed one (the CPU packs weights in its slot).
    using QT = quant::QTensorPrimitive<IT, FT>;
    /// x [M, K] @ w [K, N] (+ bias [N]) with int8 weights, multiplied by the int8 GEMM
    /// (AVX-512 VNNI, AVX-VNNI or portable, chosen at run time) on weights packed once; f64
    /// backends, Float activations and per-row weight parameters take the composed default.
    static FT q_linear(FT x, QT w, std::optional<FT> bias, const quant::ActivationQuantization& act);
    /// conv2d with an int8 weight [out, in, kh, kw]: the input quantized to u8 once, unfolded
    /// (im2col, padding at the zero point) and multiplied by the int8 GEMM; groups > 1, f64 and
    /// Float activations take the composed default.
    static FT q_conv2d(FT x, QT w, std::optional<FT> bias, const ConvOptions<2>& o,
                       const quant::ActivationQuantization& act);

    // ---- fusion (the FusionBackend side of Fusion<Cpu>) ----
    /// A checked fused program (shared by every launch of it).
    using FusedKernel = std::shared_ptr<const detail::cpu::FusedPlan>;
    /// Fused programs may end in a reduction along the last dim (folded tile by tile).
    static constexpr bool fused_reductions = true;
    /// Checks a fused program: operand order, register dtypes (f32, f64, i64, bool), outputs.
    static FusedKernel fused_compile(const fusion::Program& program);
    /// Runs a fused program over `shape` in one pass over cache-sized tiles; `inputs` are
    /// expanded to `shape`. Returns the outputs, contiguous.
    static std::vector<FT> fused_launch(const FusedKernel& kernel, const fusion::Program& program,
                                        std::vector<FT> inputs, std::span<const Scalar> scalars,
                                        const Shape& shape);
    /// Contiguous inputs are read in place; others are gathered tile by tile.
    static bool fused_input_dense(const FT& t) { return t.is_contiguous(); }
    /// A 2-D f32 matmul with a bias row added and/or relu applied in the same call (Fusion<Cpu>'s
    /// matmul epilogue): the product is finished in place, with no second tensor and no fused
    /// program, and has the bits of the ops run one after another. Nothing for other operands.
    static std::optional<FT> fused_matmul_epilogue(const FT& a, const FT& b, std::optional<FT> bias,
                                                   fusion::MatmulEpilogue epilogue);

    // ---- fused attention (AttentionKernel<CpuBackend<F>> below; backends/cpu/attention.cpp) ----
    /// Whether the fused kernel takes q [B, H, Lq, E], k [B, H, Lk, E], v [B, H, Lk, Ev] with
    /// no mask: f32, none empty, Lk up to 8192 (a task's scores stay a few MB).
    static bool attention_supported(const FT& q, const FT& k, const FT& v);
    /// {softmax(q kᵀ · scale) v [B, H, Lq, Ev], log-sum-exp of each row [B, H, Lq]}; with
    /// `causal`, query i attends to keys 0..i (PyTorch's is_causal).
    static std::array<FT, 2> attention_forward(const FT& q, const FT& k, const FT& v, bool causal,
                                               double scale);
    /// {dq, dk, dv} from attention_forward's output and log-sum-exp and dL/doutput.
    static std::array<FT, 3> attention_backward(const FT& q, const FT& k, const FT& v,
                                                const FT& out, const FT& lse, const FT& dout,
                                                bool causal, double scale);
    /// Whether a packed qkv of `like`'s dtype and sequence length (dim 1 of [B, L, ..]) runs fused.
    static bool attention_packed_supported(const FT& like, std::size_t heads, std::size_t head_dim);
    /// qkv [B, L, 3·H·E] → {output [B, L, H·E], log-sum-exp [B, H, L]}, the heads read in place.
    static std::array<FT, 2> attention_forward_packed(const FT& qkv, std::size_t heads, bool causal,
                                                      double scale);
    /// The gradient of qkv, dq, dk and dv side by side in one buffer.
    static FT attention_backward_packed(const FT& qkv, const FT& out, const FT& lse, const FT& dout,
                                        std::size_t heads, bool causal, double scale);

    // ---- module ops ----
    static FT conv1d(FT x, FT w, std::optional<FT> bias, const ConvOptions<1>& o);
    static FT conv2d(FT x, FT w, std::optional<FT> bias, const ConvOptions<2>& o);
    static FT conv3d(FT x, FT w, std::optional<FT> bias, const ConvOptions<3>& o);
    static FT conv_transpose1d(FT x, FT w, std::optional<FT> bias, const ConvTransposeOptions<1>& o);
    static FT conv_transpose2d(FT x, FT w, std::optional<FT> bias, const ConvTransposeOptions<2>& o);
    static FT conv_transpose3d(FT x, FT w, std::optional<FT> bias, const ConvTransposeOptions<3>& o);
    static FT deform_conv2d(FT x, FT offset, FT w, std::optional<FT> mask, std::optional<FT> bias,
                            const DeformConvOptions& o);
    static FT avg_pool1d(FT x, const PoolOptions<1>& o);
    static FT avg_pool2d(FT x, const PoolOptions<2>& o);
    static FT max_pool1d(FT x, const PoolOptions<1>& o);
    static FT max_pool2d(FT x, const PoolOptions<2>& o);
    static std::pair<FT, IT> max_pool1d_with_indices(FT x, const PoolOptions<1>& o);
    static std::pair<FT, IT> max_pool2d_with_indices(FT x, const PoolOptions<2>& o);
    static FT adaptive_avg_pool1d(FT x, std::size_t output_size);
    static FT adaptive_avg_pool2d(FT x, std::array<std::size_t, 2> output_size);
    static FT interpolate(FT x, std::array<std::size_t, 2> output_size, const InterpolateOptions& o);

    // ---- module backward (the gradient kernels Autodiff's rules call) ----
    /// dL/dweight of conv{N}d(x, weight) given dL/dout; `weight_shape` is the weight's shape.
    static FT conv1d_weight_backward(FT x, FT grad, const Shape& weight_shape,
                                     const ConvOptions<1>& o);
    static FT conv2d_weight_backward(FT x, FT grad, const Shape& weight_shape,
                                     const ConvOptions<2>& o);
    static FT conv3d_weight_backward(FT x, FT grad, const Shape& weight_shape,
                                     const ConvOptions<3>& o);
    /// dL/dx of avg_pool{N}d(x) given dL/dout.
    static FT avg_pool1d_backward(FT x, FT grad, const PoolOptions<1>& o);
    static FT avg_pool2d_backward(FT x, FT grad, const PoolOptions<2>& o);
    /// dL/dx of adaptive_avg_pool{N}d(x) given dL/dout (the output size is grad's).
    static FT adaptive_avg_pool1d_backward(FT x, FT grad);
    static FT adaptive_avg_pool2d_backward(FT x, FT grad);
    /// dL/dx of interpolate(x, output_size, o) given dL/dout.
    static FT interpolate_backward(FT x, FT grad, std::array<std::size_t, 2> output_size,
                                   const InterpolateOptions& o);
    /// Gradients of deform_conv2d with respect to each of its inputs.
    static DeformConv2dGrads<FT> deform_conv2d_backward(FT x, FT offset, FT w,
                                                        std::optional<FT> mask,
                                                        std::optional<FT> bias, FT grad,
                                                        const DeformConvOptions& o);
};

/// The CPU backend, f32 (the default configuration).
using Cpu = CpuBackend<float>;
/// The CPU backend, f64.
using CpuF64 = CpuBackend<double>;

extern template struct CpuBackend<float>;
extern template struct CpuBackend<double>;

static_assert(Backend<Cpu>);

template <typename B>
struct AttentionKernel;  // <ember/tensor/attention.hpp>

/// The CPU's fused attention (see AttentionKernel): f32 operands with no mask but the causal
/// flag, and packed projections; module::attention composes the rest.
template <typename F>
struct AttentionKernel<CpuBackend<F>> {
    using B = CpuBackend<F>;            ///< the backend
    using FT = detail::cpu::CpuTensor;  ///< every kind's primitive
    /// Whether the kernel handles these operands.
    static bool supports(const FT& q, const FT& k, const FT& v, const std::optional<FT>& keep,
                         const std::optional<FT>& bias) {
        return !keep && !bias && B::attention_supported(q, k, v);
    }
    /// {output, log-sum-exp} (no mask: `supports` declines them).
    static std::array<FT, 2> forward(const FT& q, const FT& k, const FT& v,
                                     const std::optional<FT>&, const std::optional<FT>&,
                                     bool causal, double scale) {
        return B::attention_forward(q, k, v, causal, scale);
    }
    /// {dq, dk, dv}.
    static std::array<FT, 3> backward(const FT& q, const FT& k, const FT& v, const FT& out,
                                      const FT& lse, const FT& dout, const std::optional<FT>&,
                                      const std::optional<FT>&, bool causal, double scale) {
        return B::attention_backward(q, k, v, out, lse, dout, causal, scale);
    }
    /// Whether a packed qkv like `like` runs fused (see FusedPackedAttention).
    static bool supports_packed(const FT& like, std::size_t heads, std::size_t head_dim) {
        return B::attention_packed_supported(like, heads, head_dim);
    }
    /// {output [B, L, H·E], log-sum-exp} from qkv [B, L, 3·H·E].
    static std::array<FT, 2> forward_packed(const FT& qkv, std::size_t heads, bool causal,
                                            double scale) {
        return B::attention_forward_packed(qkv, heads, causal, scale);
    }
    /// The gradient of qkv.
    static FT backward_packed(const FT& qkv, const FT& out, const FT& lse, const FT& dout,
                              std::size_t heads, bool causal, double scale) {
        return B::attention_backward_packed(qkv, out, lse, dout, heads, causal, scale);
    }
};

namespace cpu {
/// Number of threads the CPU backend uses.
EMBER_API std::size_t num_threads();
/// Sets the number of threads the CPU backend uses (EMBER_NUM_THREADS sets the default).
EMBER_API void set_num_threads(std::size_t n);
/// The int8 GEMM kernel in use: "avx512vnni", "avxvnni" or "portable".
EMBER_API std::string_view qgemm_kernel();
/// Chooses the int8 GEMM kernel ("avx512vnni", "avxvnni", "portable", or "auto" for the best
/// the processor has; EMBER_QGEMM sets the default); false when the processor lacks it.
EMBER_API bool set_qgemm_kernel(std::string_view name);
/// The tile loops fused programs run on: "avx512" or "native" (the build's target, AVX2 on x86-64).
EMBER_API std::string_view fusion_kernel();
/// Chooses the fused programs' tile loops ("avx512", "native", or "auto" for the widest the
/// processor has; EMBER_FUSION_KERNEL sets the default); false when the processor lacks them.
EMBER_API bool set_fusion_kernel(std::string_view name);
/// Bytes held by live CPU tensors now, and their high-water mark.
using detail::cpu::MemoryStats;
/// The CPU backend's memory counters (tensor buffers; the allocator's cache is not counted).
inline MemoryStats memory_stats() { return detail::cpu::memory_stats(); }
/// Restarts the high-water mark of memory_stats() at the current use.
inline void reset_peak_memory() { detail::cpu::reset_peak_memory(); }
}  // namespace cpu

}  // namespace ember
