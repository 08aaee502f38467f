#include "ember/tensor/error.hpp"

#include <atomic>

namespace ember {
namespace {
std::atomic<PanicHandler> g_panic_handler{nullptr};
}

PanicHandler set_panic_handler(PanicHandler handler) noexcept {
    return g_panic_handler.exchange(handler);
}

namespace detail {
[[noreturn]] void raise(ErrorKind kind, const std::string& message) {
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
    switch (kind) {
        case ErrorKind::Shape: throw ShapeError(message);
        case ErrorKind::Dim: throw DimError(message);
        case ErrorKind::Index: throw IndexError(message);
        case ErrorKind::DType: throw DTypeError(message);
        case ErrorKind::Argument: throw ArgumentError(message);
        case ErrorKind::Device: throw DeviceError(message);
        case ErrorKind::Format: throw FormatError(message);
        default: throw Error(message);
    }
#else
    if (auto h = g_panic_handler.load()) h(kind, message.c_str());
    __builtin_trap();
#endif
}
}  // namespace detail
}  // namespace ember
