#pragma once
// Helpers of the loss suites that run torch's cases of tests/fixtures/nn_loss.json
// (gen_nn_loss.py) through grad_check.hpp: the case's reduction, and one call that checks the
// reduced loss through forward(..., reduction) or, for "none", forward_no_reduction().
#include <string>
#include <type_traits>

#include <ember/nn/loss.hpp>

#include "grad_check.hpp"

namespace ember::test::loss_check {

namespace loss = ember::nn::loss;

/// A case of nn_loss.json (for its parameters).
inline Fixture fx(const std::string& name) {
    return Fixture("nn_loss", name);
}

/// The reduction a case was computed with.
inline loss::Reduction reduction_of(const Fixture& f) {
    const std::string& r = f.str("reduction");
    return r == "sum"         ? loss::Reduction::Sum
           : r == "none"      ? loss::Reduction::None
           : r == "batchmean" ? loss::Reduction::BatchMean
                              : loss::Reduction::Mean;
}

/// Checks case `name` on stack AD (and its gradients against finite differences):
/// `make(x)` gives the loss for the backend of the first input x; the case's reduction picks
/// forward() or forward_no_reduction().
template <typename AD, typename... Ins, typename Make>
void check_case(const std::string& name, Make make, GradOptions opt = {}) {
    const auto reduction = reduction_of(fx(name));
    if (reduction == loss::Reduction::None) {
        check_gradients<AD, Ins...>(
            "nn_loss", name,
            [&](const auto& first, const auto&... rest) {
                return make(first).forward_no_reduction(first, rest...);
            },
            opt);
    } else {
        check_gradients<AD, Ins...>(
            "nn_loss", name,
            [&](const auto& first, const auto&... rest) {
                return make(first).forward(first, rest..., reduction);
            },
            opt);
    }
}

/// The backend of tensor `t`.
template <typename T>
using BackendOf = typename std::remove_cvref_t<T>::BackendType;

}  // namespace ember::test::loss_check
