#pragma once
// Checks shared by the nn, optim and record suites: module parameters set from fixtures, and
// parameter gradients compared with central finite differences in float64.
#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include <ember/module/module.hpp>

#include "harness.hpp"

namespace ember::test {

/// The f64 autodiff backend the finite-difference checks run on.
using AutodiffF64 = Autodiff<CpuF64>;

/// A parameter holding `data` (converted to the backend's float dtype) with the id of `like`.
template <typename P>
P param_from(const P& like, const TensorData& data) {
    using V = typename P::Value;
    INFO("parameter shape " << like.shape().to_string() << " vs fixture " << data.shape().to_string());
    REQUIRE(data.shape() == like.shape());
    return like.with_value(V::from_data(data.convert(like.dtype()), like.device()));
}

/// `model` with every parameter set from the fixture tensor named by its path (each one required).
template <module::Module M>
M load_params(const M& model, const Fixture& f) {
    return model.map([&](std::string_view path, const auto& p) {
        INFO("parameter " << path);
        REQUIRE(f.has(std::string(path)));
        return param_from(p, f.named(std::string(path)));
    });
}

/// `model` with the parameter at `path` holding `data` (others unchanged).
template <module::Module M>
M with_param(const M& model, std::string_view path, const TensorData& data) {
    bool found = false;
    auto out = model.map([&](std::string_view p, const auto& q) {
        if (p != path) return q;
        found = true;
        return param_from(q, data);
    });
    INFO("parameter " << path);
    REQUIRE(found);
    return out;
}

/// Every parameter's values as f32, in visiting order.
template <typename M>
std::vector<std::vector<float>> param_values(const M& model) {
    std::vector<std::vector<float>> out;
    model.visit([&](std::string_view, const auto& p) {
        out.push_back(p.val().to_data().template to_vec<float>());
    });
    return out;
}

/// The largest |a − b| between two models' param_values (the same parameters required).
inline double largest_difference(const std::vector<std::vector<float>>& a,
                                 const std::vector<std::vector<float>>& b) {
    REQUIRE(a.size() == b.size());
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        REQUIRE(a[i].size() == b[i].size());
        for (std::size_t j = 0; j < a[i].size(); ++j)
            worst = std::max(worst, double(std::abs(a[i][j] - b[i][j])));
    }
    return worst;
}

/// Central finite differences of `loss(model)` (a scalar tensor of an f64 autodiff backend)
/// with respect to up to `per_param` elements of every trainable parameter (first, middle,
/// last), compared with the gradients backward() gives.
template <module::Module M, typename Loss>
void check_param_grads_fd(const M& model, Loss&& loss, std::size_t per_param = 3,
                          double eps = 1e-6, double tol = 1e-6) {
    auto grads = loss(model).backward();
    model.visit([&](std::string_view path, const auto& p) {
        if (!p.is_require_grad()) return;
        INFO("parameter " << path);
        auto g = p.val().grad(grads);
        REQUIRE(g.has_value());
        const auto analytic = g->to_data().template to_vec<double>();
        const TensorData base = p.val().to_data().convert(DType::F64);
        const std::size_t n = base.num_elements();
        std::vector<std::size_t> picks{0, n / 2, n - 1};
        picks.resize(std::min<std::size_t>(per_param, picks.size()));
        for (std::size_t k = 0; k < picks.size(); ++k) {
            const std::size_t i = picks[k];
            if (n == 0 || (k > 0 && i == picks[k - 1])) continue;
            auto at = [&](double delta) {
                TensorData d = base;
                d.as_mut_slice<double>()[i] += delta;
                return loss(with_param(model, path, d)).into_scalar();
            };
            const double numeric = (at(eps) - at(-eps)) / (2 * eps);
            INFO("element " << i << ": analytic " << analytic[i] << ", numeric " << numeric);
            CHECK(std::abs(analytic[i] - numeric) <= tol * (1.0 + std::abs(numeric)));
        }
    });
}

}  // namespace ember::test
