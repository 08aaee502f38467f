#pragma once
// What the fusion tests of every backend share: the gelu_custom, an input ramp and a
// closed-form value check.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <numbers>
#include <vector>

#include <ember/ember.hpp>

namespace ember::test {

/// gelu written with tensor ops (five elementwise ops: one fused kernel under Fusion<B>).
template <ember::Backend BE, std::size_t D>
Tensor<BE, D> gelu_custom(Tensor<BE, D> x) {
    auto y = x * ((x / std::numbers::sqrt2_v<float>).erf() + 1);
    return y / 2;
}

/// n evenly spaced values from lo to hi (n >= 2).
inline std::vector<float> ramp(std::size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = lo + (hi - lo) * static_cast<float>(i) / static_cast<float>(n - 1);
    return v;
}

/// Every element within 1e-6 absolute plus `rel` of |want|.
inline void check_values(const std::vector<float>& got, const std::vector<double>& want,
                         double rel) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("element " << i << ": " << got[i] << " vs " << want[i]);
        CHECK(std::abs(got[i] - want[i]) <= 1e-6 + rel * std::abs(want[i]));
    }
}

}  // namespace ember::test
