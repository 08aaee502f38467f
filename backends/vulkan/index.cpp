// Indexed ops (shaders/index.comp): gather, select, scatter-add, select_assign; and argwhere
// (shaders/argwhere.comp).
#include "kernels.hpp"

namespace ember::detail::vk {

namespace {
constexpr std::uint32_t kLocal = 256;

/// Indices as int64 (any int dtype is accepted, as on the CPU).
VT index_tensor(VT indices, const char* op) {
    check::index_dtype(op, indices.dtype);
    return cast(std::move(indices), DType::I64);
}

/// Throws IndexError naming `op` unless every index lies in [0, size). The test runs on the
/// device; only its one-word answer (and, on failure, the indices) comes back to the host.
void check_indices(const VT& indices, std::size_t size, std::size_t dim, const char* op) {
    if (indices.num_elements() == 0) return;
    const Buffer& st = *indices.buffer;
    if (st.lo <= st.hi) {  // bounds known on the host (uploaded values): no readback
        if (st.lo < 0 || st.hi >= static_cast<i64>(size))
            check::index_out_of_range(op, st.lo < 0 ? st.lo : st.hi, dim, size);
        return;
    }
    VT bad = binary(BinaryOp::Or, compare_scalar(CompareOp::Lt, indices, Scalar(0)),
                    compare_scalar(CompareOp::Ge, indices, Scalar(static_cast<i64>(size))));
    if (!any_true(bad)) return;
    for (const i64 v : read_ints(indices))
        if (v < 0 || v >= static_cast<i64>(size)) check::index_out_of_range(op, v, dim, size);
}

/// One launch of index.comp over `shape` (gather: the output's; scatter: the lines').
void run_index(int mode, const Shape& shape, const VT& out, const VT& t, const VT& idx,
               std::size_t dim, std::size_t line, i64 dim_stride) {
    const std::size_t n = shape.num_elements();
    if (n == 0) return;
    Params p;
    p.push(static_cast<i64>(n));
    p.push(static_cast<i64>(shape.rank()));
    for (std::size_t d = 0; d < kMaxRank; ++d) p.push(d < shape.rank() ? i64(shape[d]) : 1);
    for (const VT* v : {&out, &t, &idx}) {
        for (std::size_t d = 0; d < kMaxRank; ++d) p.push(d < shape.rank() ? v->strides[d] : 0);
        p.push(v->offset);
    }
    p.push(static_cast<i64>(dim));
    p.push(static_cast<i64>(line));
    p.push(dim_stride);
    Context& cx = ctx(out);
    const std::int32_t spec[] = {mode, class_of(out.dtype)};
    const Pipeline& pipe = cx.pipeline("index", spec, 3, kLocal);
    const Binding bs[] = {bind(out, true), bind(t, false), bind(idx, false)};
    cx.dispatch(pipe, bs, p.w, (n + kLocal - 1) / kLocal);
}

/// `t` as a fresh contiguous tensor the caller may write (t itself when it is unique).
VT writable(VT t) {
    if (t.is_unique()) return t;
    VT out = empty(t.shape, t.dtype, t.device);
    copy_into(t, out);
    return out;
}
}  // namespace

VT gather(std::size_t dim, VT t, VT indices) {
    check::gather(dim, t, indices);
    indices = index_tensor(std::move(indices), "gather");
    check_indices(indices, t.shape[dim], dim, "gather");
    VT out = empty(indices.shape, t.dtype, t.device);
    VT tv = t;
    tv.strides[dim] = 0;  // along dim the position comes from the index alone
    run_index(0, indices.shape, out, tv, indices, dim, 0, t.strides[dim]);
    return out;
}

VT select(VT t, std::size_t dim, VT indices) {
    const Shape shape = check::select(t, dim, indices);
    indices = index_tensor(std::move(indices), "select");
    check_indices(indices, t.shape[dim], dim, "select");
    VT out = empty(shape, t.dtype, t.device);
    VT iv = indices;  // varies along dim only
    iv.shape = shape;
    iv.strides = Strides{};
    iv.strides[dim] = indices.shape.rank() == 1 ? indices.strides[0] : 0;
    VT tv = t;
    tv.strides[dim] = 0;
    run_index(0, shape, out, tv, iv, dim, 0, t.strides[dim]);
    return out;
}

VT scatter_add(std::size_t dim, VT t, VT indices, VT values) {
    check::scatter_add(dim, t, indices, values);
    indices = index_tensor(std::move(indices), "scatter_add");
    check_indices(indices, t.shape[dim], dim, "scatter_add");
    VT out = writable(std::move(t));
    if (indices.num_elements() == 0) return out;
    Shape lines = indices.shape;
    lines[dim] = 1;
    run_index(1, lines, out, values, indices, dim, indices.shape[dim], out.strides[dim]);
    return out;
}

VT select_assign(VT t, std::size_t dim, VT indices, VT values) {
    check::select_assign(t, dim, indices, values);
    indices = index_tensor(std::move(indices), "select_assign");
    const std::size_t k = indices.num_elements();
    Shape expected = t.shape;
    expected[dim] = k;
    check_indices(indices, t.shape[dim], dim, "select_assign");
    VT out = writable(std::move(t));
    if (k == 0) return out;
    Shape lines = expected;
    lines[dim] = 1;
    VT iv = indices;  // the same index list on every line
    iv.shape = expected;
    iv.strides = Strides{};
    iv.strides[dim] = indices.shape.rank() == 1 ? indices.strides[0] : 0;
    run_index(1, lines, out, values, iv, dim, k, out.strides[dim]);
    return out;
}

VT argwhere(VT t) {
    const std::size_t n = t.num_elements(), rank = t.shape.rank();
    // Compaction keeps the row-major order: one workgroup scans the flags chunk by chunk and
    // writes coordinates at the running count, into a buffer sized for the worst case; the
    // count comes back to the host (the output's shape depends on the data).
    VT src = contiguous(t);
    VT coords = empty(Shape{std::max<std::size_t>(n, 1), std::max<std::size_t>(rank, 1)},
                      DType::I64, t.device);
    VT count = empty(Shape{1}, DType::I64, t.device);
    Params p;
    p.push(static_cast<i64>(n));
    p.push(static_cast<i64>(rank));
    for (std::size_t d = 0; d < kMaxRank; ++d) p.push(d < rank ? i64(t.shape[d]) : 1);
    p.push(src.offset);
    p.push(class_of(t.dtype));
    Context& cx = ctx(t);
    {
        const std::int32_t spec[] = {class_of(t.dtype)};
        const Pipeline& pipe = cx.pipeline("argwhere", spec, 3, kLocal);
        const Binding bs[] = {bind(coords, true), bind(count, true), bind(src, false)};
        cx.dispatch(pipe, bs, p.w, 1);
    }
    const auto found = static_cast<std::size_t>(read_ints(count)[0]);
    coords.shape = Shape{found, rank};
    coords.strides = contiguous_strides(coords.shape);
    return coords;
}

}  // namespace ember::detail::vk

// ---- VulkanBackend's ops on the kernels above ----
namespace ember {
namespace k = detail::vk;

auto VulkanBackend::float_gather(std::size_t dim, FT t, IT i) -> FT {
    return k::gather(dim, std::move(t), std::move(i));
}
auto VulkanBackend::int_gather(std::size_t dim, IT t, IT i) -> IT {
    return k::gather(dim, std::move(t), std::move(i));
}
auto VulkanBackend::bool_gather(std::size_t dim, BT t, IT i) -> BT {
    return k::gather(dim, std::move(t), std::move(i));
}
auto VulkanBackend::float_scatter(std::size_t dim, FT t, IT i, FT v) -> FT {
    return k::scatter_add(dim, std::move(t), std::move(i), std::move(v));
}
auto VulkanBackend::int_scatter(std::size_t dim, IT t, IT i, IT v) -> IT {
    return k::scatter_add(dim, std::move(t), std::move(i), std::move(v));
}
auto VulkanBackend::float_select(FT t, std::size_t dim, IT i) -> FT {
    return k::select(std::move(t), dim, std::move(i));
}
auto VulkanBackend::int_select(IT t, std::size_t dim, IT i) -> IT {
    return k::select(std::move(t), dim, std::move(i));
}
auto VulkanBackend::bool_select(BT t, std::size_t dim, IT i) -> BT {
    return k::select(std::move(t), dim, std::move(i));
}
auto VulkanBackend::float_select_assign(FT t, std::size_t dim, IT i, FT v) -> FT {
    return k::select_assign(std::move(t), dim, std::move(i), std::move(v));
}
auto VulkanBackend::int_select_assign(IT t, std::size_t dim, IT i, IT v) -> IT {
    return k::select_assign(std::move(t), dim, std::move(i), std::move(v));
}
auto VulkanBackend::bool_argwhere(BT t) -> IT {
    return k::argwhere(std::move(t));
}

}  // namespace ember
