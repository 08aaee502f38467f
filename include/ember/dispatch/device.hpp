#pragma once
// The device and the primitive of ember::Dispatch. A DispatchDevice names a concrete stack at
// run time — the backend (cpu, vulkan:i, cuda:i), and whether Fusion and Autodiff wrap it — and
// a DispatchTensor is a handle to a tensor of that stack. Nothing here includes a backend.
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../export.hpp"
#include "../tensor/detail/operand.hpp"
#include "../tensor/dtype.hpp"
#include "../tensor/shape.hpp"

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
    /// Devices are equal when they name the same stack on the same device (one compare of
    /// eight bytes: every op compares its operands' devices).
    friend constexpr bool operator==(const DispatchDevice& a, const DispatchDevice& b) {
        return a.word() == b.word();
    }
    /// Whether `a` and `b` name one stack but for autodiff.
    friend constexpr bool same_but_autodiff(const DispatchDevice& a, const DispatchDevice& b) {
        return ((a.word() ^ b.word()) & ~kAutodiffBit) == 0;
    }

private:
    constexpr DispatchDevice(DispatchKind k, std::uint32_t i) : kind_(k), index_(i) {}
    // Eight bytes with no padding, the flags first: two devices compare as one word.
    DispatchKind kind_ = DispatchKind::Cpu;
    bool fusion_ = false;
    bool autodiff_ = false;
    std::uint8_t unused_ = 0;
    std::uint32_t index_ = 0;
    // The device as one word (its bytes: no padding).
    constexpr std::uint64_t word() const { return std::bit_cast<std::uint64_t>(*this); }
    // word()'s bits of the autodiff flag.
    static constexpr std::uint64_t kAutodiffBit =
        std::bit_cast<std::uint64_t>(std::array<std::uint8_t, 8>{0, 0, 0xff, 0, 0, 0, 0, 0});
};

static_assert(sizeof(DispatchDevice) == 8, "DispatchDevice: one word, no padding");

namespace detail::dispatch {

struct OpTable;  // the op table of a stack (src/dispatch/table.hpp)

/// A tensor of one concrete stack, shared by the DispatchTensors that name it: its stack, shape
/// and dtype (kept here, or pointed to, so that reading them, which the tensor layer does before
/// most ops, needs no call), and a count of those DispatchTensors. The count is atomic, as the CPU
/// backend's storage count (a std::shared_ptr) is: tensors cross threads (data-parallel
/// training, loaders). src/dispatch/wrap.hpp's Holder<P> adds the stack's primitive and makes
/// and frees it.
struct Handle {
    std::atomic<std::uint32_t> refs{1};           ///< DispatchTensors naming it
    void (*destroy)(Handle*) noexcept = nullptr;  ///< frees it (its Holder<P>)
    const void* type = nullptr;                   ///< which Holder<P> it is (one address a P)
    const OpTable* ops = nullptr;                 ///< its stack's op table (null: look it up)
    DispatchDevice device;                        ///< the stack (and device) it lives on
    DType dtype = DType::F32;                     ///< the tensor's dtype
    /// The tensor's shape: in the stack's primitive where it keeps one (the CPU backend's
    /// tensor, Fusion's and Autodiff's over them), else in the handle (Holder<P>).
    const Shape* shape = nullptr;
};

/// Drops one name of `h`, freeing it with the last. A count of one is the caller's own: no
/// other thread can add a name then, so the last name frees without an atomic update.
inline void release(Handle* h) noexcept {
    if (h->refs.load(std::memory_order_acquire) == 1 ||
        h->refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
        h->destroy(h);
}

/// Throws the ember::ArgumentError of a default-made tensor used in an op.
[[noreturn]] EMBER_API void no_handle();

}  // namespace detail::dispatch

/// Dispatch's float, int and bool primitive: a counted handle to a tensor of one concrete
/// stack, which knows its stack. Copies share the tensor, as every backend's primitives do.
///
/// An op's operand may be *lent* (`lent`): it names the tensor without counting, because a
/// tensor that outlives the op keeps its count (the tensor layer lends an lvalue tensor's
/// handle to an op: OperandOf<DispatchTensor>). A lent name is never the only one (`unique()`
/// is false, so an op copies its primitive rather than taking it), and a copy or move of it
/// counts: what an op keeps or returns is a counted name.
struct DispatchTensor {
    detail::dispatch::Handle* handle = nullptr;  ///< null only when default-made or moved from
    bool lent = false;  ///< whether this names the tensor without counting (an op's operand)

    DispatchTensor() = default;
    /// Takes over one name of `h` (its count already includes it).
    explicit DispatchTensor(detail::dispatch::Handle* h) noexcept : handle(h) {}
    /// Shares `o`'s tensor.
    DispatchTensor(const DispatchTensor& o) noexcept : handle(o.handle) {
        if (handle) handle->refs.fetch_add(1, std::memory_order_relaxed);
    }
    /// Takes `o`'s name over (`o` is left empty); a lent `o` gives a counted name.
    DispatchTensor(DispatchTensor&& o) noexcept : handle(o.handle) {
        if (o.lent && handle) handle->refs.fetch_add(1, std::memory_order_relaxed);
        o.handle = nullptr;
        o.lent = false;
    }
    /// Shares `o`'s tensor.
    DispatchTensor& operator=(const DispatchTensor& o) noexcept {
        DispatchTensor(o).swap(*this);
        return *this;
    }
    /// Takes `o`'s name over.
    DispatchTensor& operator=(DispatchTensor&& o) noexcept {
        DispatchTensor(std::move(o)).swap(*this);
        return *this;
    }
    ~DispatchTensor() {
        if (handle && !lent) detail::dispatch::release(handle);
    }
    /// Exchanges two handles.
    void swap(DispatchTensor& o) noexcept {
        std::swap(handle, o.handle);
        std::swap(lent, o.lent);
    }
    /// The handle; an ember::ArgumentError when there is none (default-made).
    const detail::dispatch::Handle& get() const {
        if (handle == nullptr) [[unlikely]]
            detail::dispatch::no_handle();
        return *handle;
    }
    /// Whether this is the only DispatchTensor naming its tensor (never for a lent one).
    bool unique() const noexcept {
        return !lent && handle->refs.load(std::memory_order_acquire) == 1;
    }
    /// `t`'s tensor lent: a name that does not count, valid while `t` names it.
    static DispatchTensor lend(const DispatchTensor& t) noexcept {
        return DispatchTensor(t.handle, true);
    }
    /// `t`'s name as it is (counted or lent) handed over; `t` is left empty.
    static DispatchTensor pass(DispatchTensor& t) noexcept {
        detail::dispatch::Handle* h = t.handle;
        const bool l = t.lent;
        t.handle = nullptr;
        t.lent = false;
        return DispatchTensor(h, l);
    }

  private:
    DispatchTensor(detail::dispatch::Handle* h, bool is_lent) noexcept : handle(h), lent(is_lent) {}
};

namespace detail::dispatch {

/// The op table of an op's tensor operands when they all live on one stack, which the op runs
/// on (`any_float`: a float operand keeps the device's autodiff; an op on int or bool tensors
/// alone runs on a device without it): the table the first operand's handle records. Null
/// otherwise (a default-made tensor, two stacks, a table not recorded), and the op's
/// out-of-line part then finds the stack or throws. What each op's inline part (ops.hpp) asks.
template <typename... T>
[[gnu::always_inline]] inline const OpTable* one_stack(bool any_float, const DispatchTensor& a,
                                                       const T&... rest) noexcept {
    const Handle* h = a.handle;
    if (h == nullptr) [[unlikely]]
        return nullptr;
    if (!((rest.handle != nullptr && rest.handle->device == h->device) && ...)) [[unlikely]]
        return nullptr;
    if (!any_float && h->device.has_autodiff()) [[unlikely]]
        return nullptr;
    return h->ops;
}

/// An operand of a Dispatch op as the tensor layer's op table takes it: an lvalue tensor's
/// handle lent for the call, a temporary's name taken over. It becomes the op's DispatchTensor
/// parameter as it is (lent or counted).
class OpArg {
  public:
    /// Lends `t`'s tensor: `t` must outlive the op (the tensor layer's operands do).
    OpArg(const DispatchTensor& t) noexcept : t_(DispatchTensor::lend(t)) {}
    /// Takes `t`'s name over.
    OpArg(DispatchTensor&& t) noexcept : t_(std::move(t)) {}
    /// Hands `o`'s name over as it is.
    OpArg(OpArg&& o) noexcept : t_(DispatchTensor::pass(o.t_)) {}
    OpArg(const OpArg&) = delete;
    OpArg& operator=(const OpArg&) = delete;
    OpArg& operator=(OpArg&&) = delete;
    ~OpArg() = default;
    /// The operand, for the op's parameter.
    operator DispatchTensor() && noexcept { return DispatchTensor::pass(t_); }

  private:
    DispatchTensor t_;
};

}  // namespace detail::dispatch

namespace detail {
/// The tensor layer lends Dispatch's ops its lvalue operands (OpArg).
template <>
struct OperandOf<DispatchTensor> {
    using type = dispatch::OpArg;
};
}  // namespace detail

}  // namespace ember
