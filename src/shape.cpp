#include "ember/tensor/shape.hpp"

#include <algorithm>

namespace ember {

std::size_t Shape::dim(long i) const { return dims_[normalize_dim(i, rank_, "Shape::dim")]; }

std::string Shape::to_string() const {
    std::string s = "[";
    for (std::size_t i = 0; i < rank_; ++i) {
        if (i) s += ", ";
        s += std::to_string(dims_[i]);
    }
    return s + "]";
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
    const std::size_t r = std::max(a.rank(), b.rank());
    Shape out = Shape::filled(r, 1);
    for (std::size_t i = 0; i < r; ++i) {
        const std::size_t da = i < r - a.rank() ? 1 : a[i - (r - a.rank())];
        const std::size_t db = i < r - b.rank() ? 1 : b[i - (r - b.rank())];
        EMBER_CHECK(da == db || da == 1 || db == 1, Shape, op, ": shapes ", a.to_string(),
                    " and ", b.to_string(), " cannot be broadcast together (dim ", i, ": ", da,
                    " vs ", db, ")");
        out[i] = da == 1 ? db : da;
    }
    return out;
}

std::size_t normalize_dim(long dim, std::size_t rank, const char* op) {
    const long r = static_cast<long>(rank);
    EMBER_CHECK(dim >= -r && dim < r, Dim, op, ": dim ", dim, " is out of range for rank ",
                rank, " (expected ", -r, " to ", r - 1, ")");
    return static_cast<std::size_t>(dim < 0 ? dim + r : dim);
}

std::pair<std::size_t, std::size_t> Slice::resolve(std::size_t size, const char* op) const {
    EMBER_CHECK(step > 0, Argument, op, ": slice step must be positive, got ", step);
    const long n = static_cast<long>(size);
    long s = start < 0 ? start + n : start;
    long e = end == std::numeric_limits<long>::max() ? n : (end < 0 ? end + n : end);
    EMBER_CHECK(s >= 0 && s <= n && e >= 0 && e <= n, Index, op, ": range ", to_string(),
                " is out of bounds for a dim of size ", size);
    if (e < s) e = s;
    return {static_cast<std::size_t>(s), static_cast<std::size_t>((e - s + step - 1) / step)};
}

std::string Slice::to_string() const {
    std::string s = std::to_string(start) + "..";
    if (end != std::numeric_limits<long>::max()) s += std::to_string(end);
    if (step != 1) s += " step " + std::to_string(step);
    return s;
}

}  // namespace ember

namespace ember::detail {
Shape resolve_reshape(const Shape& from, std::span<const long> dims) {
    Shape out;
    std::size_t known = 1;
    long infer = -1;
    for (std::size_t i = 0; i < dims.size(); ++i) {
        long d = dims[i];
        if (d == 0) {
            EMBER_CHECK(i < from.rank(), Shape, "reshape: dim ", i, " is 0 (keep) but ",
                        from.to_string(), " has no dim ", i);
            d = static_cast<long>(from[i]);
        }
        if (d == -1) {
            EMBER_CHECK(infer < 0, Shape, "reshape: more than one -1 in the target dims");
            infer = static_cast<long>(i);
            out.push_back(1);
            continue;
        }
        EMBER_CHECK(d > 0 || d == 0, Shape, "reshape: invalid dim ", d);
        out.push_back(static_cast<std::size_t>(d));
        known *= static_cast<std::size_t>(d);
    }
    if (infer >= 0) {
        EMBER_CHECK(known != 0 && from.num_elements() % known == 0, Shape, "reshape: cannot infer -1 when reshaping ",
                    from.to_string(), " with ", known, " known elements");
        out[static_cast<std::size_t>(infer)] = from.num_elements() / known;
    }
    EMBER_CHECK(out.num_elements() == from.num_elements(), Shape, "reshape: cannot reshape ",
                from.to_string(), " (", from.num_elements(), " elements) into ", out.to_string(),
                " (", out.num_elements(), " elements)");
    return out;
}
}  // namespace ember::detail
