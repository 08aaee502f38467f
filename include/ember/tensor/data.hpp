#pragma once
// TensorData: a tensor's elements on the host (bytes + shape + dtype). It is how data enters
// and leaves every backend, and what tests compare.
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "../export.hpp"
#include "dtype.hpp"
#include "shape.hpp"

namespace ember {

/// Tolerances for approximate comparisons: |a - b| <= atol + rtol * |b|.
struct Tolerance {
    double atol = 1e-5;  ///< absolute tolerance
    double rtol = 1e-4;  ///< relative tolerance
};

/// A tensor's elements on the host, row-major and contiguous.
class EMBER_API TensorData {
  public:
    /// An empty f32 tensor of shape [0].
    TensorData() : shape_{0}, dtype_(DType::F32) {}
    /// Elements and shape; throws ShapeError when their counts differ.
    template <Element T>
    TensorData(const std::vector<T>& values, Shape shape) : shape_(shape), dtype_(dtype_of<T>()) {
        if constexpr (std::same_as<T, bool>) {  // bit-packed: element by element
            fill(values.begin(), values.size());
        } else {
            assign(values.data(), values.size());
        }
    }
    /// Elements and shape, e.g. `TensorData({1.f, 2.f, 3.f, 4.f}, {2, 2})`.
    template <Element T>
    TensorData(std::initializer_list<T> values, Shape shape)
        : shape_(shape), dtype_(dtype_of<T>()) {
        assign(values.begin(), values.size());
    }
    /// Raw little-endian bytes; throws ShapeError when the size does not match.
    TensorData(std::vector<std::byte> bytes, Shape shape, DType dtype);
    /// `num_elements` zeros of `dtype`.
    static TensorData zeros(Shape shape, DType dtype);

    /// The dims.
    const Shape& shape() const { return shape_; }
    /// The element type.
    DType dtype() const { return dtype_; }
    /// Number of elements.
    std::size_t num_elements() const { return shape_.num_elements(); }
    /// The raw bytes.
    std::span<const std::byte> bytes() const { return bytes_; }
    /// The raw bytes, mutable.
    std::span<std::byte> bytes_mut() { return bytes_; }
    /// Moves the bytes out.
    std::vector<std::byte> into_bytes() && { return std::move(bytes_); }

    /// A typed view; throws DTypeError unless `T` is the stored type.
    template <Element T>
    std::span<const T> as_slice() const {
        check_type(dtype_of<T>(), "TensorData::as_slice");
        return {reinterpret_cast<const T*>(bytes_.data()), num_elements()};
    }
    /// A mutable typed view; throws DTypeError unless `T` is the stored type.
    template <Element T>
    std::span<T> as_mut_slice() {
        check_type(dtype_of<T>(), "TensorData::as_mut_slice");
        return {reinterpret_cast<T*>(bytes_.data()), num_elements()};
    }
    /// The elements converted to `T` (float → int truncates, as a C++ cast).
    template <Element T>
    std::vector<T> to_vec() const {
        std::vector<T> out(num_elements());
        if constexpr (std::same_as<T, bool>) {  // bit-packed: element by element
            detail::visit_dtype(dtype_, [&]<typename S>(detail::TypeTag<S>) {
                const auto* src = reinterpret_cast<const S*>(bytes_.data());
                for (std::size_t i = 0; i < out.size(); ++i) out[i] = detail::elem_cast<T>(src[i]);
            });
        } else {
            convert_into(dtype_of<T>(), out.data());
        }
        return out;
    }
    /// Element `i` as a double.
    double value(std::size_t i) const;
    /// A copy converted to `dtype`.
    TensorData convert(DType dtype) const;
    /// The same elements under another shape with as many elements; throws ShapeError.
    TensorData reshape(Shape shape) &&;

    /// Exact equality of shape, dtype and bytes.
    friend bool operator==(const TensorData& a, const TensorData& b) {
        return a.shape_ == b.shape_ && a.dtype_ == b.dtype_ && a.bytes_ == b.bytes_;
    }
    /// Approximate equality (shapes equal, values within tolerance, NaN equals NaN, equal
    /// infinities equal). Dtypes may differ.
    bool all_close(const TensorData& other, Tolerance tol = {}) const;
    /// Like all_close, but throws ember::Error with a report of the first mismatches.
    void assert_approx_eq(const TensorData& expected, Tolerance tol = {}) const;
    /// A short description: "TensorData { shape: [2, 2], dtype: f32, values: [1, 2, 3, 4] }".
    std::string to_string() const;

private:
    template <typename It>
    void fill(It first, std::size_t n) {
        EMBER_CHECK(n == shape_.num_elements("TensorData"), Shape, "TensorData: ", n,
                    " values do not fill shape ", shape_.to_string());
        resize_bytes(n * dtype_size(dtype_));
        detail::visit_dtype(dtype_, [&]<typename S>(detail::TypeTag<S>) {
            auto* dst = reinterpret_cast<S*>(bytes_.data());
            for (std::size_t i = 0; i < n; ++i, ++first) dst[i] = detail::elem_cast<S>(*first);
        });
    }
    // The conversions compiled once in libember (src/data.cpp), so that the typed constructors
    // and to_vec do not instantiate one per element type in every file that calls them.
    // assign: the first n elements at `src`, of this tensor's dtype; checks n against the shape.
    void assign(const void* src, std::size_t n);
    // convert_into: every element converted to `dtype` at `out` (as convert()).
    void convert_into(DType dtype, void* out) const;
    void check_type(DType wanted, const char* op) const;
    // bytes_.resize, failing with an ember::Error naming the size where memory runs out.
    void resize_bytes(std::size_t n);

    std::vector<std::byte> bytes_;
    Shape shape_;
    DType dtype_;
};

/// A report of how two tensors' values differ, as Burn's `check_closeness`: counts of elements
/// within each of a ladder of tolerances.
struct EMBER_API ClosenessReport {
    std::size_t num_elements = 0;   ///< elements compared
    std::size_t num_nan_mismatch = 0;  ///< NaN in one and not the other
    double max_abs_diff = 0;        ///< largest absolute difference
    std::size_t within[5] = {};     ///< elements within 1e-1, 1e-2, 1e-3, 1e-4, 1e-5 (relative)
    /// A table, one line per tolerance.
    std::string to_string() const;
};
/// Compares `output` against `expected` element by element.
EMBER_API ClosenessReport check_closeness(const TensorData& output, const TensorData& expected);

}  // namespace ember
