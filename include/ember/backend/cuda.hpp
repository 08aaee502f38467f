#pragma once
// ember::Cuda — the CUDA backend: strided views over pooled device buffers, every op on the GPU
// (kernels in backends/cuda/*.cu, matmul and convolutions through cuBLAS), all work queued on
// one stream per device so that ops return at once; only into_data and sync wait. Float tensors
// are f32 by default and cast to f16, bf16 (or f64); ints are int64, bools one byte.
//
// This header pulls in no CUDA header: code that uses the backend compiles with any C++20
// compiler and links ember::cuda. Without a GPU (or driver) the library still links, and the
// first op throws an ember::DeviceError saying so; `ember::cuda::is_available()` tells first.
#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../export.hpp"
#include "../tensor/backend.hpp"
#include "../tensor/fusion_program.hpp"
#include "../tensor/sgd_step.hpp"
#include "detail/cuda_tensor.hpp"

namespace ember {

namespace detail::cuda {
struct FusedModule;  // a fused program's generated source and its loaded modules (fusion.cpp)
}  // namespace detail::cuda

/// A CUDA device, by index (0 is the default device).
struct EMBER_API CudaDevice {
    std::size_t index = 0;  ///< the CUDA device ordinal
    friend bool operator==(const CudaDevice&, const CudaDevice&) = default;
    /// "Cuda(0)".
    std::string to_string() const { return "Cuda(" + std::to_string(index) + ")"; }
};

/// The CUDA backend. Float data enters as f32 (FloatElem); `cast` makes f16, bf16 or f64
/// tensors, which every op accepts (f16/bf16 elementwise math runs in f32 and rounds once).
struct EMBER_API CudaBackend : BackendBase<CudaBackend> {
    using Device = CudaDevice;
    using FloatTensorPrimitive = detail::cuda::CudaTensor;
    using IntTensorPrimitive = detail::cuda::CudaTensor;
    using BoolTensorPrimitive = detail::cuda::CudaTensor;
    using FloatElem = float;
    using IntElem = std::int64_t;
    using FT = FloatTensorPrimitive;
    using IT = IntTensorPrimitive;
    using BT = BoolTensorPrimitive;

    /// "cuda".
    static std::string name();
    /// Seeds the counter-based generator behind `random`.
    static void seed(std::uint64_t seed);
    /// Waits until every op queued on the device's stream has finished.
    static void sync(const Device& d);
    /// Lends the device buffer of `t` (any dtype) in place, copied first unless `t` is the only
    /// handle on a contiguous buffer: the collectives hand it to NCCL on the backend's stream.
    static std::optional<LentMemory> lend_memory(FT& t);

    // ---- float ----
    static FT float_from_data(const TensorData& data, const Device& d);
    static TensorData float_into_data(FT t);
    static Device float_device(const FT& t) { return Device{static_cast<std::size_t>(t.device())}; }
    static FT float_to_device(FT t, const Device& d);
    static Shape float_shape(const FT& t) { return t.shape; }
    static DType float_dtype(const FT& t) { return t.dtype; }
    static FT float_empty(const Shape& shape, const Device& d);
    static FT float_full(const Shape& shape, Scalar value, const Device& d);
    static FT float_random(const Shape& shape, const Distribution& dist, const Device& d);
    static FT float_unary(UnaryOp op, FT t);
    /// dL/dx of the unary op (Gelu, Erf, Tanh, Sigmoid, Relu) in one kernel, given dL/dy and
    /// what Autodiff keeps for the op (the input for Gelu and Erf, the output for the others);
    /// nullopt for other ops, or operands that are not dense and alike (Autodiff then composes
    /// the backward from elementwise ops).
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
    /// One SGD-with-momentum update in a single pass over the three tensors (same shape):
    /// {param, velocity} updated, written into whichever inputs are unique, and in place inside
    /// a captured step (ember::cuda::capture), where the learning rate follows the graph's.
    static std::pair<FT, FT> float_sgd_step(FT param, FT grad, FT velocity,
                                            const SgdStepScalars& s);
    /// float_adam_step over many tensors in one or a few launches (PyTorch's multi-tensor
    /// Adam): tensors[i] is {param, grad, moment_1, moment_2}, result i {param, m, v}. The
    /// tensors of a launch are listed in its parameters, so a captured step replays it as is.
    static std::vector<std::array<FT, 3>> float_adam_steps(
        std::vector<std::array<FT, 4>> tensors, const std::vector<AdamStepsScalars>& scalars);
    /// float_sgd_step over many tensors in one or a few launches (PyTorch's multi-tensor SGD):
    /// tensors[i] is {param, grad, velocity}, result i {param, velocity}, each rounded as
    /// float_sgd_step rounds it.
    static std::vector<std::array<FT, 2>> float_sgd_steps(
        std::vector<std::array<FT, 3>> tensors, const std::vector<SgdStepScalars>& scalars);
    /// Training-mode batch norm of x [N, C, ...] (f32, f64, f16, bf16; statistics in f32, f64
    /// for f64): {y in x's dtype, the batch mean [C], 1/√(biased var + ε) [C], the running
    /// mean and (unbiased) variance updated with `s.momentum`}, in three kernels.
    static std::optional<std::array<FT, 5>> float_batch_norm(FT x, FT gamma, FT beta,
                                                             FT running_mean, FT running_var,
                                                             const BatchNormScalars& s);
    /// {dx, dgamma, dbeta} of float_batch_norm given dL/dy, from its mean and rstd.
    static std::array<FT, 3> float_batch_norm_backward(FT x, FT grad, FT gamma, FT mean, FT rstd);
    /// Eval-mode batch norm: (x − mean)/√(var + eps)·gamma + beta per channel, one kernel.
    static std::optional<FT> float_batch_norm_eval(FT x, FT gamma, FT beta, FT mean, FT var,
                                                   double eps);
    /// float_batch_norm with the ReLU (and an optional residual added before it) in its
    /// normalising pass: y = max(bn(x) + residual, 0), the residual in x's shape.
    static std::optional<std::array<FT, 5>> float_batch_norm_relu(FT x, FT gamma, FT beta,
                                                                  FT running_mean, FT running_var,
                                                                  std::optional<FT> residual,
                                                                  const BatchNormScalars& s);
    /// The gradients of float_batch_norm_relu from its output y (the ReLU's mask) and dL/dy,
    /// with the residual's gradient when `residual`; given beta (a forward without a residual),
    /// channels-last kernels recompute the mask from x rather than read y.
    static BatchNormReluGrads<FT> float_batch_norm_relu_backward(FT x, FT y, FT grad, FT gamma,
                                                                 FT mean, FT rstd, bool residual,
                                                                 std::optional<FT> beta);
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
    /// Layer norm over the last dim, one block a row: {y, mean, rstd}.
    static std::array<FT, 3> float_layer_norm(FT x, std::optional<FT> gamma, std::optional<FT> beta,
                                              double eps);
    /// {dx, dgamma, dbeta} of float_layer_norm from dL/dy and the forward's mean and rstd, in
    /// two kernels (dgamma and dbeta empty without gamma); nullopt unless every operand is
    /// dense f32 or f64 of one dtype, or f32 rows with an f16/bf16 gradient (add_layer_norm's
    /// 16-bit output), which the one-pass kernel reads as it is (Autodiff then composes the
    /// backward).
    /// With `acc` (x's shape and dtype) dx is the backward's plus acc — the gradient x had
    /// already collected from its other consumers (a residual stream's), added in the same pass
    /// where the one-pass kernel runs, else by one addition afterwards.
    static std::optional<std::array<FT, 3>> float_layer_norm_backward(
        const FT& x, const FT& grad, const std::optional<FT>& gamma, const FT& mean, const FT& rstd,
        const std::optional<FT>& acc = std::nullopt);
    /// float_layer_norm has a kernel of its own (Fusion<Cuda> runs it rather than composing).
    static constexpr bool native_layer_norm = true;
    /// module::add_layer_norm in one kernel: {x + residual, its layer norm stored as `out`
    /// (f32, f16 or bf16; x's dtype when empty), mean, rstd} for dense f32 x, an f32/f16/bf16
    /// residual of x's shape, f32 gamma and beta (or none) and rows of a multiple of 4 up to
    /// 8192 values; nothing otherwise (the caller composes).
    static std::optional<std::array<FT, 4>> float_add_layer_norm(FT x, FT residual,
                                                                 std::optional<FT> gamma,
                                                                 std::optional<FT> beta, double eps,
                                                                 std::optional<DType> out);

    // ---- int ----
    static IT int_from_data(const TensorData& data, const Device& d);
    static TensorData int_into_data(IT t);
    static Device int_device(const IT& t) { return Device{static_cast<std::size_t>(t.device())}; }
    static IT int_to_device(IT t, const Device& d);
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
    /// Reads a Transaction's tensors with one wait for each device they live on.
    static TransactionData tr_execute(TransactionPrimitive<FT, IT, BT> p);
    static Device bool_device(const BT& t) { return Device{static_cast<std::size_t>(t.device())}; }
    static BT bool_to_device(BT t, const Device& d);
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

    // ---- module ops ----
    static FT conv1d(FT x, FT w, std::optional<FT> bias, const ConvOptions<1>& o);
    static FT conv2d(FT x, FT w, std::optional<FT> bias, const ConvOptions<2>& o);
    static FT conv3d(FT x, FT w, std::optional<FT> bias, const ConvOptions<3>& o);
    static FT conv_transpose1d(FT x, FT w, std::optional<FT> bias,
                               const ConvTransposeOptions<1>& o);
    static FT conv_transpose2d(FT x, FT w, std::optional<FT> bias,
                               const ConvTransposeOptions<2>& o);
    static FT conv_transpose3d(FT x, FT w, std::optional<FT> bias,
                               const ConvTransposeOptions<3>& o);
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
    static FT interpolate(FT x, std::array<std::size_t, 2> output_size,
                          const InterpolateOptions& o);

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

    // ---- quantized (the int8 GEMM through cuBLASLt; everything else from BackendBase) ----
    /// The quantized primitive: BackendBase's composed one (the transposed int8 weights and
    /// their column sums are kept in its packed slot).
    using QT = quant::QTensorPrimitive<IT, FT>;
    /// x [..., K] @ w [K, N] (+ bias [N]) with int8 weights: x quantized to int8 on the device,
    /// int8 × int8 → int32 by cublasLtMatmul, zero points, scales and bias applied by one
    /// epilogue kernel. K and N must be multiples of 4 (cuBLASLt's int8 rule); other shapes,
    /// Float activations, non-f32 inputs and per-row weight parameters take the composed default.
    static FT q_linear(FT x, QT w, std::optional<FT> bias, const quant::ActivationQuantization& act);

    // ---- fusion (the FusionBackend side of Fusion<Cuda>: CUDA C++ through NVRTC) ----
    /// A fused program's kernel source and the modules loaded from it, one per device.
    using FusedKernel = std::shared_ptr<detail::cuda::FusedModule>;
    /// Fused programs may end in a reduction along the last dim (a block a row).
    static constexpr bool fused_reductions = true;
    /// Generates the CUDA C++ of a fused program (checking it); NVRTC compiles it for a
    /// device's architecture at its first launch there (or the on-disk cache supplies it).
    static FusedKernel fused_compile(const fusion::Program& program);
    /// Launches a fused program over `shape` on the inputs' device and stream (float4 loads
    /// where every input is dense and aligned, per-input strides otherwise).
    static std::vector<FT> fused_launch(const FusedKernel& kernel, const fusion::Program& program,
                                        std::vector<FT> inputs, std::span<const Scalar> scalars,
                                        const Shape& shape);
    /// Whether `t` is dense over its shape (the vectorised kernel may read it).
    static bool fused_input_dense(const FT& t) { return t.is_contiguous(); }
    /// A 2-D f32 matmul with a bias row added and/or relu applied by cuBLASLt's epilogue, in
    /// the GEMM's own kernel (Fusion<Cuda>'s matmul epilogue). Nothing for other operands, or
    /// where cuBLASLt has no algorithm for them.
    static std::optional<FT> fused_matmul_epilogue(const FT& a, const FT& b, std::optional<FT> bias,
                                                   fusion::MatmulEpilogue epilogue);
    /// {a · b, b summed over its rows} for 2-D f32/f16/bf16 operands of one dtype in one
    /// cuBLASLt call (its bias-gradient epilogue): a Linear's weight and bias gradients from the
    /// input's transpose and the output's gradient, which Autodiff asks for where it has both to
    /// compute. Nothing where cuBLASLt has no algorithm for them (or
    /// EMBER_CUDA_BIAS_GRAD_EPILOGUE=0): the caller multiplies and sums apart.
    static std::optional<std::array<FT, 2>> fused_matmul_bias_grad(const FT& a, const FT& b);
};

/// The CUDA backend (f32 by default).
using Cuda = CudaBackend;

static_assert(Backend<Cuda>);

namespace cuda {
/// Whether a CUDA device and driver are usable in this process.
EMBER_API bool is_available();
/// Number of CUDA devices (0 when there is no driver or device).
EMBER_API std::size_t device_count();
/// Lets f32 matmuls and convolutions use TF32 tensor cores (about 10 mantissa bits, as
/// PyTorch's `torch.backends.cuda.matmul.allow_tf32`). Off by default.
EMBER_API void set_allow_tf32(bool allow);
/// Whether TF32 is allowed for f32 matmuls.
EMBER_API bool allow_tf32();
/// Bytes of device memory held by live tensors, reserved by the caching pool, and the
/// high-water mark of the former.
struct MemoryStats {
    std::size_t bytes_in_use = 0;       ///< held by live tensors
    std::size_t bytes_reserved = 0;     ///< allocated from the driver (in use + cached)
    std::size_t peak_bytes_in_use = 0;  ///< the high-water mark of bytes_in_use
    std::size_t num_driver_allocs = 0;  ///< cudaMalloc calls so far (a cache hit adds none)
};
/// The memory counters of `device`.
EMBER_API MemoryStats memory_stats(const CudaDevice& device = {});
/// How often the host has waited for a device (its stream synchronised: a data read, a sync,
/// a check that reads a value, a Transaction's one wait).
struct SyncStats {
    std::size_t host_waits = 0;  ///< waits so far
};
/// The wait counter of `device`.
EMBER_API SyncStats sync_stats(const CudaDevice& device = {});
/// Gives the cached (unused) blocks of `device` back to the driver.
EMBER_API void empty_cache(const CudaDevice& device = {});
/// Restarts the high-water mark at the current use.
EMBER_API void reset_peak_memory(const CudaDevice& device = {});

/// Counters of Fusion<Cuda>'s kernel compiler, process-wide.
struct FusionCompileStats {
    std::size_t nvrtc_compiles = 0;  ///< programs compiled by NVRTC
    std::size_t disk_hits = 0;       ///< programs whose PTX/CUBIN came from the on-disk cache
    std::size_t module_loads = 0;    ///< modules loaded into a device (one per program and device)
};
/// The compiler's counters now.
EMBER_API FusionCompileStats fusion_compile_stats();
/// The CUDA C++ that Fusion<Cuda> generates for `program` (what EMBER_FUSION_DUMP=1 prints).
EMBER_API std::string fused_source(const fusion::Program& program);
/// Compiles CUDA C++ with NVRTC for compute capability `arch` (90 for sm_90): CUBIN when
/// `cubin`, else PTX. Needs no GPU; throws ember::DeviceError with NVRTC's log on failure.
EMBER_API std::string nvrtc_compile(const std::string& source, int arch, bool cubin);
}  // namespace cuda

}  // namespace ember
