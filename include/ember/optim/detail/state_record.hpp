#pragma once
// Optimizer state <-> record tree, written once for every optimizer. A state is an aggregate
// declared with EMBER_DETAIL_FIELDS whose fields are tensors (the parameter's shape), optional
// tensors, integers, doubles, or nested states. Records hold tensors as TensorData, so they can
// be loaded before the rank of the parameter is known: the check of the structure happens at
// load time, the conversion to rank-D tensors (and the shape check) at the parameter's first
// step.
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../../detail/fields.hpp"
#include "../../record/value.hpp"
#include "../../tensor/tensor.hpp"

namespace ember::optim::detail {

template <typename T>
struct IsStateTensor : std::false_type {};
template <typename B, std::size_t D>
struct IsStateTensor<Tensor<B, D>> : std::true_type {};
template <typename T>
struct IsStateOptional : std::false_type {};
template <typename T>
struct IsStateOptional<std::optional<T>> : std::true_type {};

template <typename T, std::size_t I>
using FieldType =
    std::remove_cvref_t<std::tuple_element_t<I, decltype(std::declval<T&>().ember_fields())>>;

template <typename T>
constexpr std::size_t num_fields() {
    return std::tuple_size_v<decltype(std::declval<T&>().ember_fields())>;
}

/// The state as a record tree.
template <typename T>
record::Value state_to_record(const T& x) {
    if constexpr (ember::detail::HasFields<T>) {
        record::Map map;
        ember::detail::for_each_field(x, [&](std::string_view name, const auto& f) {
            map.emplace_back(std::string(name), state_to_record(f));
        });
        return map;
    } else if constexpr (IsStateTensor<T>::value) {
        return x.to_data();
    } else if constexpr (IsStateOptional<T>::value) {
        return x ? state_to_record(*x) : record::Value{};
    } else if constexpr (std::is_integral_v<T>) {
        return static_cast<std::int64_t>(x);
    } else {
        static_assert(std::is_floating_point_v<T>, "optimizer state: unsupported field type");
        return static_cast<double>(x);
    }
}

/// Throws FormatError naming the field when `v` does not have the structure of `T`.
template <typename T>
void check_state_record(const record::Value& v, std::string_view path) {
    if constexpr (ember::detail::HasFields<T>) {
        (void)v.as<record::Map>(path);
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (check_state_record<FieldType<T, I>>(
                 v.at(T::ember_field_names[I], path),
                 record::Value::join_path(path, T::ember_field_names[I])),
             ...);
        }
        (std::make_index_sequence<num_fields<T>()>{});
    } else if constexpr (IsStateTensor<T>::value) {
        (void)v.as<TensorData>(path);
    } else if constexpr (IsStateOptional<T>::value) {
        if (!v.is_null()) check_state_record<typename T::value_type>(v, path);
    } else if constexpr (std::is_integral_v<T>) {
        (void)v.as<std::int64_t>(path);
    } else {
        if (!v.is<std::int64_t>()) (void)v.as<double>(path);
    }
}

/// The state a record holds, its tensors created on `device` with `shape` and `dtype` (the
/// parameter's); ShapeError naming the field and `param` when a tensor's shape differs.
template <typename T, typename Dev>
T state_from_record(const record::Value& v, std::string_view path, std::string_view param,
                    const Shape& shape, DType dtype, const Dev& device) {
    if constexpr (ember::detail::HasFields<T>) {
        return [&]<std::size_t... I>(std::index_sequence<I...>) {
            return T{state_from_record<FieldType<T, I>>(
                v.at(T::ember_field_names[I], path),
                record::Value::join_path(path, T::ember_field_names[I]), param, shape, dtype,
                device)...};
        }
        (std::make_index_sequence<num_fields<T>()>{});
    } else if constexpr (IsStateTensor<T>::value) {
        const auto& data = v.as<TensorData>(path);
        EMBER_CHECK(data.shape() == shape, Shape, "optimizer load_record: the state '", path,
                    "' has shape ", data.shape().to_string(), " but parameter '", param,
                    "' has shape ", shape.to_string());
        EMBER_CHECK(is_float(data.dtype()), DType, "optimizer load_record: the state '", path,
                    "' holds ", dtype_name(data.dtype()), " values; it should be a float tensor");
        return T::from_data(data.dtype() == dtype ? data : data.convert(dtype), device);
    } else if constexpr (IsStateOptional<T>::value) {
        if (v.is_null()) return T{};
        return T{state_from_record<typename T::value_type>(v, path, param, shape, dtype, device)};
    } else if constexpr (std::is_integral_v<T>) {
        return static_cast<T>(v.as<std::int64_t>(path));
    } else {
        if (v.is<std::int64_t>()) return static_cast<T>(v.as<std::int64_t>(path));
        return static_cast<T>(v.as<double>(path));
    }
}

}  // namespace ember::optim::detail
