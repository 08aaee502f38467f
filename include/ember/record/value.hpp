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

#include "../detail/bit.hpp"
#include "../export.hpp"
#include "../tensor/data.hpp"
#include "../tensor/error.hpp"

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

    // Every constructor, the copies, moves, destructor and comparison are defined in libember
    // (src/record/common.cpp): each instantiates std::variant's machinery over the eight
    // alternatives (a constructor its destructor too), which every file that builds or loads a
    // record would otherwise compile again.
    /// Null (an absent optional, a constant field).
    EMBER_API Value() noexcept;
    /// A boolean.
    EMBER_API Value(bool v);
    /// An integer.
    EMBER_API Value(std::int64_t v);
    /// An integer (every integral type is widened to int64).
    template <typename T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, std::int64_t>)
        Value(T v)
        : Value(static_cast<std::int64_t>(v)) {}
    /// A floating-point scalar.
    EMBER_API Value(double v);
    /// A floating-point scalar (stored as double: float → double is exact).
    Value(float v) : Value(static_cast<double>(v)) {}
    /// A string.
    EMBER_API Value(std::string v);
    /// A string.
    Value(const char* v) : Value(std::string(v)) {}
    /// A tensor's elements.
    EMBER_API Value(TensorData v);
    /// A list.
    EMBER_API Value(List v);
    /// A map.
    EMBER_API Value(Map v);
    /// A deep copy.
    EMBER_API Value(const Value& other);
    /// Takes `other`'s tree.
    EMBER_API Value(Value&& other) noexcept;
    /// A deep copy.
    EMBER_API Value& operator=(const Value& other);
    /// Takes `other`'s tree.
    EMBER_API Value& operator=(Value&& other) noexcept;
    EMBER_API ~Value();

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
        kind_error(path, index_of<T>(static_cast<Variant*>(nullptr)), v_.index());
    }
    /// The `T` held, mutable; throws FormatError naming `path` otherwise.
    template <typename T>
    T& as_mut(std::string_view path = {}) {
        return const_cast<T&>(as<T>(path));
    }
    /// Field `key` of a map; nullptr when absent. Throws FormatError when this is not a map.
    /// (Defined in libember, src/record/common.cpp, as at and join_path: every module's load
    /// calls them for each field.)
    EMBER_API const Value* find(std::string_view key, std::string_view path = {}) const;
    /// Field `key` of a map; throws FormatError naming `path.key` when absent.
    EMBER_API const Value& at(std::string_view key, std::string_view path = {}) const;
    /// The variant.
    const Variant& variant() const { return v_; }
    /// The variant, mutable.
    Variant& variant() { return v_; }

    /// Deep equality: tensors compare shape, dtype and bytes; doubles compare their bits, so a
    /// tree holding NaN equals itself and -0.0 differs from 0.0 (what a record holds, exactly).
    EMBER_API friend bool operator==(const Value& a, const Value& b);

    /// "null", "bool", "int", "float", "string", "tensor", "list" or "map".
    static std::string_view kind_name(std::size_t index) {
        constexpr std::string_view names[] = {"null",   "bool",   "int",  "float",
                                              "string", "tensor", "list", "map"};
        return index < 8 ? names[index] : "?";
    }
    /// `path.key`, or `key` at the root.
    EMBER_API static std::string join_path(std::string_view path, std::string_view key);

  private:
    // The index of alternative T.
    template <typename T, typename... A>
    static constexpr std::size_t index_of(std::variant<A...>*) {
        constexpr bool same[] = {std::is_same_v<T, A>...};
        for (std::size_t i = 0; i < sizeof...(A); ++i)
            if (same[i]) return i;
        return sizeof...(A);
    }
    // as<T>'s FormatError: `path` holds alternative `have`, not `want`.
    [[noreturn]] EMBER_API static void kind_error(std::string_view path, std::size_t want,
                                                  std::size_t have);

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

namespace detail {
/// Appends field `name` with `value` to `map`: what a module's to_record does for each field,
/// compiled once in libember (src/record/common.cpp) instead of the vector's growth in every
/// file that records a module.
EMBER_API void map_append(Map& map, std::string_view name, Value value);
/// The record of a parameter or running state: `{id: id, param: data}` (as map_append).
EMBER_API Value param_map(std::string id, TensorData data);
}  // namespace detail

}  // namespace ember::record
