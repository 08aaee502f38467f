#include "ember/tensor/shape.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace ember {

void Shape::too_many_elements(const char* op) const {
    EMBER_FAIL(Shape, op, ": shape ", to_string(), " holds more than ", kMaxElements,
               " elements (2^60 - 1, the most a tensor may hold)");
}

namespace detail {

void size_overflow(const char* op, const char* what, std::size_t a, char sym, std::size_t b) {
    EMBER_FAIL(Shape, op, ": ", what, " ", a, " ", sym, " ", b, " overflows (the limit is ",
               kMaxElements, " elements, or 2^63 - 1 bytes)");
}

std::size_t arange_length(std::int64_t start, std::int64_t end, std::int64_t step, const char* op) {
    EMBER_CHECK(step != 0, Argument, op, ": step must not be zero");
    EMBER_CHECK((step > 0 && start <= end) || (step < 0 && start >= end), Argument, op, ": range ",
                start, "..", end, " with step ", step, " is inconsistent");
    // |end - start| and |step| as unsigned 64-bit values: both fit even for INT64_MIN..INT64_MAX.
    const auto ustart = static_cast<std::uint64_t>(start), uend = static_cast<std::uint64_t>(end);
    const std::uint64_t span = step > 0 ? uend - ustart : ustart - uend;
    const std::uint64_t ustep = step > 0 ? static_cast<std::uint64_t>(step)
                                         : std::uint64_t{0} - static_cast<std::uint64_t>(step);
    const std::uint64_t n = span == 0 ? 0 : (span - 1) / ustep + 1;
    EMBER_CHECK(n <= kMaxElements, Shape, op, ": range ", start, "..", end, " with step ", step,
                " has ", n, " elements, more than the ", kMaxElements, " a tensor may hold");
    return static_cast<std::size_t>(n);
}

namespace {
// The bare name of a function from its source_location spelling ("ember::Tensor<B, D, K>
// ember::Tensor<B, D, K>::narrow(long int, ...) const [with ...]" → "narrow"): the identifier
// before the first '(' outside template arguments.
std::string bare_function_name(std::string_view f) {
    int depth = 0;
    for (std::size_t i = 0; i < f.size(); ++i) {
        if (f[i] == '<')
            ++depth;
        else if (f[i] == '>' && depth > 0)
            --depth;
        else if (f[i] == '(' && depth == 0) {
            std::size_t b = i;
            while (b > 0 && (std::isalnum(static_cast<unsigned char>(f[b - 1])) || f[b - 1] == '_'))
                --b;
            if (b < i) return std::string(f.substr(b, i - b));
            break;
        }
    }
    return std::string(f);
}
}  // namespace

// EMBER_API as on the declaration in ember/tensor/tensor.hpp (not included here): the inline
// tensor code of every program calls it.
EMBER_API void moved_from_tensor(const char* accessor, const char* function) {
    const std::string caller = function ? bare_function_name(function) : "a tensor op";
    EMBER_FAIL(Argument, accessor ? accessor : caller.c_str(),
               accessor ? " (called from " + caller + ")" : std::string(),
               ": the tensor was moved from (std::move handed its handle over); assign it a "
               "tensor before using it again");
}

// EMBER_API as moved_from_tensor.
EMBER_API void primitive_not_of_rank(const Shape& shape, std::size_t rank) {
    EMBER_FAIL(Shape, "Tensor: primitive of shape ", shape.to_string(), " is not of rank ", rank);
}

void allocation_failed(const char* op, std::size_t bytes, const char* device) {
    EMBER_FAIL(Device, op, ": cannot allocate ", bytes, " bytes on ", device, " (out of memory)");
}

}  // namespace detail

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
    EMBER_CHECK(size <= kMaxElements, Shape, op, ": dim of size ", size, " exceeds ", kMaxElements);
    const long n = static_cast<long>(size);
    // PyTorch's and Burn's rules: negative bounds count from the end, and bounds beyond either
    // end are clamped to it (an empty range where start passes end).
    const auto clamp = [n](long b) { return std::clamp(b < 0 ? b + n : b, 0L, n); };
    const long s = clamp(start);
    long e = end == std::numeric_limits<long>::max() ? n : clamp(end);
    if (e < s) e = s;
    // ceil((e - s) / step) without forming e - s + step - 1, which overflows for a huge step.
    const long len = e == s ? 0 : (e - s - 1) / step + 1;
    return {static_cast<std::size_t>(s), static_cast<std::size_t>(len)};
}

std::string Slice::to_string() const {
    std::string s = std::to_string(start) + "..";
    if (end != std::numeric_limits<long>::max()) s += std::to_string(end);
    if (step != 1) s += " step " + std::to_string(step);
    return s;
}

}  // namespace ember

namespace ember::detail {
// EMBER_API as on the declaration in ember/tensor/tensor.hpp (not included here).
EMBER_API void ragged_literal(const char* op, const char* where,
                              std::span<const std::size_t> lengths) {
    std::string list;
    for (std::size_t i = 0; i < lengths.size(); ++i)
        list += (i ? ", " : "") + std::to_string(lengths[i]);
    EMBER_FAIL(Shape, op, ": a ragged nested literal: the ", where, " have lengths ", list,
               " (every list of a level must have the same length)");
}

EMBER_API Shape resolve_reshape(const Shape& from, std::span<const long> dims) {
    Shape out;
    std::size_t known = 1;  // the product of the non-zero target dims
    bool zero = false;
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
        if (d != 0)
            known = checked_mul(known, static_cast<std::size_t>(d), "reshape", "target dims");
        else
            zero = true;
    }
    const std::size_t from_n = from.num_elements("reshape");
    if (infer >= 0) {
        EMBER_CHECK(!zero && from_n % known == 0, Shape, "reshape: cannot infer -1 when reshaping ",
                    from.to_string(), " with ", zero ? 0 : known, " known elements");
        out[static_cast<std::size_t>(infer)] = from_n / known;
    }
    const std::size_t out_n = out.num_elements("reshape");
    EMBER_CHECK(out_n == from_n, Shape, "reshape: cannot reshape ", from.to_string(), " (", from_n,
                " elements) into ", out.to_string(), " (", out_n, " elements)");
    return out;
}
}  // namespace ember::detail
