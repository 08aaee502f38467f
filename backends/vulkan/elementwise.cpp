// Elementwise ops, creation and casts: one strided, broadcasting shader (shaders/elementwise.comp)
// specialised per op family, op code and operand classes.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "../common/promotion.hpp"
#include "graph.hpp"
#include "kernels.hpp"

namespace ember::detail::vk {

namespace {

enum Kind : std::int32_t {
    kUnary = 0,
    kBinary,
    kBinaryScalar,
    kCompare,
    kCompareScalar,
    kWhere,
    kMaskFill,
    kClamp,
    kCopy,
    kFill,
    kArange,
    kRandom
};
constexpr std::uint32_t kLocal = 256;

// Post-conversion of the output: rounding to a narrower float, wrapping to a narrower int.
std::int32_t conv_of(DType d) {
    switch (d) {
        case DType::F16:
            return 1;
        case DType::BF16:
            return 2;
        case DType::I32:
            return 3;
        case DType::I16:
            return 4;
        case DType::I8:
            return 5;
        case DType::U8:
            return 6;
        default:
            return 0;
    }
}

using ember::detail::promote;

const char* binary_name(BinaryOp op) {
    return check::binary_op_name(op);
}
const char* compare_name(CompareOp op) {
    return check::compare_op_name(op);
}

/// One launch of the elementwise shader.
struct Launch {
    Kind kind;
    std::int32_t op = 0;
    const VT* a = nullptr;
    const VT* b = nullptr;
    const VT* c = nullptr;
    float sf[2] = {0, 0};
    i64 si[2] = {0, 0};
    std::int32_t conv = 0;
};

void run(const Launch& l, const VT& out) {
    const std::size_t n = out.num_elements();
    if (n == 0) return;
    Context& cx = ctx(out);
    const Shape& shape = out.shape;
    bool flat = out.is_contiguous();
    for (const VT* t : {l.a, l.b, l.c})
        if (t) flat = flat && t->shape == shape && t->is_contiguous();
    Params p;
    p.push(static_cast<i64>(n));
    p.push(static_cast<i64>(shape.rank()));
    for (std::size_t d = 0; d < kMaxRank; ++d) p.push(d < shape.rank() ? i64(shape[d]) : 1);
    p.push_layout(out, shape);
    for (const VT* t : {l.a, l.b, l.c}) p.push_layout(t ? *t : out, shape);
    p.push_f(l.sf[0]);
    p.push_f(l.sf[1]);
    p.push_i64(l.si[0]);
    p.push_i64(l.si[1]);
    auto cls = [&](const VT* t) { return t ? class_of(t->dtype) : kF32; };
    const std::int32_t spec[] = {
        l.kind, l.op, cls(l.a), cls(l.b), cls(l.c), class_of(out.dtype), l.conv, flat ? 1 : 0};
    const Pipeline& pipe = cx.pipeline("elementwise", spec, 4, kLocal);
    const Binding o = bind(out, true);
    const Binding bs[] = {o, l.a ? bind(*l.a, false) : o, l.b ? bind(*l.b, false) : o,
                          l.c ? bind(*l.c, false) : o};
    cx.dispatch(pipe, bs, p.w, (n + kLocal - 1) / kLocal);
}

/// The destination of a result: `a`'s own buffer when it may be reused in place.
VT output_like(const VT& a, const Shape& shape, DType dtype) {
    if (a.is_unique() && a.shape == shape && device_size(a.dtype) == device_size(dtype)) {
        VT out = a;
        out.dtype = dtype;
        return out;
    }
    return empty(shape, dtype, a.device);
}

void check_same_device(const VT& a, const VT& b, const char* op) {
    EMBER_CHECK(a.device == b.device, Device, op, ": operands on different Vulkan devices (",
                a.device, " and ", b.device, ")");
}

void check_int_args(BinaryOp op, const VT& divisor) {
    if (class_of(divisor.dtype) != kI64) return;
    const bool div =
        op == BinaryOp::Div || op == BinaryOp::Rem || op == BinaryOp::RDiv || op == BinaryOp::RRem;
    const bool pow = op == BinaryOp::Pow || op == BinaryOp::RPow;
    if (!div && !pow) return;
    // Data-dependent errors need the data: a device-side test and a one-word readback.
    if (div)
        EMBER_CHECK(!any_true(compare_scalar(CompareOp::Eq, divisor, Scalar(0))), Argument,
                    binary_name(op), ": integer division by zero");
    if (pow)
        EMBER_CHECK(!any_true(compare_scalar(CompareOp::Lt, divisor, Scalar(0))), Argument,
                    "pow: integers to negative integer powers are not allowed");
}

std::atomic<std::uint64_t> g_seed{0x853c49e6748fea9bULL};
std::atomic<std::uint64_t> g_draw{0};

std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

}  // namespace

Binding bind(const VT& t, bool write) {
    if (write) {  // the values' known range no longer holds
        t.buffer->lo = 1;
        t.buffer->hi = 0;
    }
    return {t.buffer->buffer, t.buffer->offset, t.buffer->size, write};
}

std::uint64_t draw_key(std::uint64_t counter) {
    return splitmix64(g_seed.load() ^ splitmix64(counter));
}
std::uint64_t take_draws(std::uint64_t n) {
    return g_draw.fetch_add(n);
}
std::uint64_t draw_counter() {
    return g_draw.load();
}
void set_draw_counter(std::uint64_t c) {
    g_draw = c;
}

void Params::push(i64 v) {
    w.push_back(static_cast<std::int32_t>(v));
}
void Params::push_f(float v) {
    std::int32_t x;
    std::memcpy(&x, &v, 4);
    w.push_back(x);
}
void Params::push_i64(i64 v) {
    const auto u = static_cast<std::uint64_t>(v);
    w.push_back(static_cast<std::int32_t>(static_cast<std::uint32_t>(u)));
    w.push_back(static_cast<std::int32_t>(static_cast<std::uint32_t>(u >> 32)));
}
void Params::push_layout(const VT& t, const Shape& shape) {
    const std::size_t r = shape.rank(), tr = t.shape.rank();
    for (std::size_t d = 0; d < kMaxRank; ++d) {
        i64 s = 0;
        if (d < r && d + tr >= r) {
            const std::size_t td = d + tr - r;
            s = t.shape[td] == 1 ? 0 : t.strides[td];
        }
        push(s);
    }
    push(t.offset);
}

VT empty(const Shape& shape, DType dtype, std::uint32_t device) {
    Context& cx = Context::get(device);
    VT t;
    t.buffer = cx.pool().allocate(
        std::max<std::size_t>(shape.num_elements(), 1) * device_size(dtype), "empty");
    t.shape = shape;
    t.strides = contiguous_strides(shape);
    t.dtype = dtype;
    t.device = device;
    return t;
}

VT full(const Shape& shape, Scalar value, DType dtype, std::uint32_t device) {
    VT out = empty(shape, dtype, device);
    Launch l{kFill};
    l.sf[0] = static_cast<float>(value.f);
    l.si[0] = dtype == DType::Bool ? (value.f != 0.0 || value.i != 0) : value.i;
    l.conv = conv_of(dtype);
    run(l, out);
    return out;
}

VT arange(i64 start, i64 end, i64 step, std::uint32_t device) {
    // Checked in one place for every backend: INT64_MIN..INT64_MAX or a zero step is an error.
    const auto n = ember::detail::arange_length(start, end, step, "arange");
    VT out = empty(Shape{n}, DType::I64, device);
    Launch l{kArange};
    l.si[0] = start;
    l.si[1] = step;
    run(l, out);
    return out;
}

void seed(std::uint64_t s) {
    g_seed = s;
    g_draw = 0;
}

VT random(const Shape& shape, const Distribution& dist, DType dtype, std::uint32_t device) {
    check::random(dist);
    VT out = empty(shape, dtype, device);
    Launch l{kRandom};
    l.op = static_cast<std::int32_t>(dist.kind);
    l.sf[0] = static_cast<float>(dist.kind == Distribution::Kind::Default ? 0.0 : dist.a);
    l.sf[1] = static_cast<float>(dist.kind == Distribution::Kind::Default ? 1.0 : dist.b);
    // Each draw gets its own key: the seed mixed with a draw counter (a counter-based stream).
    const std::uint64_t counter = g_draw.fetch_add(1);
    l.si[0] = static_cast<i64>(draw_key(counter));
    l.conv = conv_of(dtype);
    Context& cx = Context::get(device);
    run(l, out);
    // In a captured step a replay rewrites the key (run's parameter words: n, rank, the shape,
    // four layouts, two floats, then the key).
    if (capturing(device) && out.num_elements() > 0)
        note_draw(cx, counter, 2 + kMaxRank + 4 * (kMaxRank + 1) + 2);
    if (class_of(dtype) == kI64 && dist.kind == Distribution::Kind::Uniform) {
        // The shader keeps integer draws in this range (index checks need no readback).
        out.buffer->lo = static_cast<i64>(std::floor(dist.a));
        out.buffer->hi = std::max(out.buffer->lo - 1, static_cast<i64>(std::ceil(dist.b)) - 1);
    }
    return out;
}

VT unary(UnaryOp op, VT t) {
    const bool is_nan = op == UnaryOp::IsNan;
    check::unary_dtype(op, t.dtype);
    if (class_of(t.dtype) == kI64) {
        if (is_nan) return full(t.shape, Scalar(false), DType::Bool, t.device);
        EMBER_CHECK(op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Sign ||
                        op == UnaryOp::Relu || op == UnaryOp::Not,
                    DType, "unary op ", static_cast<int>(op),
                    " is not defined for integer tensors");
    }
    const DType rd = is_nan ? DType::Bool : t.dtype;
    VT out = output_like(t, t.shape, rd);
    Launch l{kUnary, static_cast<std::int32_t>(op), &t};
    l.conv = conv_of(rd);
    run(l, out);
    return out;
}

VT binary(BinaryOp op, VT a, VT b) {
    check_same_device(a, b, binary_name(op));
    const Shape shape = broadcast_shapes(a.shape, b.shape, check::binary_op_name(op, a.dtype));
    EMBER_CHECK(class_of(a.dtype) == class_of(b.dtype), DType, binary_name(op),
                ": operands of different kinds (", dtype_name(a.dtype), " and ",
                dtype_name(b.dtype), ")");
    check::binary_dtype(op, a.dtype);
    const bool rev = op == BinaryOp::RSub || op == BinaryOp::RDiv || op == BinaryOp::RRem ||
                     op == BinaryOp::RPow;
    check_int_args(op, rev ? a : b);
    const DType rd = promote(a.dtype, b.dtype);
    VT out = output_like(a, shape, rd);
    if (out.buffer != a.buffer) {
        VT alt = output_like(b, shape, rd);
        if (alt.buffer == b.buffer) out = std::move(alt);
    }
    Launch l{kBinary, static_cast<std::int32_t>(op), &a, &b};
    l.conv = conv_of(rd);
    run(l, out);
    return out;
}

VT binary_scalar(BinaryOp op, VT a, Scalar s) {
    const Class c = class_of(a.dtype);
    EMBER_CHECK(c != kBool, DType, binary_name(op), ": not defined for bool tensors and scalars");
    check::binary_dtype(op, a.dtype);
    if (c == kI64) {
        const bool div = op == BinaryOp::Div || op == BinaryOp::Rem;
        EMBER_CHECK(!(div && s.i == 0), Argument, binary_name(op), ": integer division by zero");
        EMBER_CHECK(!(op == BinaryOp::Pow && s.i < 0), Argument,
                    "pow: integers to negative integer powers are not allowed");
        if (op == BinaryOp::RDiv || op == BinaryOp::RRem) check_int_args(op, a);
    }
    VT out = output_like(a, a.shape, a.dtype);
    Launch l{kBinaryScalar, static_cast<std::int32_t>(op), &a};
    l.sf[0] = static_cast<float>(s.f);
    l.si[0] = s.i;
    l.conv = conv_of(a.dtype);
    run(l, out);
    return out;
}

VT compare(CompareOp op, VT a, VT b) {
    check_same_device(a, b, compare_name(op));
    const Shape shape = broadcast_shapes(a.shape, b.shape, compare_name(op));
    EMBER_CHECK(class_of(a.dtype) == class_of(b.dtype), DType, compare_name(op),
                ": operands of different kinds (", dtype_name(a.dtype), " and ",
                dtype_name(b.dtype), ")");
    VT out = empty(shape, DType::Bool, a.device);
    Launch l{kCompare, static_cast<std::int32_t>(op), &a, &b};
    run(l, out);
    return out;
}

VT compare_scalar(CompareOp op, VT a, Scalar s) {
    VT out = output_like(a, a.shape, DType::Bool);
    Launch l{kCompareScalar, static_cast<std::int32_t>(op), &a};
    l.sf[0] = static_cast<float>(s.f);
    l.si[0] = class_of(a.dtype) == kBool ? (s.i != 0 || s.f != 0.0) : s.i;
    run(l, out);
    return out;
}

VT where(VT mask, VT value, VT t) {
    check_same_device(t, mask, "mask_where");
    check_same_device(t, value, "mask_where");
    const Shape shape = check::mask_where(t, mask, value);
    const DType rd = promote(t.dtype, value.dtype);
    VT out = output_like(t, shape, rd);
    Launch l{kWhere, 0, &mask, &value, &t};
    l.conv = conv_of(rd);
    run(l, out);
    return out;
}

VT mask_fill(VT t, VT mask, Scalar value) {
    check_same_device(t, mask, "mask_fill");
    check::mask_fill(t, mask);
    const Shape& shape = t.shape;
    VT out = output_like(t, shape, t.dtype);
    Launch l{kMaskFill, 0, &t, &mask};
    l.sf[0] = static_cast<float>(value.f);
    l.si[0] = class_of(t.dtype) == kBool ? (value.i != 0 || value.f != 0.0) : value.i;
    l.conv = conv_of(t.dtype);
    run(l, out);
    return out;
}

VT clamp(VT t, Scalar lo, Scalar hi) {
    EMBER_CHECK(class_of(t.dtype) != kBool, DType, "clamp: not defined for bool tensors");
    EMBER_CHECK(is_float(t.dtype) ? lo.f <= hi.f : lo.i <= hi.i, Argument, "clamp: min ",
                is_float(t.dtype) ? lo.f : double(lo.i), " is greater than max ",
                is_float(t.dtype) ? hi.f : double(hi.i), " (tensor ", t.shape, ")");
    VT out = output_like(t, t.shape, t.dtype);
    Launch l{kClamp, 0, &t};
    l.sf[0] = static_cast<float>(lo.f);
    l.sf[1] = static_cast<float>(hi.f);
    l.si[0] = lo.i;
    l.si[1] = hi.i;
    l.conv = conv_of(t.dtype);
    run(l, out);
    return out;
}

VT cast(VT t, DType dtype) {
    if (t.dtype == dtype) return t;
    // Same storage and no rounding (f16 → f32, i32 → i64): only the tag changes.
    const bool widening = class_of(t.dtype) == class_of(dtype) && conv_of(dtype) == 0;
    if (widening) {
        t.dtype = dtype;
        return t;
    }
    VT out = output_like(t, t.shape, dtype);
    Launch l{kCopy, 0, &t};
    l.conv = conv_of(dtype);
    run(l, out);
    return out;
}

void copy_into(const VT& src, const VT& dst) {
    Launch l{kCopy, 0, &src};
    l.conv = src.dtype == dst.dtype ? 0 : conv_of(dst.dtype);
    run(l, dst);
}

VT contiguous(VT t) {
    if (t.is_contiguous()) return t;
    VT out = empty(t.shape, t.dtype, t.device);
    copy_into(t, out);
    return out;
}

}  // namespace ember::detail::vk

// ---- VulkanBackend's ops on the kernels above ----
namespace ember {
namespace k = detail::vk;

auto VulkanBackend::seed(std::uint64_t s) -> void {
    k::seed(s);
}
auto VulkanBackend::float_empty(const Shape& s, const Device& d) -> FT {
    return k::empty(s, DType::F32, d.resolved());
}
auto VulkanBackend::int_empty(const Shape& s, const Device& d) -> IT {
    return k::empty(s, DType::I64, d.resolved());
}
auto VulkanBackend::bool_empty(const Shape& s, const Device& d) -> BT {
    return k::empty(s, DType::Bool, d.resolved());
}
auto VulkanBackend::float_full(const Shape& s, Scalar v, const Device& d) -> FT {
    return k::full(s, v, DType::F32, d.resolved());
}
auto VulkanBackend::int_full(const Shape& s, Scalar v, const Device& d) -> IT {
    return k::full(s, v, DType::I64, d.resolved());
}
auto VulkanBackend::bool_full(const Shape& s, Scalar v, const Device& d) -> BT {
    return k::full(s, v, DType::Bool, d.resolved());
}
auto VulkanBackend::float_random(const Shape& s, const Distribution& dist, const Device& d) -> FT {
    return k::random(s, dist, DType::F32, d.resolved());
}
auto VulkanBackend::int_random(const Shape& s, const Distribution& dist, const Device& d) -> IT {
    return k::random(s, dist, DType::I64, d.resolved());
}
auto VulkanBackend::float_unary(UnaryOp op, FT t) -> FT {
    return k::unary(op, std::move(t));
}
auto VulkanBackend::int_unary(UnaryOp op, IT t) -> IT {
    return k::unary(op, std::move(t));
}
auto VulkanBackend::bool_not(BT t) -> BT {
    return k::unary(UnaryOp::Not, std::move(t));
}
auto VulkanBackend::float_binary(BinaryOp op, FT a, FT b) -> FT {
    return k::binary(op, std::move(a), std::move(b));
}
auto VulkanBackend::int_binary(BinaryOp op, IT a, IT b) -> IT {
    return k::binary(op, std::move(a), std::move(b));
}
auto VulkanBackend::bool_binary(BinaryOp op, BT a, BT b) -> BT {
    return k::binary(op, std::move(a), std::move(b));
}
auto VulkanBackend::float_binary_scalar(BinaryOp op, FT a, Scalar s) -> FT {
    return k::binary_scalar(op, std::move(a), s);
}
auto VulkanBackend::int_binary_scalar(BinaryOp op, IT a, Scalar s) -> IT {
    return k::binary_scalar(op, std::move(a), s);
}
auto VulkanBackend::float_compare(CompareOp op, FT a, FT b) -> BT {
    return k::compare(op, std::move(a), std::move(b));
}
auto VulkanBackend::int_compare(CompareOp op, IT a, IT b) -> BT {
    return k::compare(op, std::move(a), std::move(b));
}
auto VulkanBackend::bool_compare(CompareOp op, BT a, BT b) -> BT {
    return k::compare(op, std::move(a), std::move(b));
}
auto VulkanBackend::float_compare_scalar(CompareOp op, FT a, Scalar s) -> BT {
    return k::compare_scalar(op, std::move(a), s);
}
auto VulkanBackend::int_compare_scalar(CompareOp op, IT a, Scalar s) -> BT {
    return k::compare_scalar(op, std::move(a), s);
}
auto VulkanBackend::float_mask_where(FT t, BT mask, FT value) -> FT {
    return k::where(std::move(mask), std::move(value), std::move(t));
}
auto VulkanBackend::int_mask_where(IT t, BT mask, IT value) -> IT {
    return k::where(std::move(mask), std::move(value), std::move(t));
}
auto VulkanBackend::bool_mask_where(BT t, BT mask, BT value) -> BT {
    return k::where(std::move(mask), std::move(value), std::move(t));
}
auto VulkanBackend::float_mask_fill(FT t, BT mask, Scalar v) -> FT {
    return k::mask_fill(std::move(t), std::move(mask), v);
}
auto VulkanBackend::int_mask_fill(IT t, BT mask, Scalar v) -> IT {
    return k::mask_fill(std::move(t), std::move(mask), v);
}
auto VulkanBackend::float_clamp(FT t, Scalar lo, Scalar hi) -> FT {
    return k::clamp(std::move(t), lo, hi);
}
auto VulkanBackend::int_clamp(IT t, Scalar lo, Scalar hi) -> IT {
    return k::clamp(std::move(t), lo, hi);
}
auto VulkanBackend::float_into_int(FT t) -> IT {
    return k::cast(std::move(t), DType::I64);
}
auto VulkanBackend::float_cast(FT t, DType d) -> FT {
    EMBER_CHECK(is_float(d), DType, "cast: float tensors cast to float dtypes, got ",
                dtype_name(d));
    return k::cast(std::move(t), d);
}
auto VulkanBackend::int_into_float(IT t) -> FT {
    return k::cast(std::move(t), DType::F32);
}
auto VulkanBackend::int_cast(IT t, DType d) -> IT {
    EMBER_CHECK(is_int(d), DType, "cast: int tensors cast to int dtypes, got ", dtype_name(d));
    return k::cast(std::move(t), d);
}
auto VulkanBackend::bool_into_int(BT t) -> IT {
    return k::cast(std::move(t), DType::I64);
}
auto VulkanBackend::bool_into_float(BT t) -> FT {
    return k::cast(std::move(t), DType::F32);
}
auto VulkanBackend::int_arange(std::int64_t a, std::int64_t b, std::int64_t step, const Device& d)
    -> IT {
    return k::arange(a, b, step, d.resolved());
}

}  // namespace ember
