#pragma once
// The backend-agnostic test harness: the list of backends every suite runs on, and access to
// fixtures written by the committed PyTorch scripts in tests/fixtures/ (never by ember).
#include <catch2/catch.hpp>
#include <ember/dispatch/dispatch.hpp>
#include <ember/ember.hpp>
#include <string>
#ifdef EMBER_VULKAN
#include <ember/stacks/vulkan_autodiff.hpp>
#include <ember/stacks/vulkan_fusion.hpp>
#endif
#include <tuple>

namespace ember::test {

/// ember::Dispatch whose default device (`Device<B>{}`, what the suites make tensors on) is
/// `Tag::device()`: lets the shared suites run Dispatch on each stack. The ops are Dispatch's;
/// the inner backend defaults to the same device without autodiff (`Tag::Inner`), as
/// `Device<InnerBackend<B>>{}` does on a concrete stack.
template <typename Tag>
struct DispatchOn : ember::Dispatch {
    /// Dispatch's device, made as `Tag::device()` by default.
    struct Device : ember::DispatchDevice {
        Device() : ember::DispatchDevice(Tag::device()) {}
        Device(const ember::DispatchDevice& d) : ember::DispatchDevice(d) {}  // NOLINT: implicit
    };
    using InnerBackend = DispatchOn<typename Tag::Inner>;  ///< the device without autodiff
    static Device float_device(const FT& t) { return ember::Dispatch::float_device(t); }
    static Device int_device(const FT& t) { return ember::Dispatch::int_device(t); }
    static Device bool_device(const FT& t) { return ember::Dispatch::bool_device(t); }
};
/// The CPU stacks Dispatch is tested on (`Inner`: the same device without autodiff).
struct CpuFusionTag {
    using Inner = CpuFusionTag;
    static constexpr ember::DispatchDevice device() { return ember::DispatchDevice::cpu().fusion(); }
};
struct CpuPlainTag {
    using Inner = CpuPlainTag;
    static constexpr ember::DispatchDevice device() { return ember::DispatchDevice::cpu(); }
};
struct CpuAutodiffTag {
    using Inner = CpuPlainTag;
    static constexpr ember::DispatchDevice device() { return ember::DispatchDevice::cpu().autodiff(); }
};
struct CpuFusionAutodiffTag {
    using Inner = CpuFusionTag;
    static constexpr ember::DispatchDevice device() {
        return ember::DispatchDevice::cpu().fusion().autodiff();
    }
};
/// Dispatch on the CPU (its default device) and on Fusion<Cpu>.
using DispatchCpu = ember::Dispatch;
using DispatchCpuFusion = DispatchOn<CpuFusionTag>;
/// Dispatch on Autodiff<Cpu> and Autodiff<Fusion<Cpu>>.
using DispatchCpuAutodiff = DispatchOn<CpuAutodiffTag>;
using DispatchCpuFusionAutodiff = DispatchOn<CpuFusionAutodiffTag>;

/// Every backend (and, later, decorator stack) the suites are instantiated for: the CPU, plus
/// each GPU backend this build has (its cases skip where its device is absent).
using TestBackends = decltype(std::tuple_cat(std::tuple<ember::Cpu, ember::Fusion<ember::Cpu>>{}
#if defined(EMBER_VULKAN)
                                             , std::tuple<ember::Vulkan, ember::Fusion<ember::Vulkan>>{}
#endif
#if defined(EMBER_CUDA)
                                             , std::tuple<ember::Cuda, ember::Fusion<ember::Cuda>>{}
#endif
                                             ));

/// TestBackends plus ember::Dispatch on the CPU stacks: the suites that run on Dispatch too
/// (basic, int/bool, float and module ops; more join as they are checked on it).
/// EMBER_TEST_NO_DISPATCH (the AArch64 cross build, tests/aarch64) leaves Dispatch out: it routes
/// to the same CPU kernels, and its instantiations would double that build's compile time.
#if defined(EMBER_TEST_NO_DISPATCH)
using TestBackendsWithDispatch = TestBackends;
#else
using TestBackendsWithDispatch =
    decltype(std::tuple_cat(TestBackends{}, std::tuple<DispatchCpu, DispatchCpuFusion>{}));
#endif

/// Whether backend B computes on the Vulkan backend (itself, or under Fusion and Autodiff).
template <typename B>
constexpr bool on_vulkan() {
#if defined(EMBER_VULKAN)
    return std::is_same_v<InnerBackend<B>, ember::Vulkan> ||
           std::is_same_v<InnerBackend<B>, ember::Fusion<ember::Vulkan>>;
#else
    return false;
#endif
}

/// Whether backend B (or the backend under a decorator) can run here: a GPU backend needs its
/// device; the CPU always can.
template <typename B>
bool backend_available() {
#if defined(EMBER_VULKAN)
    if constexpr (on_vulkan<B>()) return ember::vulkan::is_available();
#endif
#if defined(EMBER_CUDA)
    if constexpr (std::is_same_v<InnerBackend<B>, ember::Cuda> ||
                  std::is_same_v<InnerBackend<B>, ember::Fusion<ember::Cuda>>)
        return ember::cuda::is_available();
#endif
    return true;
}

/// One tensor of a fixture.
struct FixtureTensor {
    TensorData data;
};

/// A named case of a fixture file: its input and output tensors.
class Fixture {
public:
    /// Loads case `name` of tests/fixtures/<file>.json (throws when absent).
    Fixture(const std::string& file, const std::string& name);
    /// Number of inputs.
    std::size_t num_inputs() const;
    /// Input i as host data.
    const TensorData& input(std::size_t i) const;
    /// Output i as host data.
    const TensorData& output(std::size_t i) const;
    /// A scalar parameter of the case (e.g. "dim").
    double param(const std::string& key) const;
    /// Whether the case has a scalar or string parameter `key`.
    bool has_param(const std::string& key) const;
    /// A string parameter of the case (e.g. "mode").
    const std::string& str(const std::string& key) const;
    /// Whether the case has a named tensor (module fixtures name theirs: "weight", "grad.input").
    bool has(const std::string& name) const;
    /// Named tensor `name` as host data (throws when absent).
    const TensorData& named(const std::string& name) const;
    /// Named tensor `name` as a tensor of backend B.
    template <typename B, std::size_t D, typename K = Float>
    Tensor<B, D, K> named_tensor(const std::string& name) const {
        return Tensor<B, D, K>::from_data(named(name), Device<B>{});
    }
    /// Input i as a tensor of backend B (float inputs become Float, int Int, bool Bool unless K
    /// says otherwise).
    template <typename B, std::size_t D, typename K = Float>
    Tensor<B, D, K> tensor(std::size_t i) const {
        return Tensor<B, D, K>::from_data(input(i), Device<B>{});
    }

private:
    std::vector<TensorData> inputs_, outputs_;
    std::vector<std::pair<std::string, double>> params_;
    std::vector<std::pair<std::string, std::string>> strings_;
    std::vector<std::pair<std::string, TensorData>> named_;
    std::string name_;
};

/// The names of every case in tests/fixtures/<file>.json.
std::vector<std::string> fixture_cases(const std::string& file);

/// Checks `actual` against `expected` within tolerance (NaN matches NaN), with a readable
/// report on failure.
void check_close(const TensorData& actual, const TensorData& expected, Tolerance tol = {});
/// Checks exact equality of values and shape (ints, bools, indices).
void check_equal(const TensorData& actual, const TensorData& expected);

/// Tolerance suited to the backend's float precision.
template <typename B>
Tolerance default_tolerance() {
    if constexpr (std::is_same_v<typename B::FloatElem, double>) return {1e-9, 1e-9};
#ifdef EMBER_VULKAN
    // GPU transcendentals are specified to a few ulp (exp, log, pow through exp2/log2) and sums
    // are reduced in a different order: a few f32 ulp of headroom over the CPU's bound.
    else if constexpr (on_vulkan<B>()) return {2e-5, 2e-4};
#endif
    else return {1e-5, 1e-4};
}

/// Whether backend B computes f64 tensors in double precision. The Vulkan backend stores and
/// computes them in f32 (GLSL has no double-precision exp/log; docs/vulkan.md), so f64 cases
/// check it at its f32 tolerance.
template <typename B>
constexpr bool computes_f64() {
#if defined(EMBER_VULKAN)
    if constexpr (on_vulkan<B>()) return false;
#endif
    return true;
}

}  // namespace ember::test

/// First statement of a case instantiated per backend: skips it (with a warning, so that the
/// run says so) when the backend's device is absent, e.g. the CUDA suites on a machine
/// without a GPU.
#define EMBER_SKIP_IF_UNAVAILABLE(B)                                                   \
    do {                                                                               \
        if (!::ember::test::backend_available<B>()) {                                  \
            WARN("skipped: no device for backend " << B::name());                      \
            return;                                                                    \
        }                                                                              \
    } while (0)
