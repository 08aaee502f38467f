#pragma once
// Tensor<B, D, K>: a handle to a backend primitive with a static rank D and kind K (Float, Int,
// Bool). Copying a Tensor copies the handle (Burn's clone()); ops read lvalue tensors and consume
// moved ones, so `std::move(t)` hands over the last reference and the backend may reuse the buffer
// in place.
#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <optional>
#if __has_include(<source_location>)  // not in Emscripten's libc++ (the web build)
#include <source_location>
#endif
#include <type_traits>
#include <utility>
#include <vector>

#include "../export.hpp"
#include "autocast.hpp"
#include "check.hpp"
#include "kind.hpp"

namespace ember {

template <Backend B, std::size_t D, TensorKind K = Float>
class Tensor;

namespace quant {  // the quantization API, defined in <ember/quant/tensor.hpp>
template <Backend B>
struct QuantizationParameters;
namespace detail {
template <typename Scheme>
struct QuantizeHook;
}  // namespace detail
}  // namespace quant

namespace detail {
/// What `reshape<D2>` accepts: dims with -1 (inferred) and 0 (kept), or a Shape.
template <std::size_t D2>
struct ReshapeArgs {
    std::array<long, D2> dims{};
    ReshapeArgs(std::initializer_list<long> l) {  // NOLINT: implicit on purpose
        EMBER_CHECK(l.size() == D2, Shape, "reshape: ", l.size(), " dims given for rank ", D2);
        std::copy(l.begin(), l.end(), dims.begin());
    }
    ReshapeArgs(const std::array<long, D2>& a) : dims(a) {}  // NOLINT
    ReshapeArgs(const std::array<std::size_t, D2>& a) {      // NOLINT
        // A dim past kMaxElements would turn negative as a long (and -1 means "infer").
        for (std::size_t i = 0; i < D2; ++i) dims[i] = static_cast<long>(checked_dim(a[i]));
    }
    ReshapeArgs(const Shape& s) {  // NOLINT
        EMBER_CHECK(s.rank() == D2, Shape, "reshape: shape ", s.to_string(), " is not of rank ", D2);
        for (std::size_t i = 0; i < D2; ++i) dims[i] = static_cast<long>(checked_dim(s[i]));
    }
    /// `d`, which must be at most kMaxElements (ShapeError otherwise).
    static std::size_t checked_dim(std::size_t d) {
        return checked_mul(d, 1, "reshape", "target dim");
    }
};
EMBER_API Shape resolve_reshape(const Shape& from, std::span<const long> dims);
/// Throws ShapeError: the lists of one level of a nested literal differ in length (`lengths`,
/// at the level `where` names: "rows", "the lists of block 1"...).
[[noreturn]] EMBER_API void ragged_literal(const char* op, const char* where,
                                           std::span<const std::size_t> lengths);
/// The data of a 2-d nested literal (rows of equal length).
template <typename T>
TensorData nested_data(std::initializer_list<std::initializer_list<T>> rows, const char* op) {
    const std::size_t cols = rows.size() == 0 ? 0 : rows.begin()->size();
    std::vector<T> flat;
    flat.reserve(rows.size() * cols);
    for (const auto& r : rows) {
        if (r.size() != cols) {
            std::vector<std::size_t> lengths;
            for (const auto& q : rows) lengths.push_back(q.size());
            ragged_literal(op, "rows", lengths);
        }
        flat.insert(flat.end(), r.begin(), r.end());
    }
    return TensorData(flat, Shape{rows.size(), cols});
}
/// The data of a 3-d nested literal (blocks of the same shape).
template <typename T>
TensorData nested_data(
    std::initializer_list<std::initializer_list<std::initializer_list<T>>> blocks, const char* op) {
    Shape shape{blocks.size(), 0, 0};
    std::vector<T> flat;
    bool first = true;
    for (const auto& b : blocks) {
        if (!first && b.size() != shape[1]) {
            std::vector<std::size_t> lengths;
            for (const auto& q : blocks) lengths.push_back(q.size());
            ragged_literal(op, "blocks (rows per block)", lengths);
        }
        const TensorData block = nested_data(b, op);
        if (first) {
            shape[1] = block.shape()[0];
            shape[2] = block.shape()[1];
            first = false;
        } else if (block.shape()[1] != shape[2]) {
            std::vector<std::size_t> lengths;
            for (const auto& q : blocks)
                for (const auto& r : q) lengths.push_back(r.size());
            ragged_literal(op, "rows (of every block, in order)", lengths);
        }
        const auto v = block.template as_slice<T>();
        flat.insert(flat.end(), v.begin(), v.end());
    }
    return TensorData(flat, shape);
}
#if EMBER_FREESTANDING
/// Firmware keeps no call sites: their function names would cost flash in every op.
struct NoCallSite {
    /// The (empty) call site.
    static constexpr NoCallSite current() { return {}; }
    /// No name: errors say "a tensor op".
    constexpr const char* function_name() const { return nullptr; }
};
using CallSite = NoCallSite;
#elif defined(__cpp_lib_source_location)
/// Where an op was called from (errors on moved-from tensors name it).
using CallSite = std::source_location;
#else
/// Where an op was called from, for compilers whose standard library has no
/// std::source_location (Clang 14 with libstdc++ 12): the calling function's name through the
/// builtin GCC and Clang share, evaluated at the call site as source_location::current() is.
struct BuiltinCallSite {
    const char* name = nullptr;  ///< the calling function's name
    /// The call site of the function whose default argument this is.
    static constexpr BuiltinCallSite current(const char* function = __builtin_FUNCTION()) {
        return {function};
    }
    /// The calling function's name.
    constexpr const char* function_name() const { return name; }
};
using CallSite = BuiltinCallSite;
#endif
/// Throws ArgumentError: a moved-from tensor was used by `accessor` (null for an op itself) in
/// `function` (a source_location's spelling).
[[noreturn]] EMBER_API void moved_from_tensor(const char* accessor, const char* function);
/// Throws ShapeError: a primitive of shape `shape` wrapped in a tensor of rank `rank` (out of
/// line, so that the wrapping constructor, which every op's result goes through, stays small).
[[noreturn]] EMBER_API void primitive_not_of_rank(const Shape& shape, std::size_t rank);
template <typename T>
concept Arithmetic = std::is_arithmetic_v<T>;
}  // namespace detail

/// A tensor of rank D and kind K on backend B.
template <Backend B, std::size_t D, TensorKind K>
class Tensor {
    static_assert(D >= 1 && D <= kMaxRank, "ember::Tensor: rank must be between 1 and kMaxRank");
    // Where an op was called from (errors on moved-from tensors name it).
    using Here = detail::CallSite;

public:
    /// The kind's op table.
    using Ops = detail::KindOps<B, K>;
    /// The backend primitive held.
    using Primitive = typename Ops::P;
    /// The element type of `into_scalar()`.
    using Elem = typename Ops::Elem;
    /// The backend.
    using BackendType = B;
    /// The kind.
    using Kind = K;
    /// The rank.
    static constexpr std::size_t rank = D;

    /// Wraps a primitive; throws ShapeError when its rank is not D.
    explicit Tensor(Primitive p) : p_(std::move(p)) {
        if (Ops::shape(p_).rank() != D) [[unlikely]]
            detail::primitive_not_of_rank(Ops::shape(p_), D);
    }
    /// Wraps a primitive (Burn's from_primitive).
    static Tensor from_primitive(Primitive p) { return Tensor(std::move(p)); }
    /// A copy of the handle (no data copy).
    Tensor(const Tensor&) = default;
    /// Takes `other`'s handle; `other` is left moved-from (see is_valid).
    Tensor(Tensor&& other) noexcept(std::is_nothrow_move_constructible_v<Primitive>)
        : p_(std::move(other.p_)), moved_(other.moved_) {
        other.moved_ = true;
    }
    /// Copies `other`'s handle.
    Tensor& operator=(const Tensor&) = default;
    /// Takes `other`'s handle; `other` is left moved-from (see is_valid).
    Tensor& operator=(Tensor&& other) noexcept(std::is_nothrow_move_assignable_v<Primitive>) {
        if (this != &other) {
            p_ = std::move(other.p_);
            moved_ = other.moved_;
            other.moved_ = true;
        }
        return *this;
    }
    ~Tensor() = default;

    // ---- creation ------------------------------------------------------------------------
    /// Uninitialised tensor.
    static Tensor empty(const Shape& shape, const Device<B>& device = {}) {
        check_rank(shape, "empty");
        return Tensor(Ops::empty(shape, device));
    }
    /// Tensor from host data; throws ShapeError when the data is not of rank D.
    static Tensor from_data(const TensorData& data, const Device<B>& device = {}) {
        check_rank(data.shape(), "from_data");
        return Tensor(Ops::from_data(data, device));
    }
    /// Tensor filled with `value` (Bool: true for a non-zero value).
    static Tensor full(const Shape& shape, Scalar value, const Device<B>& device = {}) {
        check_rank(shape, "full");
        return Tensor(Ops::full(shape, value, device));
    }
    /// Zeros (Bool: false).
    static Tensor zeros(const Shape& shape, const Device<B>& device = {}) {
        check_rank(shape, "zeros");
        return full(shape, Scalar(0), device);
    }
    /// Ones (Bool: true).
    static Tensor ones(const Shape& shape, const Device<B>& device = {}) {
        check_rank(shape, "ones");
        return full(shape, Scalar(1), device);
    }
    /// Random values drawn from `dist` (B::seed makes draws reproducible).
    static Tensor random(const Shape& shape, const Distribution& dist, const Device<B>& device = {})
        requires NumericKind<K>
    {
        check_rank(shape, "random");
        return Tensor(Ops::random(shape, dist, device));
    }
    /// The identity matrix of size n × n.
    static Tensor eye(std::size_t n, const Device<B>& device = {})
        requires(NumericKind<K> && D == 2)
    {
        auto r = Tensor<B, 1, Int>::arange(0, static_cast<std::int64_t>(n), device);
        auto m = r.template unsqueeze_dim<2>(1).equal(r.template unsqueeze_dim<2>(0));
        return Tensor(Ops::from_bool(m.into_primitive()));
    }
    /// [start, end) with step 1.
    static Tensor arange(std::int64_t start, std::int64_t end, const Device<B>& device = {})
        requires(std::same_as<K, Int> && D == 1)
    {
        return arange_step(start, end, 1, device);
    }
    /// [start, end) with the given step.
    static Tensor arange_step(std::int64_t start, std::int64_t end, std::int64_t step,
                              const Device<B>& device = {})
        requires(std::same_as<K, Int> && D == 1)
    {
        (void)detail::arange_length(start, end, step, "arange");  // before any backend sees it
        return Tensor(B::int_arange(start, end, step, device));
    }
    /// A 1-d float tensor from values.
    static Tensor from_floats(std::initializer_list<float> values, const Device<B>& device = {})
        requires(std::same_as<K, Float> && D == 1)
    {
        return from_data(TensorData(std::vector<float>(values), Shape{values.size()}), device);
    }
    /// A 1-d int tensor from values.
    static Tensor from_ints(std::initializer_list<std::int64_t> values, const Device<B>& device = {})
        requires(std::same_as<K, Int> && D == 1)
    {
        return from_data(TensorData(std::vector<std::int64_t>(values), Shape{values.size()}), device);
    }
    /// A 2-d float tensor from nested rows: `from_floats({{1, 2}, {3, 4}}, device)`; throws
    /// ShapeError naming the row lengths when they differ.
    static Tensor from_floats(std::initializer_list<std::initializer_list<float>> rows,
                              const Device<B>& device = {}) requires(std::same_as<K, Float>&& D ==
                                                                     2) {
        return from_data(detail::nested_data(rows, "from_floats"), device);
    }
    /// A 3-d float tensor from nested lists (every list of a level must have the same length).
    static Tensor from_floats(
        std::initializer_list<std::initializer_list<std::initializer_list<float>>> blocks,
        const Device<B>& device = {}) requires(std::same_as<K, Float>&& D == 3) {
        return from_data(detail::nested_data(blocks, "from_floats"), device);
    }
    /// A 2-d int tensor from nested rows: `from_ints({{1, 2}, {3, 4}}, device)`.
    static Tensor from_ints(std::initializer_list<std::initializer_list<std::int64_t>> rows,
                            const Device<B>& device = {}) requires(std::same_as<K, Int>&& D == 2) {
        return from_data(detail::nested_data(rows, "from_ints"), device);
    }
    /// A 3-d int tensor from nested lists.
    static Tensor from_ints(
        std::initializer_list<std::initializer_list<std::initializer_list<std::int64_t>>> blocks,
        const Device<B>& device = {}) requires(std::same_as<K, Int>&& D == 3) {
        return from_data(detail::nested_data(blocks, "from_ints"), device);
    }
    /// One-hot float vector of `num_classes` with a 1 at `index`.
    static Tensor one_hot(std::size_t index, std::size_t num_classes, const Device<B>& device = {})
        requires(std::same_as<K, Float> && D == 1)
    {
        EMBER_CHECK(index < num_classes, Index, "one_hot: index ", index,
                    " is out of range for ", num_classes, " classes");
        return zeros(Shape{num_classes}, device)
            .slice_assign({Slice{static_cast<long>(index), static_cast<long>(index) + 1}},
                          ones(Shape{1}, device));
    }
    /// Coordinates of every position of a grid of `shape`: [*shape, D - 1], int.
    static Tensor cartesian_grid(const std::array<std::size_t, D - 1>& shape,
                                 const Device<B>& device = {})
        requires(std::same_as<K, Int> && D >= 2)
    {
        std::vector<Primitive> parts;
        const Shape grid(shape);
        Shape with_coord = grid;
        with_coord.push_back(1);
        for (std::size_t d = 0; d < D - 1; ++d) {
            Shape s = Shape::filled(D - 1, 1);
            s[d] = shape[d];
            auto r = B::int_reshape(B::int_arange(0, static_cast<std::int64_t>(shape[d]), 1, device), s);
            parts.push_back(B::int_reshape(B::int_expand(std::move(r), grid), with_coord));
        }
        return Tensor(B::int_cat(std::move(parts), D - 1));
    }
    /// Mask of shape [n, m] (or any rank ≥ 2, on the last two dims) that is false on the
    /// diagonal shifted by `diagonal` and true elsewhere.
    static Tensor diag_mask(const Shape& shape, long diagonal = 0, const Device<B>& device = {})
        requires(std::same_as<K, Bool>)
    {
        return Tensor(tri_diff(shape, diagonal, device).not_equal_elem(0).into_primitive());
    }
    /// Mask that is true above the diagonal (col - row > diagonal): `x.mask_fill(mask, 0)` keeps
    /// the lower triangle, like `tril`.
    static Tensor tril_mask(const Shape& shape, long diagonal = 0, const Device<B>& device = {})
        requires(std::same_as<K, Bool>)
    {
        return Tensor(tri_diff(shape, diagonal, device).greater_elem(0).into_primitive());
    }
    /// Mask that is true below the diagonal (col - row < diagonal): `x.mask_fill(mask, 0)` keeps
    /// the upper triangle, like `triu`.
    static Tensor triu_mask(const Shape& shape, long diagonal = 0, const Device<B>& device = {})
        requires(std::same_as<K, Bool>)
    {
        return Tensor(tri_diff(shape, diagonal, device).lower_elem(0).into_primitive());
    }
    /// Concatenates along `dim`; throws ArgumentError for an empty list, ShapeError when the
    /// other dims differ.
    static Tensor cat(const std::vector<Tensor>& tensors, long dim) {
        EMBER_CHECK(!tensors.empty(), Argument, "cat: needs at least one tensor");
        const std::size_t d = normalize_dim(dim, D, "cat");
        std::vector<Primitive> ps;
        ps.reserve(tensors.size());
        Shape out = tensors[0].shape();
        out[d] = 0;
        for (const auto& t : tensors) {
            ps.push_back(t.handle());
            out[d] = detail::checked_add(out[d], Ops::shape(ps.back())[d], "cat", "dim sizes");
        }
        (void)out.num_elements("cat");
        return Tensor(Ops::cat(std::move(ps), d));
    }
    /// Stacks tensors along a new dim `dim` (D2 = D + 1).
    template <std::size_t D2 = D + 1>
    static Tensor<B, D2, K> stack(const std::vector<Tensor>& tensors, long dim) {
        static_assert(D2 == D + 1, "stack: the output rank must be D + 1");
        EMBER_CHECK(!tensors.empty(), Argument, "stack: needs at least one tensor");
        std::vector<Tensor<B, D2, K>> parts;
        parts.reserve(tensors.size());
        const long d = static_cast<long>(normalize_dim(dim, D2, "stack"));
        for (const auto& t : tensors) parts.push_back(t.template unsqueeze_dim<D2>(d));
        return Tensor<B, D2, K>::cat(parts, d);
    }

    // ---- access --------------------------------------------------------------------------
    // The accessors take the caller's source location: on a moved-from tensor their error
    // names the accessor and the function that called it (an op, or the user's function).
    /// The dims.
    std::array<std::size_t, D> dims(Here here = Here::current()) const {
        return Ops::shape(handle(here, "dims")).template to_array<D>();
    }
    /// The shape.
    Shape shape(Here here = Here::current()) const { return Ops::shape(handle(here, "shape")); }
    /// The element type.
    DType dtype(Here here = Here::current()) const { return Ops::dtype(handle(here, "dtype")); }
    /// The device.
    Device<B> device(Here here = Here::current()) const {
        return Ops::device(handle(here, "device"));
    }
    /// Number of elements.
    std::size_t num_elements(Here here = Here::current()) const {
        return shape(here).num_elements();
    }
    /// True unless the tensor was moved from (`std::move(t)` handed its handle over): every op
    /// on a moved-from tensor throws ArgumentError, until it is assigned a tensor again.
    bool is_valid() const { return !moved_; }
    /// The primitive (a handle copy).
    const Primitive& primitive(Here here = Here::current()) const {
        return handle(here, "primitive");
    }
    /// Moves the primitive out.
    Primitive into_primitive(Here here = Here::current()) && {
        return take(here, "into_primitive");
    }
    Primitive into_primitive(Here here = Here::current()) const& {
        return handle(here, "into_primitive");
    }
    /// A copy of the handle (no data copy), as Burn's clone().
    Tensor clone() const { return *this; }
    /// Host copy of the data (waits on asynchronous backends).
    TensorData to_data(Here here = Here::current()) const {
        return Ops::into_data(handle(here, "to_data"));
    }
    /// Host data, consuming this handle.
    TensorData into_data(Here here = Here::current()) && {
        return Ops::into_data(take(here, "into_data"));
    }
    TensorData into_data(Here here = Here::current()) const& {
        return Ops::into_data(handle(here, "into_data"));
    }
    /// The single element; throws ShapeError unless there is exactly one.
    Elem into_scalar() const {
        EMBER_CHECK(num_elements() == 1, Shape, "into_scalar: tensor of shape ",
                    shape().to_string(), " does not hold exactly one element");
        if constexpr (std::same_as<Elem, bool>) return to_data().template to_vec<bool>()[0];
        else return to_data().template to_vec<Elem>()[0];
    }
    /// The tensor on another device.
    Tensor to_device(const Device<B>& device) const {
        return Tensor(Ops::to_device(handle(), device));
    }

    // ---- shape ops (all kinds) -----------------------------------------------------------
    /// Same elements, new shape; dims may hold one -1 (inferred) and 0 (kept from this shape).
    template <std::size_t D2>
    Tensor<B, D2, K> reshape(detail::ReshapeArgs<D2> args) const {
        return Tensor<B, D2, K>(
            Ops::reshape(handle(), detail::resolve_reshape(shape(), args.dims)));
    }
    /// Broadcasts to `shape` (a view).
    template <std::size_t D2>
    Tensor<B, D2, K> expand(const Shape& shape) const {
        (void)shape.num_elements("expand");
        return Tensor<B, D2, K>(Ops::expand(handle(), shape));
    }
    /// Reorders the dims (a view).
    Tensor permute(const std::array<long, D>& axes) const {
        std::array<std::size_t, D> a{};
        for (std::size_t i = 0; i < D; ++i) a[i] = normalize_dim(axes[i], D, "permute");
        return Tensor(Ops::permute(handle(), a));
    }
    /// Swaps two dims (a view).
    Tensor swap_dims(long d1, long d2) const {
        std::array<long, D> a{};
        for (std::size_t i = 0; i < D; ++i) a[i] = static_cast<long>(i);
        std::swap(a[normalize_dim(d1, D, "swap_dims")], a[normalize_dim(d2, D, "swap_dims")]);
        return permute(a);
    }
    /// Swaps the last two dims.
    Tensor transpose() const {
        if constexpr (D == 1) return *this;
        else return swap_dims(-2, -1);
    }
    /// Moves dim `src` to position `dst`.
    Tensor movedim(long src, long dst) const {
        const std::size_t s = normalize_dim(src, D, "movedim"), d = normalize_dim(dst, D, "movedim");
        std::vector<long> order;
        for (std::size_t i = 0; i < D; ++i)
            if (i != s) order.push_back(static_cast<long>(i));
        order.insert(order.begin() + static_cast<long>(d), static_cast<long>(s));
        std::array<long, D> a{};
        std::copy(order.begin(), order.end(), a.begin());
        return permute(a);
    }
    /// Flattens dims [start, end] into one (D2 = D - (end - start)).
    template <std::size_t D2>
    Tensor<B, D2, K> flatten(long start, long end) const {
        const std::size_t s = normalize_dim(start, D, "flatten"), e = normalize_dim(end, D, "flatten");
        EMBER_CHECK(s <= e, Dim, "flatten: start dim ", s, " is after end dim ", e);
        EMBER_CHECK(D2 == D - (e - s), Dim, "flatten: dims ", s, "..=", e, " of rank ", D,
                    " give rank ", D - (e - s), ", not ", D2);
        const Shape in = shape();
        Shape out;
        for (std::size_t i = 0; i < s; ++i) out.push_back(in[i]);
        std::size_t m = 1;
        for (std::size_t i = s; i <= e; ++i) m *= in[i];
        out.push_back(m);
        for (std::size_t i = e + 1; i < D; ++i) out.push_back(in[i]);
        return Tensor<B, D2, K>(Ops::reshape(handle(), out));
    }
    /// Removes dim `dim`, which must have size 1 (D2 = D - 1).
    template <std::size_t D2>
    Tensor<B, D2, K> squeeze(long dim) const {
        static_assert(D2 + 1 == D, "squeeze: the output rank must be D - 1");
        const std::size_t d = normalize_dim(dim, D, "squeeze");
        const Shape in = shape();
        EMBER_CHECK(in[d] == 1, Shape, "squeeze: dim ", d, " of shape ", in.to_string(),
                    " has size ", in[d], ", not 1");
        Shape out;
        for (std::size_t i = 0; i < D; ++i)
            if (i != d) out.push_back(in[i]);
        return Tensor<B, D2, K>(Ops::reshape(handle(), out));
    }
    /// Alias of squeeze.
    template <std::size_t D2>
    Tensor<B, D2, K> squeeze_dim(long dim) const {
        return squeeze<D2>(dim);
    }
    /// Adds a leading dim of size 1.
    Tensor<B, D + 1, K> unsqueeze() const { return unsqueeze_dim<D + 1>(0); }
    /// Inserts a dim of size 1 at `dim` (of the output; negative counts from the end).
    template <std::size_t D2>
    Tensor<B, D2, K> unsqueeze_dim(long dim) const {
        static_assert(D2 == D + 1, "unsqueeze_dim: the output rank must be D + 1");
        const std::size_t d = normalize_dim(dim, D2, "unsqueeze_dim");
        const Shape in = shape();
        Shape out;
        for (std::size_t i = 0, j = 0; i < D2; ++i) out.push_back(i == d ? 1 : in[j++]);
        return Tensor<B, D2, K>(Ops::reshape(handle(), out));
    }
    /// Sub-tensor over ranges of the leading dims: `t.slice({{0, 2}, {1, 3}})`; each range is
    /// {start, end} or {start, end, step}, negative values count from the end.
    template <std::size_t N>
    Tensor slice(const Slice (&ranges)[N]) const {
        static_assert(N <= D, "slice: more ranges than dims");
        return Tensor(Ops::slice(handle(), tame_steps(std::span<const Slice>(ranges, N), "slice")));
    }
    /// Sub-tensor over ranges given as pairs.
    template <std::size_t N>
    Tensor slice(const std::array<std::pair<long, long>, N>& ranges) const {
        static_assert(N <= D, "slice: more ranges than dims");
        std::array<Slice, N> r{};
        for (std::size_t i = 0; i < N; ++i) r[i] = Slice{ranges[i].first, ranges[i].second};
        return Tensor(Ops::slice(handle(), tame_steps(r, "slice")));
    }
    /// Sub-tensor over a run-time list of ranges.
    Tensor slice(std::span<const Slice> ranges) const {
        EMBER_CHECK(ranges.size() <= D, Dim, "slice: ", ranges.size(), " ranges for rank ", D);
        return Tensor(Ops::slice(handle(), tame_steps(ranges, "slice")));
    }
    /// This tensor with the region `ranges` replaced by `values`.
    template <std::size_t N>
    Tensor slice_assign(const Slice (&ranges)[N], const Tensor& values) const {
        static_assert(N <= D, "slice_assign: more ranges than dims");
        return Tensor(
            Ops::slice_assign(handle(), tame_steps(std::span<const Slice>(ranges, N), "slice_assign"),
                              values.handle()));
    }
    /// slice_assign with ranges given as pairs (as `slice` takes them).
    template <std::size_t N>
    Tensor slice_assign(const std::array<std::pair<long, long>, N>& ranges,
                        const Tensor& values) const {
        static_assert(N <= D, "slice_assign: more ranges than dims");
        std::array<Slice, N> r{};
        for (std::size_t i = 0; i < N; ++i) r[i] = Slice{ranges[i].first, ranges[i].second};
        return Tensor(Ops::slice_assign(handle(), tame_steps(r, "slice_assign"), values.handle()));
    }
    /// slice_assign with a run-time list of ranges.
    Tensor slice_assign(std::span<const Slice> ranges, const Tensor& values) const {
        EMBER_CHECK(ranges.size() <= D, Dim, "slice_assign: ", ranges.size(), " ranges for rank ", D);
        return Tensor(Ops::slice_assign(handle(), tame_steps(ranges, "slice_assign"), values.handle()));
    }
    /// `length` elements of `dim` from `start`.
    Tensor narrow(long dim, std::size_t start, std::size_t length) const {
        const std::size_t d = normalize_dim(dim, D, "narrow");
        const std::size_t size = shape()[d];
        // Not `start + length <= size`: that sum wraps for narrow(d, SIZE_MAX, 2).
        EMBER_CHECK(start <= size && length <= size - start, Index, "narrow: start ", start,
                    " + length ", length, " exceeds dim ", d, " of size ", size);
        std::array<Slice, D> r{};
        r[d] = Slice{static_cast<long>(start), static_cast<long>(start + length)};
        return Tensor(Ops::slice(handle(), std::span<const Slice>(r.data(), d + 1)));
    }
    /// Splits into `chunks` pieces along `dim` (torch.chunk: the last may be smaller).
    std::vector<Tensor> chunk(std::size_t chunks, long dim) const {
        EMBER_CHECK(chunks > 0, Argument, "chunk: number of chunks must be positive");
        const std::size_t d = normalize_dim(dim, D, "chunk");
        const std::size_t size = shape()[d];
        const std::size_t step = std::max<std::size_t>(1, (size + chunks - 1) / chunks);
        std::vector<Tensor> out;
        for (std::size_t s = 0; s < size; s += step) out.push_back(narrow(d, s, std::min(step, size - s)));
        if (size == 0) out.push_back(*this);
        return out;
    }
    /// Reverses the listed dims.
    template <std::size_t N>
    Tensor flip(const long (&axes)[N]) const {
        return flip(std::span<const long>(axes, N));
    }
    /// Reverses the listed dims.
    Tensor flip(std::span<const long> axes) const {
        std::array<std::size_t, kMaxRank> a{};
        for (std::size_t i = 0; i < axes.size(); ++i) a[i] = normalize_dim(axes[i], D, "flip");
        return Tensor(Ops::flip(handle(), std::span<const std::size_t>(a.data(), axes.size())));
    }
    /// Tiles `times` copies along `dim`.
    Tensor repeat_dim(long dim, std::size_t times) const {
        const std::size_t d = normalize_dim(dim, D, "repeat_dim");
        return Tensor(Ops::repeat_dim(handle(), d, checked_repeat(d, times, "repeat_dim")));
    }
    /// Tiles along every dim (torch.Tensor.repeat with D sizes).
    Tensor repeat(const std::array<std::size_t, D>& sizes) const {
        Primitive q = handle();
        for (std::size_t i = 0; i < D; ++i)
            if (sizes[i] != 1)
                q = Ops::repeat_dim(std::move(q), i, checked_repeat(i, sizes[i], "repeat"));
        return Tensor(std::move(q));
    }
    /// Elementwise equality.
    Tensor<B, D, Bool> equal(const Tensor& other) const {
        return Tensor<B, D, Bool>(Ops::compare(CompareOp::Eq, handle(), other.handle()));
    }
    /// Elementwise inequality.
    Tensor<B, D, Bool> not_equal(const Tensor& other) const {
        return Tensor<B, D, Bool>(Ops::compare(CompareOp::Ne, handle(), other.handle()));
    }
    /// True when every element is non-zero; shape [1].
    Tensor<B, 1, Bool> all() const {
        return Tensor<B, 1, Bool>(B::bool_reduce(ReduceOp::All, Ops::to_bool(handle())));
    }
    /// True when any element is non-zero; shape [1].
    Tensor<B, 1, Bool> any() const {
        return Tensor<B, 1, Bool>(B::bool_reduce(ReduceOp::Any, Ops::to_bool(handle())));
    }
    /// all() along `dim`, kept with size 1.
    Tensor<B, D, Bool> all_dim(long dim) const {
        return Tensor<B, D, Bool>(B::bool_reduce_dim(ReduceOp::All, Ops::to_bool(handle()),
                                                     normalize_dim(dim, D, "all_dim")));
    }
    /// any() along `dim`, kept with size 1.
    Tensor<B, D, Bool> any_dim(long dim) const {
        return Tensor<B, D, Bool>(B::bool_reduce_dim(ReduceOp::Any, Ops::to_bool(handle()),
                                                     normalize_dim(dim, D, "any_dim")));
    }
    /// Elements picked along `dim` by an int index of the same rank (torch.gather).
    Tensor gather(long dim, const Tensor<B, D, Int>& indices) const {
        return Tensor(Ops::gather(normalize_dim(dim, D, "gather"), handle(), indices.primitive()));
    }
    /// Rows picked along `dim` by a 1-d int index (torch.index_select).
    Tensor select(long dim, const Tensor<B, 1, Int>& indices) const {
        return Tensor(Ops::select(handle(), normalize_dim(dim, D, "select"), indices.primitive()));
    }
    /// `value` where `mask` is true, this tensor elsewhere (torch.where(mask, value, self)).
    Tensor mask_where(const Tensor<B, D, Bool>& mask, const Tensor& value) const {
        return Tensor(Ops::mask_where(handle(), mask.primitive(), value.handle()));
    }

    // ---- numeric ops (Float and Int) -----------------------------------------------------
#define EMBER_BINARY_METHOD(name, OP)                                       \
    Tensor name(const Tensor& other) const& requires NumericKind<K> {       \
        return Tensor(Ops::binary(BinaryOp::OP, handle(), other.handle())); \
    }                                                                       \
    Tensor name(const Tensor& other) && requires NumericKind<K> {           \
        if (&other == this) return std::as_const(*this).name(other);        \
        return Tensor(Ops::binary(BinaryOp::OP, take(), other.handle()));   \
    }                                                                       \
    Tensor name##_scalar(Scalar s) const& requires NumericKind<K> {         \
        return Tensor(Ops::binary_scalar(BinaryOp::OP, handle(), s));       \
    }                                                                       \
    Tensor name##_scalar(Scalar s) && requires NumericKind<K> {             \
        return Tensor(Ops::binary_scalar(BinaryOp::OP, take(), s));         \
    }
    /// Elementwise a + b (broadcasting).
    EMBER_BINARY_METHOD(add, Add)
    /// Elementwise a - b.
    EMBER_BINARY_METHOD(sub, Sub)
    /// Elementwise a * b.
    EMBER_BINARY_METHOD(mul, Mul)
    /// Elementwise a / b (Int: floor division).
    EMBER_BINARY_METHOD(div, Div)
    /// Elementwise remainder with the divisor's sign (torch.remainder).
    EMBER_BINARY_METHOD(rem, Rem)
    /// Elementwise maximum (NaN propagates).
    EMBER_BINARY_METHOD(max_pair, Max)
    /// Elementwise minimum (NaN propagates).
    EMBER_BINARY_METHOD(min_pair, Min)
#undef EMBER_BINARY_METHOD

#define EMBER_UNARY_METHOD(name, OP, REQ)                 \
    Tensor name() const& requires REQ {                   \
        return Tensor(Ops::unary(UnaryOp::OP, handle())); \
    }                                                     \
    Tensor name() && requires REQ {                       \
        return Tensor(Ops::unary(UnaryOp::OP, take()));   \
    }
    /// -x.
    EMBER_UNARY_METHOD(neg, Neg, NumericKind<K>)
    /// |x|.
    EMBER_UNARY_METHOD(abs, Abs, NumericKind<K>)
    /// -1, 0 or 1 (0 for NaN, as PyTorch).
    EMBER_UNARY_METHOD(sign, Sign, NumericKind<K>)
    /// e^x.
    EMBER_UNARY_METHOD(exp, Exp, (std::same_as<K, Float>))
    /// Natural log.
    EMBER_UNARY_METHOD(log, Log, (std::same_as<K, Float>))
    /// log(1 + x).
    EMBER_UNARY_METHOD(log1p, Log1p, (std::same_as<K, Float>))
    /// Square root.
    EMBER_UNARY_METHOD(sqrt, Sqrt, (std::same_as<K, Float>))
    /// Sine.
    EMBER_UNARY_METHOD(sin, Sin, (std::same_as<K, Float>))
    /// Cosine.
    EMBER_UNARY_METHOD(cos, Cos, (std::same_as<K, Float>))
    /// Hyperbolic tangent.
    EMBER_UNARY_METHOD(tanh, Tanh, (std::same_as<K, Float>))
    /// Error function.
    EMBER_UNARY_METHOD(erf, Erf, (std::same_as<K, Float>))
    /// 1 / x.
    EMBER_UNARY_METHOD(recip, Recip, (std::same_as<K, Float>))
    /// Round down.
    EMBER_UNARY_METHOD(floor, Floor, (std::same_as<K, Float>))
    /// Round up.
    EMBER_UNARY_METHOD(ceil, Ceil, (std::same_as<K, Float>))
    /// Round half to even (torch.round).
    EMBER_UNARY_METHOD(round, Round, (std::same_as<K, Float>))
#undef EMBER_UNARY_METHOD

    /// x^y elementwise, float exponent tensor.
    Tensor powf(const Tensor& other) const requires(std::same_as<K, Float>) {
        return Tensor(Ops::binary(BinaryOp::Pow, handle(), other.handle()));
    }
    /// x^y with an int exponent tensor.
    Tensor powi(const Tensor<B, D, Int>& other) const requires NumericKind<K> {
        if constexpr (std::same_as<K, Float>) return powf(other.float_());
        else
            return Tensor(Ops::binary(BinaryOp::Pow, handle(), other.primitive()));
    }
    /// x^p with a float exponent.
    Tensor powf_scalar(double p) const requires(std::same_as<K, Float>) {
        if (p == 2.0) return Tensor(Ops::binary(BinaryOp::Mul, handle(), handle()));
        return Tensor(Ops::binary_scalar(BinaryOp::Pow, handle(), Scalar(p)));
    }
    /// x^p with an int exponent.
    Tensor powi_scalar(std::int64_t p) const requires NumericKind<K> {
        if (p == 2) return Tensor(Ops::binary(BinaryOp::Mul, handle(), handle()));
        return Tensor(Ops::binary_scalar(BinaryOp::Pow, handle(), Scalar(p)));
    }
    /// Clamps into [lo, hi] (NaN stays NaN).
    Tensor clamp(Scalar lo, Scalar hi) const requires NumericKind<K> {
        return Tensor(Ops::clamp(handle(), lo, hi));
    }
    /// max(x, lo).
    Tensor clamp_min(Scalar lo) const requires NumericKind<K> {
        return Tensor(Ops::binary_scalar(BinaryOp::Max, handle(), lo));
    }
    /// min(x, hi).
    Tensor clamp_max(Scalar hi) const requires NumericKind<K> {
        return Tensor(Ops::binary_scalar(BinaryOp::Min, handle(), hi));
    }

#define EMBER_COMPARE_METHOD(name, OP)                                                    \
    Tensor<B, D, Bool> name(const Tensor& other) const requires NumericKind<K> {          \
        return Tensor<B, D, Bool>(Ops::compare(CompareOp::OP, handle(), other.handle())); \
    }                                                                                     \
    Tensor<B, D, Bool> name##_elem(Scalar s) const requires NumericKind<K> {              \
        return Tensor<B, D, Bool>(Ops::compare_scalar(CompareOp::OP, handle(), s));       \
    }
    /// x > y.
    EMBER_COMPARE_METHOD(greater, Gt)
    /// x >= y.
    EMBER_COMPARE_METHOD(greater_equal, Ge)
    /// x < y.
    EMBER_COMPARE_METHOD(lower, Lt)
    /// x <= y.
    EMBER_COMPARE_METHOD(lower_equal, Le)
#undef EMBER_COMPARE_METHOD
    /// x == s.
    Tensor<B, D, Bool> equal_elem(Scalar s) const requires NumericKind<K> {
        return Tensor<B, D, Bool>(Ops::compare_scalar(CompareOp::Eq, handle(), s));
    }
    /// x != s.
    Tensor<B, D, Bool> not_equal_elem(Scalar s) const requires NumericKind<K> {
        return Tensor<B, D, Bool>(Ops::compare_scalar(CompareOp::Ne, handle(), s));
    }
    /// x == b, for a bool tensor: itself for true, its negation for false.
    Tensor equal_elem(bool b) const requires(std::same_as<K, Bool>) {
        return b ? Tensor(handle()) : not_();
    }
    /// x != b, for a bool tensor.
    Tensor not_equal_elem(bool b) const requires(std::same_as<K, Bool>) {
        return b ? not_() : Tensor(handle());
    }
    /// NaN positions (never true for Int).
    Tensor<B, D, Bool> is_nan() const requires NumericKind<K> {
        return Tensor<B, D, Bool>(Ops::compare(CompareOp::Ne, handle(), handle()));
    }
    /// True when any element is NaN; shape [1].
    Tensor<B, 1, Bool> contains_nan() const requires NumericKind<K> { return is_nan().any(); }
    /// |x - y| <= atol + rtol * |y| elementwise (torch.isclose; NaN is never close).
    Tensor<B, D, Bool> is_close(const Tensor& other, double atol = 1e-8, double rtol = 1e-5) const
        requires NumericKind<K>
    {
        auto a = float_tensor(), b = other.float_tensor();
        auto diff = a.sub(b).abs();
        auto tol = b.abs().mul_scalar(rtol).add_scalar(atol);
        // As torch.isclose: non-finite values are close only to equal values (equal
        // infinities, although their difference is NaN); an infinite `other` would otherwise
        // make the tolerance infinite and every value close to it.
        auto finite = b.abs().lower_elem(std::numeric_limits<double>::infinity());
        return diff.lower_equal(tol).bool_and(finite).bool_or(a.equal(b));
    }
    /// True when every element is close (torch.allclose).
    bool all_close(const Tensor& other, std::optional<double> atol = std::nullopt,
                   std::optional<double> rtol = std::nullopt) const requires NumericKind<K> {
        return is_close(other, atol.value_or(1e-8), rtol.value_or(1e-5)).all().into_scalar();
    }
    /// `value` where `mask` is true (Bool: true for a non-zero value); the mask broadcasts to
    /// this tensor's shape.
    Tensor mask_fill(const Tensor<B, D, Bool>& mask, Scalar value) const {
        if constexpr (std::same_as<K, Bool>) {
            // Backends have no bool mask_fill: a mask_where against a broadcast [1, ..., 1]
            // value is the same, once the shared check has held the mask to this shape.
            detail::check::mask_fill(detail::check::Operand(shape(), DType::Bool),
                                     detail::check::Operand(mask.shape(), mask.dtype()));
            return Tensor(Ops::mask_where(handle(), mask.primitive(),
                                          Ops::full(Shape::filled(D, 1), value, device())));
        } else {
            return Tensor(Ops::mask_fill(handle(), mask.primitive(), value));
        }
    }
    /// Adds `values` at positions `indices` along `dim` (torch.scatter_add).
    Tensor scatter(long dim, const Tensor<B, D, Int>& indices, const Tensor& values) const
        requires NumericKind<K>
    {
        return Tensor(Ops::scatter(normalize_dim(dim, D, "scatter"), handle(), indices.primitive(),
                                   values.handle()));
    }
    /// Adds `values` into the rows `indices` along `dim` (Bool: ors them in, as Burn's
    /// bool_select_or: a row stays true once any value sent to it is true).
    Tensor select_assign(long dim, const Tensor<B, 1, Int>& indices, const Tensor& values) const {
        if constexpr (std::same_as<K, Bool>) {
            // As counts: the sum of the 0/1 values sent to a row is non-zero iff one was true.
            return int_().select_assign(dim, indices, values.int_()).not_equal_elem(0);
        } else {
            return Tensor(Ops::select_assign(handle(), normalize_dim(dim, D, "select_assign"),
                                             indices.primitive(), values.handle()));
        }
    }

// WIDEN: on PyTorch's autocast f32 list (f16/bf16 operands are cast to f32 under a guard).
#define EMBER_REDUCE_METHOD(name, OP, WIDEN)                                               \
    Tensor<B, 1, K> name() const requires NumericKind<K> {                                 \
        if constexpr (WIDEN && std::same_as<K, Float>)                                     \
            if (autocast_widens()) [[unlikely]]                                            \
                return cast(DType::F32).name();                                            \
        return Tensor<B, 1, K>(Ops::reduce(ReduceOp::OP, handle()));                       \
    }                                                                                      \
    Tensor name##_dim(long dim) const requires NumericKind<K> {                            \
        if constexpr (WIDEN && std::same_as<K, Float>)                                     \
            if (autocast_widens()) [[unlikely]]                                            \
                return cast(DType::F32).name##_dim(dim);                                   \
        return Tensor(                                                                     \
            Ops::reduce_dim(ReduceOp::OP, handle(), normalize_dim(dim, D, #name "_dim"))); \
    }
    /// Sum (shape [1]) / along a dim (kept). In f32 under an ember::Autocast guard.
    EMBER_REDUCE_METHOD(sum, Sum, true)
    /// Product. In f32 under an ember::Autocast guard.
    EMBER_REDUCE_METHOD(prod, Prod, true)
    /// Maximum (NaN propagates).
    EMBER_REDUCE_METHOD(max, Max, false)
    /// Minimum (NaN propagates).
    EMBER_REDUCE_METHOD(min, Min, false)
#undef EMBER_REDUCE_METHOD
    /// Mean, shape [1]. Int: an Int result, as Burn's, the sum divided by the count rounding
    /// toward zero (-7 / 2 is -3); throws ShapeError for an empty Int tensor (no mean exists).
    Tensor<B, 1, K> mean() const requires NumericKind<K> {
        if constexpr (std::same_as<K, Int>)
            return sum().int_mean_divide(num_elements(), "mean", shape());
        else
            return Tensor<B, 1, K>(Ops::reduce(ReduceOp::Mean, handle()));
    }
    /// Mean along `dim` (kept); Int rounds toward zero as mean() does.
    Tensor mean_dim(long dim) const requires NumericKind<K> {
        const std::size_t d = normalize_dim(dim, D, "mean_dim");
        if constexpr (std::same_as<K, Int>)
            return sum_dim(static_cast<long>(d)).int_mean_divide(shape()[d], "mean_dim", shape());
        else
            return Tensor(Ops::reduce_dim(ReduceOp::Mean, handle(), d));
    }
    /// Index of the maximum along `dim` (kept).
    Tensor<B, D, Int> argmax(long dim) const requires NumericKind<K> {
        return Tensor<B, D, Int>(
            Ops::arg_reduce(ArgReduceOp::ArgMax, handle(), normalize_dim(dim, D, "argmax")));
    }
    /// Index of the minimum along `dim` (kept).
    Tensor<B, D, Int> argmin(long dim) const requires NumericKind<K> {
        return Tensor<B, D, Int>(
            Ops::arg_reduce(ArgReduceOp::ArgMin, handle(), normalize_dim(dim, D, "argmin")));
    }
    /// (max along `dim`, its index), both kept.
    std::pair<Tensor, Tensor<B, D, Int>> max_dim_with_indices(long dim) const requires NumericKind<K> {
        auto idx = argmax(dim);
        return {gather(dim, idx), idx};
    }
    /// (min along `dim`, its index), both kept.
    std::pair<Tensor, Tensor<B, D, Int>> min_dim_with_indices(long dim) const requires NumericKind<K> {
        auto idx = argmin(dim);
        return {gather(dim, idx), idx};
    }
    /// Sorted along `dim` (stable; NaN last).
    Tensor sort(long dim) const requires NumericKind<K> { return sort_with_indices(dim).first; }
    /// Sorted descending along `dim`.
    Tensor sort_descending(long dim) const requires NumericKind<K> {
        return sort_descending_with_indices(dim).first;
    }
    /// (sorted values, their original indices).
    std::pair<Tensor, Tensor<B, D, Int>> sort_with_indices(long dim) const requires NumericKind<K> {
        auto [v, i] = Ops::sort_with_indices(handle(), normalize_dim(dim, D, "sort"), false);
        return {Tensor(std::move(v)), Tensor<B, D, Int>(std::move(i))};
    }
    /// (values sorted descending, their original indices).
    std::pair<Tensor, Tensor<B, D, Int>> sort_descending_with_indices(long dim) const
        requires NumericKind<K>
    {
        auto [v, i] =
            Ops::sort_with_indices(handle(), normalize_dim(dim, D, "sort_descending"), true);
        return {Tensor(std::move(v)), Tensor<B, D, Int>(std::move(i))};
    }
    /// Indices that sort along `dim`.
    Tensor<B, D, Int> argsort(long dim) const requires NumericKind<K> { return sort_with_indices(dim).second; }
    /// Indices that sort descending along `dim`.
    Tensor<B, D, Int> argsort_descending(long dim) const requires NumericKind<K> {
        return sort_descending_with_indices(dim).second;
    }
    /// The k largest along `dim`, descending.
    Tensor topk(std::size_t k, long dim) const requires NumericKind<K> { return topk_with_indices(k, dim).first; }
    /// (the k largest along `dim`, their indices).
    std::pair<Tensor, Tensor<B, D, Int>> topk_with_indices(std::size_t k, long dim) const
        requires NumericKind<K>
    {
        auto [v, i] = Ops::topk(handle(), k, normalize_dim(dim, D, "topk"), true);
        return {Tensor(std::move(v)), Tensor<B, D, Int>(std::move(i))};
    }
    /// Lower triangle of the last two dims (elements above diagonal + `diagonal` zeroed).
    Tensor tril(long diagonal = 0) const requires NumericKind<K> {
        return mask_fill(Tensor<B, D, Bool>::tril_mask(shape(), diagonal, device()), Scalar(0));
    }
    /// Upper triangle of the last two dims.
    Tensor triu(long diagonal = 0) const requires NumericKind<K> {
        return mask_fill(Tensor<B, D, Bool>::triu_mask(shape(), diagonal, device()), Scalar(0));
    }
    /// Same shape, filled with `value`.
    Tensor full_like(Scalar value) const requires NumericKind<K> {
        return Tensor(Ops::full(shape(), value, device()));
    }
    /// Same shape, zeros.
    Tensor zeros_like() const requires NumericKind<K> { return full_like(Scalar(0)); }
    /// Same shape, ones.
    Tensor ones_like() const requires NumericKind<K> { return full_like(Scalar(1)); }
    /// Same shape, random.
    Tensor random_like(const Distribution& dist) const requires NumericKind<K> {
        return random(shape(), dist, device());
    }
    /// Pads the last two dims by (left, right, top, bottom) with `value` (Burn's pad).
    Tensor pad(const std::array<std::size_t, 4>& pads, Scalar value) const requires NumericKind<K> {
        static_assert(D >= 2, "pad: needs rank >= 2");
        const Shape in = shape();
        Shape out = in;
        out[D - 1] =
            detail::checked_add(in[D - 1], detail::checked_add(pads[0], pads[1], "pad"), "pad");
        out[D - 2] =
            detail::checked_add(in[D - 2], detail::checked_add(pads[2], pads[3], "pad"), "pad");
        (void)out.num_elements("pad");
        std::array<Slice, D> r{};
        r[D - 1] = Slice{static_cast<long>(pads[0]), static_cast<long>(pads[0] + in[D - 1])};
        r[D - 2] = Slice{static_cast<long>(pads[2]), static_cast<long>(pads[2] + in[D - 2])};
        return Tensor(Ops::slice_assign(Ops::full(out, value, device()), r, handle()));
    }
    /// Non-zero → true.
    Tensor<B, D, Bool> bool_() const requires NumericKind<K> {
        return Tensor<B, D, Bool>(Ops::to_bool(handle()));
    }

    // ---- autodiff ------------------------------------------------------------------------
    // On a backend without autodiff these are no-ops (as in Burn): require_grad marks nothing,
    // is_require_grad is false, detach and inner return the tensor, grad finds nothing.

    /// Marks this tensor as a leaf whose gradient `backward()` keeps.
    Tensor require_grad() const requires(std::same_as<K, Float>) { return set_require_grad(true); }
    /// Marks (or unmarks) this tensor as a leaf whose gradient `backward()` keeps.
    Tensor set_require_grad(bool require) const requires(std::same_as<K, Float>) {
        return Tensor(B::float_set_require_grad(handle(), require));
    }
    /// Whether `backward()` keeps this tensor's gradient.
    bool is_require_grad() const {
        if constexpr (std::same_as<K, Float>)
            return B::float_is_require_grad(handle());
        else return false;
    }
    /// The same values, cut from the graph: no gradient flows through the result.
    Tensor detach() const {
        if constexpr (std::same_as<K, Float>)
            return Tensor(B::float_detach(handle()));
        else return *this;
    }
    /// Backpropagates from this tensor (seeded with ones) and returns the gradients of every
    /// leaf marked with `require_grad()`. The graph behind it is consumed.
    auto backward() const requires(std::same_as<K, Float> && AutodiffBackend<B>) {
        return B::backward(handle());
    }
    /// This tensor's gradient in `grads` (a tensor of the inner backend), if it has one.
    template <typename G>
    std::optional<Tensor<InnerBackend<B>, D>> grad(const G& grads) const
        requires(std::same_as<K, Float>) {
        if constexpr (AutodiffBackend<B>) {
            auto g = B::grad(handle(), grads);
            if (!g) return std::nullopt;
            return Tensor<InnerBackend<B>, D>(std::move(*g));
        } else {
            return std::nullopt;
        }
    }
    /// Removes this tensor's gradient from `grads` and returns it.
    template <typename G>
    std::optional<Tensor<InnerBackend<B>, D>> grad_remove(G& grads) const
        requires(std::same_as<K, Float>) {
        if constexpr (AutodiffBackend<B>) {
            auto g = B::grad_remove(handle(), grads);
            if (!g) return std::nullopt;
            return Tensor<InnerBackend<B>, D>(std::move(*g));
        } else {
            return std::nullopt;
        }
    }
    /// Replaces (or sets) this tensor's gradient in `grads`.
    template <typename G>
    void grad_replace(G& grads, const Tensor<InnerBackend<B>, D>& grad) const
        requires(std::same_as<K, Float> && AutodiffBackend<B>) {
        B::grad_replace(handle(), grads, grad.primitive());
    }
    /// The same values on the inner backend, outside any graph.
    Tensor<InnerBackend<B>, D, K> inner() const {
        if constexpr (std::same_as<K, Float> && AutodiffBackend<B>)
            return Tensor<InnerBackend<B>, D, K>(B::inner(handle()));
        else
            return Tensor<InnerBackend<B>, D, K>(handle());
    }
    /// Wraps a tensor of the inner backend (untracked, no gradient required).
    static Tensor from_inner(const Tensor<InnerBackend<B>, D, K>& t) {
        if constexpr (std::same_as<K, Float> && AutodiffBackend<B>)
            return Tensor(B::from_inner(t.primitive()));
        else return Tensor(t.primitive());
    }

    // ---- float only ----------------------------------------------------------------------
    /// Matrix product with torch.matmul's broadcasting of batch dims. Under an ember::Autocast
    /// guard both operands are cast to its dtype first (f64 ones excepted).
    Tensor matmul(const Tensor& other) const& requires(std::same_as<K, Float>) {
        if (detail::autocast::current()) [[unlikely]]
            return autocast_matmul(*this, other);
        return Tensor(B::float_matmul(typename Ops::A(handle()), typename Ops::A(other.handle())));
    }
    Tensor matmul(const Tensor& other) && requires(std::same_as<K, Float>) {
        if (detail::autocast::current()) [[unlikely]]
            return autocast_matmul(*this, other);
        if (&other == this) return std::as_const(*this).matmul(other);
        return Tensor(B::float_matmul(typename Ops::A(take()), typename Ops::A(other.handle())));
    }
    /// The tensor quantized with `scheme` and `qparams`: a quant::QuantizedTensor<B, D>
    /// (needs <ember/quant/tensor.hpp>, which <ember/ember.hpp> includes).
    template <typename Scheme = quant::QuantizationScheme>
    auto quantize(const Scheme& scheme, const quant::QuantizationParameters<B>& qparams) const
        requires(std::same_as<K, Float>)
    {
        return quant::detail::QuantizeHook<Scheme>::quantize(*this, scheme, qparams);
    }
    /// The tensor quantized with parameters computed from its own range (min-max).
    template <typename Scheme = quant::QuantizationScheme>
    auto quantize_dynamic(const Scheme& scheme) const requires(std::same_as<K, Float>) {
        return quant::detail::QuantizeHook<Scheme>::quantize_dynamic(*this, scheme);
    }
    /// Truncates toward zero into an int tensor.
    Tensor<B, D, Int> int_() const requires(!std::same_as<K, Int>) {
        if constexpr (std::same_as<K, Float>)
            return Tensor<B, D, Int>(B::float_into_int(handle()));
        else
            return Tensor<B, D, Int>(B::bool_into_int(handle()));
    }
    /// Converts to a float tensor.
    Tensor<B, D, Float> float_() const requires(!std::same_as<K, Float>) {
        if constexpr (std::same_as<K, Int>)
            return Tensor<B, D, Float>(B::int_into_float(handle()));
        else
            return Tensor<B, D, Float>(B::bool_into_float(handle()));
    }
    /// Converts the elements to another float dtype (f32, f64, f16, bf16). A tensor already in
    /// `dtype` is returned as is (no kernel, no graph node), as PyTorch's `to` returns self.
    Tensor cast(DType dtype) const requires(std::same_as<K, Float>) {
        if (B::float_dtype(handle()) == dtype) return *this;
        return Tensor(B::float_cast(handle(), dtype));
    }
    /// As f32 (Burn's to_full_precision).
    Tensor to_full_precision() const requires(std::same_as<K, Float>) { return cast(DType::F32); }
    /// Back to the backend's float dtype.
    static Tensor from_full_precision(const Tensor& t) requires(std::same_as<K, Float>) {
        return t.cast(dtype_of<typename B::FloatElem>());
    }
    /// Variance along `dim` with Bessel's correction (n - 1), kept.
    Tensor var(long dim) const requires(std::same_as<K, Float>) { return var_mean_impl(dim, 1).first; }
    /// Biased variance (n) along `dim`, kept.
    Tensor var_bias(long dim) const requires(std::same_as<K, Float>) { return var_mean_impl(dim, 0).first; }
    /// (variance with correction, mean) along `dim`.
    std::pair<Tensor, Tensor> var_mean(long dim) const requires(std::same_as<K, Float>) {
        return var_mean_impl(dim, 1);
    }
    /// (biased variance, mean) along `dim`.
    std::pair<Tensor, Tensor> var_mean_bias(long dim) const requires(std::same_as<K, Float>) {
        return var_mean_impl(dim, 0);
    }

    // ---- int only ------------------------------------------------------------------------
    /// One-hot encoding of class indices into a new last dim of `num_classes`.
    Tensor<B, D + 1, Int> one_hot(std::size_t num_classes) const requires(std::same_as<K, Int>) {
        if (num_elements() > 0) {
            const auto lo = min().into_scalar(), hi = max().into_scalar();
            EMBER_CHECK(lo >= 0 && hi < static_cast<std::int64_t>(num_classes), Index,
                        "one_hot: class indices ", lo, "..=", hi, " are out of range for ",
                        num_classes, " classes");
        }
        Shape s = Shape::filled(D + 1, 1);
        s[D] = num_classes;
        auto classes = Tensor<B, D + 1, Int>(B::int_reshape(
            B::int_arange(0, static_cast<std::int64_t>(num_classes), 1, device()), s));
        return unsqueeze_dim<D + 1>(D).equal(classes).int_();
    }

    // ---- int bitwise ops (Burn's names, PyTorch's semantics on two's-complement ints) -------
#define EMBER_BITWISE_METHOD(name)                                          \
    Tensor name(const Tensor& other) const requires(std::same_as<K, Int>) { \
        return Tensor(B::int_##name(handle(), other.handle()));             \
    }                                                                       \
    Tensor name##_scalar(Scalar s) const requires(std::same_as<K, Int>) {   \
        return Tensor(B::int_##name##_scalar(handle(), s));                 \
    }
    /// Bitwise and, elementwise (broadcasting); `_scalar`: with one int (torch.bitwise_and).
    EMBER_BITWISE_METHOD(bitwise_and)
    /// Bitwise or, elementwise (broadcasting); `_scalar`: with one int (torch.bitwise_or).
    EMBER_BITWISE_METHOD(bitwise_or)
    /// Bitwise xor, elementwise (broadcasting); `_scalar`: with one int (torch.bitwise_xor).
    EMBER_BITWISE_METHOD(bitwise_xor)
    /// x << n elementwise (broadcasting; `_scalar`: by one n), wrapping in two's complement
    /// (torch.bitwise_left_shift). A shift by n < 0 or n >= the element's bit width (64 for
    /// the I64 int tensors) gives 0, as PyTorch 2's; PyTorch 1.13 leaves that case to the
    /// hardware (x86 shifts by n mod 64).
    EMBER_BITWISE_METHOD(bitwise_left_shift)
    /// x >> n elementwise (broadcasting; `_scalar`: by one n), arithmetic: negative values
    /// keep their sign, -5 >> 1 == -3 (torch.bitwise_right_shift). A shift by n < 0 or n >= the
    /// element's bit width gives the sign fill, 0 or -1, as PyTorch 2's (PyTorch 1.13 leaves
    /// that case to the hardware).
    EMBER_BITWISE_METHOD(bitwise_right_shift)
#undef EMBER_BITWISE_METHOD
    /// ~x: each bit flipped, so -x - 1 (torch.bitwise_not on an int tensor).
    Tensor bitwise_not() const requires(std::same_as<K, Int>) {
        return Tensor(B::int_bitwise_not(handle()));
    }

    // ---- bool only -----------------------------------------------------------------------
    /// Logical not.
    Tensor not_() const requires(std::same_as<K, Bool>) {
        return Tensor(B::bool_not(handle()));
    }
    /// Logical and.
    Tensor bool_and(const Tensor& o) const requires(std::same_as<K, Bool>) {
        return Tensor(B::bool_binary(BinaryOp::And, handle(), o.handle()));
    }
    /// Logical or.
    Tensor bool_or(const Tensor& o) const requires(std::same_as<K, Bool>) {
        return Tensor(B::bool_binary(BinaryOp::Or, handle(), o.handle()));
    }
    /// Logical xor.
    Tensor bool_xor(const Tensor& o) const requires(std::same_as<K, Bool>) {
        return Tensor(B::bool_binary(BinaryOp::Xor, handle(), o.handle()));
    }
    /// Indices of true elements: [n, D] (torch.argwhere).
    Tensor<B, 2, Int> argwhere() const requires(std::same_as<K, Bool>) {
        return Tensor<B, 2, Int>(B::bool_argwhere(handle()));
    }
    /// Indices of true elements, one 1-d tensor per dim (torch.nonzero(as_tuple=True)).
    std::vector<Tensor<B, 1, Int>> nonzero() const requires(std::same_as<K, Bool>) {
        auto w = argwhere();
        std::vector<Tensor<B, 1, Int>> out;
        for (std::size_t d = 0; d < D; ++d)
            out.push_back(w.narrow(1, d, 1).template squeeze<1>(1));
        return out;
    }

private:
    template <Backend, std::size_t, TensorKind>
    friend class Tensor;

    // The primitive, for an op; throws ArgumentError when this tensor was moved from, naming
    // `accessor` (when an accessor asks) and `here`'s function (the op, or the user's function
    // that called the accessor). One test of a flag: ops stay as cheap as before.
    const Primitive& handle(Here here = Here::current(), const char* accessor = nullptr) const {
        if (moved_) [[unlikely]]
            detail::moved_from_tensor(accessor, here.function_name());
        return p_;
    }
    // The primitive handed over to an op that consumes this tensor (std::move(t).op()).
    Primitive&& take(Here here = Here::current(), const char* accessor = nullptr) {
        if (moved_) [[unlikely]]
            detail::moved_from_tensor(accessor, here.function_name());
        moved_ = true;
        return std::move(p_);
    }
    // Under an ember::Autocast guard: both operands in its dtype, then the plain product.
    static Tensor autocast_matmul(const Tensor& a, const Tensor& b) {
        const DType to = *detail::autocast::current();
        const Tensor x = detail::autocast::lower(a, to), y = detail::autocast::lower(b, to);
        return Tensor(B::float_matmul(x.handle(), y.handle()));
    }
    // True under an ember::Autocast guard for an f16/bf16 tensor (an f32-list op widens it).
    bool autocast_widens() const {
        if (!detail::autocast::current()) return false;
        const DType d = dtype();
        return d == DType::F16 || d == DType::BF16;
    }
    // Checks a shape an op is about to create (rank D, element count in range).
    static void check_rank(const Shape& s, const char* op) {
        EMBER_CHECK(s.rank() == D, Shape, op, ": shape ", s.to_string(), " is not of rank ", D);
        (void)s.num_elements(op);
    }
    // The ranges, each of at most one element rewritten with step 1: its step changes nothing
    // but its stride, and a backend multiplying a stride by a huge step (2 * LONG_MAX)
    // would overflow. A longer range's stride * step stays below the tensor's extent.
    struct TamedRanges {
        std::array<Slice, kMaxRank> r{};
        std::size_t n = 0;
        operator std::span<const Slice>() const { return {r.data(), n}; }  // NOLINT
    };
    TamedRanges tame_steps(std::span<const Slice> ranges, const char* op) const {
        TamedRanges out;
        out.n = std::min(ranges.size(), kMaxRank);
        const Shape s = shape();
        for (std::size_t i = 0; i < out.n; ++i) {
            out.r[i] = ranges[i];
            if (ranges[i].step <= 1 || i >= s.rank()) continue;
            const auto [start, len] = ranges[i].resolve(s[i], op);
            if (len <= 1)
                out.r[i] = Slice{static_cast<long>(start), static_cast<long>(start + len), 1};
        }
        return out;
    }
    // `times` copies of dim `d`: the size they make must be one a tensor may have.
    std::size_t checked_repeat(std::size_t d, std::size_t times, const char* op) const {
        const Shape s = shape();
        Shape out = s;
        out[d] = detail::checked_mul(s[d], times, op, "dim size times repeats");
        (void)out.num_elements(op);
        return times;
    }
    // An Int sum over `count` elements divided by the count, rounding toward zero as Burn's
    // int_mean does (Int div floors, so the division runs on |sum| and the sign goes back on).
    Tensor int_mean_divide(std::size_t count, const char* op, const Shape& input) const
        requires(std::same_as<K, Int>) {
        EMBER_CHECK(count > 0, Shape, op, ": the mean of no elements (Int tensor of shape ",
                    input.to_string(), ") has no Int value");
        return abs().div_scalar(Scalar(count)).mul(sign());
    }
    Tensor<B, D, Float> float_tensor() const {
        if constexpr (std::same_as<K, Float>) return *this;
        else return float_();
    }
    // col - row - diagonal over the last two dims of `shape`, broadcast to it.
    static Tensor<B, D, Int> tri_diff(const Shape& shape, long diagonal, const Device<B>& device) {
        static_assert(D >= 2, "triangular masks need rank >= 2");
        check_rank(shape, "tril_mask");
        const auto rows = static_cast<std::int64_t>(shape[D - 2]);
        const auto cols = static_cast<std::int64_t>(shape[D - 1]);
        Shape rs = Shape::filled(D, 1), cs = Shape::filled(D, 1);
        rs[D - 2] = shape[D - 2];
        cs[D - 1] = shape[D - 1];
        Tensor<B, D, Int> r(B::int_reshape(B::int_arange(0, rows, 1, device), rs));
        Tensor<B, D, Int> c(B::int_reshape(B::int_arange(0, cols, 1, device), cs));
        auto diff = c.sub(r).sub_scalar(diagonal);
        return Tensor<B, D, Int>(B::int_expand(std::move(diff).into_primitive(), shape));
    }
    std::pair<Tensor, Tensor> var_mean_impl(long dim, std::size_t correction) const {
        const std::size_t d = normalize_dim(dim, D, "var");
        const std::size_t n = shape()[d];
        auto mean = mean_dim(static_cast<long>(d));
        // The centered values are not kept: under Fusion<B> their squares' sum is then one
        // kernel that never writes them out.
        auto squared = [](Tensor c) { return c.mul(c); };
        auto sq = squared(sub(mean)).sum_dim(static_cast<long>(d));
        const double denom = n > correction ? static_cast<double>(n - correction) : 0.0;
        return {sq.div_scalar(denom), mean};
    }

    Primitive p_;
    bool moved_ = false;  // the handle was moved out (see is_valid)
};

// ---- operators ----------------------------------------------------------------------------
#define EMBER_TENSOR_OPERATOR(op, name, rname)                                        \
    template <Backend B, std::size_t D, NumericKind K>                                \
    Tensor<B, D, K> operator op(const Tensor<B, D, K>& a, const Tensor<B, D, K>& b) { \
        return a.name(b);                                                             \
    }                                                                                 \
    template <Backend B, std::size_t D, NumericKind K>                                \
    Tensor<B, D, K> operator op(Tensor<B, D, K>&& a, const Tensor<B, D, K>& b) {      \
        return std::move(a).name(b);                                                  \
    }                                                                                 \
    template <Backend B, std::size_t D, NumericKind K, detail::Arithmetic S>          \
    Tensor<B, D, K> operator op(Tensor<B, D, K> a, S s) {                             \
        return std::move(a).name##_scalar(Scalar(s));                                 \
    }                                                                                 \
    template <Backend B, std::size_t D, NumericKind K, detail::Arithmetic S>          \
    Tensor<B, D, K> operator op(S s, Tensor<B, D, K> a) {                             \
        return Tensor<B, D, K>(detail::KindOps<B, K>::binary_scalar(                  \
            BinaryOp::rname, std::move(a).into_primitive(), Scalar(s)));              \
    }
/// a + b, a + s, s + a.
EMBER_TENSOR_OPERATOR(+, add, Add)
/// a - b, a - s, s - a.
EMBER_TENSOR_OPERATOR(-, sub, RSub)
/// a * b, a * s, s * a.
EMBER_TENSOR_OPERATOR(*, mul, Mul)
/// a / b, a / s, s / a.
EMBER_TENSOR_OPERATOR(/, div, RDiv)
/// a % b, a % s, s % a (remainder with the divisor's sign).
EMBER_TENSOR_OPERATOR(%, rem, RRem)
#undef EMBER_TENSOR_OPERATOR

/// -a.
template <Backend B, std::size_t D, NumericKind K>
Tensor<B, D, K> operator-(Tensor<B, D, K> a) {
    return std::move(a).neg();
}
/// Logical not of a bool tensor.
template <Backend B, std::size_t D>
Tensor<B, D, Bool> operator!(const Tensor<B, D, Bool>& a) {
    return a.not_();
}

}  // namespace ember
