#pragma once
// ember::Vulkan — the Vulkan compute backend: strided views over pooled device buffers, GLSL
// kernels compiled to SPIR-V at build time and embedded, dispatches recorded into command
// buffers and submitted in batches (the host waits only at data reads and sync), matmul with
// autotuned tiled kernels. The Vulkan loader is opened at run time through volk: a machine
// without one gets an ember::DeviceError when a Vulkan tensor is first made. docs/vulkan.md.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../export.hpp"
#include "../tensor/backend.hpp"
#include "../tensor/fusion_program.hpp"
#include "detail/vulkan_tensor.hpp"

namespace ember {

namespace detail::vk {
/// A fused program compiled for the Vulkan backend (backends/vulkan/fusion.hpp).
struct FusedPlan;
}  // namespace detail::vk

/// A Vulkan device, by index among the physical devices that have a compute queue. The
/// default-constructed device is the one EMBER_VULKAN_DEVICE names (index 0 when unset).
struct EMBER_API VulkanDevice {
    /// "The default device" (EMBER_VULKAN_DEVICE, else 0).
    static constexpr std::uint32_t kDefault = 0xffffffffu;
    std::uint32_t index = kDefault;  ///< physical device index, or kDefault
    /// The index this device resolves to (reads EMBER_VULKAN_DEVICE for the default; throws
    /// an ember::DeviceError when it is not a number).
    std::uint32_t resolved() const;
    /// Devices are equal when they resolve to the same index.
    friend bool operator==(const VulkanDevice& a, const VulkanDevice& b) {
        return a.resolved() == b.resolved();
    }
    /// "Vulkan(0)".
    std::string to_string() const;
};

/// The Vulkan backend: f32 floats, int64 ints, bools. Every op runs on the device.
struct EMBER_API VulkanBackend : BackendBase<VulkanBackend> {
    using Device = VulkanDevice;
    using FloatTensorPrimitive = detail::vk::VulkanTensor;
    using IntTensorPrimitive = detail::vk::VulkanTensor;
    using BoolTensorPrimitive = detail::vk::VulkanTensor;
    using FloatElem = float;
    using IntElem = std::int64_t;
    using FT = FloatTensorPrimitive;
    using IT = IntTensorPrimitive;
    using BT = BoolTensorPrimitive;

    /// "vulkan".
    static std::string name();
    /// Seeds the counter-based generator behind `random`.
    static void seed(std::uint64_t seed);
    /// Submits the recorded work and waits until the device has finished it.
    static void sync(const Device& d);

    // ---- float ----
    static FT float_from_data(const TensorData& data, const Device& d);
    static TensorData float_into_data(FT t);
    static Device float_device(const FT& t) { return Device{t.device}; }
    static FT float_to_device(FT t, const Device& d);
    static Shape float_shape(const FT& t) { return t.shape; }
    static DType float_dtype(const FT& t) { return t.dtype; }
    static FT float_empty(const Shape& shape, const Device& d);
    static FT float_full(const Shape& shape, Scalar value, const Device& d);
    static FT float_random(const Shape& shape, const Distribution& dist, const Device& d);
    static FT float_unary(UnaryOp op, FT t);
    static FT float_binary(BinaryOp op, FT a, FT b);
    static FT float_binary_scalar(BinaryOp op, FT a, Scalar s);
    static BT float_compare(CompareOp op, FT a, FT b);
    static BT float_compare_scalar(CompareOp op, FT a, Scalar s);
    static FT float_mask_where(FT t, BT mask, FT value);
    static FT float_mask_fill(FT t, BT mask, Scalar value);
    static FT float_clamp(FT t, Scalar lo, Scalar hi);
    /// One Adam update in a single pass over the four tensors (same shape): {param, m, v},
    /// written into whichever inputs are unique (always in place inside a captured step).
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
    /// Layer norm over the last dim, a workgroup a row: {y, mean, rstd}.
    static std::array<FT, 3> float_layer_norm(FT x, std::optional<FT> gamma, std::optional<FT> beta,
                                              double eps);
    /// float_layer_norm has a kernel of its own (Fusion<Vulkan> runs it rather than composing).
    static constexpr bool native_layer_norm = true;

    // ---- int ----
    static IT int_from_data(const TensorData& data, const Device& d);
    static TensorData int_into_data(IT t);
    static Device int_device(const IT& t) { return Device{t.device}; }
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
    static Device bool_device(const BT& t) { return Device{t.device}; }
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

    // ---- fusion (the FusionBackend side of Fusion<Vulkan>; backends/vulkan/fusion.cpp) ----
    /// A fused program turned into GLSL; its SPIR-V and pipelines are made per device at first
    /// launch (from the on-disk cache when present) and kept.
    using FusedKernel = std::shared_ptr<const detail::vk::FusedPlan>;
    /// Fused programs may end in a reduction along the last dim (a workgroup a row; f64
    /// reductions run op by op).
    static constexpr bool fused_reductions = true;
    /// Checks a fused program and generates its compute shader (EMBER_FUSION_DUMP=1 prints it).
    static FusedKernel fused_compile(const fusion::Program& program);
    /// Runs a fused program over `shape` in one dispatch; scalar values go in push constants.
    static std::vector<FT> fused_launch(const FusedKernel& kernel, const fusion::Program& program,
                                        std::vector<FT> inputs, std::span<const Scalar> scalars,
                                        const Shape& shape);
    /// Whether `t` is contiguous (the kernel may then read it with 16-byte vector loads).
    static bool fused_input_dense(const FT& t) { return t.is_contiguous(); }
};

/// The Vulkan backend (f32).
using Vulkan = VulkanBackend;

static_assert(Backend<Vulkan>);

namespace vulkan {
/// Number of Vulkan devices with a compute queue (0 when no loader or device is present).
EMBER_API std::size_t device_count();
/// Whether a Vulkan device can be used here (a loader and at least one device).
EMBER_API bool is_available();
/// The name of a device ("NVIDIA H100 80GB HBM3", "llvmpipe (LLVM 15.0.6, 256 bits)").
EMBER_API std::string device_name(const VulkanDevice& d = {});
/// The tensor-core (cooperative-matrix) matmul of a device.
struct CooperativeMatrixInfo {
    /// "VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix", or empty (16-bit matmuls then
    /// run on the f32 tiles).
    std::string extension;
    bool f16 = false;   ///< f16 x f16 → f32 matmuls run on tensor cores
    bool bf16 = false;  ///< bf16 x bf16 → f32 matmuls run on tensor cores (VK_KHR_shader_bfloat16)
    bool f16_16x16 = false;  ///< f16 also in 16 x 16 x 16 fragments (KHR), besides 16 x 8 x 16
    /// Workgroup-scope matrices with tensor loads (VK_NV_cooperative_matrix2) for f16, and for
    /// bf16 where `bf16` holds: a second matmul kernel the autotuner also times.
    bool workgroup_scope = false;
};
/// What device `d` offers (EMBER_VULKAN_COOPMAT=0 turns it off, =nv keeps the NV extension;
/// EMBER_VULKAN_COOPMAT2=0 leaves VK_NV_cooperative_matrix2 off).
EMBER_API CooperativeMatrixInfo cooperative_matrix_info(const VulkanDevice& d = {});
/// TFLOP/s that device `d`'s cooperative matrices sustain on `dtype` (F16 or BF16) fragments of
/// 16 x `fragment_columns` x 16 multiplied from registers, with no memory traffic: the ceiling
/// of the 16-bit matmul (bench_vulkan coop-peak). With `from_shared`, each round of products
/// first loads its fragments from shared memory, as the matmul's inner loop does. Throws
/// DeviceError where the device has no such fragments.
EMBER_API double cooperative_matrix_peak(DType dtype, int fragment_columns,
                                         bool from_shared = false, const VulkanDevice& d = {});
/// The memory pool's counters of one device.
struct MemoryStats {
    std::size_t bytes_in_use = 0;       ///< held by live tensors (size classes, rounded up)
    std::size_t peak_bytes_in_use = 0;  ///< high-water mark of bytes_in_use
    std::size_t bytes_reserved = 0;     ///< device memory the pool holds (blocks)
    std::size_t num_blocks = 0;         ///< device memory allocations the pool holds
    std::size_t num_allocs = 0;         ///< sub-allocations served since start
    std::size_t num_reused = 0;         ///< ... of which came from the free lists
};
/// The pool's counters of device `d`.
EMBER_API MemoryStats memory_stats(const VulkanDevice& d = {});
/// Returns the pool's cached free blocks to the driver (after waiting for the device).
EMBER_API void empty_cache(const VulkanDevice& d = {});
/// Number of command-buffer submissions and pipeline barriers recorded so far on `d`.
struct ExecutionStats {
    std::size_t dispatches = 0;  ///< compute dispatches recorded
    std::size_t barriers = 0;    ///< barriers inserted between dependent dispatches
    std::size_t submits = 0;     ///< queue submissions
    std::size_t waits = 0;       ///< times the host waited for the device
};
/// The recorder's counters of device `d`.
EMBER_API ExecutionStats execution_stats(const VulkanDevice& d = {});

/// The GPU time of one kernel over the dispatches the profiler timed (set_profiling).
struct KernelTime {
    /// The shader's name with its specialization constants, e.g. "matmul (2,32,32,16,2,2,0,4,0)"
    /// (a kernel variant, an op code); "fused": Fusion's generated kernels.
    std::string kernel;
    std::size_t dispatches = 0;  ///< dispatches timed
    /// GPU microseconds from the end of the work before each dispatch to its own end (its
    /// barrier, and any copy recorded before it, included): the times of all kernels add up to
    /// the GPU's busy time.
    double microseconds = 0;
};
/// Starts (true) or stops timing every dispatch recorded on device `d` (a timestamp after each,
/// read when its command buffer's fence is waited; captured steps' replays are not timed, so
/// time the same step eagerly). `EMBER_VULKAN_PROFILE=1` starts it with the device and prints
/// the table to standard error at exit. Throws DeviceError where the device has no timestamps.
EMBER_API void set_profiling(bool on, const VulkanDevice& d = {});
/// The kernels timed so far on `d`, the most time first (waits for the device); `reset` empties
/// the table afterwards.
EMBER_API std::vector<KernelTime> kernel_times(const VulkanDevice& d = {}, bool reset = false);

/// Counters of Fusion<Vulkan>'s kernel cache, process-wide (every device).
struct FusionCacheStats {
    std::size_t spirv_compiled = 0;  ///< shaders compiled to SPIR-V by shaderc
    std::size_t disk_loads = 0;      ///< SPIR-V read from the on-disk cache instead
    std::size_t disk_rejected = 0;   ///< cache files found unreadable or corrupt (rewritten)
    std::size_t disk_writes = 0;     ///< cache files written
    std::size_t pipelines = 0;       ///< pipelines created for fused kernels
    std::string last_file;           ///< the cache file last written or read (empty: none yet)
};
/// The fused-kernel cache's counters now.
EMBER_API FusionCacheStats fusion_cache_stats();
/// Forgets fused kernels' SPIR-V held in memory (each device keeps its pipelines, named by the
/// source's hash), so the next launch of each program reads the on-disk cache again or, with
/// `remove_files`, also deletes this process's devices' cache files and compiles anew.
EMBER_API void clear_fusion_cache(bool remove_files = false);
/// The directory of device `d`'s on-disk caches (pipelines, autotuning, fused SPIR-V):
/// $EMBER_CACHE_DIR, else $XDG_CACHE_HOME/ember, else ~/.cache/ember.
EMBER_API std::string cache_directory(const VulkanDevice& d = {});
}  // namespace vulkan

}  // namespace ember
