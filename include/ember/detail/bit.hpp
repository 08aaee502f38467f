#pragma once
// bit_cast for every C++ library ember is built with: some (Emscripten's, for the WebAssembly
// build) predate std::bit_cast, while the compiler builtin behind it is in GCC and Clang alike.
#include <type_traits>

namespace ember::detail {

/// The object representation of `from` read as a `To`, as std::bit_cast.
template <class To, class From>
    requires(sizeof(To) == sizeof(From) && std::is_trivially_copyable_v<To> &&
             std::is_trivially_copyable_v<From>)
constexpr To bit_cast(const From& from) noexcept {
    return __builtin_bit_cast(To, from);
}

}  // namespace ember::detail
