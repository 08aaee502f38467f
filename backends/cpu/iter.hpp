#pragma once
// Strided iteration shared by the CPU kernels: an N-d loop over K operands, with adjacent dims
// merged wherever every operand allows, handing the kernel one innermost run at a time.
#include <array>
#include <cstddef>
#include <concepts>
#include <cstdint>

#include "ember/backend/detail/cpu_tensor.hpp"
#include "ember/tensor/error.hpp"

namespace ember::detail::cpu {

/// Strides of `t` viewed with the (broadcast) shape `out`: right-aligned, 0 on broadcast dims.
inline Strides broadcast_strides(const CpuTensor& t, const Shape& out) {
    Strides s{};
    const std::size_t off = out.rank() - t.shape.rank();
    for (std::size_t i = 0; i < t.shape.rank(); ++i)
        s[off + i] = (t.shape[i] == 1 && out[off + i] != 1) ? 0 : t.strides[i];
    return s;
}

/// A merged iteration space over K operands.
template <std::size_t K>
struct Iter {
    std::size_t rank = 0;                     ///< merged rank (>= 1)
    std::array<std::size_t, kMaxRank> dims{};  ///< merged dims
    std::array<Strides, K> strides{};          ///< per operand, per merged dim
    /// Number of innermost runs.
    std::size_t rows() const {
        std::size_t r = 1;
        for (std::size_t i = 0; i + 1 < rank; ++i) r *= dims[i];
        return r;
    }
    /// Length of each innermost run.
    std::size_t inner() const { return dims[rank - 1]; }
};

/// Builds the iteration over `shape` where operand k has strides `*st[k]` (aligned to shape).
template <std::size_t K>
Iter<K> make_iter(const Shape& shape, const std::array<const Strides*, K>& st) {
    Iter<K> it;
    // Drop size-1 dims, then merge neighbours that are contiguous for every operand.
    for (std::size_t d = 0; d < shape.rank(); ++d) {
        if (shape[d] == 1) continue;
        if (it.rank > 0) {
            bool merge = true;
            for (std::size_t k = 0; k < K; ++k)
                if (it.strides[k][it.rank - 1] !=
                    (*st[k])[d] * static_cast<std::int64_t>(shape[d]))
                    merge = false;
            if (merge) {
                it.dims[it.rank - 1] *= shape[d];
                for (std::size_t k = 0; k < K; ++k) it.strides[k][it.rank - 1] = (*st[k])[d];
                continue;
            }
        }
        it.dims[it.rank] = shape[d];
        for (std::size_t k = 0; k < K; ++k) it.strides[k][it.rank] = (*st[k])[d];
        ++it.rank;
    }
    if (it.rank == 0) {  // all dims of size 1 (or rank 0): one run of one element
        it.rank = 1;
        it.dims[0] = shape.num_elements();
        for (std::size_t k = 0; k < K; ++k) it.strides[k][0] = 1;
    }
    return it;
}

/// Calls `f(offsets, n, inner_strides)` for rows [row_begin, row_end) of `it`, where
/// offsets[k] is operand k's element offset of the run's first element.
template <std::size_t K, typename F>
void for_each_run(const Iter<K>& it, std::size_t row_begin, std::size_t row_end, F&& f) {
    if (row_begin >= row_end || it.inner() == 0) return;
    const std::size_t outer = it.rank - 1;
    std::array<std::size_t, kMaxRank> idx{};
    std::array<std::int64_t, K> off{};
    std::size_t r = row_begin;
    for (std::size_t d = outer; d-- > 0;) {
        idx[d] = r % it.dims[d];
        r /= it.dims[d];
        for (std::size_t k = 0; k < K; ++k)
            off[k] += static_cast<std::int64_t>(idx[d]) * it.strides[k][d];
    }
    std::array<std::int64_t, K> inner_stride{};
    for (std::size_t k = 0; k < K; ++k) inner_stride[k] = it.strides[k][outer];
    for (std::size_t row = row_begin; row < row_end; ++row) {
        f(off, it.inner(), inner_stride);
        for (std::size_t d = outer; d-- > 0;) {
            for (std::size_t k = 0; k < K; ++k) off[k] += it.strides[k][d];
            if (++idx[d] < it.dims[d]) break;
            for (std::size_t k = 0; k < K; ++k)
                off[k] -= static_cast<std::int64_t>(it.dims[d]) * it.strides[k][d];
            idx[d] = 0;
        }
    }
}

/// Visits every element's offsets of a single operand in row-major order: f(offset).
template <typename F>
void for_each_offset(const CpuTensor& t, F&& f) {
    auto it = make_iter<1>(t.shape, {&t.strides});
    for_each_run(it, 0, it.rows(), [&](const std::array<std::int64_t, 1>& off, std::size_t n,
                                       const std::array<std::int64_t, 1>& s) {
        for (std::size_t i = 0; i < n; ++i) f(off[0] + static_cast<std::int64_t>(i) * s[0]);
    });
}

/// Calls `f(offsets, n, strides)` for the part of each innermost run of `it` that falls in the
/// flat element range [b, e), so parallel chunks need not align with runs.
template <std::size_t K, typename F>
void for_each_span(const Iter<K>& it, std::size_t b, std::size_t e, F&& f) {
    const std::size_t m = it.inner();
    if (m == 0 || b >= e) return;
    const std::size_t rb = b / m, re = (e + m - 1) / m;
    std::size_t row = rb;
    for_each_run(it, rb, re, [&](const auto& off, std::size_t, const auto& st) {
        const std::size_t j0 = row == rb ? b - rb * m : 0;
        const std::size_t j1 = row + 1 == re ? e - row * m : m;
        std::array<std::int64_t, K> o = off;
        for (std::size_t k = 0; k < K; ++k) o[k] += static_cast<std::int64_t>(j0) * st[k];
        f(o, j1 - j0, st);
        ++row;
    });
}

/// Calls `f(TypeTag<T>)` for f32 or f64 (kernels that widen f16/bf16 to f32 first).
template <typename F>
void by_float_type(DType dt, F&& f) {
    if (dt == DType::F64)
        f(TypeTag<double>{});
    else
        f(TypeTag<float>{});
}

/// Calls `f(TypeTag<U>)` with an unsigned type as wide as one element, for ops that only move
/// elements.
template <typename F>
void visit_bits(std::size_t size, F&& f) {
    switch (size) {
        case 8:
            f(TypeTag<std::uint64_t>{});
            break;
        case 4:
            f(TypeTag<std::uint32_t>{});
            break;
        case 2:
            f(TypeTag<std::uint16_t>{});
            break;
        default:
            f(TypeTag<std::uint8_t>{});
            break;
    }
}

/// Element offset of index i along a dim of the given stride.
inline std::int64_t idx(std::size_t i, std::int64_t stride) {
    return static_cast<std::int64_t>(i) * stride;
}

/// True for the 16-bit float types, which kernels compute through float.
template <typename T>
constexpr bool kIsHalf = std::same_as<T, f16> || std::same_as<T, bf16>;

}  // namespace ember::detail::cpu
