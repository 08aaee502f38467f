#pragma once
// The reflection that EMBER_MODULE, EMBER_CONFIG and EMBER_RECORD share: a struct lists its
// fields once and gets their names and a tuple of references to them. Everything else
// (records, visitors, JSON, display) is written once against these two members.
#include <array>
#include <cstddef>
#include <string_view>
#include <tuple>
#include <utility>

#include "for_each.hpp"

#define EMBER_DETAIL_FIELD_NAME(c, x) , std::string_view(#x)
#define EMBER_DETAIL_FIELD_OF(self, x) , self.x

/// Inside a struct: `ember_type_name`, `ember_field_names` (the names as written) and
/// `ember_fields()` (a tuple of references, const and mutable), in the order given. No fields
/// is allowed (`EMBER_DETAIL_FIELDS(Gelu)`). `ember_fields` is a template whose body depends on
/// its parameter, so that a struct that is not a template instantiates its tuple of references
/// (tie_fields, std::tuple's constructors) only where it is used, not in every file that
/// includes it: for the ~200 structs of <ember/nn.hpp> and <ember/optim.hpp> that was ~1.1 of
/// the 4.8 CPU-seconds a file including them took (GCC 12, -O2; docs/backend.md).
#define EMBER_DETAIL_FIELDS(Type, ...)                                                        \
    [[maybe_unused]] static constexpr auto ember_type_name = std::string_view(#Type);         \
    [[maybe_unused]] static constexpr auto ember_field_names = ::ember::detail::field_names(  \
        0 __VA_OPT__(EMBER_FOR_EACH(EMBER_DETAIL_FIELD_NAME, , __VA_ARGS__)));                \
    template <typename Self_ = Type>                                                          \
    auto ember_fields() {                                                                     \
        return ::ember::detail::tie_fields(0 __VA_OPT__(                                      \
            EMBER_FOR_EACH(EMBER_DETAIL_FIELD_OF, static_cast<Self_&>(*this), __VA_ARGS__))); \
    }                                                                                         \
    template <typename Self_ = Type>                                                          \
    auto ember_fields() const {                                                               \
        return ::ember::detail::tie_fields(0 __VA_OPT__(EMBER_FOR_EACH(                       \
            EMBER_DETAIL_FIELD_OF, static_cast<const Self_&>(*this), __VA_ARGS__)));          \
    }

namespace ember::detail {

/// The field names as an array. The macro passes a leading `0` that this ignores, so that it can
/// write `, name` for every field, and an empty field list still makes a valid call.
template <typename... S>
constexpr std::array<std::string_view, sizeof...(S)> field_names(int, S... names) {
    return {names...};
}

/// std::tie of the fields after the ignored leading `0` (same reason as field_names).
template <typename... T>
constexpr std::tuple<T&...> tie_fields(int, T&... fields) {
    return std::tuple<T&...>(fields...);
}

/// True for types declared with EMBER_DETAIL_FIELDS (modules, configs, records).
template <typename T>
concept HasFields = requires(const T& t) {
    T::ember_field_names;
    t.ember_fields();
};

/// Calls `f(name, field)` for each field, in order.
template <typename T, typename F>
constexpr void for_each_field(T&& obj, F&& f) {
    auto fields = obj.ember_fields();
    constexpr auto& names = std::remove_cvref_t<T>::ember_field_names;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        (f(names[I], std::get<I>(fields)), ...);
    }(std::make_index_sequence<std::tuple_size_v<decltype(fields)>>{});
}

/// Builds a `Out` by aggregate initialisation from `f(name, field)` for each field of `obj`.
template <typename Out, typename T, typename F>
constexpr Out map_fields(T&& obj, F&& f) {
    auto fields = obj.ember_fields();
    constexpr auto& names = std::remove_cvref_t<T>::ember_field_names;
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
        return Out{f(names[I], std::get<I>(fields))...};
    }(std::make_index_sequence<std::tuple_size_v<decltype(fields)>>{});
}

}  // namespace ember::detail
