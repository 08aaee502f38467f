// Shape-changing ops that move data: cat, slice_assign, flip, repeat_dim. Each builds strided
// views of the output (or input) and runs one dtype-agnostic strided copy per piece, so every
// layout (permuted, sliced, broadcast, reversed) goes through the same path.
#include <cstdint>
#include <cstring>
#include <span>

#include "../common/view.hpp"
#include "iter.hpp"
#include "kernels.hpp"
#include "parallel.hpp"

namespace ember::detail::cpu {

namespace {

// Enough elements per task that a thread hand-off costs little next to the copy.
constexpr std::size_t kCopyGrain = std::size_t{1} << 15;

/// dst[...] = src[...] for views of the same shape and dtype (src may broadcast or run
/// backwards; dst must not overlap itself).
void copy_into(const CpuTensor& dst, const CpuTensor& src) {
    const std::size_t n = dst.num_elements();
    if (n == 0) return;
    const auto it = make_iter<2>(dst.shape, {&dst.strides, &src.strides});
    visit_bits(dtype_size(dst.dtype), [&]<typename U>(TypeTag<U>) {
        U* d = reinterpret_cast<U*>(dst.bytes());
        const U* s = reinterpret_cast<const U*>(src.bytes());
        parallel_for(n, kCopyGrain, [&](std::size_t b, std::size_t e) {
            for_each_span(it, b, e, [&](const auto& off, std::size_t len, const auto& st) {
                U* dp = d + off[0];
                const U* sp = s + off[1];
                if (st[0] == 1 && st[1] == 1) {
                    std::memcpy(dp, sp, len * sizeof(U));
                } else if (st[0] == 1 && st[1] == 0) {
                    const U v = *sp;
                    for (std::size_t i = 0; i < len; ++i) dp[i] = v;
                } else {
                    for (std::size_t i = 0; i < len; ++i)
                        dp[static_cast<std::int64_t>(i) * st[0]] =
                            sp[static_cast<std::int64_t>(i) * st[1]];
                }
            });
        });
    });
}

}  // namespace

CpuTensor cat(std::span<const CpuTensor> tensors, std::size_t dim) {
    const Shape out_shape = check::cat(check::operands(tensors), dim);
    const CpuTensor& first = tensors[0];
    CpuTensor out = empty(out_shape, first.dtype);
    view::cat_into(out, tensors, dim, copy_into);
    return out;
}

CpuTensor slice_assign(CpuTensor t, std::span<const Slice> ranges, CpuTensor values) {
    // Checked and resolved before copying, so that a bad range throws without doing any work.
    const check::Region r = check::slice_assign(t, ranges, values);
    if (!t.is_unique()) {
        CpuTensor copy = empty(t.shape, t.dtype);
        copy_into(copy, t);
        t = std::move(copy);
    }
    copy_into(view::region(t, ranges, r), values);
    return t;
}

CpuTensor flip(CpuTensor t, std::span<const std::size_t> axes) {
    const auto flipped = check::flip(t.shape, axes);
    CpuTensor out = empty(t.shape, t.dtype);
    if (out.num_elements() == 0) return out;
    // Reading through negative strides turns the flip into a plain strided copy.
    const CpuTensor src = view::flip(t, flipped);
    copy_into(out, src);
    return out;
}

CpuTensor repeat_dim(CpuTensor t, std::size_t dim, std::size_t times) {
    const Shape out_shape = check::repeat_dim(t.shape, dim, times);
    CpuTensor out = empty(out_shape, t.dtype);
    if (out.num_elements() == 0) return out;
    const std::size_t n = t.shape[dim];
    if (n == 1) {
        // One broadcast copy instead of `times` small ones.
        const CpuTensor src = view::broadcast_dim(t, dim, times);
        copy_into(out, src);
        return out;
    }
    for (std::size_t k = 0; k < times; ++k) copy_into(view::narrow(out, dim, k * n, n), t);
    return out;
}

}  // namespace ember::detail::cpu
