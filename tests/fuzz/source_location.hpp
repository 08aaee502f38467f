#pragma once
// Force-included into the fuzz build (tests/fuzz/CMakeLists.txt) where the standard library offers
// no std::source_location to this compiler: clang 14 with libstdc++ 12 (Debian 12's pair), whose
// header needs __builtin_source_location, which clang has from version 15. ember's tensor API
// names the caller of an op through it; this stand-in gives the same members from the builtins
// clang 14 has, so that the parsers and the headers they include compile for the fuzzer.
#include <cstdint>
#include <version>
#if !defined(__cpp_lib_source_location)
namespace std {
struct source_location {
    static constexpr source_location current(
        const char* file = __builtin_FILE(), const char* function = __builtin_FUNCTION(),
        std::uint_least32_t line = __builtin_LINE(),
        std::uint_least32_t column = __builtin_COLUMN()) noexcept {
        source_location s;
        s.file_ = file;
        s.function_ = function;
        s.line_ = line;
        s.column_ = column;
        return s;
    }
    constexpr std::uint_least32_t line() const noexcept { return line_; }
    constexpr std::uint_least32_t column() const noexcept { return column_; }
    constexpr const char* file_name() const noexcept { return file_; }
    constexpr const char* function_name() const noexcept { return function_; }

  private:
    const char* file_ = "";
    const char* function_ = "";
    std::uint_least32_t line_ = 0;
    std::uint_least32_t column_ = 0;
};
}  // namespace std
#endif
