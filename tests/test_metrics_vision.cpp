// DiceMetric, PsnrMetric, SsimMetric and MsSsimMetric, checked against values worked out by hand
// and, for SSIM and MS-SSIM, the torch references of tests/fixtures/gen_metrics.py.
#include <catch2/catch.hpp>
#include <cmath>
#include <ember/ember.hpp>
#include <ember/train/vision_metrics.hpp>
#include <string>
#include <utility>

#include "harness.hpp"

namespace test_metrics_vision {

namespace {
using ember::Cpu;
using ember::Int;
using ember::Tensor;
using ember::TensorData;
namespace train = ember::train;

Tensor<Cpu, 4, Int> mask(std::vector<std::int64_t> v, ember::Shape s) {
    return Tensor<Cpu, 4, Int>::from_data(TensorData(std::move(v), std::move(s)));
}
Tensor<Cpu, 4> image(std::vector<float> v, ember::Shape s) {
    return Tensor<Cpu, 4>::from_data(TensorData(std::move(v), std::move(s)));
}
}  // namespace

TEST_CASE("DiceMetric: overlap of masks, background left out by default", "[metrics]") {
    static_assert(train::Numeric<train::DiceMetric<Cpu>>);
    // Class 0 (background) identical in both; class 1: X = 1100, Y = 1010, |X ∩ Y| = 1.
    auto x = mask({0, 0, 1, 1, 1, 1, 0, 0}, {1, 2, 2, 2});
    auto y = mask({0, 0, 1, 1, 1, 0, 1, 0}, {1, 2, 2, 2});
    train::DiceMetric<Cpu> dice;
    auto e = dice.update({x, y}, {});
    CHECK(e.name == "4D Dice Metric");
    CHECK(*e.numeric == Approx(2.0 / 4.0));
    // With the background: |X ∩ Y| = 2 + 1, |X| = |Y| = 4.
    train::DiceMetric<Cpu> with_bg({.epsilon = 1e-7, .include_background = true});
    CHECK(*with_bg.update({x, y}, {}).numeric == Approx(6.0 / 8.0));
    // Empty masks agree: ε / ε.
    auto empty = mask(std::vector<std::int64_t>(4, 0), {1, 1, 2, 2});
    CHECK(*dice.update({empty, empty}, {}).numeric == Approx(1.0));
    SECTION("errors") {
        CHECK_THROWS_AS(with_bg.update({empty, empty}, {}), ember::ArgumentError);
        CHECK_THROWS_AS(train::DiceMetric<Cpu>({.epsilon = -1.0}), ember::ArgumentError);
        CHECK_THROWS_WITH(dice.update({x, mask(std::vector<std::int64_t>(4, 0), {1, 1, 2, 2})}, {}),
                          Catch::Contains("DiceMetric") && Catch::Contains("[1, 2, 2, 2]"));
    }
}

TEST_CASE("PsnrMetric: 10·log10(max² / MSE) per image, averaged", "[metrics]") {
    static_assert(train::Numeric<train::PsnrMetric<Cpu>>);
    // Image 0 off by 0.1 everywhere (MSE 0.01: 20 dB), image 1 by 0.01 (MSE 1e-4: 40 dB).
    auto out = image({0.1f, 0.1f, 0.1f, 0.1f, 0.01f, 0.01f, 0.01f, 0.01f}, {2, 1, 2, 2});
    auto zero = Tensor<Cpu, 4>::zeros({2, 1, 2, 2});
    train::PsnrMetric<Cpu> psnr;
    auto e = psnr.update({out, zero}, {});
    CHECK(e.name == "PSNR@1");
    CHECK(*e.numeric == Approx(30.0).epsilon(1e-5));
    CHECK(e.formatted == "30.00 dB");
    // 8-bit range, error 10: 10·log10(255² / 100); a perfect image is capped by ε = 1e-10.
    train::PsnrMetric<Cpu> byte({.max_pixel_value = 255.0});
    auto ten = Tensor<Cpu, 4>::full({1, 1, 2, 2}, 10.0);
    CHECK(*byte.update({ten, Tensor<Cpu, 4>::zeros({1, 1, 2, 2})}, {}).numeric ==
          Approx(10.0 * std::log10(255.0 * 255.0 / 100.0)));
    CHECK(*psnr.update({zero, zero}, {}).numeric == Approx(100.0));
    SECTION("errors") {
        CHECK_THROWS_AS(train::PsnrMetric<Cpu>({.max_pixel_value = 0.0}), ember::ArgumentError);
        CHECK_THROWS_AS(psnr.update({out, Tensor<Cpu, 4>::zeros({2, 1, 2, 1})}, {}),
                        ember::ShapeError);
    }
}

TEST_CASE("SsimMetric: identical images, and torch references", "[metrics]") {
    static_assert(train::Numeric<train::SsimMetric<Cpu>>);
    train::SsimMetric<Cpu> ssim;
    CHECK(ssim.name() == "SSIM");
    // An image against itself: 1 wherever the window lies.
    std::vector<float> v(2 * 12 * 13);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = float((i * 37) % 101) / 100.0f;
    auto x = image(v, {1, 2, 12, 13});
    CHECK(*ssim.update({x, x}, {}).numeric == Approx(1.0));
    for (const char* name : {"ssim_default", "ssim_range", "ssim_small_window"}) {
        INFO(name);
        ember::test::Fixture fx("metrics", name);
        train::SsimMetricConfig config;
        if (fx.has_param("data_range")) config.data_range = fx.param("data_range");
        if (fx.has_param("kernel_size")) config.kernel_size = std::size_t(fx.param("kernel_size"));
        if (fx.has_param("sigma")) config.sigma = fx.param("sigma");
        train::SsimMetric<Cpu> m(config);
        auto e =
            m.update({fx.named_tensor<Cpu, 4>("outputs"), fx.named_tensor<Cpu, 4>("targets")}, {});
        CHECK(*e.numeric == Approx(fx.param("ssim")).epsilon(1e-9));
    }
    SECTION("errors") {
        CHECK_THROWS_AS(train::SsimMetric<Cpu>({.kernel_size = 4}), ember::ArgumentError);
        CHECK_THROWS_AS(train::SsimMetric<Cpu>({.sigma = 0.0}), ember::ArgumentError);
        CHECK_THROWS_AS(train::SsimMetric<Cpu>({.data_range = -1.0}), ember::ArgumentError);
        auto small = Tensor<Cpu, 4>::zeros({1, 1, 10, 20});
        CHECK_THROWS_WITH(ssim.update({small, small}, {}),
                          Catch::Contains("SsimMetric") && Catch::Contains("[1, 1, 10, 20]"));
        CHECK_THROWS_AS(ssim.update({x, Tensor<Cpu, 4>::zeros({1, 2, 12, 12})}, {}),
                        ember::ShapeError);
        // Constant images have no data range to derive.
        auto flat = Tensor<Cpu, 4>::full({1, 1, 11, 11}, 0.5);
        CHECK_THROWS_WITH(ssim.update({flat, flat}, {}), Catch::Contains("data_range"));
        train::SsimMetric<Cpu> ranged({.data_range = 1.0});
        CHECK(*ranged.update({flat, flat}, {}).numeric == Approx(1.0));
    }
}

namespace {
// The images of gen_metrics.py's formula_images (no pixels in the fixture): targets t and
// outputs o, in the same order of operations, rounded to float32.
std::pair<Tensor<Cpu, 4>, Tensor<Cpu, 4>> formula_images(std::size_t n, std::size_t c,
                                                         std::size_t h, std::size_t w) {
    std::vector<float> o(n * c * h * w), t(o.size());
    std::size_t at = 0;
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t ch = 0; ch < c; ++ch)
            for (std::size_t y = 0; y < h; ++y)
                for (std::size_t x = 0; x < w; ++x, ++at) {
                    const double xd = double(x), yd = double(y), cd = double(ch), id = double(i);
                    const double tv = 0.5 + 0.25 * std::sin(0.11 * xd + 0.05 * yd + cd + id) +
                                      0.15 * std::cos(0.031 * xd * yd / 8);
                    const double ov = tv + 0.1 * std::sin(2.3 * xd + 1.9 * yd + 0.5 * cd + 3 * id);
                    t[at] = float(tv);
                    o[at] = float(ov);
                }
    return {image(o, {n, c, h, w}), image(t, {n, c, h, w})};
}
}  // namespace

TEST_CASE("MsSsimMetric: identical images, and torch references", "[metrics][msssim]") {
    static_assert(train::Numeric<train::MsSsimMetric<Cpu>>);
    SECTION("the defaults: 5 scales of an 11-wide window on 180 × 184 images") {
        ember::test::Fixture fx("metrics", "msssim_default_formula");
        auto [o, t] = formula_images(std::size_t(fx.param("n")), std::size_t(fx.param("c")),
                                     std::size_t(fx.param("h")), std::size_t(fx.param("w")));
        train::MsSsimMetric<Cpu> m;
        CHECK(m.name() == "MS-SSIM");
        CHECK(*m.update({o, t}, {}).numeric == Approx(fx.param("msssim")).epsilon(1e-9));
        // An image against itself: every term 1.
        CHECK(*m.update({t, t}, {}).numeric == Approx(1.0).epsilon(1e-12));
    }
    SECTION("3 scales of a 5-wide window: relu and simple, data range derived or set") {
        ember::test::Fixture small("metrics", "msssim_small");
        const auto out = small.named_tensor<Cpu, 4>("outputs");
        const auto tgt = small.named_tensor<Cpu, 4>("targets");
        const auto anti = 1.0f - tgt;
        for (const char* name :
             {"msssim_small", "msssim_simple_range", "msssim_anti_relu", "msssim_anti_simple"}) {
            INFO(name);
            ember::test::Fixture fx("metrics", name);
            train::MsSsimMetricConfig config;
            config.kernel_size = std::size_t(fx.param("kernel_size"));
            config.sigma = fx.param("sigma");
            config.betas = {fx.param("beta0"), fx.param("beta1"), fx.param("beta2")};
            if (fx.has_param("data_range")) config.data_range = fx.param("data_range");
            if (fx.has_param("normalize") && fx.str("normalize") == "simple")
                config.normalize = train::MsSsimNormalize::Simple;
            train::MsSsimMetric<Cpu> m(config);
            const bool is_anti = std::string(name).find("anti") != std::string::npos;
            const double v = *m.update({is_anti ? anti : out, tgt}, {}).numeric;
            CHECK(v == Approx(fx.param("msssim")).epsilon(1e-9).margin(1e-12));
        }
    }
    SECTION("normalize None lets a negative term through (NaN under a fractional power)") {
        ember::test::Fixture small("metrics", "msssim_small");
        const auto tgt = small.named_tensor<Cpu, 4>("targets");
        train::MsSsimMetric<Cpu> m({.kernel_size = 5,
                                    .sigma = 1.0,
                                    .betas = {0.2, 0.3, 0.5},
                                    .normalize = train::MsSsimNormalize::None});
        CHECK(std::isnan(*m.update({1.0f - tgt, tgt}, {}).numeric));
    }
    SECTION("errors") {
        using Catch::Contains;
        CHECK_THROWS_AS(train::MsSsimMetric<Cpu>({.kernel_size = 4}), ember::ArgumentError);
        CHECK_THROWS_AS(train::MsSsimMetric<Cpu>({.sigma = 0.0}), ember::ArgumentError);
        CHECK_THROWS_AS(train::MsSsimMetric<Cpu>({.data_range = 0.0}), ember::ArgumentError);
        CHECK_THROWS_AS(train::MsSsimMetric<Cpu>({.betas = {}}), ember::ArgumentError);
        CHECK_THROWS_WITH(train::MsSsimMetric<Cpu>({.betas = {0.5, -0.1}}),
                          Contains("MsSsimMetric") && Contains("-0.1"));
        train::MsSsimMetric<Cpu> m;
        // 5 scales of 11: 176 × 176 at least; 175 leaves a 10-wide coarsest scale.
        auto small = Tensor<Cpu, 4>::zeros({1, 1, 175, 200});
        CHECK_THROWS_AS(m.update({small, small}, {}), ember::ShapeError);
        CHECK_THROWS_WITH(m.update({small, small}, {}), Contains("MsSsimMetric") &&
                                                            Contains("[1, 1, 175, 200]") &&
                                                            Contains("176"));
        auto a = Tensor<Cpu, 4>::zeros({1, 1, 176, 176});
        CHECK_THROWS_AS(m.update({a, Tensor<Cpu, 4>::zeros({1, 1, 176, 177})}, {}),
                        ember::ShapeError);
        CHECK_THROWS_AS(m.update({a.slice({{0, 0}}), a.slice({{0, 0}})}, {}), ember::ShapeError);
        // Constant images: no data range to derive.
        auto flat = Tensor<Cpu, 4>::full({1, 1, 176, 176}, 0.5);
        CHECK_THROWS_WITH(m.update({flat, flat}, {}),
                          Contains("MsSsimMetric") && Contains("data_range"));
        train::MsSsimMetric<Cpu> ranged({.data_range = 1.0});
        CHECK(*ranged.update({flat, flat}, {}).numeric == Approx(1.0));
    }
}

}  // namespace test_metrics_vision
