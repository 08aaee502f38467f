#include "ember/tensor/data.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ember/detail/bit.hpp>
#include <new>
#include <stdexcept>

namespace ember {

std::uint16_t f16::from_float(float f) {
    const std::uint32_t u = ember::detail::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = (u >> 16) & 0x8000u;
    std::uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
    if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow → inf
    if (abs < 0x38800000u) {
        // Subnormal half: shift the mantissa (with its implicit bit) and round to nearest even.
        if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign);
        const std::uint32_t e = abs >> 23;
        const std::uint32_t m = (abs & 0x7fffffu) | 0x800000u;
        const std::uint32_t shift = 126 - e;
        std::uint32_t h = m >> shift;
        const std::uint32_t rem = m & ((1u << shift) - 1);
        const std::uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u))) ++h;
        return static_cast<std::uint16_t>(sign | h);
    }
    abs += 0xc8000000u;  // rebias exponent (127 → 15)
    abs += 0xfffu + ((abs >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (abs >> 13));
}

float f16::to_float(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    std::uint32_t e = (h >> 10) & 0x1fu;
    std::uint32_t m = h & 0x3ffu;
    std::uint32_t u;
    if (e == 0) {
        if (m == 0) {
            u = sign;
        } else {  // subnormal: normalise
            e = 113;
            while (!(m & 0x400u)) {
                m <<= 1;
                --e;
            }
            u = sign | (e << 23) | ((m & 0x3ffu) << 13);
        }
    } else if (e == 31) {
        u = sign | 0x7f800000u | (m << 13);
    } else {
        u = sign | ((e + 112) << 23) | (m << 13);
    }
    return ember::detail::bit_cast<float>(u);
}

TensorData::TensorData(std::vector<std::byte> bytes, Shape shape, DType dtype)
    : bytes_(std::move(bytes)), shape_(shape), dtype_(dtype) {
    EMBER_CHECK(bytes_.size() == shape_.num_elements("TensorData") * dtype_size(dtype_), Shape,
                "TensorData: ", bytes_.size(), " bytes do not hold shape ", shape_.to_string(),
                " of ", dtype_name(dtype_));
}

TensorData TensorData::zeros(Shape shape, DType dtype) {
    TensorData out;
    out.shape_ = shape;
    out.dtype_ = dtype;
    out.resize_bytes(shape.num_elements("TensorData::zeros") * dtype_size(dtype));
    return out;
}

void TensorData::resize_bytes(std::size_t n) {
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
    try {
        bytes_.resize(n);
    } catch (const std::bad_alloc&) {
        detail::allocation_failed("TensorData", n, "the host");
    } catch (const std::length_error&) {
        detail::allocation_failed("TensorData", n, "the host");
    }
#else
    bytes_.resize(n);
#endif
}

double TensorData::value(std::size_t i) const {
    EMBER_CHECK(i < num_elements(), Index, "TensorData::value: index ", i,
                " out of range for ", num_elements(), " elements");
    return detail::visit_dtype(dtype_, [&]<typename S>(detail::TypeTag<S>) {
        return detail::elem_cast<double>(reinterpret_cast<const S*>(bytes_.data())[i]);
    });
}

TensorData TensorData::convert(DType dtype) const {
    if (dtype == dtype_) return *this;
    TensorData out = zeros(shape_, dtype);
    convert_into(dtype, out.bytes_.data());
    return out;
}

void TensorData::convert_into(DType dtype, void* out) const {
    if (dtype == dtype_) {
        if (!bytes_.empty()) std::memcpy(out, bytes_.data(), bytes_.size());
        return;
    }
    detail::visit_dtype(dtype_, [&]<typename S>(detail::TypeTag<S>) {
        detail::visit_dtype(dtype, [&]<typename D>(detail::TypeTag<D>) {
            const auto* src = reinterpret_cast<const S*>(bytes_.data());
            auto* dst = static_cast<D*>(out);
            for (std::size_t i = 0, n = num_elements(); i < n; ++i)
                dst[i] = detail::elem_cast<D>(src[i]);
        });
    });
}

void TensorData::assign(const void* src, std::size_t n) {
    EMBER_CHECK(n == shape_.num_elements("TensorData"), Shape, "TensorData: ", n,
                " values do not fill shape ", shape_.to_string());
    resize_bytes(n * dtype_size(dtype_));
    if (n) std::memcpy(bytes_.data(), src, n * dtype_size(dtype_));
}

TensorData TensorData::reshape(Shape shape) && {
    EMBER_CHECK(shape.num_elements("TensorData::reshape") == num_elements(), Shape,
                "TensorData::reshape: cannot view ", shape_.to_string(), " as ", shape.to_string());
    shape_ = shape;
    return std::move(*this);
}

void TensorData::check_type(DType wanted, const char* op) const {
    EMBER_CHECK(wanted == dtype_, DType, op, ": data holds ", dtype_name(dtype_),
                ", requested ", dtype_name(wanted));
}

namespace {
bool close(double a, double b, const Tolerance& tol) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    if (std::isinf(a) || std::isinf(b)) return a == b;
    return std::fabs(a - b) <= tol.atol + tol.rtol * std::fabs(b);
}
std::string fmt(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.7g", v);
    return buf;
}
}  // namespace

bool TensorData::all_close(const TensorData& other, Tolerance tol) const {
    if (shape_ != other.shape_) return false;
    for (std::size_t i = 0, n = num_elements(); i < n; ++i)
        if (!close(value(i), other.value(i), tol)) return false;
    return true;
}

void TensorData::assert_approx_eq(const TensorData& expected, Tolerance tol) const {
    EMBER_CHECK(shape_ == expected.shape_, Shape, "assert_approx_eq: shape ", shape_.to_string(),
                " differs from the expected ", expected.shape_.to_string());
    std::string report;
    std::size_t bad = 0;
    for (std::size_t i = 0, n = num_elements(); i < n; ++i) {
        const double a = value(i), b = expected.value(i);
        if (close(a, b, tol)) continue;
        if (++bad <= 5) report += detail::cat_str("\n  at ", i, ": got ", fmt(a), ", expected ", fmt(b));
    }
    EMBER_CHECK(bad == 0, Generic, "assert_approx_eq: ", bad, " of ", num_elements(),
                " elements differ (atol ", fmt(tol.atol), ", rtol ", fmt(tol.rtol), ")", report);
}

std::string TensorData::to_string() const {
    std::string s = detail::cat_str("TensorData { shape: ", shape_.to_string(), ", dtype: ",
                                    dtype_name(dtype_), ", values: [");
    const std::size_t n = num_elements();
    for (std::size_t i = 0; i < n && i < 32; ++i) s += (i ? ", " : "") + fmt(value(i));
    if (n > 32) s += ", ...";
    return s + "] }";
}

ClosenessReport check_closeness(const TensorData& output, const TensorData& expected) {
    EMBER_CHECK(output.shape() == expected.shape(), Shape, "check_closeness: shape ",
                output.shape().to_string(), " differs from ", expected.shape().to_string());
    ClosenessReport r;
    r.num_elements = output.num_elements();
    const double tols[5] = {1e-1, 1e-2, 1e-3, 1e-4, 1e-5};
    for (std::size_t i = 0; i < r.num_elements; ++i) {
        const double a = output.value(i), b = expected.value(i);
        if (std::isnan(a) != std::isnan(b)) {
            ++r.num_nan_mismatch;
            continue;
        }
        if (std::isnan(a)) {
            for (auto& w : r.within) ++w;
            continue;
        }
        const double d = (std::isinf(a) || std::isinf(b)) ? (a == b ? 0.0 : INFINITY)
                                                          : std::fabs(a - b);
        r.max_abs_diff = std::max(r.max_abs_diff, d);
        for (int k = 0; k < 5; ++k)
            if (d <= tols[k] * std::max(1.0, std::fabs(b))) ++r.within[k];
    }
    return r;
}

std::string ClosenessReport::to_string() const {
    const char* names[5] = {"1e-1", "1e-2", "1e-3", "1e-4", "1e-5"};
    std::string s = detail::cat_str("closeness of ", num_elements, " elements (max |diff| ",
                                    fmt(max_abs_diff), ", NaN mismatches ", num_nan_mismatch, ")");
    for (int k = 0; k < 5; ++k) {
        const double pct = num_elements ? 100.0 * static_cast<double>(within[k]) /
                                              static_cast<double>(num_elements)
                                        : 100.0;
        s += detail::cat_str("\n  within ", names[k], ": ", within[k], " (", fmt(pct), "%)");
    }
    return s;
}

}  // namespace ember
