// CpuBackend's op functions: each a call of its dtype-generic kernel (kernels.hpp). They are all
// defined in this file because CpuBackend is a class template (f32, f64) whose explicit
// instantiation below instantiates only the members defined in the same file.
#include "ember/backend/cpu.hpp"

#include <cstdlib>

#include "kernels.hpp"
#include "parallel.hpp"
#include "params.hpp"
#include "unary_backward.hpp"

namespace ember {
namespace k = detail::cpu;

namespace {
using k::conv_params;
using k::pool_params;
constexpr DType kIntDType = DType::I64;
}  // namespace

template <typename F>
auto CpuBackend<F>::name() -> std::string {
    return std::is_same_v<F, float> ? "cpu" : "cpu<f64>";
}
template <typename F>
auto CpuBackend<F>::seed(std::uint64_t s) -> void {
    k::seed(s);
}

// ---- float ----
template <typename F>
auto CpuBackend<F>::float_from_data(const TensorData& data, const Device&) -> FT {
    // As Burn: data enters as the backend's float type; `cast` makes other float dtypes.
    return k::from_data(data, dtype_of<F>());
}
template <typename F>
auto CpuBackend<F>::float_into_data(FT t) -> TensorData {
    return k::to_data(t);
}
template <typename F>
auto CpuBackend<F>::float_empty(const Shape& s, const Device&) -> FT {
    return k::empty(s, dtype_of<F>());
}
template <typename F>
auto CpuBackend<F>::float_full(const Shape& s, Scalar v, const Device&) -> FT {
    return k::full(s, v, dtype_of<F>());
}
template <typename F>
auto CpuBackend<F>::float_random(const Shape& s, const Distribution& d, const Device&) -> FT {
    return k::random(s, d, dtype_of<F>());
}
template <typename F>
auto CpuBackend<F>::float_unary(UnaryOp op, FT t) -> FT {
    return k::unary(op, std::move(t));
}
template <typename F>
auto CpuBackend<F>::float_binary(BinaryOp op, FT a, FT b) -> FT {
    return k::binary(op, std::move(a), std::move(b));
}
template <typename F>
auto CpuBackend<F>::float_binary_scalar(BinaryOp op, FT a, Scalar s) -> FT {
    return k::binary_scalar(op, std::move(a), s);
}
template <typename F>
auto CpuBackend<F>::float_compare(CompareOp op, FT a, FT b) -> BT {
    return k::compare(op, std::move(a), std::move(b));
}
template <typename F>
auto CpuBackend<F>::float_compare_scalar(CompareOp op, FT a, Scalar s) -> BT {
    return k::compare_scalar(op, std::move(a), s);
}
template <typename F>
auto CpuBackend<F>::float_mask_where(FT t, BT mask, FT value) -> FT {
    return k::where(std::move(mask), std::move(value), std::move(t));
}
template <typename F>
auto CpuBackend<F>::float_mask_fill(FT t, BT mask, Scalar v) -> FT {
    return k::mask_fill(std::move(t), std::move(mask), v);
}
template <typename F>
auto CpuBackend<F>::float_clamp(FT t, Scalar lo, Scalar hi) -> FT {
    return k::clamp(std::move(t), lo, hi);
}
template <typename F>
auto CpuBackend<F>::float_adam_step(FT param, FT grad, FT m, FT v, const AdamStepScalars& s)
    -> std::array<FT, 3> {
    return k::adam_step(std::move(param), std::move(grad), std::move(m), std::move(v), s);
}
template <typename F>
auto CpuBackend<F>::float_reduce(ReduceOp op, FT t) -> FT {
    return k::reduce_all(op, std::move(t));
}
template <typename F>
auto CpuBackend<F>::float_reduce_dim(ReduceOp op, FT t, std::size_t dim) -> FT {
    return k::reduce_dim(op, std::move(t), dim);
}
template <typename F>
auto CpuBackend<F>::float_arg_reduce(ArgReduceOp op, FT t, std::size_t dim) -> IT {
    return k::arg_reduce(op, std::move(t), dim);
}
template <typename F>
auto CpuBackend<F>::float_reshape(FT t, const Shape& s) -> FT {
    return k::reshape(std::move(t), s);
}
template <typename F>
auto CpuBackend<F>::float_permute(FT t, std::span<const std::size_t> axes) -> FT {
    return k::permute(std::move(t), axes);
}
template <typename F>
auto CpuBackend<F>::float_expand(FT t, const Shape& s) -> FT {
    return k::expand(std::move(t), s);
}
template <typename F>
auto CpuBackend<F>::float_slice(FT t, std::span<const Slice> r) -> FT {
    return k::slice(std::move(t), r);
}
template <typename F>
auto CpuBackend<F>::float_slice_assign(FT t, std::span<const Slice> r, FT v) -> FT {
    return k::slice_assign(std::move(t), r, std::move(v));
}
template <typename F>
auto CpuBackend<F>::float_flip(FT t, std::span<const std::size_t> axes) -> FT {
    return k::flip(std::move(t), axes);
}
template <typename F>
auto CpuBackend<F>::float_cat(std::vector<FT> ts, std::size_t dim) -> FT {
    return k::cat(ts, dim);
}
template <typename F>
auto CpuBackend<F>::float_repeat_dim(FT t, std::size_t dim, std::size_t times) -> FT {
    return k::repeat_dim(std::move(t), dim, times);
}
template <typename F>
auto CpuBackend<F>::float_gather(std::size_t dim, FT t, IT i) -> FT {
    return k::gather(dim, std::move(t), std::move(i));
}
template <typename F>
auto CpuBackend<F>::float_scatter(std::size_t dim, FT t, IT i, FT v) -> FT {
    return k::scatter_add(dim, std::move(t), std::move(i), std::move(v));
}
template <typename F>
auto CpuBackend<F>::float_select(FT t, std::size_t dim, IT i) -> FT {
    return k::select(std::move(t), dim, std::move(i));
}
template <typename F>
auto CpuBackend<F>::float_select_assign(FT t, std::size_t dim, IT i, FT v) -> FT {
    return k::select_assign(std::move(t), dim, std::move(i), std::move(v));
}
template <typename F>
auto CpuBackend<F>::float_sort_with_indices(FT t, std::size_t dim, bool desc) -> std::pair<FT, IT> {
    return k::sort_with_indices(std::move(t), dim, desc);
}
template <typename F>
auto CpuBackend<F>::float_topk(FT t, std::size_t kk, std::size_t dim, bool largest)
    -> std::pair<FT, IT> {
    return k::topk(std::move(t), kk, dim, largest);
}
template <typename F>
auto CpuBackend<F>::float_matmul(FT a, FT b) -> FT {
    return k::matmul(std::move(a), std::move(b));
}
template <typename F>
auto CpuBackend<F>::fused_matmul_epilogue(const FT& a, const FT& b, std::optional<FT> bias,
                                          fusion::MatmulEpilogue e) -> std::optional<FT> {
    return k::matmul_epilogue(a, b, bias, e.relu);
}
namespace {
// The fused attention's bound on keys: a task's scores and their gradient, 2 · 64 rows of them.
constexpr std::size_t kAttentionMaxKeys = 8192;
// EMBER_CPU_ATTENTION=0 turns the fused attention off (module::attention then composes, and
// MultiHeadAttention projects q, k and v one by one): read at each call, so that a benchmark or
// a test compares both ways in one process.
bool attention_enabled() {
    const char* e = std::getenv("EMBER_CPU_ATTENTION");
    return !(e && e[0] == '0' && e[1] == '\0');
}
}  // namespace
template <typename F>
bool CpuBackend<F>::attention_supported(const FT& q, const FT& k, const FT& v) {
    if (!attention_enabled()) return false;
    for (const FT* t : {&q, &k, &v})
        if (t->dtype != DType::F32 || t->shape.rank() != 4 || t->num_elements() == 0) return false;
    return k.shape[2] <= kAttentionMaxKeys;
}
template <typename F>
auto CpuBackend<F>::attention_forward(const FT& q, const FT& k, const FT& v, bool causal,
                                      double scale) -> std::array<FT, 2> {
    return k::attention_forward(q, k, v, causal, scale);
}
template <typename F>
auto CpuBackend<F>::attention_backward(const FT& q, const FT& k, const FT& v, const FT& out,
                                       const FT& lse, const FT& dout, bool causal, double scale)
    -> std::array<FT, 3> {
    return k::attention_backward(q, k, v, out, lse, dout, causal, scale);
}
template <typename F>
bool CpuBackend<F>::attention_packed_supported(const FT& like, std::size_t heads,
                                               std::size_t head_dim) {
    return attention_enabled() && like.dtype == DType::F32 && heads > 0 && head_dim > 0 &&
           like.shape.rank() == 3 && like.num_elements() > 0 && like.shape[1] <= kAttentionMaxKeys;
}
template <typename F>
auto CpuBackend<F>::attention_forward_packed(const FT& qkv, std::size_t heads, bool causal,
                                             double scale) -> std::array<FT, 2> {
    return k::attention_forward_packed(qkv, heads, causal, scale);
}
template <typename F>
auto CpuBackend<F>::attention_backward_packed(const FT& qkv, const FT& out, const FT& lse,
                                              const FT& dout, std::size_t heads, bool causal,
                                              double scale) -> FT {
    return k::attention_backward_packed(qkv, out, lse, dout, heads, causal, scale);
}
template <typename F>
auto CpuBackend<F>::float_into_int(FT t) -> IT {
    return k::cast(std::move(t), kIntDType);
}
template <typename F>
auto CpuBackend<F>::float_cast(FT t, DType d) -> FT {
    EMBER_CHECK(is_float(d), DType, "cast: float tensors cast to float dtypes, got ", dtype_name(d));
    return k::cast(std::move(t), d);
}
template <typename F>
auto CpuBackend<F>::float_softmax(FT t, std::size_t dim) -> FT {
    return k::softmax(std::move(t), dim);
}
template <typename F>
auto CpuBackend<F>::float_log_softmax(FT t, std::size_t dim) -> FT {
    return k::log_softmax(std::move(t), dim);
}
template <typename F>
auto CpuBackend<F>::float_layer_norm(FT x, std::optional<FT> gamma, std::optional<FT> beta,
                                     double eps) -> std::array<FT, 3> {
    return k::layer_norm(std::move(x), std::move(gamma), std::move(beta), eps);
}
template <typename F>
auto CpuBackend<F>::float_layer_norm_backward(const FT& x, const FT& grad,
                                              const std::optional<FT>& gamma, const FT& mean,
                                              const FT& rstd, const std::optional<FT>& acc)
    -> std::optional<std::array<FT, 3>> {
    return k::layer_norm_backward(x, grad, gamma, mean, rstd, acc);
}
template <typename F>
auto CpuBackend<F>::float_add_layer_norm(FT x, FT residual, std::optional<FT> gamma,
                                         std::optional<FT> beta, double eps,
                                         std::optional<DType> out)
    -> std::optional<std::array<FT, 4>> {
    if (out && *out != DType::F32) return std::nullopt;
    return k::add_layer_norm(std::move(x), std::move(residual), std::move(gamma), std::move(beta),
                             eps);
}
template <typename F>
auto CpuBackend<F>::float_unary_backward(UnaryOp op, const FT& grad, const FT& v)
    -> std::optional<FT> {
    return k::unary_backward(op, grad, v);
}
template <typename F>
auto CpuBackend<F>::float_batch_norm(FT x, FT gamma, FT beta, FT running_mean, FT running_var,
                                     const BatchNormScalars& s)
    -> std::optional<std::array<FT, 5>> {
    return k::batch_norm(std::move(x), std::move(gamma), std::move(beta), std::move(running_mean),
                         std::move(running_var), s);
}
template <typename F>
auto CpuBackend<F>::float_batch_norm_backward(FT x, FT grad, FT gamma, FT mean, FT rstd)
    -> std::array<FT, 3> {
    return k::batch_norm_backward(std::move(x), std::move(grad), std::move(gamma), std::move(mean),
                                  std::move(rstd));
}
template <typename F>
auto CpuBackend<F>::float_batch_norm_relu(FT x, FT gamma, FT beta, FT running_mean, FT running_var,
                                          std::optional<FT> residual, const BatchNormScalars& s)
    -> std::optional<std::array<FT, 5>> {
    return k::batch_norm_relu(std::move(x), std::move(gamma), std::move(beta),
                              std::move(running_mean), std::move(running_var), std::move(residual),
                              s);
}
template <typename F>
auto CpuBackend<F>::float_batch_norm_relu_backward(FT x, FT y, FT grad, FT gamma, FT mean, FT rstd,
                                                   bool residual, std::optional<FT> /*beta*/)
    -> BatchNormReluGrads<FT> {
    return k::batch_norm_relu_backward(std::move(x), std::move(y), std::move(grad),
                                       std::move(gamma), std::move(mean), std::move(rstd),
                                       residual);
}
template <typename F>
auto CpuBackend<F>::float_batch_norm_eval(FT x, FT gamma, FT beta, FT mean, FT var, double eps)
    -> std::optional<FT> {
    return k::batch_norm_eval(std::move(x), std::move(gamma), std::move(beta), std::move(mean),
                              std::move(var), eps);
}

// ---- int ----
template <typename F>
auto CpuBackend<F>::int_from_data(const TensorData& data, const Device&) -> IT {
    return k::from_data(data, kIntDType);
}
template <typename F>
auto CpuBackend<F>::int_into_data(IT t) -> TensorData {
    return k::to_data(t);
}
template <typename F>
auto CpuBackend<F>::int_empty(const Shape& s, const Device&) -> IT {
    return k::empty(s, kIntDType);
}
template <typename F>
auto CpuBackend<F>::int_full(const Shape& s, Scalar v, const Device&) -> IT {
    return k::full(s, v, kIntDType);
}
template <typename F>
auto CpuBackend<F>::int_random(const Shape& s, const Distribution& d, const Device&) -> IT {
    return k::random(s, d, kIntDType);
}
template <typename F>
auto CpuBackend<F>::int_arange(std::int64_t a, std::int64_t b, std::int64_t step, const Device&)
    -> IT {
    return k::arange(a, b, step, kIntDType);
}
template <typename F>
auto CpuBackend<F>::int_unary(UnaryOp op, IT t) -> IT {
    return k::unary(op, std::move(t));
}
template <typename F>
auto CpuBackend<F>::int_binary(BinaryOp op, IT a, IT b) -> IT {
    return k::binary(op, std::move(a), std::move(b));
}
template <typename F>
auto CpuBackend<F>::int_binary_scalar(BinaryOp op, IT a, Scalar s) -> IT {
    return k::binary_scalar(op, std::move(a), s);
}
template <typename F>
auto CpuBackend<F>::int_compare(CompareOp op, IT a, IT b) -> BT {
    return k::compare(op, std::move(a), std::move(b));
}
template <typename F>
auto CpuBackend<F>::int_compare_scalar(CompareOp op, IT a, Scalar s) -> BT {
    return k::compare_scalar(op, std::move(a), s);
}
template <typename F>
auto CpuBackend<F>::int_mask_where(IT t, BT mask, IT value) -> IT {
    return k::where(std::move(mask), std::move(value), std::move(t));
}
template <typename F>
auto CpuBackend<F>::int_mask_fill(IT t, BT mask, Scalar v) -> IT {
    return k::mask_fill(std::move(t), std::move(mask), v);
}
template <typename F>
auto CpuBackend<F>::int_clamp(IT t, Scalar lo, Scalar hi) -> IT {
    return k::clamp(std::move(t), lo, hi);
}
template <typename F>
auto CpuBackend<F>::int_reduce(ReduceOp op, IT t) -> IT {
    return k::reduce_all(op, std::move(t));
}
template <typename F>
auto CpuBackend<F>::int_reduce_dim(ReduceOp op, IT t, std::size_t dim) -> IT {
    return k::reduce_dim(op, std::move(t), dim);
}
template <typename F>
auto CpuBackend<F>::int_arg_reduce(ArgReduceOp op, IT t, std::size_t dim) -> IT {
    return k::arg_reduce(op, std::move(t), dim);
}
template <typename F>
auto CpuBackend<F>::int_reshape(IT t, const Shape& s) -> IT {
    return k::reshape(std::move(t), s);
}
template <typename F>
auto CpuBackend<F>::int_permute(IT t, std::span<const std::size_t> axes) -> IT {
    return k::permute(std::move(t), axes);
}
template <typename F>
auto CpuBackend<F>::int_expand(IT t, const Shape& s) -> IT {
    return k::expand(std::move(t), s);
}
template <typename F>
auto CpuBackend<F>::int_slice(IT t, std::span<const Slice> r) -> IT {
    return k::slice(std::move(t), r);
}
template <typename F>
auto CpuBackend<F>::int_slice_assign(IT t, std::span<const Slice> r, IT v) -> IT {
    return k::slice_assign(std::move(t), r, std::move(v));
}
template <typename F>
auto CpuBackend<F>::int_flip(IT t, std::span<const std::size_t> axes) -> IT {
    return k::flip(std::move(t), axes);
}
template <typename F>
auto CpuBackend<F>::int_cat(std::vector<IT> ts, std::size_t dim) -> IT {
    return k::cat(ts, dim);
}
template <typename F>
auto CpuBackend<F>::int_repeat_dim(IT t, std::size_t dim, std::size_t times) -> IT {
    return k::repeat_dim(std::move(t), dim, times);
}
template <typename F>
auto CpuBackend<F>::int_gather(std::size_t dim, IT t, IT i) -> IT {
    return k::gather(dim, std::move(t), std::move(i));
}
template <typename F>
auto CpuBackend<F>::int_scatter(std::size_t dim, IT t, IT i, IT v) -> IT {
    return k::scatter_add(dim, std::move(t), std::move(i), std::move(v));
}
template <typename F>
auto CpuBackend<F>::int_select(IT t, std::size_t dim, IT i) -> IT {
    return k::select(std::move(t), dim, std::move(i));
}
template <typename F>
auto CpuBackend<F>::int_select_assign(IT t, std::size_t dim, IT i, IT v) -> IT {
    return k::select_assign(std::move(t), dim, std::move(i), std::move(v));
}
template <typename F>
auto CpuBackend<F>::int_sort_with_indices(IT t, std::size_t dim, bool desc) -> std::pair<IT, IT> {
    return k::sort_with_indices(std::move(t), dim, desc);
}
template <typename F>
auto CpuBackend<F>::int_topk(IT t, std::size_t kk, std::size_t dim, bool largest)
    -> std::pair<IT, IT> {
    return k::topk(std::move(t), kk, dim, largest);
}
template <typename F>
auto CpuBackend<F>::int_matmul(IT a, IT b) -> IT {
    return k::matmul(std::move(a), std::move(b));
}
template <typename F>
auto CpuBackend<F>::int_into_float(IT t) -> FT {
    return k::cast(std::move(t), dtype_of<F>());
}
template <typename F>
auto CpuBackend<F>::int_cast(IT t, DType d) -> IT {
    EMBER_CHECK(is_int(d), DType, "cast: int tensors cast to int dtypes, got ", dtype_name(d));
    return k::cast(std::move(t), d);
}

// ---- bool ----
template <typename F>
auto CpuBackend<F>::bool_from_data(const TensorData& data, const Device&) -> BT {
    return k::from_data(data, DType::Bool);
}
template <typename F>
auto CpuBackend<F>::bool_into_data(BT t) -> TensorData {
    return k::to_data(t);
}
template <typename F>
auto CpuBackend<F>::bool_empty(const Shape& s, const Device&) -> BT {
    return k::empty(s, DType::Bool);
}
template <typename F>
auto CpuBackend<F>::bool_full(const Shape& s, Scalar v, const Device&) -> BT {
    return k::full(s, v, DType::Bool);
}
template <typename F>
auto CpuBackend<F>::bool_not(BT t) -> BT {
    return k::unary(UnaryOp::Not, std::move(t));
}
template <typename F>
auto CpuBackend<F>::bool_binary(BinaryOp op, BT a, BT b) -> BT {
    return k::binary(op, std::move(a), std::move(b));
}
template <typename F>
auto CpuBackend<F>::bool_compare(CompareOp op, BT a, BT b) -> BT {
    return k::compare(op, std::move(a), std::move(b));
}
template <typename F>
auto CpuBackend<F>::bool_mask_where(BT t, BT mask, BT value) -> BT {
    return k::where(std::move(mask), std::move(value), std::move(t));
}
template <typename F>
auto CpuBackend<F>::bool_reduce(ReduceOp op, BT t) -> BT {
    return k::reduce_all(op, std::move(t));
}
template <typename F>
auto CpuBackend<F>::bool_reduce_dim(ReduceOp op, BT t, std::size_t dim) -> BT {
    return k::reduce_dim(op, std::move(t), dim);
}
template <typename F>
auto CpuBackend<F>::bool_reshape(BT t, const Shape& s) -> BT {
    return k::reshape(std::move(t), s);
}
template <typename F>
auto CpuBackend<F>::bool_permute(BT t, std::span<const std::size_t> axes) -> BT {
    return k::permute(std::move(t), axes);
}
template <typename F>
auto CpuBackend<F>::bool_expand(BT t, const Shape& s) -> BT {
    return k::expand(std::move(t), s);
}
template <typename F>
auto CpuBackend<F>::bool_slice(BT t, std::span<const Slice> r) -> BT {
    return k::slice(std::move(t), r);
}
template <typename F>
auto CpuBackend<F>::bool_slice_assign(BT t, std::span<const Slice> r, BT v) -> BT {
    return k::slice_assign(std::move(t), r, std::move(v));
}
template <typename F>
auto CpuBackend<F>::bool_flip(BT t, std::span<const std::size_t> axes) -> BT {
    return k::flip(std::move(t), axes);
}
template <typename F>
auto CpuBackend<F>::bool_cat(std::vector<BT> ts, std::size_t dim) -> BT {
    return k::cat(ts, dim);
}
template <typename F>
auto CpuBackend<F>::bool_repeat_dim(BT t, std::size_t dim, std::size_t times) -> BT {
    return k::repeat_dim(std::move(t), dim, times);
}
template <typename F>
auto CpuBackend<F>::bool_gather(std::size_t dim, BT t, IT i) -> BT {
    return k::gather(dim, std::move(t), std::move(i));
}
template <typename F>
auto CpuBackend<F>::bool_select(BT t, std::size_t dim, IT i) -> BT {
    return k::select(std::move(t), dim, std::move(i));
}
template <typename F>
auto CpuBackend<F>::bool_into_int(BT t) -> IT {
    return k::cast(std::move(t), kIntDType);
}
template <typename F>
auto CpuBackend<F>::bool_into_float(BT t) -> FT {
    return k::cast(std::move(t), dtype_of<F>());
}
template <typename F>
auto CpuBackend<F>::bool_argwhere(BT t) -> IT {
    return k::argwhere(std::move(t));
}

// ---- module ops ----
template <typename F>
auto CpuBackend<F>::conv1d(FT x, FT w, std::optional<FT> b, const ConvOptions<1>& o) -> FT {
    return k::conv(std::move(x), std::move(w), std::move(b), conv_params<1>(o));
}
template <typename F>
auto CpuBackend<F>::conv2d(FT x, FT w, std::optional<FT> b, const ConvOptions<2>& o) -> FT {
    return k::conv(std::move(x), std::move(w), std::move(b), conv_params<2>(o));
}
template <typename F>
auto CpuBackend<F>::conv3d(FT x, FT w, std::optional<FT> b, const ConvOptions<3>& o) -> FT {
    return k::conv(std::move(x), std::move(w), std::move(b), conv_params<3>(o));
}
template <typename F>
auto CpuBackend<F>::conv_transpose1d(FT x, FT w, std::optional<FT> b,
                                     const ConvTransposeOptions<1>& o) -> FT {
    return k::conv_transpose(std::move(x), std::move(w), std::move(b), conv_params<1>(o));
}
template <typename F>
auto CpuBackend<F>::conv_transpose2d(FT x, FT w, std::optional<FT> b,
                                     const ConvTransposeOptions<2>& o) -> FT {
    return k::conv_transpose(std::move(x), std::move(w), std::move(b), conv_params<2>(o));
}
template <typename F>
auto CpuBackend<F>::conv_transpose3d(FT x, FT w, std::optional<FT> b,
                                     const ConvTransposeOptions<3>& o) -> FT {
    return k::conv_transpose(std::move(x), std::move(w), std::move(b), conv_params<3>(o));
}
template <typename F>
auto CpuBackend<F>::deform_conv2d(FT x, FT off, FT w, std::optional<FT> m, std::optional<FT> b,
                                  const DeformConvOptions& o) -> FT {
    return k::deform_conv2d(std::move(x), std::move(off), std::move(w), std::move(m), std::move(b), o);
}
template <typename F>
auto CpuBackend<F>::avg_pool1d(FT x, const PoolOptions<1>& o) -> FT {
    return k::avg_pool(std::move(x), pool_params(o));
}
template <typename F>
auto CpuBackend<F>::avg_pool2d(FT x, const PoolOptions<2>& o) -> FT {
    return k::avg_pool(std::move(x), pool_params(o));
}
template <typename F>
auto CpuBackend<F>::max_pool1d(FT x, const PoolOptions<1>& o) -> FT {
    return k::max_pool_with_indices(std::move(x), pool_params(o)).first;
}
template <typename F>
auto CpuBackend<F>::max_pool2d(FT x, const PoolOptions<2>& o) -> FT {
    return k::max_pool_with_indices(std::move(x), pool_params(o)).first;
}
template <typename F>
auto CpuBackend<F>::max_pool1d_with_indices(FT x, const PoolOptions<1>& o) -> std::pair<FT, IT> {
    return k::max_pool_with_indices(std::move(x), pool_params(o));
}
template <typename F>
auto CpuBackend<F>::max_pool2d_with_indices(FT x, const PoolOptions<2>& o) -> std::pair<FT, IT> {
    return k::max_pool_with_indices(std::move(x), pool_params(o));
}
template <typename F>
auto CpuBackend<F>::adaptive_avg_pool1d(FT x, std::size_t n) -> FT {
    const std::size_t s[1] = {n};
    return k::adaptive_avg_pool(std::move(x), s);
}
template <typename F>
auto CpuBackend<F>::adaptive_avg_pool2d(FT x, std::array<std::size_t, 2> s) -> FT {
    return k::adaptive_avg_pool(std::move(x), s);
}
template <typename F>
auto CpuBackend<F>::interpolate(FT x, std::array<std::size_t, 2> s, const InterpolateOptions& o)
    -> FT {
    return k::interpolate(std::move(x), s, o);
}

// ---- module backward ----
template <typename F>
auto CpuBackend<F>::conv1d_weight_backward(FT x, FT grad, const Shape& ws, const ConvOptions<1>& o)
    -> FT {
    return k::conv_weight_backward(std::move(x), std::move(grad), ws, conv_params<1>(o));
}
template <typename F>
auto CpuBackend<F>::conv2d_weight_backward(FT x, FT grad, const Shape& ws, const ConvOptions<2>& o)
    -> FT {
    return k::conv_weight_backward(std::move(x), std::move(grad), ws, conv_params<2>(o));
}
template <typename F>
auto CpuBackend<F>::conv3d_weight_backward(FT x, FT grad, const Shape& ws, const ConvOptions<3>& o)
    -> FT {
    return k::conv_weight_backward(std::move(x), std::move(grad), ws, conv_params<3>(o));
}
template <typename F>
auto CpuBackend<F>::avg_pool1d_backward(FT x, FT grad, const PoolOptions<1>& o) -> FT {
    return k::avg_pool_backward(std::move(x), std::move(grad), pool_params(o));
}
template <typename F>
auto CpuBackend<F>::avg_pool2d_backward(FT x, FT grad, const PoolOptions<2>& o) -> FT {
    return k::avg_pool_backward(std::move(x), std::move(grad), pool_params(o));
}
template <typename F>
auto CpuBackend<F>::adaptive_avg_pool1d_backward(FT x, FT grad) -> FT {
    return k::adaptive_avg_pool_backward(std::move(x), std::move(grad), 1);
}
template <typename F>
auto CpuBackend<F>::adaptive_avg_pool2d_backward(FT x, FT grad) -> FT {
    return k::adaptive_avg_pool_backward(std::move(x), std::move(grad), 2);
}
template <typename F>
auto CpuBackend<F>::interpolate_backward(FT x, FT grad, std::array<std::size_t, 2> s,
                                         const InterpolateOptions& o) -> FT {
    return k::interpolate_backward(std::move(x), std::move(grad), s, o);
}
template <typename F>
auto CpuBackend<F>::deform_conv2d_backward(FT x, FT off, FT w, std::optional<FT> m,
                                           std::optional<FT> b, FT grad, const DeformConvOptions& o)
    -> DeformConv2dGrads<FT> {
    k::DeformConv2dGradients g = k::deform_conv2d_backward(
        std::move(x), std::move(off), std::move(w), std::move(m), std::move(b), std::move(grad), o);
    return {std::move(g.x), std::move(g.offset), std::move(g.weight), std::move(g.mask),
            std::move(g.bias)};
}

// ---- fusion ----
template <typename F>
auto CpuBackend<F>::fused_compile(const fusion::Program& p) -> FusedKernel {
    return k::fused_compile(p);
}
template <typename F>
auto CpuBackend<F>::fused_launch(const FusedKernel& kernel, const fusion::Program&,
                                 std::vector<FT> inputs, std::span<const Scalar> scalars,
                                 const Shape& shape) -> std::vector<FT> {
    return k::fused_launch(*kernel, std::move(inputs), scalars, shape);
}

template struct CpuBackend<float>;
template struct CpuBackend<double>;

namespace cpu {
std::size_t num_threads() { return detail::cpu::num_threads(); }
void set_num_threads(std::size_t n) { detail::cpu::set_num_threads(n); }
}  // namespace cpu

}  // namespace ember
