#pragma once
// The record tree: what modules, optimizers and schedulers turn their state into, and what
// every recorder writes and reads. A tree of maps (ordered, named fields), lists, scalars,
// strings and tensors (TensorData). Recorders convert the tree's tensors to their precision
// settings when they write; modules convert them back to their own dtypes when they load.
#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "../tensor/data.hpp"
#include "../tensor/error.hpp"
#include "../detail/bit.hpp"

namespace ember::record {

class Value;
/// An ordered list of values; a lone inner list is `List{Value(inner)}` (docs/records.md).
using List = std::vector<Value>;
/// Named fields in declaration order (the order recorders write them).
using Map = std::vector<std::pair<std::string, Value>>;

/// One node of a record tree.
class Value {
public:
    /// The alternatives, in the order of `index()`.
    using Variant =
        std::variant<std::monostate, bool, std::int64_t, double, std::string, TensorData, List, Map>;

    /// Null (an absent optional, a constant field).
    Value() = default;
    /// A boolean.
    Value(bool v) : v_(v) {}
    /// An integer (every integral type is widened to int64).
    template <typename T>
        requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
    Value(T v) : v_(static_cast<std::int64_t>(v)) {}
    /// A floating-point scalar.
    Value(double v) : v_(v) {}
    /// A floating-point scalar (stored as double: float → double is exact).
    Value(float v) : v_(static_cast<double>(v)) {}
    /// A string.
    Value(std::string v) : v_(std::move(v)) {}
    /// A string.
    Value(const char* v) : v_(std::string(v)) {}
    /// A tensor's elements.
    Value(TensorData v) : v_(std::move(v)) {}
    /// A list.
    Value(List v) : v_(std::move(v)) {}
    /// A map.
    Value(Map v) : v_(std::move(v)) {}

    /// True for null.
    bool is_null() const { return std::holds_alternative<std::monostate>(v_); }
    /// True when the value holds `T` (one of Variant's alternatives).
    template <typename T>
    bool is() const {
        return std::holds_alternative<T>(v_);
    }
    /// The `T` held; throws FormatError naming `path` otherwise.
    template <typename T>
    const T& as(std::string_view path = {}) const {
        if (const T* p = std::get_if<T>(&v_)) return *p;
        EMBER_FAIL(Format, "record: '", path.empty() ? std::string_view("<root>") : path,
                   "' should be ", kind_name(Variant(T{}).index()), " but is ",
                   kind_name(v_.index()));
    }
    /// The `T` held, mutable; throws FormatError naming `path` otherwise.
    template <typename T>
    T& as_mut(std::string_view path = {}) {
        return const_cast<T&>(as<T>(path));
    }
    /// Field `key` of a map; nullptr when absent. Throws FormatError when this is not a map.
    const Value* find(std::string_view key, std::string_view path = {}) const {
        for (const auto& [k, v] : as<Map>(path))
            if (k == key) return &v;
        return nullptr;
    }
    /// Field `key` of a map; throws FormatError naming `path.key` when absent.
    const Value& at(std::string_view key, std::string_view path = {}) const {
        if (const Value* v = find(key, path)) return *v;
        EMBER_FAIL(Format, "record: missing field '", join_path(path, key), "'");
    }
    /// The variant.
    const Variant& variant() const { return v_; }
    /// The variant, mutable.
    Variant& variant() { return v_; }

    /// Deep equality: tensors compare shape, dtype and bytes; doubles compare their bits, so a
    /// tree holding NaN equals itself and -0.0 differs from 0.0 (what a record holds, exactly).
    friend bool operator==(const Value& a, const Value& b) {
        if (const double* x = std::get_if<double>(&a.v_)) {
            const double* y = std::get_if<double>(&b.v_);
            return y && ember::detail::bit_cast<std::uint64_t>(*x) == ember::detail::bit_cast<std::uint64_t>(*y);
        }
        return a.v_ == b.v_;
    }

    /// "null", "bool", "int", "float", "string", "tensor", "list" or "map".
    static std::string_view kind_name(std::size_t index) {
        constexpr std::string_view names[] = {"null",   "bool",   "int",  "float",
                                              "string", "tensor", "list", "map"};
        return index < 8 ? names[index] : "?";
    }
    /// `path.key`, or `key` at the root.
    static std::string join_path(std::string_view path, std::string_view key) {
        std::string s(path);
        if (!s.empty()) s += '.';
        s += key;
        return s;
    }

private:
    Variant v_;
};

/// Precision of the tensors a recorder writes: float elements as `float_dtype`, integer
/// elements as `int_dtype`; bool and u8 tensors are written as they are.
struct PrecisionSettings {
    DType float_dtype;  ///< dtype float tensors are written in
    DType int_dtype;    ///< dtype integer tensors are written in
};
/// f64 / i64.
struct DoublePrecisionSettings {
    static constexpr PrecisionSettings value{DType::F64, DType::I64};
};
/// f32 / i32 (the default).
struct FullPrecisionSettings {
    static constexpr PrecisionSettings value{DType::F32, DType::I32};
};
/// f16 / i16.
struct HalfPrecisionSettings {
    static constexpr PrecisionSettings value{DType::F16, DType::I16};
};

}  // namespace ember::record
