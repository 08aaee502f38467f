// CudaBackend's op functions: thin forwards to the dtype-generic ops of ops.hpp, which check
// their inputs as the CPU backend's do and queue kernels on the device's stream.
#include "ember/backend/cuda.hpp"

#include "ops.hpp"

namespace ember {
namespace k = detail::cuda;

namespace {
using k::conv_params;
using k::pool_params;
constexpr DType kIntDType = DType::I64;
int dev(const CudaDevice& d) { return static_cast<int>(d.index); }
}  // namespace

#define CUDA auto CudaBackend

CUDA::name()->std::string { return "cuda"; }
CUDA::seed(std::uint64_t s)->void { k::seed(s); }
CUDA::sync(const Device& d)->void { k::synchronize(dev(d)); }
CUDA::lend_memory(FT& t)->std::optional<LentMemory> {
    if (!t.is_unique()) t = k::fresh_copy(t);
    return LentMemory{t.ptr(), MemorySpace::Cuda, t.device()};
}

// ---- float ----
CUDA::float_from_data(const TensorData& data, const Device& d)->FT {
    // As Burn: data enters as the backend's float type; `cast` makes other float dtypes.
    return k::from_data(data, DType::F32, dev(d));
}
CUDA::float_into_data(FT t)->TensorData { return k::to_data(t); }
CUDA::float_empty(const Shape& s, const Device& d)->FT { return k::empty(s, DType::F32, dev(d)); }
CUDA::float_full(const Shape& s, Scalar v, const Device& d)->FT { return k::full(s, v, DType::F32, dev(d)); }
CUDA::float_random(const Shape& s, const Distribution& dist, const Device& d)->FT {
    return k::random(s, dist, DType::F32, dev(d));
}
CUDA::float_unary(UnaryOp op, FT t)->FT { return k::unary(op, std::move(t)); }
CUDA::float_binary(BinaryOp op, FT a, FT b)->FT { return k::binary(op, std::move(a), std::move(b)); }
CUDA::float_binary_scalar(BinaryOp op, FT a, Scalar s)->FT {
    return k::binary_scalar(op, std::move(a), s);
}
CUDA::float_compare(CompareOp op, FT a, FT b)->BT { return k::compare(op, std::move(a), std::move(b)); }
CUDA::float_compare_scalar(CompareOp op, FT a, Scalar s)->BT {
    return k::compare_scalar(op, std::move(a), s);
}
CUDA::float_mask_where(FT t, BT mask, FT value)->FT {
    return k::where(std::move(mask), std::move(value), std::move(t));
}
CUDA::float_mask_fill(FT t, BT mask, Scalar v)->FT { return k::mask_fill(std::move(t), std::move(mask), v); }
CUDA::float_clamp(FT t, Scalar lo, Scalar hi)->FT { return k::clamp(std::move(t), lo, hi); }
CUDA::float_adam_step(FT param, FT grad, FT m, FT v, const AdamStepScalars& s)->std::array<FT, 3> {
    return k::adam_step(std::move(param), std::move(grad), std::move(m), std::move(v), s);
}
CUDA::float_reduce(ReduceOp op, FT t)->FT { return k::reduce_all(op, std::move(t)); }
CUDA::float_reduce_dim(ReduceOp op, FT t, std::size_t dim)->FT {
    return k::reduce_dim(op, std::move(t), dim);
}
CUDA::float_arg_reduce(ArgReduceOp op, FT t, std::size_t dim)->IT {
    return k::arg_reduce(op, std::move(t), dim);
}
CUDA::float_reshape(FT t, const Shape& s)->FT { return k::reshape(std::move(t), s); }
CUDA::float_permute(FT t, std::span<const std::size_t> axes)->FT { return k::permute(std::move(t), axes); }
CUDA::float_expand(FT t, const Shape& s)->FT { return k::expand(std::move(t), s); }
CUDA::float_slice(FT t, std::span<const Slice> r)->FT { return k::slice(std::move(t), r); }
CUDA::float_slice_assign(FT t, std::span<const Slice> r, FT v)->FT {
    return k::slice_assign(std::move(t), r, std::move(v));
}
CUDA::float_flip(FT t, std::span<const std::size_t> axes)->FT { return k::flip(std::move(t), axes); }
CUDA::float_cat(std::vector<FT> ts, std::size_t dim)->FT { return k::cat(ts, dim); }
CUDA::float_repeat_dim(FT t, std::size_t dim, std::size_t times)->FT {
    return k::repeat_dim(std::move(t), dim, times);
}
CUDA::float_gather(std::size_t dim, FT t, IT i)->FT { return k::gather(dim, std::move(t), std::move(i)); }
CUDA::float_scatter(std::size_t dim, FT t, IT i, FT v)->FT {
    return k::scatter_add(dim, std::move(t), std::move(i), std::move(v));
}
CUDA::float_select(FT t, std::size_t dim, IT i)->FT { return k::select(std::move(t), dim, std::move(i)); }
CUDA::float_select_assign(FT t, std::size_t dim, IT i, FT v)->FT {
    return k::select_assign(std::move(t), dim, std::move(i), std::move(v));
}
CUDA::float_sort_with_indices(FT t, std::size_t dim, bool desc)->std::pair<FT, IT> {
    return k::sort_with_indices(std::move(t), dim, desc);
}
CUDA::float_topk(FT t, std::size_t kk, std::size_t dim, bool largest)->std::pair<FT, IT> {
    return k::topk(std::move(t), kk, dim, largest);
}
CUDA::float_matmul(FT a, FT b)->FT { return k::matmul(std::move(a), std::move(b)); }
CUDA::fused_matmul_epilogue(const FT& a, const FT& b, std::optional<FT> bias,
                            fusion::MatmulEpilogue e)->std::optional<FT> {
    return k::matmul_epilogue(a, b, bias, e.relu);
}
CUDA::float_into_int(FT t)->IT { return k::cast_to(std::move(t), kIntDType); }
CUDA::float_cast(FT t, DType d)->FT {
    EMBER_CHECK(is_float(d), DType, "cast: float tensors cast to float dtypes, got ", dtype_name(d));
    return k::cast_to(std::move(t), d);
}
CUDA::float_softmax(FT t, std::size_t dim)->FT { return k::softmax(std::move(t), dim, false); }
CUDA::float_log_softmax(FT t, std::size_t dim)->FT { return k::softmax(std::move(t), dim, true); }
CUDA::float_layer_norm(FT x, std::optional<FT> gamma, std::optional<FT> beta, double eps)
    ->std::array<FT, 3> {
    return k::layer_norm(std::move(x), std::move(gamma), std::move(beta), eps);
}

// ---- int ----
CUDA::int_from_data(const TensorData& data, const Device& d)->IT { return k::from_data(data, kIntDType, dev(d)); }
CUDA::int_into_data(IT t)->TensorData { return k::to_data(t); }
CUDA::int_empty(const Shape& s, const Device& d)->IT { return k::empty(s, kIntDType, dev(d)); }
CUDA::int_full(const Shape& s, Scalar v, const Device& d)->IT { return k::full(s, v, kIntDType, dev(d)); }
CUDA::int_random(const Shape& s, const Distribution& dist, const Device& d)->IT {
    return k::random(s, dist, kIntDType, dev(d));
}
CUDA::int_arange(std::int64_t a, std::int64_t b, std::int64_t step, const Device& d)->IT {
    return k::arange(a, b, step, dev(d));
}
CUDA::int_unary(UnaryOp op, IT t)->IT { return k::unary(op, std::move(t)); }
CUDA::int_binary(BinaryOp op, IT a, IT b)->IT { return k::binary(op, std::move(a), std::move(b)); }
CUDA::int_binary_scalar(BinaryOp op, IT a, Scalar s)->IT { return k::binary_scalar(op, std::move(a), s); }
CUDA::int_compare(CompareOp op, IT a, IT b)->BT { return k::compare(op, std::move(a), std::move(b)); }
CUDA::int_compare_scalar(CompareOp op, IT a, Scalar s)->BT {
    return k::compare_scalar(op, std::move(a), s);
}
CUDA::int_mask_where(IT t, BT mask, IT value)->IT {
    return k::where(std::move(mask), std::move(value), std::move(t));
}
CUDA::int_mask_fill(IT t, BT mask, Scalar v)->IT { return k::mask_fill(std::move(t), std::move(mask), v); }
CUDA::int_clamp(IT t, Scalar lo, Scalar hi)->IT { return k::clamp(std::move(t), lo, hi); }
CUDA::int_reduce(ReduceOp op, IT t)->IT { return k::reduce_all(op, std::move(t)); }
CUDA::int_reduce_dim(ReduceOp op, IT t, std::size_t dim)->IT { return k::reduce_dim(op, std::move(t), dim); }
CUDA::int_arg_reduce(ArgReduceOp op, IT t, std::size_t dim)->IT {
    return k::arg_reduce(op, std::move(t), dim);
}
CUDA::int_reshape(IT t, const Shape& s)->IT { return k::reshape(std::move(t), s); }
CUDA::int_permute(IT t, std::span<const std::size_t> axes)->IT { return k::permute(std::move(t), axes); }
CUDA::int_expand(IT t, const Shape& s)->IT { return k::expand(std::move(t), s); }
CUDA::int_slice(IT t, std::span<const Slice> r)->IT { return k::slice(std::move(t), r); }
CUDA::int_slice_assign(IT t, std::span<const Slice> r, IT v)->IT {
    return k::slice_assign(std::move(t), r, std::move(v));
}
CUDA::int_flip(IT t, std::span<const std::size_t> axes)->IT { return k::flip(std::move(t), axes); }
CUDA::int_cat(std::vector<IT> ts, std::size_t dim)->IT { return k::cat(ts, dim); }
CUDA::int_repeat_dim(IT t, std::size_t dim, std::size_t times)->IT {
    return k::repeat_dim(std::move(t), dim, times);
}
CUDA::int_gather(std::size_t dim, IT t, IT i)->IT { return k::gather(dim, std::move(t), std::move(i)); }
CUDA::int_scatter(std::size_t dim, IT t, IT i, IT v)->IT {
    return k::scatter_add(dim, std::move(t), std::move(i), std::move(v));
}
CUDA::int_select(IT t, std::size_t dim, IT i)->IT { return k::select(std::move(t), dim, std::move(i)); }
CUDA::int_select_assign(IT t, std::size_t dim, IT i, IT v)->IT {
    return k::select_assign(std::move(t), dim, std::move(i), std::move(v));
}
CUDA::int_sort_with_indices(IT t, std::size_t dim, bool desc)->std::pair<IT, IT> {
    return k::sort_with_indices(std::move(t), dim, desc);
}
CUDA::int_topk(IT t, std::size_t kk, std::size_t dim, bool largest)->std::pair<IT, IT> {
    return k::topk(std::move(t), kk, dim, largest);
}
CUDA::int_matmul(IT a, IT b)->IT { return k::matmul(std::move(a), std::move(b)); }
CUDA::int_into_float(IT t)->FT { return k::cast_to(std::move(t), DType::F32); }
CUDA::int_cast(IT t, DType d)->IT {
    EMBER_CHECK(is_int(d), DType, "cast: int tensors cast to int dtypes, got ", dtype_name(d));
    return k::cast_to(std::move(t), d);
}

// ---- bool ----
CUDA::bool_from_data(const TensorData& data, const Device& d)->BT { return k::from_data(data, DType::Bool, dev(d)); }
CUDA::bool_into_data(BT t)->TensorData { return k::to_data(t); }
CUDA::bool_empty(const Shape& s, const Device& d)->BT { return k::empty(s, DType::Bool, dev(d)); }
CUDA::bool_full(const Shape& s, Scalar v, const Device& d)->BT { return k::full(s, v, DType::Bool, dev(d)); }
CUDA::bool_not(BT t)->BT { return k::unary(UnaryOp::Not, std::move(t)); }
CUDA::bool_binary(BinaryOp op, BT a, BT b)->BT { return k::binary(op, std::move(a), std::move(b)); }
CUDA::bool_compare(CompareOp op, BT a, BT b)->BT { return k::compare(op, std::move(a), std::move(b)); }
CUDA::bool_mask_where(BT t, BT mask, BT value)->BT {
    return k::where(std::move(mask), std::move(value), std::move(t));
}
CUDA::bool_reduce(ReduceOp op, BT t)->BT { return k::reduce_all(op, std::move(t)); }
CUDA::bool_reduce_dim(ReduceOp op, BT t, std::size_t dim)->BT { return k::reduce_dim(op, std::move(t), dim); }
CUDA::bool_reshape(BT t, const Shape& s)->BT { return k::reshape(std::move(t), s); }
CUDA::bool_permute(BT t, std::span<const std::size_t> axes)->BT { return k::permute(std::move(t), axes); }
CUDA::bool_expand(BT t, const Shape& s)->BT { return k::expand(std::move(t), s); }
CUDA::bool_slice(BT t, std::span<const Slice> r)->BT { return k::slice(std::move(t), r); }
CUDA::bool_slice_assign(BT t, std::span<const Slice> r, BT v)->BT {
    return k::slice_assign(std::move(t), r, std::move(v));
}
CUDA::bool_flip(BT t, std::span<const std::size_t> axes)->BT { return k::flip(std::move(t), axes); }
CUDA::bool_cat(std::vector<BT> ts, std::size_t dim)->BT { return k::cat(ts, dim); }
CUDA::bool_repeat_dim(BT t, std::size_t dim, std::size_t times)->BT {
    return k::repeat_dim(std::move(t), dim, times);
}
CUDA::bool_gather(std::size_t dim, BT t, IT i)->BT { return k::gather(dim, std::move(t), std::move(i)); }
CUDA::bool_select(BT t, std::size_t dim, IT i)->BT { return k::select(std::move(t), dim, std::move(i)); }
CUDA::bool_into_int(BT t)->IT { return k::cast_to(std::move(t), kIntDType); }
CUDA::bool_into_float(BT t)->FT { return k::cast_to(std::move(t), DType::F32); }
CUDA::bool_argwhere(BT t)->IT { return k::argwhere(std::move(t)); }

// ---- module ops ----
CUDA::conv1d(FT x, FT w, std::optional<FT> b, const ConvOptions<1>& o)->FT {
    return k::conv(std::move(x), std::move(w), std::move(b), conv_params<1>(o));
}
CUDA::conv2d(FT x, FT w, std::optional<FT> b, const ConvOptions<2>& o)->FT {
    return k::conv(std::move(x), std::move(w), std::move(b), conv_params<2>(o));
}
CUDA::conv3d(FT x, FT w, std::optional<FT> b, const ConvOptions<3>& o)->FT {
    return k::conv(std::move(x), std::move(w), std::move(b), conv_params<3>(o));
}
CUDA::conv_transpose1d(FT x, FT w, std::optional<FT> b, const ConvTransposeOptions<1>& o)->FT {
    return k::conv_transpose(std::move(x), std::move(w), std::move(b), conv_params<1>(o));
}
CUDA::conv_transpose2d(FT x, FT w, std::optional<FT> b, const ConvTransposeOptions<2>& o)->FT {
    return k::conv_transpose(std::move(x), std::move(w), std::move(b), conv_params<2>(o));
}
CUDA::conv_transpose3d(FT x, FT w, std::optional<FT> b, const ConvTransposeOptions<3>& o)->FT {
    return k::conv_transpose(std::move(x), std::move(w), std::move(b), conv_params<3>(o));
}
CUDA::deform_conv2d(FT x, FT off, FT w, std::optional<FT> m, std::optional<FT> b,
                   const DeformConvOptions& o)->FT {
    return k::deform_conv2d(std::move(x), std::move(off), std::move(w), std::move(m), std::move(b), o);
}
CUDA::avg_pool1d(FT x, const PoolOptions<1>& o)->FT { return k::avg_pool(std::move(x), pool_params(o)); }
CUDA::avg_pool2d(FT x, const PoolOptions<2>& o)->FT { return k::avg_pool(std::move(x), pool_params(o)); }
CUDA::max_pool1d(FT x, const PoolOptions<1>& o)->FT {
    return k::max_pool_with_indices(std::move(x), pool_params(o), false).first;
}
CUDA::max_pool2d(FT x, const PoolOptions<2>& o)->FT {
    return k::max_pool_with_indices(std::move(x), pool_params(o), false).first;
}
CUDA::max_pool1d_with_indices(FT x, const PoolOptions<1>& o)->std::pair<FT, IT> {
    return k::max_pool_with_indices(std::move(x), pool_params(o), true);
}
CUDA::max_pool2d_with_indices(FT x, const PoolOptions<2>& o)->std::pair<FT, IT> {
    return k::max_pool_with_indices(std::move(x), pool_params(o), true);
}
CUDA::adaptive_avg_pool1d(FT x, std::size_t n)->FT {
    const std::size_t s[1] = {n};
    return k::adaptive_avg_pool(std::move(x), s);
}
CUDA::adaptive_avg_pool2d(FT x, std::array<std::size_t, 2> s)->FT {
    return k::adaptive_avg_pool(std::move(x), s);
}
CUDA::interpolate(FT x, std::array<std::size_t, 2> s, const InterpolateOptions& o)->FT {
    return k::interpolate(std::move(x), s, o);
}

// ---- transfers between devices ----
CUDA::float_to_device(FT t, const Device& d)->FT { return k::to_device(std::move(t), dev(d)); }
CUDA::int_to_device(IT t, const Device& d)->IT { return k::to_device(std::move(t), dev(d)); }
CUDA::bool_to_device(BT t, const Device& d)->BT { return k::to_device(std::move(t), dev(d)); }

// ---- module backward ----
CUDA::conv1d_weight_backward(FT x, FT grad, const Shape& ws, const ConvOptions<1>& o)->FT {
    return k::conv_weight_backward(std::move(x), std::move(grad), ws, conv_params<1>(o));
}
CUDA::conv2d_weight_backward(FT x, FT grad, const Shape& ws, const ConvOptions<2>& o)->FT {
    return k::conv_weight_backward(std::move(x), std::move(grad), ws, conv_params<2>(o));
}
CUDA::conv3d_weight_backward(FT x, FT grad, const Shape& ws, const ConvOptions<3>& o)->FT {
    return k::conv_weight_backward(std::move(x), std::move(grad), ws, conv_params<3>(o));
}
CUDA::avg_pool1d_backward(FT x, FT grad, const PoolOptions<1>& o)->FT {
    return k::avg_pool_backward(std::move(x), std::move(grad), pool_params(o));
}
CUDA::avg_pool2d_backward(FT x, FT grad, const PoolOptions<2>& o)->FT {
    return k::avg_pool_backward(std::move(x), std::move(grad), pool_params(o));
}
CUDA::adaptive_avg_pool1d_backward(FT x, FT grad)->FT {
    return k::adaptive_avg_pool_backward(std::move(x), std::move(grad), 1);
}
CUDA::adaptive_avg_pool2d_backward(FT x, FT grad)->FT {
    return k::adaptive_avg_pool_backward(std::move(x), std::move(grad), 2);
}
CUDA::interpolate_backward(FT x, FT grad, std::array<std::size_t, 2> s, const InterpolateOptions& o)
    ->FT {
    return k::interpolate_backward(std::move(x), std::move(grad), s, o);
}
CUDA::deform_conv2d_backward(FT x, FT off, FT w, std::optional<FT> m, std::optional<FT> b, FT grad,
                             const DeformConvOptions& o)
    ->DeformConv2dGrads<FT> {
    k::DeformGrads g = k::deform_conv2d_backward(std::move(x), std::move(off), std::move(w),
                                                 std::move(m), std::move(b), std::move(grad), o);
    return {std::move(g.x), std::move(g.offset), std::move(g.weight), std::move(g.mask),
            std::move(g.bias)};
}

#undef CUDA

}  // namespace ember
