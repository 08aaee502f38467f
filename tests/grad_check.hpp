#pragma once
// Gradient checks, written once for every autodiff stack. A case is a fixture written by a
// committed PyTorch script (inputs, then the upstream gradient `gout`; outputs: the forward
// value, then dL/dinput for each differentiable input, L = sum(op(inputs) * gout)) and a generic
// callable that runs the same op on ember tensors. check_gradients() checks
//   1. on the stack under test: the forward value and every gradient against PyTorch;
//   2. on the stack's float64 twin: every gradient against central finite differences of the
//      inner (non-autodiff) backend's forward.
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "harness.hpp"

namespace ember::test {

/// Every autodiff stack the gradient suites run on.
using AutodiffBackends = decltype(std::tuple_cat(
    std::tuple<ember::Autodiff<ember::Cpu>,
               ember::Autodiff<ember::Cpu, ember::BalancedCheckpointing>,
               ember::Autodiff<ember::Fusion<ember::Cpu>>>{}
#if defined(EMBER_VULKAN)
    , std::tuple<ember::Autodiff<ember::Vulkan>, ember::Autodiff<ember::Fusion<ember::Vulkan>>>{}
#endif
#if defined(EMBER_CUDA)
    , std::tuple<ember::Autodiff<ember::Cuda>, ember::Autodiff<ember::Fusion<ember::Cuda>>>{}
#endif
    ));

/// AutodiffBackends plus ember::Dispatch on the CPU's autodiff stacks (the suites checked on it).
/// (Without Dispatch under EMBER_TEST_NO_DISPATCH, as TestBackendsWithDispatch.)
#if defined(EMBER_TEST_NO_DISPATCH)
using AutodiffBackendsWithDispatch = AutodiffBackends;
#else
using AutodiffBackendsWithDispatch = decltype(std::tuple_cat(
    AutodiffBackends{}, std::tuple<DispatchCpuAutodiff, DispatchCpuFusionAutodiff>{}));
#endif

/// The float64 stack used for finite-difference checks of a stack.
template <typename AD>
struct F64Twin;
template <typename C>
struct F64Twin<Autodiff<Cpu, C>> {
    using type = Autodiff<CpuF64, C>;
};
template <typename C>
struct F64Twin<Autodiff<Fusion<Cpu>, C>> {
    using type = Autodiff<Fusion<CpuF64>, C>;
};
/// Dispatch computes in f32 (its float element): the finite differences run on the CPU's f64
/// stack.
template <typename Tag>
struct F64Twin<DispatchOn<Tag>> {
    using type = Autodiff<CpuF64>;
};
#ifdef EMBER_VULKAN
/// Vulkan computes in f32: its finite-difference check runs the same op on the CPU in f64
/// (the analytic gradients of the Vulkan stack are checked against PyTorch in step 1).
template <typename C>
struct F64Twin<Autodiff<Vulkan, C>> {
    using type = Autodiff<CpuF64, C>;
};
template <typename C>
struct F64Twin<Autodiff<Fusion<Vulkan>, C>> {
    using type = Autodiff<CpuF64, C>;
};
#endif
#if defined(EMBER_CUDA)
/// CUDA's gradients are checked against PyTorch's; the finite differences run on the CPU's f64
/// stack (the CUDA backend has no f64-by-default twin).
template <>
struct F64Twin<Autodiff<Cuda>> {
    using type = Autodiff<CpuF64>;
};
template <>
struct F64Twin<Autodiff<Fusion<Cuda>>> {
    using type = Autodiff<CpuF64>;
};
#endif

/// One input of a gradient case: rank D and kind K; `Grad` says whether it requires (and so is
/// checked for) a gradient. Int and bool inputs never do.
template <std::size_t D, typename K = Float, bool Grad = std::same_as<K, Float>>
struct In {
    static constexpr std::size_t rank = D;
    using Kind = K;
    static constexpr bool grad = Grad;
};

/// Tolerances and switches of a case.
struct GradOptions {
    Tolerance value{1e-4, 1e-4};  ///< forward value vs PyTorch (f32 stack)
    Tolerance grad{1e-4, 1e-3};   ///< gradients vs PyTorch (f32 stack)
    Tolerance fd{1e-6, 1e-5};     ///< f64 gradients vs finite differences
    double step = 1e-6;           ///< finite-difference step
    bool finite_differences = true;  ///< off where the op is not differentiable at the inputs
};

namespace detail {
template <typename B, typename I>
using TensorOf = Tensor<B, I::rank, typename I::Kind>;

template <typename B, typename... Ins, std::size_t... Is>
auto make_inputs(const Fixture& fx, bool require, std::index_sequence<Is...>) {
    return std::tuple<TensorOf<B, Ins>...>{[&] {
        auto t = TensorOf<B, Ins>::from_data(fx.input(Is), Device<B>{});
        if constexpr (std::same_as<typename Ins::Kind, Float>)
            if (require && Ins::grad) t = t.require_grad();
        return t;
    }()...};
}

template <typename Out>
double weighted_sum(const Out& out, const TensorData& gout) {
    using B = typename Out::BackendType;
    auto g = Tensor<B, Out::rank>::from_data(gout, Device<B>{});
    return static_cast<double>((out * g).sum().into_scalar());
}
}  // namespace detail

/// Runs gradient case `name` of tests/fixtures/<file>.json; see the file comment.
template <typename AD, typename... Ins, typename F>
void check_gradients(const std::string& file, const std::string& name, F f,
                     GradOptions opt = {}) {
    constexpr std::size_t n = sizeof...(Ins);
    using Seq = std::index_sequence_for<Ins...>;
    INFO("gradient case " << file << "/" << name);
    const Fixture fx(file, name);
    REQUIRE(fx.num_inputs() == n + 1);
    const TensorData& gout = fx.input(n);

    // 1. The stack under test against PyTorch.
    {
        auto ts = detail::make_inputs<AD, Ins...>(fx, true, Seq{});
        auto out = std::apply(f, ts);
        using Out = decltype(out);
        check_close(out.to_data(), fx.output(0), opt.value);
        auto g = Tensor<AD, Out::rank>::from_data(gout, Device<AD>{});
        auto grads = (out * g).sum().backward();
        std::size_t k = 1;
        [&]<std::size_t... Is>(std::index_sequence<Is...>) {
            (
                [&] {
                    using I = std::tuple_element_t<Is, std::tuple<Ins...>>;
                    if constexpr (I::grad) {
                        INFO("gradient of input " << Is);
                        auto gi = std::get<Is>(ts).grad(grads);
                        REQUIRE(gi.has_value());
                        check_close(gi->to_data(), fx.output(k++), opt.grad);
                    }
                }(),
                ...);
        }(Seq{});
    }

    // 2. Float64: analytic gradients against central finite differences.
    if (!opt.finite_differences) return;
    using T = typename F64Twin<AD>::type;
    using Inner = InnerBackend<T>;
    auto ts = detail::make_inputs<T, Ins...>(fx, true, Seq{});
    auto grads = [&] {
        auto out = std::apply(f, ts);
        auto g = Tensor<T, decltype(out)::rank>::from_data(gout, Device<T>{});
        return (out * g).sum().backward();
    }();
    auto base = detail::make_inputs<Inner, Ins...>(fx, false, Seq{});
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        (
            [&] {
                using I = std::tuple_element_t<Is, std::tuple<Ins...>>;
                if constexpr (I::grad) {
                    INFO("finite differences of input " << Is);
                    auto analytic = std::get<Is>(ts).grad(grads);
                    REQUIRE(analytic.has_value());
                    const TensorData x = std::get<Is>(base).to_data();
                    std::vector<double> v = x.to_vec<double>();
                    std::vector<double> fd(v.size());
                    for (std::size_t j = 0; j < v.size(); ++j) {
                        auto at = [&](double dx) {
                            std::vector<double> w = v;
                            w[j] += dx;
                            auto args = base;
                            std::get<Is>(args) = detail::TensorOf<Inner, I>::from_data(
                                TensorData(w, x.shape()), Device<Inner>{});
                            return detail::weighted_sum(std::apply(f, args), gout);
                        };
                        fd[j] = (at(opt.step) - at(-opt.step)) / (2 * opt.step);
                    }
                    check_close(analytic->to_data(), TensorData(fd, x.shape()), opt.fd);
                }
            }(),
            ...);
    }(Seq{});
}

}  // namespace ember::test
