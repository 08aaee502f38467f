// Reductions (shaders/reduce.comp): one workgroup per output element over a strided row.
#include <algorithm>

#include "../common/norm_check.hpp"
#include "kernels.hpp"

namespace ember::detail::vk {

namespace {
constexpr std::uint32_t kGroup = 64;  // must match WG in reduce.comp

const char* reduce_name(ReduceOp op) {
    constexpr const char* names[] = {"sum", "mean", "prod", "max", "min", "any", "all"};
    return names[static_cast<int>(op)];
}

/// Reduces `t` along `dim` with shader op code `code` into a contiguous tensor of `out_dtype`
/// whose shape is t's with dim set to `parts` (each row split in that many chunks).
VT run_pass(std::int32_t code, const VT& t, std::size_t dim, DType out_dtype, std::size_t parts) {
    Shape out_shape = t.shape;
    out_shape[dim] = parts;
    VT out = empty(out_shape, out_dtype, t.device);
    const std::size_t n = out.num_elements();
    if (n == 0) return out;
    Params p;
    p.push(static_cast<i64>(n));
    p.push(static_cast<i64>(t.shape.rank()));
    for (std::size_t d = 0; d < kMaxRank; ++d)
        p.push(d < out_shape.rank() ? (d == dim ? 1 : i64(out_shape[d])) : 1);
    for (std::size_t d = 0; d < kMaxRank; ++d)
        p.push(d < t.shape.rank() && d != dim ? t.strides[d] : 0);
    p.push(t.offset);
    const std::size_t R = t.shape[dim];
    p.push(static_cast<i64>(R));
    p.push(t.strides[dim]);
    p.push(static_cast<i64>(parts));
    p.push(static_cast<i64>((R + parts - 1) / parts));
    Context& cx = ctx(t);
    const std::int32_t spec[] = {code, class_of(t.dtype), class_of(out_dtype)};
    const Pipeline& pipe = cx.pipeline("reduce", spec, 2, kGroup);
    const Binding bs[] = {bind(out, true), bind(t, false)};
    cx.dispatch(pipe, bs, p.w, n);
    return out;
}

/// One pass, or two when rows are long and few: the first splits each row over many
/// workgroups (partial results [rows, parts]), the second folds the parts.
VT run_reduce(std::int32_t code, const VT& t, std::size_t dim, DType out_dtype) {
    const std::size_t R = t.shape[dim];
    const std::size_t rows = R == 0 ? 0 : t.num_elements() / R;
    const bool arg = code >= 7;
    if (arg || R <= 8192 || rows >= 256) return run_pass(code, t, dim, out_dtype, 1);
    const std::size_t parts = std::min<std::size_t>((R + 4095) / 4096, 1024);
    const bool mean = code == static_cast<std::int32_t>(ReduceOp::Mean);
    const std::int32_t first = mean ? static_cast<std::int32_t>(ReduceOp::Sum) : code;
    VT partial = run_pass(first, t, dim, out_dtype, parts);
    VT out = run_pass(first, partial, dim, out_dtype, 1);
    if (mean) out = binary_scalar(BinaryOp::Div, std::move(out), Scalar(static_cast<double>(R)));
    return out;
}

DType reduce_dtype(ReduceOp op, DType in) {
    return op == ReduceOp::Any || op == ReduceOp::All ? DType::Bool : in;
}

void check_reduce(ReduceOp op, const VT& t) {
    EMBER_CHECK(op != ReduceOp::Mean || is_float(t.dtype), DType, reduce_name(op),
                ": needs a float tensor, got ", dtype_name(t.dtype));
}
}  // namespace

VT reduce_all(ReduceOp op, VT t) {
    check::reduce_all(reduce_name(op), op != ReduceOp::Max && op != ReduceOp::Min, t.shape);
    check_reduce(op, t);
    const std::size_t n = t.num_elements();
    VT flat = reshape(std::move(t), Shape{1, n});
    return reshape(run_reduce(static_cast<std::int32_t>(op), flat, 1, reduce_dtype(op, flat.dtype)),
                   Shape{1});
}

VT reduce_dim(ReduceOp op, VT t, std::size_t dim) {
    check::reduce_dim(reduce_name(op), op != ReduceOp::Max && op != ReduceOp::Min, dim, t.shape);
    check_reduce(op, t);
    return run_reduce(static_cast<std::int32_t>(op), t, dim, reduce_dtype(op, t.dtype));
}

VT arg_reduce(ArgReduceOp op, VT t, std::size_t dim) {
    const char* name = op == ArgReduceOp::ArgMax ? "argmax" : "argmin";
    check::nonempty_dim(name, dim, t.shape);
    return run_pass(op == ArgReduceOp::ArgMax ? 7 : 8, t, dim, DType::I64, 1);
}

/// Softmax (or log-softmax) along `dim` in one kernel: max, sum of exponentials and the
/// result per row.
VT softmax(VT t, std::size_t dim, bool log) {
    const char* name = log ? "log_softmax" : "softmax";
    EMBER_CHECK(is_float(t.dtype), DType, name, ": needs a float tensor, got ", dtype_name(t.dtype),
                " ", t.shape);
    check::dim(name, dim, t.shape);
    const DType dt = t.dtype;
    VT out = empty(t.shape, DType::F32, t.device);
    const std::size_t R = t.shape[dim];
    const std::size_t rows = R == 0 ? 0 : t.num_elements() / R;
    if (rows == 0) return cast(std::move(out), dt);
    Params p;
    p.push(static_cast<i64>(rows));
    p.push(static_cast<i64>(t.shape.rank()));
    for (std::size_t d = 0; d < kMaxRank; ++d)
        p.push(d < t.shape.rank() ? (d == dim ? 1 : i64(t.shape[d])) : 1);
    for (std::size_t d = 0; d < kMaxRank; ++d)
        p.push(d < t.shape.rank() && d != dim ? t.strides[d] : 0);
    p.push(t.offset);
    p.push(static_cast<i64>(R));
    p.push(t.strides[dim]);
    p.push(out.strides[dim]);
    for (std::size_t d = 0; d < kMaxRank; ++d)
        p.push(d < out.shape.rank() && d != dim ? out.strides[d] : 0);
    Context& cx = ctx(t);
    const std::int32_t spec[] = {log ? 1 : 0};
    {
        const Pipeline& pipe = cx.pipeline("softmax", spec, 2, 256);
        const Binding bs[] = {bind(out, true), bind(t, false)};
        cx.dispatch(pipe, bs, p.w, rows);
    }
    return cast(std::move(out), dt);
}

}  // namespace ember::detail::vk

namespace ember::detail::vk {

/// Layer norm over the last dim in one kernel (shaders/norm.comp): {y, mean, rstd}.
std::array<VT, 3> layer_norm(VT x, std::optional<VT> gamma, std::optional<VT> beta, double eps) {
    const std::size_t R = norm::check_layer_norm(x, gamma, beta);
    for (auto* t : {&gamma, &beta}) {
        if (!*t) continue;
        **t = contiguous(cast(std::move(**t), DType::F32));
    }
    const DType dt = x.dtype;
    x = contiguous(cast(std::move(x), DType::F32));
    Shape stat_shape = x.shape;
    stat_shape[stat_shape.rank() - 1] = 1;
    VT y = empty(x.shape, DType::F32, x.device);
    VT mean = empty(stat_shape, DType::F32, x.device), rstd = empty(stat_shape, DType::F32, x.device);
    const std::size_t rows = R == 0 ? 0 : x.num_elements() / R;
    if (rows > 0) {
        Params p;
        p.push(static_cast<i64>(rows));
        p.push(static_cast<i64>(R));
        p.push(x.offset);
        p.push(gamma ? gamma->offset : 0);
        p.push(beta ? beta->offset : 0);
        p.push_f(static_cast<float>(eps));
        Context& cx = ctx(x);
        // Absent operands bind x in their place (the shader does not read them).
        const std::int32_t spec[] = {(gamma ? 1 : 0) | (beta ? 2 : 0)};
        const Pipeline& pipe = cx.pipeline("norm", spec, 6, 256);
        const Binding bs[] = {bind(y, true),  bind(mean, true), bind(rstd, true), bind(x, false),
                              bind(gamma ? *gamma : x, false), bind(beta ? *beta : x, false)};
        cx.dispatch(pipe, bs, p.w, rows);
    }
    return {cast(std::move(y), dt), cast(std::move(mean), dt), cast(std::move(rstd), dt)};
}

}  // namespace ember::detail::vk

// ---- VulkanBackend's ops on the kernels above ----
namespace ember {
namespace k = detail::vk;

auto VulkanBackend::float_reduce(ReduceOp op, FT t) -> FT {
    return k::reduce_all(op, std::move(t));
}
auto VulkanBackend::int_reduce(ReduceOp op, IT t) -> IT {
    return k::reduce_all(op, std::move(t));
}
auto VulkanBackend::bool_reduce(ReduceOp op, BT t) -> BT {
    return k::reduce_all(op, std::move(t));
}
auto VulkanBackend::float_reduce_dim(ReduceOp op, FT t, std::size_t dim) -> FT {
    return k::reduce_dim(op, std::move(t), dim);
}
auto VulkanBackend::int_reduce_dim(ReduceOp op, IT t, std::size_t dim) -> IT {
    return k::reduce_dim(op, std::move(t), dim);
}
auto VulkanBackend::bool_reduce_dim(ReduceOp op, BT t, std::size_t dim) -> BT {
    return k::reduce_dim(op, std::move(t), dim);
}
auto VulkanBackend::float_arg_reduce(ArgReduceOp op, FT t, std::size_t dim) -> IT {
    return k::arg_reduce(op, std::move(t), dim);
}
auto VulkanBackend::int_arg_reduce(ArgReduceOp op, IT t, std::size_t dim) -> IT {
    return k::arg_reduce(op, std::move(t), dim);
}
auto VulkanBackend::float_softmax(FT t, std::size_t dim) -> FT {
    return k::softmax(std::move(t), dim, false);
}
auto VulkanBackend::float_log_softmax(FT t, std::size_t dim) -> FT {
    return k::softmax(std::move(t), dim, true);
}
auto VulkanBackend::float_layer_norm(FT x, std::optional<FT> gamma, std::optional<FT> beta,
                                     double eps) -> std::array<FT, 3> {
    return k::layer_norm(std::move(x), std::move(gamma), std::move(beta), eps);
}

}  // namespace ember
