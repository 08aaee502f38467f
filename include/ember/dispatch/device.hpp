#pragma once
// The device and the primitive of ember::Dispatch. A DispatchDevice names a concrete stack at
// run time — the backend (cpu, vulkan:i, cuda:i), and whether Fusion and Autodiff wrap it — and
// a DispatchTensor is a handle to a tensor of that stack. Nothing here includes a backend.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../export.hpp"

namespace ember {

/// The backends Dispatch can run on (those compiled into this build: `Dispatch::stacks()`).
enum class DispatchKind : std::uint8_t {
    Cpu,     ///< ember::Cpu
    Vulkan,  ///< ember::Vulkan
    Cuda,    ///< ember::Cuda
};

/// Dispatch's device: a backend and device index plus the decorators over it.
///
///     auto d = ember::Device<ember::Dispatch>::cuda(0).fusion(true).autodiff(true);
///     auto e = ember::DispatchDevice::parse("vulkan:1+fusion");
class EMBER_API DispatchDevice {
  public:
    /// The CPU (no decorators): the default device.
    constexpr DispatchDevice() = default;
    /// The CPU.
    static constexpr DispatchDevice cpu() { return {}; }
    /// Vulkan device `index`.
    static constexpr DispatchDevice vulkan(std::uint32_t index = 0) {
        return DispatchDevice(DispatchKind::Vulkan, index);
    }
    /// CUDA device `index`.
    static constexpr DispatchDevice cuda(std::uint32_t index = 0) {
        return DispatchDevice(DispatchKind::Cuda, index);
    }
    /// Parses "cpu", "vulkan[:i]" or "cuda[:i]", each optionally followed by "+fusion" and/or
    /// "+autodiff" (any order): "cuda:0+fusion", "cpu+autodiff". Throws an ember::DeviceError
    /// naming the string for a malformed one, and listing this build's backends for a backend
    /// it lacks.
    static DispatchDevice parse(std::string_view text);

    /// The same device with Fusion over its backend (or without, for false).
    constexpr DispatchDevice fusion(bool on = true) const {
        DispatchDevice d = *this;
        d.fusion_ = on;
        return d;
    }
    /// The same device with Autodiff over the stack (or without, for false).
    constexpr DispatchDevice autodiff(bool on = true) const {
        DispatchDevice d = *this;
        d.autodiff_ = on;
        return d;
    }

    /// The backend.
    constexpr DispatchKind kind() const { return kind_; }
    /// The device index (0 on the CPU).
    constexpr std::uint32_t index() const { return index_; }
    /// Whether Fusion wraps the backend.
    constexpr bool has_fusion() const { return fusion_; }
    /// Whether Autodiff wraps the stack.
    constexpr bool has_autodiff() const { return autodiff_; }

    /// The device string parse() reads back: "cpu", "cuda:0+fusion+autodiff".
    std::string to_string() const;
    /// Devices are equal when they name the same stack on the same device.
    friend constexpr bool operator==(const DispatchDevice&, const DispatchDevice&) = default;

private:
    constexpr DispatchDevice(DispatchKind k, std::uint32_t i) : kind_(k), index_(i) {}
    DispatchKind kind_ = DispatchKind::Cpu;
    std::uint32_t index_ = 0;
    bool fusion_ = false;
    bool autodiff_ = false;
};

namespace detail::dispatch {
struct Handle;  // a tensor of one concrete stack (src/dispatch/wrap.hpp)
}  // namespace detail::dispatch

/// Dispatch's float, int and bool primitive: a shared handle to a tensor of one concrete
/// stack, which knows its stack. Copies share the tensor, as every backend's primitives do.
struct DispatchTensor {
    std::shared_ptr<detail::dispatch::Handle> handle;  ///< null only when default-made
};

}  // namespace ember
