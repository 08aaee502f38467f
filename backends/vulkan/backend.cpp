// VulkanBackend's op functions: thin forwards to the kernels (backends/vulkan/kernels.hpp).
#include "ember/backend/vulkan.hpp"

#include <cstdlib>
#include <string>

#include "graph.hpp"
#include "kernels.hpp"

namespace ember {
namespace k = detail::vk;

#define VK auto VulkanBackend
using k::conv_params;
using k::pool_params;

std::uint32_t VulkanDevice::resolved() const {
    if (index != kDefault) return index;
    const char* e = std::getenv("EMBER_VULKAN_DEVICE");
    if (!e || !*e) return 0;
    char* end = nullptr;
    const unsigned long v = std::strtoul(e, &end, 10);
    EMBER_CHECK(end && *end == '\0' && v < kDefault, Device,
                "vulkan: EMBER_VULKAN_DEVICE must be a device index, got '", e, "'");
    return static_cast<std::uint32_t>(v);
}

std::string VulkanDevice::to_string() const { return "Vulkan(" + std::to_string(resolved()) + ")"; }

VK::name()->std::string { return "vulkan"; }
VK::seed(std::uint64_t s)->void { k::seed(s); }
VK::sync(const Device& d)->void {
    k::forbid_in_capture("sync");
    auto& cx = k::Context::get(d.resolved());
    std::lock_guard lock(cx.mu);
    cx.wait_idle();
}
VK::float_to_device(FT t, const Device& d)->FT { return k::to_device(std::move(t), d.resolved()); }
VK::int_to_device(IT t, const Device& d)->IT { return k::to_device(std::move(t), d.resolved()); }
VK::bool_to_device(BT t, const Device& d)->BT { return k::to_device(std::move(t), d.resolved()); }

// ---- float ----
VK::float_from_data(const TensorData& data, const Device& d)->FT {
    // As Burn: data enters as the backend's float type; `cast` makes other float dtypes.
    return k::from_data(data, DType::F32, d.resolved());
}
VK::float_into_data(FT t)->TensorData { return k::to_data(t); }
VK::float_adam_step(FT param, FT grad, FT m, FT v, const AdamStepScalars& s)->std::array<FT, 3> {
    return k::adam_step(std::move(param), std::move(grad), std::move(m), std::move(v), s);
}
VK::float_empty(const Shape& s, const Device& d)->FT { return k::empty(s, DType::F32, d.resolved()); }
VK::float_full(const Shape& s, Scalar v, const Device& d)->FT {
    return k::full(s, v, DType::F32, d.resolved());
}
VK::float_random(const Shape& s, const Distribution& dist, const Device& d)->FT {
    return k::random(s, dist, DType::F32, d.resolved());
}
VK::float_unary(UnaryOp op, FT t)->FT { return k::unary(op, std::move(t)); }
VK::float_binary(BinaryOp op, FT a, FT b)->FT { return k::binary(op, std::move(a), std::move(b)); }
VK::float_binary_scalar(BinaryOp op, FT a, Scalar s)->FT {
    return k::binary_scalar(op, std::move(a), s);
}
VK::float_compare(CompareOp op, FT a, FT b)->BT { return k::compare(op, std::move(a), std::move(b)); }
VK::float_compare_scalar(CompareOp op, FT a, Scalar s)->BT {
    return k::compare_scalar(op, std::move(a), s);
}
VK::float_mask_where(FT t, BT mask, FT value)->FT {
    return k::where(std::move(mask), std::move(value), std::move(t));
}
VK::float_mask_fill(FT t, BT mask, Scalar v)->FT { return k::mask_fill(std::move(t), std::move(mask), v); }
VK::float_clamp(FT t, Scalar lo, Scalar hi)->FT { return k::clamp(std::move(t), lo, hi); }
VK::float_reduce(ReduceOp op, FT t)->FT { return k::reduce_all(op, std::move(t)); }
VK::float_reduce_dim(ReduceOp op, FT t, std::size_t dim)->FT {
    return k::reduce_dim(op, std::move(t), dim);
}
VK::float_arg_reduce(ArgReduceOp op, FT t, std::size_t dim)->IT {
    return k::arg_reduce(op, std::move(t), dim);
}
VK::float_reshape(FT t, const Shape& s)->FT { return k::reshape(std::move(t), s); }
VK::float_permute(FT t, std::span<const std::size_t> axes)->FT { return k::permute(std::move(t), axes); }
VK::float_expand(FT t, const Shape& s)->FT { return k::expand(std::move(t), s); }
VK::float_slice(FT t, std::span<const Slice> r)->FT { return k::slice(std::move(t), r); }
VK::float_slice_assign(FT t, std::span<const Slice> r, FT v)->FT {
    return k::slice_assign(std::move(t), r, std::move(v));
}
VK::float_flip(FT t, std::span<const std::size_t> axes)->FT { return k::flip(std::move(t), axes); }
VK::float_cat(std::vector<FT> ts, std::size_t dim)->FT { return k::cat(ts, dim); }
VK::float_repeat_dim(FT t, std::size_t dim, std::size_t times)->FT {
    return k::repeat_dim(std::move(t), dim, times);
}
VK::float_gather(std::size_t dim, FT t, IT i)->FT { return k::gather(dim, std::move(t), std::move(i)); }
VK::float_scatter(std::size_t dim, FT t, IT i, FT v)->FT {
    return k::scatter_add(dim, std::move(t), std::move(i), std::move(v));
}
VK::float_select(FT t, std::size_t dim, IT i)->FT { return k::select(std::move(t), dim, std::move(i)); }
VK::float_select_assign(FT t, std::size_t dim, IT i, FT v)->FT {
    return k::select_assign(std::move(t), dim, std::move(i), std::move(v));
}
VK::float_sort_with_indices(FT t, std::size_t dim, bool desc)->std::pair<FT, IT> {
    return k::sort_with_indices(std::move(t), dim, desc);
}
VK::float_topk(FT t, std::size_t kk, std::size_t dim, bool largest)->std::pair<FT, IT> {
    return k::topk(std::move(t), kk, dim, largest);
}
VK::float_matmul(FT a, FT b)->FT { return k::matmul(std::move(a), std::move(b)); }
VK::float_into_int(FT t)->IT { return k::cast(std::move(t), DType::I64); }
VK::float_cast(FT t, DType d)->FT {
    EMBER_CHECK(is_float(d), DType, "cast: float tensors cast to float dtypes, got ", dtype_name(d));
    return k::cast(std::move(t), d);
}
VK::float_softmax(FT t, std::size_t dim)->FT { return k::softmax(std::move(t), dim, false); }
VK::float_log_softmax(FT t, std::size_t dim)->FT { return k::softmax(std::move(t), dim, true); }
VK::float_layer_norm(FT x, std::optional<FT> gamma, std::optional<FT> beta, double eps)
    ->std::array<FT, 3> {
    return k::layer_norm(std::move(x), std::move(gamma), std::move(beta), eps);
}

// ---- int ----
VK::int_from_data(const TensorData& data, const Device& d)->IT {
    return k::from_data(data, DType::I64, d.resolved());
}
VK::int_into_data(IT t)->TensorData { return k::to_data(t); }
VK::int_empty(const Shape& s, const Device& d)->IT { return k::empty(s, DType::I64, d.resolved()); }
VK::int_full(const Shape& s, Scalar v, const Device& d)->IT {
    return k::full(s, v, DType::I64, d.resolved());
}
VK::int_random(const Shape& s, const Distribution& dist, const Device& d)->IT {
    return k::random(s, dist, DType::I64, d.resolved());
}
VK::int_arange(std::int64_t a, std::int64_t b, std::int64_t step, const Device& d)->IT {
    return k::arange(a, b, step, d.resolved());
}
VK::int_unary(UnaryOp op, IT t)->IT { return k::unary(op, std::move(t)); }
VK::int_binary(BinaryOp op, IT a, IT b)->IT { return k::binary(op, std::move(a), std::move(b)); }
VK::int_binary_scalar(BinaryOp op, IT a, Scalar s)->IT { return k::binary_scalar(op, std::move(a), s); }
VK::int_compare(CompareOp op, IT a, IT b)->BT { return k::compare(op, std::move(a), std::move(b)); }
VK::int_compare_scalar(CompareOp op, IT a, Scalar s)->BT {
    return k::compare_scalar(op, std::move(a), s);
}
VK::int_mask_where(IT t, BT mask, IT value)->IT {
    return k::where(std::move(mask), std::move(value), std::move(t));
}
VK::int_mask_fill(IT t, BT mask, Scalar v)->IT { return k::mask_fill(std::move(t), std::move(mask), v); }
VK::int_clamp(IT t, Scalar lo, Scalar hi)->IT { return k::clamp(std::move(t), lo, hi); }
VK::int_reduce(ReduceOp op, IT t)->IT { return k::reduce_all(op, std::move(t)); }
VK::int_reduce_dim(ReduceOp op, IT t, std::size_t dim)->IT { return k::reduce_dim(op, std::move(t), dim); }
VK::int_arg_reduce(ArgReduceOp op, IT t, std::size_t dim)->IT {
    return k::arg_reduce(op, std::move(t), dim);
}
VK::int_reshape(IT t, const Shape& s)->IT { return k::reshape(std::move(t), s); }
VK::int_permute(IT t, std::span<const std::size_t> axes)->IT { return k::permute(std::move(t), axes); }
VK::int_expand(IT t, const Shape& s)->IT { return k::expand(std::move(t), s); }
VK::int_slice(IT t, std::span<const Slice> r)->IT { return k::slice(std::move(t), r); }
VK::int_slice_assign(IT t, std::span<const Slice> r, IT v)->IT {
    return k::slice_assign(std::move(t), r, std::move(v));
}
VK::int_flip(IT t, std::span<const std::size_t> axes)->IT { return k::flip(std::move(t), axes); }
VK::int_cat(std::vector<IT> ts, std::size_t dim)->IT { return k::cat(ts, dim); }
VK::int_repeat_dim(IT t, std::size_t dim, std::size_t times)->IT {
    return k::repeat_dim(std::move(t), dim, times);
}
VK::int_gather(std::size_t dim, IT t, IT i)->IT { return k::gather(dim, std::move(t), std::move(i)); }
VK::int_scatter(std::size_t dim, IT t, IT i, IT v)->IT {
    return k::scatter_add(dim, std::move(t), std::move(i), std::move(v));
}
VK::int_select(IT t, std::size_t dim, IT i)->IT { return k::select(std::move(t), dim, std::move(i)); }
VK::int_select_assign(IT t, std::size_t dim, IT i, IT v)->IT {
    return k::select_assign(std::move(t), dim, std::move(i), std::move(v));
}
VK::int_sort_with_indices(IT t, std::size_t dim, bool desc)->std::pair<IT, IT> {
    return k::sort_with_indices(std::move(t), dim, desc);
}
VK::int_topk(IT t, std::size_t kk, std::size_t dim, bool largest)->std::pair<IT, IT> {
    return k::topk(std::move(t), kk, dim, largest);
}
VK::int_matmul(IT a, IT b)->IT { return k::matmul(std::move(a), std::move(b)); }
VK::int_into_float(IT t)->FT { return k::cast(std::move(t), DType::F32); }
VK::int_cast(IT t, DType d)->IT {
    EMBER_CHECK(is_int(d), DType, "cast: int tensors cast to int dtypes, got ", dtype_name(d));
    return k::cast(std::move(t), d);
}

// ---- bool ----
VK::bool_from_data(const TensorData& data, const Device& d)->BT {
    return k::from_data(data, DType::Bool, d.resolved());
}
VK::bool_into_data(BT t)->TensorData { return k::to_data(t); }
VK::bool_empty(const Shape& s, const Device& d)->BT { return k::empty(s, DType::Bool, d.resolved()); }
VK::bool_full(const Shape& s, Scalar v, const Device& d)->BT {
    return k::full(s, v, DType::Bool, d.resolved());
}
VK::bool_not(BT t)->BT { return k::unary(UnaryOp::Not, std::move(t)); }
VK::bool_binary(BinaryOp op, BT a, BT b)->BT { return k::binary(op, std::move(a), std::move(b)); }
VK::bool_compare(CompareOp op, BT a, BT b)->BT { return k::compare(op, std::move(a), std::move(b)); }
VK::bool_mask_where(BT t, BT mask, BT value)->BT {
    return k::where(std::move(mask), std::move(value), std::move(t));
}
VK::bool_reduce(ReduceOp op, BT t)->BT { return k::reduce_all(op, std::move(t)); }
VK::bool_reduce_dim(ReduceOp op, BT t, std::size_t dim)->BT { return k::reduce_dim(op, std::move(t), dim); }
VK::bool_reshape(BT t, const Shape& s)->BT { return k::reshape(std::move(t), s); }
VK::bool_permute(BT t, std::span<const std::size_t> axes)->BT { return k::permute(std::move(t), axes); }
VK::bool_expand(BT t, const Shape& s)->BT { return k::expand(std::move(t), s); }
VK::bool_slice(BT t, std::span<const Slice> r)->BT { return k::slice(std::move(t), r); }
VK::bool_slice_assign(BT t, std::span<const Slice> r, BT v)->BT {
    return k::slice_assign(std::move(t), r, std::move(v));
}
VK::bool_flip(BT t, std::span<const std::size_t> axes)->BT { return k::flip(std::move(t), axes); }
VK::bool_cat(std::vector<BT> ts, std::size_t dim)->BT { return k::cat(ts, dim); }
VK::bool_repeat_dim(BT t, std::size_t dim, std::size_t times)->BT {
    return k::repeat_dim(std::move(t), dim, times);
}
VK::bool_gather(std::size_t dim, BT t, IT i)->BT { return k::gather(dim, std::move(t), std::move(i)); }
VK::bool_select(BT t, std::size_t dim, IT i)->BT { return k::select(std::move(t), dim, std::move(i)); }
VK::bool_into_int(BT t)->IT { return k::cast(std::move(t), DType::I64); }
VK::bool_into_float(BT t)->FT { return k::cast(std::move(t), DType::F32); }
VK::bool_argwhere(BT t)->IT { return k::argwhere(std::move(t)); }

// ---- module ops ----
VK::conv1d(FT x, FT w, std::optional<FT> b, const ConvOptions<1>& o)->FT {
    return k::conv(std::move(x), std::move(w), std::move(b), conv_params<1>(o));
}
VK::conv2d(FT x, FT w, std::optional<FT> b, const ConvOptions<2>& o)->FT {
    return k::conv(std::move(x), std::move(w), std::move(b), conv_params<2>(o));
}
VK::conv3d(FT x, FT w, std::optional<FT> b, const ConvOptions<3>& o)->FT {
    return k::conv(std::move(x), std::move(w), std::move(b), conv_params<3>(o));
}
VK::conv_transpose1d(FT x, FT w, std::optional<FT> b, const ConvTransposeOptions<1>& o)->FT {
    return k::conv_transpose(std::move(x), std::move(w), std::move(b), conv_params<1>(o));
}
VK::conv_transpose2d(FT x, FT w, std::optional<FT> b, const ConvTransposeOptions<2>& o)->FT {
    return k::conv_transpose(std::move(x), std::move(w), std::move(b), conv_params<2>(o));
}
VK::conv_transpose3d(FT x, FT w, std::optional<FT> b, const ConvTransposeOptions<3>& o)->FT {
    return k::conv_transpose(std::move(x), std::move(w), std::move(b), conv_params<3>(o));
}
VK::deform_conv2d(FT x, FT off, FT w, std::optional<FT> m, std::optional<FT> b,
                   const DeformConvOptions& o)->FT {
    return k::deform_conv2d(std::move(x), std::move(off), std::move(w), std::move(m), std::move(b), o);
}
VK::avg_pool1d(FT x, const PoolOptions<1>& o)->FT { return k::avg_pool(std::move(x), pool_params(o)); }
VK::avg_pool2d(FT x, const PoolOptions<2>& o)->FT { return k::avg_pool(std::move(x), pool_params(o)); }
VK::max_pool1d(FT x, const PoolOptions<1>& o)->FT {
    return k::max_pool_with_indices(std::move(x), pool_params(o)).first;
}
VK::max_pool2d(FT x, const PoolOptions<2>& o)->FT {
    return k::max_pool_with_indices(std::move(x), pool_params(o)).first;
}
VK::max_pool1d_with_indices(FT x, const PoolOptions<1>& o)->std::pair<FT, IT> {
    return k::max_pool_with_indices(std::move(x), pool_params(o));
}
VK::max_pool2d_with_indices(FT x, const PoolOptions<2>& o)->std::pair<FT, IT> {
    return k::max_pool_with_indices(std::move(x), pool_params(o));
}
VK::adaptive_avg_pool1d(FT x, std::size_t n)->FT {
    const std::size_t s[1] = {n};
    return k::adaptive_avg_pool(std::move(x), s);
}
VK::adaptive_avg_pool2d(FT x, std::array<std::size_t, 2> s)->FT {
    return k::adaptive_avg_pool(std::move(x), s);
}
VK::interpolate(FT x, std::array<std::size_t, 2> s, const InterpolateOptions& o)->FT {
    return k::interpolate(std::move(x), s, o);
}

#undef VK

// ---- module backward ----
auto VulkanBackend::conv1d_weight_backward(FT x, FT g, const Shape& ws, const ConvOptions<1>& o) -> FT {
    return k::conv_weight_backward(std::move(x), std::move(g), ws, k::conv_params<1>(o));
}
auto VulkanBackend::conv2d_weight_backward(FT x, FT g, const Shape& ws, const ConvOptions<2>& o) -> FT {
    return k::conv_weight_backward(std::move(x), std::move(g), ws, k::conv_params<2>(o));
}
auto VulkanBackend::conv3d_weight_backward(FT x, FT g, const Shape& ws, const ConvOptions<3>& o) -> FT {
    return k::conv_weight_backward(std::move(x), std::move(g), ws, k::conv_params<3>(o));
}
auto VulkanBackend::avg_pool1d_backward(FT x, FT g, const PoolOptions<1>& o) -> FT {
    return k::avg_pool_backward(std::move(x), std::move(g), k::pool_params(o));
}
auto VulkanBackend::avg_pool2d_backward(FT x, FT g, const PoolOptions<2>& o) -> FT {
    return k::avg_pool_backward(std::move(x), std::move(g), k::pool_params(o));
}
auto VulkanBackend::adaptive_avg_pool1d_backward(FT x, FT g) -> FT {
    return k::adaptive_avg_pool_backward(std::move(x), std::move(g), 1);
}
auto VulkanBackend::adaptive_avg_pool2d_backward(FT x, FT g) -> FT {
    return k::adaptive_avg_pool_backward(std::move(x), std::move(g), 2);
}
auto VulkanBackend::interpolate_backward(FT x, FT g, std::array<std::size_t, 2> s,
                                         const InterpolateOptions& o) -> FT {
    return k::interpolate_backward(std::move(x), std::move(g), s, o);
}
auto VulkanBackend::deform_conv2d_backward(FT x, FT off, FT w, std::optional<FT> m,
                                           std::optional<FT> b, FT g, const DeformConvOptions& o)
    -> DeformConv2dGrads<FT> {
    auto r = k::deform_conv2d_backward(std::move(x), std::move(off), std::move(w), std::move(m),
                                       std::move(b), std::move(g), o);
    return {std::move(r.x), std::move(r.offset), std::move(r.weight), std::move(r.mask),
            std::move(r.bias)};
}

namespace vulkan {
std::size_t device_count() {
    try {
        return k::Context::device_count();
    } catch (const Error&) {
        return 0;
    }
}
bool is_available() { return device_count() > 0; }
std::string device_name(const VulkanDevice& d) { return k::Context::get(d.resolved()).info().name; }
CooperativeMatrixInfo cooperative_matrix_info(const VulkanDevice& d) {
    const k::DeviceInfo& info = k::Context::get(d.resolved()).info();
    CooperativeMatrixInfo r;
    if (info.coop == k::DeviceInfo::Coop::Khr) r.extension = "VK_KHR_cooperative_matrix";
    if (info.coop == k::DeviceInfo::Coop::Nv) r.extension = "VK_NV_cooperative_matrix";
    r.f16 = info.cooperative_matrix;
    r.bf16 = info.coop_bf16;
    r.f16_16x16 = info.coop_f16_n16;
    r.workgroup_scope = !info.cm2.empty();
    return r;
}
MemoryStats memory_stats(const VulkanDevice& d) {
    return k::Context::get(d.resolved()).pool().stats();
}
void empty_cache(const VulkanDevice& d) {
    auto& cx = k::Context::get(d.resolved());
    std::lock_guard lock(cx.mu);
    cx.wait_idle();
    cx.pool().empty_cache();
}
ExecutionStats execution_stats(const VulkanDevice& d) {
    return k::Context::get(d.resolved()).exec_stats();
}
}  // namespace vulkan

}  // namespace ember
