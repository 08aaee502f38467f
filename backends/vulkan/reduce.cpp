// Reductions (shaders/reduce.comp): one workgroup per output element over a strided row.
#include "kernels.hpp"

namespace ember::detail::vk {

namespace {
constexpr std::uint32_t kGroup = 64;  // must match WG in reduce.comp

const char* reduce_name(ReduceOp op) {
    constexpr const char* names[] = {"sum", "mean", "prod", "max", "min", "any", "all"};
    return names[static_cast<int>(op)];
}

/// Reduces `t` along `dim` with shader op code `code` into a contiguous tensor of `out_dtype`
/// whose shape is t's with dim set to 1.
VT run_reduce(std::int32_t code, const VT& t, std::size_t dim, DType out_dtype) {
    Shape out_shape = t.shape;
    out_shape[dim] = 1;
    VT out = empty(out_shape, out_dtype, t.device);
    const std::size_t n = out.num_elements();
    if (n == 0) return out;
    Params p;
    p.push(static_cast<i64>(n));
    p.push(static_cast<i64>(t.shape.rank()));
    for (std::size_t d = 0; d < kMaxRank; ++d) p.push(d < out_shape.rank() ? i64(out_shape[d]) : 1);
    for (std::size_t d = 0; d < kMaxRank; ++d)
        p.push(d < t.shape.rank() && d != dim ? t.strides[d] : 0);
    p.push(t.offset);
    p.push(static_cast<i64>(t.shape[dim]));
    p.push(t.strides[dim]);
    Context& cx = ctx(t);
    const std::int32_t spec[] = {code, class_of(t.dtype), class_of(out_dtype)};
    std::lock_guard lock(cx.mu);
    const Pipeline& pipe = cx.pipeline("reduce", spec, 2, kGroup);
    const Binding bs[] = {bind(out, true), bind(t, false)};
    cx.dispatch(pipe, bs, p.w, n);
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
    EMBER_CHECK((op != ReduceOp::Max && op != ReduceOp::Min) || t.num_elements() > 0, Argument,
                reduce_name(op), ": the tensor of shape ", t.shape, " is empty");
    check_reduce(op, t);
    const std::size_t n = t.num_elements();
    VT flat = reshape(std::move(t), Shape{1, n});
    return reshape(run_reduce(static_cast<std::int32_t>(op), flat, 1, reduce_dtype(op, flat.dtype)),
                   Shape{1});
}

VT reduce_dim(ReduceOp op, VT t, std::size_t dim) {
    EMBER_CHECK(dim < t.shape.rank(), Dim, reduce_name(op), ": dim ", dim,
                " is out of range for shape ", t.shape);
    EMBER_CHECK((op != ReduceOp::Max && op != ReduceOp::Min) || t.shape[dim] > 0, Argument,
                reduce_name(op), ": dim ", dim, " of shape ", t.shape, " is empty");
    check_reduce(op, t);
    return run_reduce(static_cast<std::int32_t>(op), t, dim, reduce_dtype(op, t.dtype));
}

VT arg_reduce(ArgReduceOp op, VT t, std::size_t dim) {
    const char* name = op == ArgReduceOp::ArgMax ? "argmax" : "argmin";
    EMBER_CHECK(dim < t.shape.rank(), Dim, name, ": dim ", dim, " is out of range for shape ",
                t.shape);
    EMBER_CHECK(t.shape[dim] > 0, Argument, name, ": dim ", dim, " of shape ", t.shape,
                " is empty");
    return run_reduce(op == ArgReduceOp::ArgMax ? 7 : 8, t, dim, DType::I64);
}

}  // namespace ember::detail::vk
