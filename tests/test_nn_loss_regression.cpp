// Pointwise losses against torch.nn.functional (tests/fixtures/gen_nn_loss.py): KLDivLoss,
// LpLoss, PoissonNllLoss, SmoothL1Loss and GaussianNllLoss with every option and reduction, on
// every autodiff stack, with the gradients of every float input against torch's and against
// finite differences.
#include <sstream>

#include <ember/nn/loss_regression.hpp>

#include "loss_check.hpp"

namespace test_nn_loss_regression {

using ember::Tensor;
using ember::test::In;
using ember::test::loss_check::check_case;
using ember::test::loss_check::fx;
namespace loss = ember::nn::loss;

namespace {
template <typename T>
std::string show(const T& module) {
    std::ostringstream os;
    os << module;
    return os.str();
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("KLDivLoss matches torch's kl_div", "[nn][loss]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;
    for (const char* red : {"mean", "sum", "none", "batchmean"}) {
        for (bool log_target : {false, true}) {
            const std::string name = std::string(log_target ? "kldiv_log_target_" : "kldiv_") + red;
            DYNAMIC_SECTION(name) {
                const auto l = loss::KLDivLossConfig{}.with_log_target(log_target).init();
                check_case<AD, In<2>, In<2>>(name, [&](const auto&) { return l; });
            }
        }
    }
    SECTION("zero target probabilities add nothing") {
        const auto l = loss::KLDivLossConfig{}.init();
        check_case<AD, In<2>, In<2, ember::Float, false>>("kldiv_zero_target",
                                                          [&](const auto&) { return l; });
    }
    SECTION("Auto is the batch mean; Reduction::None through forward flattens") {
        const ember::test::Fixture f("nn_loss", "kldiv_batchmean");
        auto x = Tensor<AD, 2>::from_data(f.input(0));
        auto t = Tensor<AD, 2>::from_data(f.input(1));
        const auto l = loss::KLDivLossConfig{}.init();
        ember::test::check_close(l.forward(x, t).to_data(), f.output(0));
        const ember::test::Fixture none("nn_loss", "kldiv_none");
        auto flat = l.forward(x, t, loss::Reduction::None);
        ember::test::check_close(
            flat.to_data(),
            Tensor<ember::Cpu, 2>::from_data(none.output(0)).reshape<1>({-1}).to_data());
    }
    SECTION("display") {
        CHECK(show(loss::KLDivLossConfig{}.with_log_target(true).init()) ==
              "KLDivLoss {log_target: true}");
    }
}

TEMPLATE_LIST_TEST_CASE("LpLoss matches |x - t|^p", "[nn][loss]", ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;
    for (const char* p : {"1", "2", "3", "0.5"}) {
        for (const char* red : {"mean", "sum", "none"}) {
            const std::string name = std::string("lp_") + p + "_" + red;
            DYNAMIC_SECTION(name) {
                const auto l = loss::LpLossConfig{fx(name).param("p")}.init();
                check_case<AD, In<2>, In<2>>(name, [&](const auto&) { return l; });
            }
        }
    }
    SECTION("l1() and l2(); forward_reduce_dims is the mean over the dims") {
        CHECK(loss::LpLossConfig::l1().p == 1.0);
        CHECK(loss::LpLossConfig::l2().p == 2.0);
        const ember::test::Fixture f("nn_loss", "lp_2_none");
        auto x = Tensor<AD, 2>::from_data(f.input(0));
        auto t = Tensor<AD, 2>::from_data(f.input(1));
        auto per_row = loss::LpLossConfig::l2().forward_reduce_dims(x, t, {1});
        auto expected = Tensor<ember::Cpu, 2>::from_data(f.output(0)).mean_dim(1);
        ember::test::check_close(per_row.to_data(), expected.to_data());
        CHECK_THROWS_AS(loss::LpLossConfig::l2().forward_reduce_dims(x, t, {2}), ember::DimError);
    }
    SECTION("display") {
        CHECK(show(loss::LpLossConfig{3.0}.init()) == "LpLoss {p: 3}");
    }
}

TEMPLATE_LIST_TEST_CASE("PoissonNllLoss matches torch's poisson_nll_loss", "[nn][loss]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;
    for (const char* input : {"log", "lin"}) {
        for (const char* full : {"part", "full"}) {
            for (const char* red : {"mean", "sum", "none"}) {
                const std::string name = std::string("poisson_") + input + "_" + full + "_" + red;
                DYNAMIC_SECTION(name) {
                    const auto f = fx(name);
                    const auto l = loss::PoissonNllLossConfig{f.param("log_input") != 0,
                                                              f.param("full") != 0, f.param("eps")}
                                       .init();
                    check_case<AD, In<2>, In<2>>(name, [&](const auto&) { return l; });
                }
            }
        }
    }
    SECTION("eps") {
        const auto l = loss::PoissonNllLossConfig{}.with_log_input(false).with_eps(0.25).init();
        check_case<AD, In<2>, In<2>>("poisson_lin_eps", [&](const auto&) { return l; });
    }
    SECTION("display") {
        CHECK(show(loss::PoissonNllLossConfig{}.with_full(true).init()) ==
              "PoissonNllLoss {log_input: true, full: true, eps: 1e-08}");
    }
}

TEMPLATE_LIST_TEST_CASE("SmoothL1Loss matches torch's smooth_l1_loss", "[nn][loss]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;
    for (const char* beta : {"1", "0.5", "0"}) {
        for (const char* red : {"mean", "sum", "none"}) {
            const std::string name = std::string("smooth_l1_") + beta + "_" + red;
            DYNAMIC_SECTION(name) {
                const auto l = loss::SmoothL1LossConfig{fx(name).param("beta")}.init();
                check_case<AD, In<2>, In<2>>(name, [&](const auto&) { return l; });
            }
        }
    }
    SECTION("display") {
        CHECK(show(loss::SmoothL1LossConfig{0.5}.init()) == "SmoothL1Loss {beta: 0.5}");
    }
}

TEMPLATE_LIST_TEST_CASE("GaussianNllLoss matches torch's gaussian_nll_loss", "[nn][loss]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;
    for (const char* full : {"part", "full"}) {
        for (const char* red : {"mean", "sum", "none"}) {
            const std::string name = std::string("gaussian_nll_") + full + "_" + red;
            DYNAMIC_SECTION(name) {
                const auto l =
                    loss::GaussianNllLossConfig{}.with_full(fx(name).param("full") != 0).init();
                check_case<AD, In<2>, In<2>, In<2>>(name, [&](const auto&) { return l; });
            }
        }
    }
    const auto plain = loss::GaussianNllLossConfig{}.init();
    SECTION("one variance per sample: [N, 1]") {
        check_case<AD, In<2>, In<2>, In<2>>("gaussian_nll_var_column",
                                            [&](const auto&) { return plain; });
    }
    SECTION("one variance per sample: [N]") {
        check_case<AD, In<2>, In<2>, In<1>>("gaussian_nll_var_per_sample",
                                            [&](const auto&) { return plain; });
    }
    SECTION("variances below eps count as eps; the gradient passes through") {
        const auto l = loss::GaussianNllLossConfig{}.with_eps(0.1).init();
        ember::test::GradOptions opt;
        opt.finite_differences = false;  // the clamped function's differences are 0 there
        check_case<AD, In<2>, In<2>, In<2>>(
            "gaussian_nll_eps_clamp", [&](const auto&) { return l; }, opt);
    }
    SECTION("display") {
        CHECK(show(plain) == "GaussianNllLoss {full: false, eps: 1e-06}");
    }
}

TEMPLATE_LIST_TEST_CASE("pointwise losses reject bad options and shapes", "[nn][loss]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;
    SECTION("ArgumentError: options out of range") {
        CHECK_THROWS_AS(loss::LpLossConfig{0.0}.init(), ember::ArgumentError);
        CHECK_THROWS_WITH(loss::LpLossConfig{-1.0}.init(),
                          Catch::Contains("LpLossConfig") && Catch::Contains("-1"));
        CHECK_THROWS_AS(loss::PoissonNllLossConfig{}.with_eps(0.0).init(), ember::ArgumentError);
        CHECK_THROWS_AS(loss::SmoothL1LossConfig{-0.5}.init(), ember::ArgumentError);
        CHECK_THROWS_AS(loss::GaussianNllLossConfig{}.with_eps(-1.0).init(), ember::ArgumentError);
    }
    SECTION("ShapeError: predictions, targets and variances that do not match") {
        auto a = Tensor<AD, 2>::zeros({2, 3});
        auto b = Tensor<AD, 2>::zeros({3, 2});
        CHECK_THROWS_WITH(
            loss::KLDivLossConfig{}.init().forward(a, b),
            Catch::Contains("KLDivLoss") && Catch::Contains("[2, 3]") && Catch::Contains("[3, 2]"));
        CHECK_THROWS_AS(loss::LpLossConfig{}.init().forward(a, b), ember::ShapeError);
        CHECK_THROWS_AS(loss::PoissonNllLossConfig{}.init().forward(a, b), ember::ShapeError);
        CHECK_THROWS_AS(loss::SmoothL1LossConfig{}.init().forward(a, b), ember::ShapeError);
        const auto g = loss::GaussianNllLossConfig{}.init();
        CHECK_THROWS_AS(g.forward(a, b, a), ember::ShapeError);
        CHECK_THROWS_WITH(g.forward(a, a, b), Catch::Contains("GaussianNllLoss") &&
                                                  Catch::Contains("var") &&
                                                  Catch::Contains("[3, 2]"));
        CHECK_THROWS_AS(g.forward(a, a, Tensor<AD, 2>::ones({2, 2})), ember::ShapeError);
        CHECK_THROWS_AS(g.forward(a, a, Tensor<AD, 1>::ones({3})), ember::ShapeError);
    }
}

}  // namespace test_nn_loss_regression
