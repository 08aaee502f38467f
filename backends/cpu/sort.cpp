// Sorting along a dim: each line (all positions but `dim`) is copied into a buffer of
// (key, index) pairs, sorted there, and written back as values and int64 indices. Lines are
// independent, so they run in parallel with a buffer per task.
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <utility>
#include <vector>

#include "iter.hpp"
#include "kernels.hpp"
#include "parallel.hpp"

namespace ember::detail::cpu {

namespace {

// Elements per parallel task.
constexpr std::size_t kGrain = std::size_t{1} << 14;


/// The key type elements are compared as: halves widen to float, bool to a byte.
template <typename T>
using Key = std::conditional_t<kIsHalf<T>, float,
                               std::conditional_t<std::same_as<T, bool>, std::uint8_t, T>>;

template <typename T>
inline Key<T> key_of(T x) {
    if constexpr (kIsHalf<T>) {
        return static_cast<float>(x);
    } else {
        return static_cast<Key<T>>(x);
    }
}

/// Ascending order with NaN above everything (and NaNs equal to each other).
template <typename K>
inline bool key_less(K a, K b) {
    if constexpr (std::floating_point<K>)
        return a < b || (b != b && a == a);
    else
        return a < b;
}

template <typename K>
struct Item {
    K key;
    std::int64_t index;
};

/// Runs `line(in, out_values, out_indices, buf)` for every line of `t` along `dim`, where the
/// outputs have shape `out_shape` (t's shape, maybe with another size along `dim`).
template <typename T, typename F>
std::pair<CpuTensor, CpuTensor> for_each_line(const CpuTensor& t, std::size_t dim,
                                              const Shape& out_shape, F&& line) {
    CpuTensor values = empty(out_shape, t.dtype);
    CpuTensor indices = empty(out_shape, DType::I64);
    if (values.num_elements() == 0) return {std::move(values), std::move(indices)};
    Shape lines = out_shape;
    lines[dim] = 1;
    const std::size_t n = t.shape[dim];
    const std::int64_t sd = t.strides[dim], so = values.strides[dim];
    const auto it = make_iter<2>(lines, {&values.strides, &t.strides});
    const T* p = t.data<T>();
    T* vo = values.data<T>();
    auto* io = indices.data<std::int64_t>();
    const std::size_t grain = std::max<std::size_t>(1, kGrain / n);
    parallel_for(lines.num_elements(), grain, [&](std::size_t b, std::size_t e) {
        std::vector<Item<Key<T>>> buf(n);
        for_each_span(it, b, e, [&](const auto& off, std::size_t len, const auto& st) {
            for (std::size_t j = 0; j < len; ++j) {
                const T* in = p + off[1] + idx(j, st[1]);
                for (std::size_t r = 0; r < n; ++r)
                    buf[r] = {key_of(in[idx(r, sd)]), static_cast<std::int64_t>(r)};
                const std::size_t k = line(buf);
                // Values are re-read from the input so halves keep their exact bits.
                T* vl = vo + off[0] + idx(j, st[0]);
                std::int64_t* il = io + off[0] + idx(j, st[0]);
                for (std::size_t r = 0; r < k; ++r) {
                    vl[idx(r, so)] = in[buf[r].index * sd];
                    il[idx(r, so)] = buf[r].index;
                }
            }
        });
    });
    return {std::move(values), std::move(indices)};
}

}  // namespace

std::pair<CpuTensor, CpuTensor> sort_with_indices(CpuTensor t, std::size_t dim, bool descending) {
    if (t.shape.rank() == 0) {
        EMBER_CHECK(dim == 0, Dim, "sort: dim ", dim, " is out of range for a scalar");
        return {contiguous(std::move(t)), full(Shape{}, Scalar(0), DType::I64)};
    }
    check::dim("sort", dim, t.shape);
    return visit_dtype(t.dtype, [&]<typename T>(TypeTag<T>) {
        using K = Key<T>;
        return for_each_line<T>(t, dim, t.shape, [&](std::vector<Item<K>>& buf) {
            // Stable in both directions: equal keys keep their original order.
            if (descending)
                std::stable_sort(buf.begin(), buf.end(), [](const Item<K>& a, const Item<K>& b) {
                    return key_less(b.key, a.key);
                });
            else
                std::stable_sort(buf.begin(), buf.end(), [](const Item<K>& a, const Item<K>& b) {
                    return key_less(a.key, b.key);
                });
            return buf.size();
        });
    });
}

std::pair<CpuTensor, CpuTensor> topk(CpuTensor t, std::size_t k, std::size_t dim, bool largest) {
    const Shape out_shape = check::topk(k, dim, t.shape);
    return visit_dtype(t.dtype, [&]<typename T>(TypeTag<T>) {
        using K = Key<T>;
        return for_each_line<T>(t, dim, out_shape, [&](std::vector<Item<K>>& buf) {
            // Ties broken by position make the order total, so partial_sort (not stable by
            // itself) still returns the earliest of equal elements first.
            const auto mid = buf.begin() + static_cast<std::ptrdiff_t>(k);
            if (largest)
                std::partial_sort(buf.begin(), mid, buf.end(),
                                  [](const Item<K>& a, const Item<K>& b) {
                                      return key_less(b.key, a.key) ||
                                             (!key_less(a.key, b.key) && a.index < b.index);
                                  });
            else
                std::partial_sort(buf.begin(), mid, buf.end(),
                                  [](const Item<K>& a, const Item<K>& b) {
                                      return key_less(a.key, b.key) ||
                                             (!key_less(b.key, a.key) && a.index < b.index);
                                  });
            return k;
        });
    });
}

}  // namespace ember::detail::cpu
