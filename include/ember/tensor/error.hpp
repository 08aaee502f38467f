#pragma once
// Errors: every failed precondition throws a subclass of ember::Error naming the op and the
// offending shapes or values. Freestanding builds (no exceptions) route the same checks to a
// panic handler that the firmware installs.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

#include "../export.hpp"

namespace ember {

/// Base of every error ember reports.
class EMBER_API Error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};
/// Shapes that do not fit the op (elementwise broadcast, matmul, cat, reshape...).
class EMBER_API ShapeError : public Error {
  public:
    using Error::Error;
};
/// A dim, axis or rank argument outside what the tensor has.
class EMBER_API DimError : public Error {
  public:
    using Error::Error;
};
/// An index or range outside the tensor's extent (slice, gather, select...).
class EMBER_API IndexError : public Error {
  public:
    using Error::Error;
};
/// A dtype the op does not accept, or a conversion that cannot be made.
class EMBER_API DTypeError : public Error {
  public:
    using Error::Error;
};
/// An argument value that is invalid for the op (negative sizes, empty lists, bad options...).
class EMBER_API ArgumentError : public Error {
  public:
    using Error::Error;
};
/// Tensors on different devices, or a device that does not exist.
class EMBER_API DeviceError : public Error {
  public:
    using Error::Error;
};
/// A file or byte stream that is missing, truncated or malformed.
class EMBER_API FormatError : public Error {
  public:
    using Error::Error;
};

/// The kinds of error, for the freestanding panic handler.
enum class ErrorKind { Generic, Shape, Dim, Index, DType, Argument, Device, Format };

/// Called instead of throwing in builds without exceptions; must not return.
using PanicHandler = void (*)(ErrorKind kind, const char* message);
/// Installs the panic handler used by freestanding builds; returns the previous one.
EMBER_API PanicHandler set_panic_handler(PanicHandler handler) noexcept;

namespace detail {
[[noreturn]] EMBER_API void raise(ErrorKind kind, const std::string& message);

inline void append_one(std::string& s, std::string_view v) { s.append(v); }
inline void append_one(std::string& s, const char* v) { s.append(v); }
inline void append_one(std::string& s, const std::string& v) { s.append(v); }
inline void append_one(std::string& s, char v) { s.push_back(v); }
inline void append_one(std::string& s, bool v) { s.append(v ? "true" : "false"); }
template <typename T>
    requires std::is_integral_v<T>
inline void append_one(std::string& s, T v) {
    s.append(std::to_string(v));
}
template <typename T>
    requires std::is_floating_point_v<T>
inline void append_one(std::string& s, T v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
    s.append(buf);
}
template <typename T>
    requires requires(const T& t) { t.to_string(); }
inline void append_one(std::string& s, const T& v) {
    s.append(v.to_string());
}

/// Concatenates the pieces of an error message (no iostream, so freestanding builds keep it).
template <typename... Args>
std::string cat_str(const Args&... args) {
    std::string s;
    (append_one(s, args), ...);
    return s;
}
}  // namespace detail
}  // namespace ember

/// Throws (or panics) with an error of the given kind when `cond` is false.
#define EMBER_CHECK(cond, Kind, ...)                                                 \
    do {                                                                             \
        if (!(cond)) [[unlikely]]                                                    \
            ::ember::detail::raise(::ember::ErrorKind::Kind,                         \
                                   ::ember::detail::cat_str(__VA_ARGS__));           \
    } while (0)

/// Unconditionally throws (or panics) with an error of the given kind.
#define EMBER_FAIL(Kind, ...) \
    ::ember::detail::raise(::ember::ErrorKind::Kind, ::ember::detail::cat_str(__VA_ARGS__))
