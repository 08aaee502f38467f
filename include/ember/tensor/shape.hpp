#pragma once
// Shape: the dims of a tensor, stored inline (no allocation) up to kMaxRank dims, because every
// op builds a few of them and per-op overhead matters.
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <limits>
#include <string>
#include <utility>

#include "../export.hpp"
#include "detail/checked.hpp"
#include "error.hpp"

namespace ember {

/// The largest rank a tensor may have.
inline constexpr std::size_t kMaxRank = 8;

/// The dims of a tensor.
class EMBER_API Shape {
  public:
    /// A rank-0 shape (a scalar has one element).
    constexpr Shape() = default;
    /// A shape from its dims, e.g. `Shape{2, 3}`.
    Shape(std::initializer_list<std::size_t> dims) { assign(dims.begin(), dims.size()); }
    /// A shape from a span of dims.
    explicit Shape(std::span<const std::size_t> dims) { assign(dims.data(), dims.size()); }
    /// A shape from an array of dims (what `Tensor::dims()` returns).
    template <std::size_t N>
    Shape(const std::array<std::size_t, N>& dims) {  // NOLINT: implicit on purpose
        assign(dims.data(), N);
    }
    /// A shape of `rank` dims all equal to `fill`.
    static Shape filled(std::size_t rank, std::size_t fill) {
        Shape s;
        check_rank(rank);
        s.rank_ = static_cast<std::uint8_t>(rank);
        for (std::size_t i = 0; i < rank; ++i) s.dims_[i] = fill;
        return s;
    }

    /// Number of dims.
    constexpr std::size_t rank() const { return rank_; }
    /// Product of the dims (1 for rank 0); throws ShapeError when the dims other than 0
    /// multiply to more than kMaxElements (no tensor may have such a shape: its sizes in
    /// bytes and its strides would overflow).
    constexpr std::size_t num_elements() const { return num_elements("Shape::num_elements"); }
    /// num_elements(), whose error names `op` (the op about to use the shape).
    constexpr std::size_t num_elements(const char* op) const {
        std::size_t n = 1;
        bool zero = false;
        for (std::size_t i = 0; i < rank_; ++i) {
            // Dims of 0 are skipped so that [0, 2^40, 2^40] is refused too: its strides would
            // overflow even though it holds nothing.
            if (dims_[i] == 0) {
                zero = true;
            } else if (__builtin_mul_overflow(n, dims_[i], &n) || n > kMaxElements) [[unlikely]] {
                too_many_elements(op);
            }
        }
        return zero ? 0 : n;
    }
    /// Dim `i` (unchecked).
    constexpr std::size_t operator[](std::size_t i) const { return dims_[i]; }
    /// Mutable dim `i` (unchecked).
    constexpr std::size_t& operator[](std::size_t i) { return dims_[i]; }
    /// Dim `i`, where negative `i` counts from the end; throws DimError when out of range.
    std::size_t dim(long i) const;
    /// The dims as a span.
    std::span<const std::size_t> dims() const { return {dims_.data(), rank_}; }
    const std::size_t* begin() const { return dims_.data(); }
    const std::size_t* end() const { return dims_.data() + rank_; }
    /// Appends a dim.
    void push_back(std::size_t d) {
        check_rank(rank_ + 1u);
        dims_[rank_++] = d;
    }
    /// The dims as a fixed-size array; throws when the rank is not N.
    template <std::size_t N>
    std::array<std::size_t, N> to_array() const {
        EMBER_CHECK(N == rank_, Shape, "Shape::to_array: shape ", to_string(), " has rank ",
                    std::size_t{rank_}, ", expected ", N);
        std::array<std::size_t, N> a{};
        for (std::size_t i = 0; i < N; ++i) a[i] = dims_[i];
        return a;
    }
    /// "[2, 3]".
    std::string to_string() const;

    friend constexpr bool operator==(const Shape& a, const Shape& b) {
        if (a.rank_ != b.rank_) return false;
        for (std::size_t i = 0; i < a.rank_; ++i)
            if (a.dims_[i] != b.dims_[i]) return false;
        return true;
    }

private:
    [[noreturn]] void too_many_elements(const char* op) const;
    static void check_rank(std::size_t r) {
        EMBER_CHECK(r <= kMaxRank, Shape, "Shape: rank ", r, " exceeds the maximum of ",
                    kMaxRank);
    }
    void assign(const std::size_t* d, std::size_t n) {
        check_rank(n);
        rank_ = static_cast<std::uint8_t>(n);
        for (std::size_t i = 0; i < n; ++i) dims_[i] = d[i];
    }
    std::array<std::size_t, kMaxRank> dims_{};
    std::uint8_t rank_ = 0;
};

/// PyTorch's broadcasting of two shapes; throws ShapeError naming `op` when they do not fit.
EMBER_API Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

/// Normalises a possibly negative dim against `rank`; throws DimError naming `op`.
EMBER_API std::size_t normalize_dim(long dim, std::size_t rank, const char* op);

/// A range along one dim: [start, end) with a positive step; negative values count from the end
/// and bounds beyond the dim are clamped to it, as in PyTorch and Burn.
struct EMBER_API Slice {
    long start = 0;                                  ///< first index (negative: from the end)
    long end = std::numeric_limits<long>::max();     ///< one past the last (default: the dim's end)
    long step = 1;                                   ///< positive stride
    /// Resolves against a dim of size `size` into (start, length) following Python's rules.
    std::pair<std::size_t, std::size_t> resolve(std::size_t size, const char* op) const;
    std::string to_string() const;
};

}  // namespace ember
