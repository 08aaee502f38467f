#pragma once
// Serde: any serialisable type to and from a record tree, so that optimizer state, scheduler
// state and training metadata are saved by the same recorders as modules.
//
//   struct AdamState {
//       std::int64_t step = 0;
//       std::vector<TensorData> moments;
//       std::optional<double> clip;
//       EMBER_RECORD(AdamState, step, moments, clip)
//   };
//   Value v = ember::record::to_value(state);
//   auto back = ember::record::from_value<AdamState>(v);
//
// Built in: bool, integers (range-checked on load), float, double, std::string, TensorData,
// Value, enums (as their underlying integer), std::vector, std::array (length checked),
// std::optional (null when empty), std::map<std::string, T>, std::pair, and EMBER_RECORD
// structs (a map of their fields; fields missing on load are errors, extra ones are ignored).
// Other types specialise `ember::record::Serde<T>` with `to` and `from`.
//
// Loading throws FormatError naming the path of the offending value ("state.moments[2]").
#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../detail/fields.hpp"
#include "value.hpp"

/// Inside a struct: declares its fields (in order) and makes it a record, serialisable as a map
/// of its fields. The struct must be default-constructible.
#define EMBER_RECORD(Type, ...)            \
    EMBER_DETAIL_FIELDS(Type, __VA_ARGS__) \
    [[maybe_unused]] static constexpr bool ember_is_record = true;

namespace ember::record {

/// How `T` becomes a Value and back. Specialise it for your types:
/// `static Value to(const T&)` and `static T from(const Value&, std::string_view path)`, where
/// `path` names the value in error messages.
template <class T>
struct Serde;

/// True when `Serde<T>` is defined.
template <class T>
concept Serializable = requires(const T& t, const Value& v, std::string_view path) {
    { Serde<T>::to(t) } -> std::same_as<Value>;
    { Serde<T>::from(v, path) } -> std::same_as<T>;
};

/// `v` as a record tree.
template <class T>
Value to_value(const T& v) {
    static_assert(Serializable<T>,
                  "ember::record::to_value: no Serde<T> for this type; declare it with "
                  "EMBER_RECORD(...) or specialise ember::record::Serde");
    return Serde<T>::to(v);
}

/// A `T` read back from `v`; throws FormatError naming `path` (and below) when `v` does not fit.
template <class T>
T from_value(const Value& v, std::string_view path = {}) {
    static_assert(Serializable<T>,
                  "ember::record::from_value: no Serde<T> for this type; declare it with "
                  "EMBER_RECORD(...) or specialise ember::record::Serde");
    return Serde<T>::from(v, path);
}

namespace detail {

/// True for structs declared with EMBER_RECORD.
template <class T>
concept RecordStruct = ember::detail::HasFields<T> && !requires { typename T::ember_module_tag; };

/// The path as messages show it.
inline std::string_view shown(std::string_view path) {
    return path.empty() ? std::string_view("<root>") : path;
}

/// Builds "path[i]" for each element of a list without reallocating each time.
class IndexPath {
  public:
    /// Paths below `path`.
    explicit IndexPath(std::string_view path) : s_(path), base_(s_.size()) {}
    /// "path[i]"; valid until the next call.
    std::string_view at(std::size_t i) {
        s_.resize(base_);
        s_ += '[';
        s_ += std::to_string(i);
        s_ += ']';
        return s_;
    }

  private:
    std::string s_;
    std::size_t base_;
};

/// "int8", "uint64", ... for range errors.
template <class T>
std::string int_name() {
    return (std::is_signed_v<T> ? "int" : "uint") + std::to_string(sizeof(T) * 8);
}

/// The List at `v`, of exactly `n` elements when `n` is given.
inline const List& list_of(const Value& v, std::string_view path, std::optional<std::size_t> n) {
    const List& l = v.as<List>(path);
    EMBER_CHECK(!n || l.size() == *n, Format, "record: '", shown(path), "' should have ", *n,
                " elements but has ", l.size());
    return l;
}

}  // namespace detail

/// bool.
template <>
struct Serde<bool> {
    /// A bool value.
    static Value to(const bool& v) { return Value(v); }
    /// Requires a bool.
    static bool from(const Value& v, std::string_view path) { return v.as<bool>(path); }
};

/// Integers, as int64; loading checks the range of `T`.
template <class T>
requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) struct Serde<T> {
    /// An int value; throws ArgumentError for unsigned values beyond int64.
    static Value to(const T& v) {
        if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(std::int64_t)) {
            EMBER_CHECK(v <= static_cast<T>(std::numeric_limits<std::int64_t>::max()), Argument,
                        "record: ", detail::int_name<T>(), " value ", v,
                        " does not fit the int64 records hold");
        }
        return Value(static_cast<std::int64_t>(v));
    }
    /// Requires an int within the range of `T`.
    static T from(const Value& v, std::string_view path) {
        const std::int64_t i = v.as<std::int64_t>(path);
        bool ok;
        if constexpr (std::is_signed_v<T>) {
            ok = i >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
                 i <= static_cast<std::int64_t>(std::numeric_limits<T>::max());
        } else {
            ok = i >= 0 && static_cast<std::uint64_t>(i) <=
                               static_cast<std::uint64_t>(std::numeric_limits<T>::max());
        }
        EMBER_CHECK(ok, Format, "record: '", detail::shown(path), "' = ", i,
                    " is out of range for ", detail::int_name<T>());
        return static_cast<T>(i);
    }
};

/// float and double, as double (float → double is exact). An int is accepted on load.
template <class T>
requires(std::is_same_v<T, float> || std::is_same_v<T, double>) struct Serde<T> {
    /// A float value.
    static Value to(const T& v) { return Value(static_cast<double>(v)); }
    /// Requires a float (or an int); a finite double beyond float's range is an error.
    static T from(const Value& v, std::string_view path) {
        const double d =
            v.is<std::int64_t>() ? static_cast<double>(v.as<std::int64_t>()) : v.as<double>(path);
        if constexpr (std::is_same_v<T, float>) {
            EMBER_CHECK(!std::isfinite(d) || std::fabs(d) <= std::numeric_limits<float>::max(),
                        Format, "record: '", detail::shown(path), "' = ", d,
                        " is out of range for float");
        }
        return static_cast<T>(d);
    }
};

/// Scoped and unscoped enums, as their underlying integer.
template <class T>
requires std::is_enum_v<T>
struct Serde<T> {
    /// The underlying value.
    static Value to(const T& v) {
        return Serde<std::underlying_type_t<T>>::to(static_cast<std::underlying_type_t<T>>(v));
    }
    /// Requires an int within the underlying type's range.
    static T from(const Value& v, std::string_view path) {
        return static_cast<T>(Serde<std::underlying_type_t<T>>::from(v, path));
    }
};

/// std::string.
template <>
struct Serde<std::string> {
    /// A string value.
    static Value to(const std::string& v) { return Value(v); }
    /// Requires a string.
    static std::string from(const Value& v, std::string_view path) {
        return v.as<std::string>(path);
    }
};

/// TensorData, as a tensor (recorders convert it to their precision when they write).
template <>
struct Serde<TensorData> {
    /// A tensor value.
    static Value to(const TensorData& v) { return Value(v); }
    /// Requires a tensor; its dtype is the file's.
    static TensorData from(const Value& v, std::string_view path) { return v.as<TensorData>(path); }
};

/// Value itself, unchanged: for fields whose shape is free.
template <>
struct Serde<Value> {
    /// A copy.
    static Value to(const Value& v) { return v; }
    /// A copy.
    static Value from(const Value& v, std::string_view) { return v; }
};

/// std::vector, as a list.
template <Serializable T, class A>
struct Serde<std::vector<T, A>> {
    /// A list of the elements.
    static Value to(const std::vector<T, A>& v) {
        List l;
        l.reserve(v.size());
        for (const auto& e : v) l.push_back(to_value<T>(e));
        return Value(std::move(l));
    }
    /// Requires a list.
    static std::vector<T, A> from(const Value& v, std::string_view path) {
        const List& l = detail::list_of(v, path, std::nullopt);
        detail::IndexPath p(path);
        std::vector<T, A> out;
        out.reserve(l.size());
        for (std::size_t i = 0; i < l.size(); ++i) out.push_back(from_value<T>(l[i], p.at(i)));
        return out;
    }
};

/// std::array, as a list of exactly N elements.
template <Serializable T, std::size_t N>
struct Serde<std::array<T, N>> {
    /// A list of the elements.
    static Value to(const std::array<T, N>& v) {
        List l;
        l.reserve(N);
        for (const auto& e : v) l.push_back(to_value<T>(e));
        return Value(std::move(l));
    }
    /// Requires a list of N elements.
    static std::array<T, N> from(const Value& v, std::string_view path) {
        const List& l = detail::list_of(v, path, N);
        detail::IndexPath p(path);
        return [&]<std::size_t... I>(std::index_sequence<I...>) {
            return std::array<T, N>{from_value<T>(l[I], p.at(I))...};
        }
        (std::make_index_sequence<N>{});
    }
};

/// std::optional: null when empty.
template <Serializable T>
struct Serde<std::optional<T>> {
    /// Null or the value.
    static Value to(const std::optional<T>& v) { return v ? to_value<T>(*v) : Value(); }
    /// Null gives std::nullopt.
    static std::optional<T> from(const Value& v, std::string_view path) {
        if (v.is_null()) return std::nullopt;
        return from_value<T>(v, path);
    }
};

/// std::map with string keys, as a map (in key order).
template <Serializable T, class C, class A>
struct Serde<std::map<std::string, T, C, A>> {
    /// A map of the entries.
    static Value to(const std::map<std::string, T, C, A>& v) {
        Map m;
        m.reserve(v.size());
        for (const auto& [k, e] : v) m.emplace_back(k, to_value<T>(e));
        return Value(std::move(m));
    }
    /// Requires a map without repeated keys.
    static std::map<std::string, T, C, A> from(const Value& v, std::string_view path) {
        std::map<std::string, T, C, A> out;
        for (const auto& [k, e] : v.as<Map>(path)) {
            const std::string p = Value::join_path(path, k);
            const bool fresh = out.emplace(k, from_value<T>(e, p)).second;
            EMBER_CHECK(fresh, Format, "record: '", p, "' appears twice");
        }
        return out;
    }
};

/// std::pair, as a list of two.
template <Serializable A, Serializable B>
struct Serde<std::pair<A, B>> {
    /// [first, second].
    static Value to(const std::pair<A, B>& v) {
        return Value(List{to_value<A>(v.first), to_value<B>(v.second)});
    }
    /// Requires a list of two.
    static std::pair<A, B> from(const Value& v, std::string_view path) {
        const List& l = detail::list_of(v, path, 2);
        detail::IndexPath p(path);
        A first = from_value<A>(l[0], p.at(0));
        return {std::move(first), from_value<B>(l[1], p.at(1))};
    }
};

/// EMBER_RECORD structs, as a map of their fields in declaration order.
template <detail::RecordStruct T>
struct Serde<T> {
    /// A map of the fields.
    static Value to(const T& v) {
        Map m;
        m.reserve(T::ember_field_names.size());
        ember::detail::for_each_field(v, [&](std::string_view name, const auto& field) {
            using F = std::remove_cvref_t<decltype(field)>;
            m.emplace_back(std::string(name), to_value<F>(field));
        });
        return Value(std::move(m));
    }
    /// Requires a map holding every field; fields it has beyond them are ignored.
    static T from(const Value& v, std::string_view path) {
        v.as<Map>(path);
        T out{};
        ember::detail::for_each_field(out, [&](std::string_view name, auto& field) {
            using F = std::remove_cvref_t<decltype(field)>;
            field = from_value<F>(v.at(name, path), Value::join_path(path, name));
        });
        return out;
    }
};

}  // namespace ember::record
