// Indexing: gather, scatter_add, index_select, select_assign, argwhere. Indices are validated
// in a pass of their own before any element moves, so a bad index throws without leaving a
// half-written tensor behind (and without throwing from inside a worker thread).
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <vector>

#include "iter.hpp"
#include "kernels.hpp"
#include "parallel.hpp"

namespace ember::detail::cpu {

namespace {

constexpr std::size_t kGrain = std::size_t{1} << 15;

/// A new contiguous buffer holding the values of `t`.
CpuTensor fresh_copy(const CpuTensor& t) {
    CpuTensor out = empty(t.shape, t.dtype);
    const std::size_t n = t.num_elements();
    if (n == 0) return out;
    const auto it = make_iter<2>(t.shape, {&out.strides, &t.strides});
    visit_bits(dtype_size(t.dtype), [&]<typename U>(TypeTag<U>) {
        U* d = out.data<U>();
        const U* s = reinterpret_cast<const U*>(t.bytes());
        parallel_for(n, kGrain, [&](std::size_t b, std::size_t e) {
            for_each_span(it, b, e, [&](const auto& off, std::size_t len, const auto& st) {
                if (st[0] == 1 && st[1] == 1) {
                    std::memcpy(d + off[0], s + off[1], len * sizeof(U));
                } else {
                    for (std::size_t i = 0; i < len; ++i)
                        d[off[0] + idx(i, st[0])] = s[off[1] + idx(i, st[1])];
                }
            });
        });
    });
    return out;
}

/// `t` itself when the caller handed over its only reference, else a copy to write into.
CpuTensor writable(CpuTensor t) {
    return t.is_unique() ? std::move(t) : fresh_copy(t);
}

/// Indices as int64 or int32 (narrower ints are widened; anything else is an error).
CpuTensor index_tensor(CpuTensor indices, const char* op) {
    check::index_dtype(op, indices.dtype);
    if (indices.dtype == DType::I64 || indices.dtype == DType::I32) return indices;
    return cast(std::move(indices), DType::I64);
}

/// Calls `f(TypeTag<I>)` with the C++ type of an index tensor made by index_tensor.
template <typename F>
decltype(auto) visit_index(DType d, F&& f) {
    if (d == DType::I32) return f(TypeTag<std::int32_t>{});
    return f(TypeTag<std::int64_t>{});
}

/// Throws IndexError naming `op` unless every index lies in [0, size). Fixed blocks, so the
/// index reported is the first bad one whatever the thread count.
void check_indices(const CpuTensor& indices, std::size_t size, std::size_t dim, const char* op) {
    const std::size_t n = indices.num_elements();
    if (n == 0) return;
    constexpr std::size_t kBlock = std::size_t{1} << 16;
    const std::size_t nb = (n + kBlock - 1) / kBlock;
    std::vector<std::uint8_t> bad(nb, 0);
    std::vector<std::int64_t> value(nb, 0);
    const auto it = make_iter<1>(indices.shape, {&indices.strides});
    const auto limit = static_cast<std::int64_t>(size);
    visit_index(indices.dtype, [&]<typename I>(TypeTag<I>) {
        const I* p = indices.data<I>();
        parallel_for(nb, 1, [&](std::size_t bb, std::size_t be) {
            for (std::size_t blk = bb; blk < be; ++blk) {
                for_each_span(it, blk * kBlock, std::min(n, (blk + 1) * kBlock),
                              [&](const auto& off, std::size_t len, const auto& st) {
                                  for (std::size_t j = 0; j < len && !bad[blk]; ++j) {
                                      const auto v =
                                          static_cast<std::int64_t>(p[off[0] + idx(j, st[0])]);
                                      if (v < 0 || v >= limit) {
                                          bad[blk] = 1;
                                          value[blk] = v;
                                      }
                                  }
                              });
            }
        });
    });
    for (std::size_t blk = 0; blk < nb; ++blk)
        if (bad[blk]) check::index_out_of_range(op, value[blk], dim, size);
}

/// a + b in the element type (ints wrap, bools or, halves round once).
template <typename T>
inline T add_elem(T a, T b) {
    if constexpr (std::same_as<T, bool>) {
        return a || b;
    } else if constexpr (std::same_as<T, f16> || std::same_as<T, bf16>) {
        return T(static_cast<float>(a) + static_cast<float>(b));
    } else if constexpr (std::integral<T>) {
        using U = std::make_unsigned_t<T>;
        return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
        return a + b;
    }
}

}  // namespace

CpuTensor gather(std::size_t dim, CpuTensor t, CpuTensor indices) {
    check::gather(dim, t, indices);
    indices = index_tensor(std::move(indices), "gather");
    check_indices(indices, t.shape[dim], dim, "gather");
    CpuTensor out = empty(indices.shape, t.dtype);
    const std::size_t n = out.num_elements();
    if (n == 0) return out;
    const std::int64_t sd = t.strides[dim];
    // Along `dim` the position in t comes from the index alone.
    Strides tst = t.strides;
    tst[dim] = 0;
    const auto it = make_iter<3>(indices.shape, {&out.strides, &indices.strides, &tst});
    visit_bits(dtype_size(t.dtype), [&]<typename U>(TypeTag<U>) {
        visit_index(indices.dtype, [&]<typename I>(TypeTag<I>) {
            U* o = out.data<U>();
            const I* ip = indices.data<I>();
            const U* tp = reinterpret_cast<const U*>(t.bytes());
            parallel_for(n, kGrain, [&](std::size_t b, std::size_t e) {
                for_each_span(it, b, e, [&](const auto& off, std::size_t len, const auto& st) {
                    for (std::size_t j = 0; j < len; ++j)
                        o[off[0] + idx(j, st[0])] =
                            tp[off[2] + idx(j, st[2]) +
                               static_cast<std::int64_t>(ip[off[1] + idx(j, st[1])]) * sd];
                });
            });
        });
    });
    return out;
}

CpuTensor scatter_add(std::size_t dim, CpuTensor t, CpuTensor indices, CpuTensor values) {
    check::scatter_add(dim, t, indices, values);
    indices = index_tensor(std::move(indices), "scatter_add");
    check_indices(indices, t.shape[dim], dim, "scatter_add");
    CpuTensor out = writable(std::move(t));
    if (indices.num_elements() == 0) return out;
    const std::size_t k = indices.shape[dim];
    Shape lines = indices.shape;
    lines[dim] = 1;
    const std::int64_t osd = out.strides[dim], isd = indices.strides[dim],
                       vsd = values.strides[dim];
    const auto it = make_iter<3>(lines, {&out.strides, &indices.strides, &values.strides});
    // Lines differ in some dim other than `dim`, so they write disjoint outputs: parallel over
    // lines, sequential within one (repeated indices add up in order).
    visit_dtype(out.dtype, [&]<typename T>(TypeTag<T>) {
        visit_index(indices.dtype, [&]<typename I>(TypeTag<I>) {
            T* o = out.data<T>();
            const I* ip = indices.data<I>();
            const T* vp = values.data<T>();
            const std::size_t grain = std::max<std::size_t>(1, kGrain / k);
            parallel_for(lines.num_elements(), grain, [&](std::size_t b, std::size_t e) {
                for_each_span(it, b, e, [&](const auto& off, std::size_t len, const auto& st) {
                    for (std::size_t j = 0; j < len; ++j) {
                        T* ol = o + off[0] + idx(j, st[0]);
                        const I* il = ip + off[1] + idx(j, st[1]);
                        const T* vl = vp + off[2] + idx(j, st[2]);
                        for (std::size_t r = 0; r < k; ++r) {
                            T& dst = ol[static_cast<std::int64_t>(il[idx(r, isd)]) * osd];
                            dst = add_elem(dst, vl[idx(r, vsd)]);
                        }
                    }
                });
            });
        });
    });
    return out;
}

CpuTensor select(CpuTensor t, std::size_t dim, CpuTensor indices) {
    const Shape out_shape = check::select(t, dim, indices);
    indices = index_tensor(std::move(indices), "select");
    check_indices(indices, t.shape[dim], dim, "select");
    const std::size_t k = indices.num_elements();
    CpuTensor out = empty(out_shape, t.dtype);
    if (out.num_elements() == 0) return out;
    Shape lines = out_shape;
    lines[dim] = 1;
    const std::int64_t osd = out.strides[dim], tsd = t.strides[dim];
    const auto it = make_iter<2>(lines, {&out.strides, &t.strides});
    // Small index lists are read once into int64 so the inner loops see one type.
    std::vector<std::int64_t> ix(k);
    visit_index(indices.dtype, [&]<typename I>(TypeTag<I>) {
        const I* ip = indices.data<I>();
        const std::int64_t s = indices.shape.rank() == 0 ? 0 : indices.strides[0];
        for (std::size_t r = 0; r < k; ++r) ix[r] = static_cast<std::int64_t>(ip[idx(r, s)]);
    });
    visit_bits(dtype_size(t.dtype), [&]<typename U>(TypeTag<U>) {
        U* o = out.data<U>();
        const U* tp = reinterpret_cast<const U*>(t.bytes());
        const std::size_t grain = std::max<std::size_t>(1, kGrain / k);
        parallel_for(lines.num_elements(), grain, [&](std::size_t b, std::size_t e) {
            for_each_span(it, b, e, [&](const auto& off, std::size_t len, const auto& st) {
                U* ob = o + off[0];
                const U* tb = tp + off[1];
                if (st[0] == 1) {
                    // Whole rows along the kept dims: one (often contiguous) copy per index.
                    for (std::size_t r = 0; r < k; ++r) {
                        U* orow = ob + idx(r, osd);
                        const U* trow = tb + ix[r] * tsd;
                        if (st[1] == 1) {
                            std::memcpy(orow, trow, len * sizeof(U));
                        } else {
                            for (std::size_t j = 0; j < len; ++j) orow[j] = trow[idx(j, st[1])];
                        }
                    }
                } else {
                    // Selecting along the innermost dim: each output row is a lookup table.
                    for (std::size_t j = 0; j < len; ++j) {
                        U* orow = ob + idx(j, st[0]);
                        const U* trow = tb + idx(j, st[1]);
                        for (std::size_t r = 0; r < k; ++r) orow[idx(r, osd)] = trow[ix[r] * tsd];
                    }
                }
            });
        });
    });
    return out;
}

CpuTensor select_assign(CpuTensor t, std::size_t dim, CpuTensor indices, CpuTensor values) {
    check::select_assign(t, dim, indices, values);
    const std::size_t k = indices.num_elements();
    indices = index_tensor(std::move(indices), "select_assign");
    check_indices(indices, t.shape[dim], dim, "select_assign");
    CpuTensor out = writable(std::move(t));
    if (values.num_elements() == 0) return out;
    std::vector<std::int64_t> ix(k);
    visit_index(indices.dtype, [&]<typename I>(TypeTag<I>) {
        const I* ip = indices.data<I>();
        const std::int64_t s = indices.shape.rank() == 0 ? 0 : indices.strides[0];
        for (std::size_t r = 0; r < k; ++r) ix[r] = static_cast<std::int64_t>(ip[idx(r, s)]);
    });
    Shape lines = out.shape;
    lines[dim] = 1;
    const std::int64_t osd = out.strides[dim], vsd = values.strides[dim];
    const auto it = make_iter<2>(lines, {&out.strides, &values.strides});
    // As in scatter_add: lines are disjoint, indices within a line are applied in order.
    visit_dtype(out.dtype, [&]<typename T>(TypeTag<T>) {
        T* o = out.data<T>();
        const T* vp = values.data<T>();
        const std::size_t grain = std::max<std::size_t>(1, kGrain / k);
        parallel_for(lines.num_elements(), grain, [&](std::size_t b, std::size_t e) {
            for_each_span(it, b, e, [&](const auto& off, std::size_t len, const auto& st) {
                T* ob = o + off[0];
                const T* vb = vp + off[1];
                if (st[0] == 1) {
                    for (std::size_t r = 0; r < k; ++r) {
                        T* orow = ob + ix[r] * osd;
                        const T* vrow = vb + idx(r, vsd);
                        for (std::size_t j = 0; j < len; ++j)
                            orow[j] = add_elem(orow[j], vrow[idx(j, st[1])]);
                    }
                } else {
                    for (std::size_t j = 0; j < len; ++j) {
                        T* orow = ob + idx(j, st[0]);
                        const T* vrow = vb + idx(j, st[1]);
                        for (std::size_t r = 0; r < k; ++r) {
                            T& dst = orow[ix[r] * osd];
                            dst = add_elem(dst, vrow[idx(r, vsd)]);
                        }
                    }
                }
            });
        });
    });
    return out;
}

CpuTensor argwhere(CpuTensor t) {
    const std::size_t rank = t.shape.rank();
    const std::size_t n = t.num_elements();
    // Non-zero flags in row-major order, counted per fixed block so that the second pass can
    // write each block's rows at a known place in parallel.
    constexpr std::size_t kBlock = std::size_t{1} << 16;
    const std::size_t nb = (n + kBlock - 1) / kBlock;
    std::vector<std::uint8_t> nz(n);
    std::vector<std::size_t> count(nb + 1, 0);
    const auto it = make_iter<1>(t.shape, {&t.strides});
    visit_dtype(t.dtype, [&]<typename T>(TypeTag<T>) {
        const T* p = t.data<T>();
        parallel_for(nb, 1, [&](std::size_t bb, std::size_t be) {
            for (std::size_t blk = bb; blk < be; ++blk) {
                const std::size_t b = blk * kBlock, e = std::min(n, b + kBlock);
                std::size_t pos = b, c = 0;
                for_each_span(it, b, e, [&](const auto& off, std::size_t len, const auto& st) {
                    for (std::size_t j = 0; j < len; ++j) {
                        const T x = p[off[0] + idx(j, st[0])];
                        bool v;
                        if constexpr (std::same_as<T, f16> || std::same_as<T, bf16>)
                            v = static_cast<float>(x) != 0.0f;
                        else
                            v = x != T{};
                        nz[pos++] = v;
                        c += v;
                    }
                });
                count[blk + 1] = c;
            }
        });
    });
    for (std::size_t blk = 0; blk < nb; ++blk) count[blk + 1] += count[blk];
    const std::size_t total = count[nb];
    CpuTensor out = empty(Shape{total, rank}, DType::I64);
    if (total == 0 || rank == 0) return out;
    auto* o = out.data<std::int64_t>();
    parallel_for(nb, 1, [&](std::size_t bb, std::size_t be) {
        for (std::size_t blk = bb; blk < be; ++blk) {
            const std::size_t b = blk * kBlock, e = std::min(n, b + kBlock);
            std::int64_t* row = o + count[blk] * rank;
            for (std::size_t i = b; i < e; ++i) {
                if (!nz[i]) continue;
                std::size_t rem = i;
                for (std::size_t d = rank; d-- > 0;) {
                    row[d] = static_cast<std::int64_t>(rem % t.shape[d]);
                    rem /= t.shape[d];
                }
                row += rank;
            }
        }
    });
    return out;
}

}  // namespace ember::detail::cpu
