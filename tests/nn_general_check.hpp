#pragma once
// Helpers of the general-layer and loss suites: fixture parameters mapped onto ember's names and
// layouts, and one forward/backward comparison against a torch case (L = sum(output * gout)).
#include <string>
#include <vector>

#include "module_check.hpp"

namespace ember::test::general {

/// The backend the torch comparisons run on, and its inner (inference) backend.
using AD = Autodiff<Cpu>;
/// The f64 backend of the finite-difference checks.
using F64 = AutodiffF64;

/// The fixture file of both suites.
inline Fixture fx(const std::string& name) {
    return Fixture("nn_general", name);
}

/// An ember parameter path and the torch state_dict name it is read from (transposed for Linear
/// weights, which torch stores [out, in]).
struct ParamName {
    std::string path;
    std::string torch;
    bool transpose = false;
};

/// `data` [a, b] as [b, a].
inline TensorData transposed(const TensorData& data) {
    return Tensor<Cpu, 2>::from_data(data).transpose().to_data();
}

/// `model` with every listed parameter set from the fixture.
template <module::Module M>
M with_params(M model, const Fixture& f, const std::vector<ParamName>& names) {
    for (const auto& p : names) {
        const TensorData& d = f.named(p.torch);
        model = with_param(model, p.path, p.transpose ? transposed(d) : d);
    }
    return model;
}

/// The rank of a tensor type.
template <typename T>
struct RankOf;
template <typename B, std::size_t D, typename K>
struct RankOf<Tensor<B, D, K>> {
    static constexpr std::size_t value = D;
    static constexpr bool is_float = std::is_same_v<K, Float>;
};

/// Checks `y` (computed from `input` by `model`) against the case's "output", then the
/// gradients of L = sum(y * gout) for every listed parameter and, when `input` is a float tensor
/// requiring a gradient, for the input ("grad.input"). Every trainable parameter of the model
/// must be listed.
template <module::Module M, typename Y, typename X>
void check_against(const M& model, const Fixture& f, const std::vector<ParamName>& names,
                   const X& input, const Y& y, Tolerance tol = {}) {
    check_close(y.to_data(), f.named("output"), tol);
    auto gout = Y::from_data(f.named("gout"), y.device());
    auto grads = (y * gout).sum().backward();
    std::size_t checked = 0;
    model.visit([&](std::string_view path, const auto& p) {
        bool listed = false;
        for (const auto& q : names) {
            if (q.path != path) continue;
            listed = true;
            INFO("gradient of " << path << " (torch " << q.torch << ")");
            auto g = p.val().grad(grads);
            REQUIRE(g.has_value());
            auto data = g->to_data();
            check_close(q.transpose ? transposed(data) : data, f.named("grad." + q.torch), tol);
            ++checked;
        }
        INFO("parameter " << path << " has no fixture name");
        CHECK((listed || !p.is_require_grad()));
    });
    CHECK(checked == names.size());
    if constexpr (RankOf<X>::is_float) {
        if (input.is_require_grad()) {
            INFO("gradient of the input");
            auto gx = input.grad(grads);
            REQUIRE(gx.has_value());
            check_close(gx->to_data(), f.named("grad.input"), tol);
        }
    }
}

/// A trainable parameter of `model` moved away from its initial value (so that constant
/// initialisations such as gamma = 1 do not hide errors), drawn uniformly in [-0.5, 0.5).
template <module::Module M>
M perturbed(const M& model) {
    return model.map([](std::string_view, const auto& p) {
        return p.map([](auto t) { return t + t.random_like(Distribution::Uniform(-0.5, 0.5)); });
    });
}

/// Finite-difference check of every parameter of `model` (f64) for L = sum(forward(x) · w) with
/// a fixed random w.
template <module::Module M, typename X, typename Fwd>
void check_fd(const M& model, const X& x, Fwd&& forward) {
    auto y = forward(model, x);
    auto w = y.random_like(Distribution::Uniform(-1.0, 1.0));
    check_param_grads_fd(model, [&](const M& m) { return (forward(m, x) * w).sum(); });
}

}  // namespace ember::test::general
