// Sorting along a dim (shaders/sort.comp) and top-k through it.
#include <bit>

#include "kernels.hpp"

namespace ember::detail::vk {

namespace {
constexpr std::size_t kSharedRow = 1024;  // SH in sort.comp
constexpr std::uint32_t kLocal = 256;
}  // namespace

std::pair<VT, VT> sort_with_indices(VT t, std::size_t dim, bool descending) {
    check::dim("sort", dim, t.shape);
    const std::size_t rank = t.shape.rank();
    // The sorted dim goes last: rows are then contiguous in the outputs, which are permuted
    // back as views.
    std::array<std::size_t, kMaxRank> perm{};
    for (std::size_t d = 0, k = 0; d < rank; ++d)
        if (d != dim) perm[k++] = d;
    perm[rank - 1] = dim;
    std::array<std::size_t, kMaxRank> inv{};
    for (std::size_t d = 0; d < rank; ++d) inv[perm[d]] = d;
    const std::span<const std::size_t> ps(perm.data(), rank), is(inv.data(), rank);
    VT tp = permute(t, ps);
    if (class_of(tp.dtype) == kBool) tp = cast(std::move(tp), DType::I64);
    const DType vd = t.dtype;
    VT values = empty(tp.shape, class_of(vd) == kBool ? DType::I64 : vd, t.device);
    VT indices = empty(tp.shape, DType::I64, t.device);
    const std::size_t L = tp.shape[rank - 1];
    const std::size_t rows = L == 0 ? 0 : tp.num_elements() / L;
    if (rows > 0) {
        const std::size_t P = std::bit_ceil(std::max<std::size_t>(L, 1));
        Params p;
        p.push(static_cast<i64>(rows));
        p.push(static_cast<i64>(rank));
        for (std::size_t d = 0; d < kMaxRank; ++d)
            p.push(d < rank ? (d == rank - 1 ? 1 : i64(tp.shape[d])) : 1);
        for (std::size_t d = 0; d < kMaxRank; ++d) p.push(d < rank - 1 ? tp.strides[d] : 0);
        p.push(tp.offset);
        p.push(static_cast<i64>(L));
        p.push(tp.strides[rank - 1]);
        p.push(static_cast<i64>(P));
        p.push(descending ? 1 : 0);
        const std::size_t kpos = p.w.size();
        p.push(0);
        p.push(0);
        Context& cx = ctx(t);
        const std::int32_t ct = class_of(tp.dtype);
        if (P <= kSharedRow) {
            const std::int32_t spec[] = {0, ct};
            const Pipeline& pipe = cx.pipeline("sort", spec, 5, kLocal);
            const Binding o = bind(values, true);
            const Binding bs[] = {o, bind(indices, true), bind(tp, false), o, o};
            cx.dispatch(pipe, bs, p.w, rows);
        } else {
            VT keys = empty(Shape{rows * P}, DType::I64, t.device);   // two words per key
            VT order = empty(Shape{rows * P}, DType::F32, t.device);  // one word per index
            const std::uint64_t groups = (rows * P + kLocal - 1) / kLocal;
            auto launch = [&](std::int32_t mode) {
                const std::int32_t spec[] = {mode, ct};
                const Pipeline& pipe = cx.pipeline("sort", spec, 5, kLocal);
                const Binding bs[] = {bind(values, true), bind(indices, true), bind(tp, false),
                                      bind(keys, true), bind(order, true)};
                cx.dispatch(pipe, bs, p.w, groups);
            };
            launch(2);
            for (std::size_t k = 2; k <= P; k <<= 1)
                for (std::size_t j = k >> 1; j > 0; j >>= 1) {
                    p.w[kpos] = static_cast<std::int32_t>(k);
                    p.w[kpos + 1] = static_cast<std::int32_t>(j);
                    launch(1);
                }
            launch(3);
        }
    }
    if (values.dtype != vd) values = cast(std::move(values), vd);
    return {permute(std::move(values), is), permute(std::move(indices), is)};
}

/// The k largest (or smallest) along `dim`, sorted, with int64 indices.
std::pair<VT, VT> topk(VT t, std::size_t k, std::size_t dim, bool largest) {
    check::topk(k, dim, t.shape);
    auto [v, i] = sort_with_indices(std::move(t), dim, largest);
    std::array<Slice, kMaxRank> r{};
    r[dim] = Slice{0, static_cast<long>(k)};
    const std::span<const Slice> rs(r.data(), dim + 1);
    return {slice(std::move(v), rs), slice(std::move(i), rs)};
}

}  // namespace ember::detail::vk

// ---- VulkanBackend's ops on the kernels above ----
namespace ember {
namespace k = detail::vk;

auto VulkanBackend::float_sort_with_indices(FT t, std::size_t dim, bool desc) -> std::pair<FT, IT> {
    return k::sort_with_indices(std::move(t), dim, desc);
}
auto VulkanBackend::int_sort_with_indices(IT t, std::size_t dim, bool desc) -> std::pair<IT, IT> {
    return k::sort_with_indices(std::move(t), dim, desc);
}
auto VulkanBackend::float_topk(FT t, std::size_t kk, std::size_t dim, bool largest)
    -> std::pair<FT, IT> {
    return k::topk(std::move(t), kk, dim, largest);
}
auto VulkanBackend::int_topk(IT t, std::size_t kk, std::size_t dim, bool largest)
    -> std::pair<IT, IT> {
    return k::topk(std::move(t), kk, dim, largest);
}

}  // namespace ember
