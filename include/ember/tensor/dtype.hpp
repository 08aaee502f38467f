#pragma once
// DType: the element types a tensor can hold, and the C++ types behind them.
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "../detail/bit.hpp"
#include "../export.hpp"

namespace ember {

/// Element type of a tensor.
enum class DType : std::uint8_t { F32, F64, F16, BF16, I64, I32, I16, I8, U8, Bool };

/// IEEE 754 half precision, stored as bits; converts through float.
struct EMBER_API f16 {
    std::uint16_t bits = 0;
    f16() = default;
    /// Rounds to nearest even.
    explicit f16(float f) : bits(from_float(f)) {}
    /// Exact widening.
    explicit operator float() const { return to_float(bits); }
    static std::uint16_t from_float(float f);
    static float to_float(std::uint16_t h);
};

/// bfloat16 (the top half of a float), stored as bits; converts through float.
struct bf16 {
    std::uint16_t bits = 0;
    bf16() = default;
    /// Rounds to nearest even; NaN stays NaN.
    explicit bf16(float f) {
        std::uint32_t u = ember::detail::bit_cast<std::uint32_t>(f);
        if ((u & 0x7fffffffu) > 0x7f800000u) {
            bits = static_cast<std::uint16_t>((u >> 16) | 0x40u);
        } else {
            u += 0x7fffu + ((u >> 16) & 1u);
            bits = static_cast<std::uint16_t>(u >> 16);
        }
    }
    /// Exact widening.
    explicit operator float() const {
        return ember::detail::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
    }
};

/// Size of one element in bytes.
constexpr std::size_t dtype_size(DType d) {
    switch (d) {
        case DType::F64:
        case DType::I64: return 8;
        case DType::F32:
        case DType::I32: return 4;
        case DType::F16:
        case DType::BF16:
        case DType::I16: return 2;
        default: return 1;
    }
}
/// True for f32, f64, f16 and bf16.
constexpr bool is_float(DType d) {
    return d == DType::F32 || d == DType::F64 || d == DType::F16 || d == DType::BF16;
}
/// True for the signed and unsigned integer types (not bool).
constexpr bool is_int(DType d) {
    return d == DType::I64 || d == DType::I32 || d == DType::I16 || d == DType::I8 ||
           d == DType::U8;
}
/// The lower-case name ("f32", "i64", "bool"...).
constexpr std::string_view dtype_name(DType d) {
    constexpr std::string_view names[] = {"f32", "f64", "f16", "bf16", "i64",
                                          "i32", "i16", "i8",  "u8",   "bool"};
    return names[static_cast<int>(d)];
}

/// The C++ types a TensorData may hold.
template <typename T>
concept Element = std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, f16> ||
                  std::same_as<T, bf16> || std::same_as<T, std::int64_t> ||
                  std::same_as<T, std::int32_t> || std::same_as<T, std::int16_t> ||
                  std::same_as<T, std::int8_t> || std::same_as<T, std::uint8_t> ||
                  std::same_as<T, bool>;

/// The DType of a C++ element type.
template <Element T>
constexpr DType dtype_of() {
    if constexpr (std::same_as<T, float>) return DType::F32;
    else if constexpr (std::same_as<T, double>) return DType::F64;
    else if constexpr (std::same_as<T, f16>) return DType::F16;
    else if constexpr (std::same_as<T, bf16>) return DType::BF16;
    else if constexpr (std::same_as<T, std::int64_t>) return DType::I64;
    else if constexpr (std::same_as<T, std::int32_t>) return DType::I32;
    else if constexpr (std::same_as<T, std::int16_t>) return DType::I16;
    else if constexpr (std::same_as<T, std::int8_t>) return DType::I8;
    else if constexpr (std::same_as<T, std::uint8_t>) return DType::U8;
    else return DType::Bool;
}

namespace detail {
template <typename T>
struct TypeTag {
    using type = T;
};
/// Calls `f(TypeTag<T>{})` with the C++ type of `d` (bool is stored as one byte: bool).
template <typename F>
decltype(auto) visit_dtype(DType d, F&& f) {
    switch (d) {
        case DType::F32: return f(TypeTag<float>{});
        case DType::F64: return f(TypeTag<double>{});
        case DType::F16: return f(TypeTag<f16>{});
        case DType::BF16: return f(TypeTag<bf16>{});
        case DType::I64: return f(TypeTag<std::int64_t>{});
        case DType::I32: return f(TypeTag<std::int32_t>{});
        case DType::I16: return f(TypeTag<std::int16_t>{});
        case DType::I8: return f(TypeTag<std::int8_t>{});
        case DType::U8: return f(TypeTag<std::uint8_t>{});
        default: return f(TypeTag<bool>{});
    }
}
/// Converts between element types with C++ semantics (float → int truncates toward zero).
template <typename To, typename From>
inline To elem_cast(From v) {
    if constexpr (std::same_as<To, From>) {
        return v;
    } else if constexpr (std::same_as<From, f16> || std::same_as<From, bf16>) {
        return elem_cast<To>(static_cast<float>(v));
    } else if constexpr (std::same_as<To, f16> || std::same_as<To, bf16>) {
        return To(static_cast<float>(v));
    } else if constexpr (std::same_as<To, bool>) {
        return v != From{};
    } else {
        return static_cast<To>(v);
    }
}
}  // namespace detail
}  // namespace ember
