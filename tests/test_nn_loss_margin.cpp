// Margin and embedding losses against torch.nn.functional (tests/fixtures/gen_nn_loss.py):
// CosineEmbeddingLoss, HingeEmbeddingLoss, MarginRankingLoss, MultiMarginLoss, SoftMarginLoss and
// TripletMarginLoss with every option and reduction, on every autodiff stack, with the gradients
// of every float input against torch's and against finite differences.
#include <sstream>

#include <ember/nn/loss_margin.hpp>

#include "loss_check.hpp"

namespace test_nn_loss_margin {

using ember::Int;
using ember::Tensor;
using ember::test::In;
using ember::test::loss_check::BackendOf;
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
const char* const kReductions[] = {"mean", "sum", "none"};
}  // namespace

TEMPLATE_LIST_TEST_CASE("CosineEmbeddingLoss matches torch's cosine_embedding_loss", "[nn][loss]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;
    for (const char* margin : {"0", "0.3"}) {
        for (const char* red : kReductions) {
            const std::string name = std::string("cosine_embedding_") + margin + "_" + red;
            DYNAMIC_SECTION(name) {
                const auto l = loss::CosineEmbeddingLossConfig{fx(name).param("margin")}.init();
                check_case<AD, In<2>, In<2>, In<1, Int>>(name, [&](const auto&) { return l; });
            }
        }
    }
    SECTION("display") {
        CHECK(show(loss::CosineEmbeddingLossConfig{0.3}.init()) ==
              "CosineEmbeddingLoss {margin: 0.3}");
    }
}

TEMPLATE_LIST_TEST_CASE("HingeEmbeddingLoss matches torch's hinge_embedding_loss", "[nn][loss]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;
    for (const char* margin : {"1", "0.5"}) {
        for (const char* red : kReductions) {
            const std::string name = std::string("hinge_embedding_") + margin + "_" + red;
            DYNAMIC_SECTION(name) {
                const auto l = loss::HingeEmbeddingLossConfig{fx(name).param("margin")}.init();
                check_case<AD, In<2>, In<2, ember::Float, false>>(name,
                                                                  [&](const auto&) { return l; });
            }
        }
    }
    SECTION("display") {
        CHECK(show(loss::HingeEmbeddingLossConfig{}.init()) == "HingeEmbeddingLoss {margin: 1}");
    }
}

TEMPLATE_LIST_TEST_CASE("MarginRankingLoss matches torch's margin_ranking_loss", "[nn][loss]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;
    for (const char* margin : {"0", "0.5"}) {
        for (const char* red : kReductions) {
            const std::string name = std::string("margin_ranking_") + margin + "_" + red;
            DYNAMIC_SECTION(name) {
                const auto l = loss::MarginRankingLossConfig{fx(name).param("margin")}.init();
                check_case<AD, In<1>, In<1>, In<1>>(name, [&](const auto&) { return l; });
            }
        }
    }
    SECTION("display") {
        CHECK(show(loss::MarginRankingLossConfig{0.5}.init()) == "MarginRankingLoss {margin: 0.5}");
    }
}

TEMPLATE_LIST_TEST_CASE("MultiMarginLoss matches torch's multi_margin_loss", "[nn][loss]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;
    for (const char* p : {"1", "2"}) {
        for (const char* margin : {"1", "0.5"}) {
            for (const char* red : kReductions) {
                const std::string name =
                    std::string("multi_margin_") + p + "_" + margin + "_" + red;
                DYNAMIC_SECTION(name) {
                    const auto f = fx(name);
                    const loss::MultiMarginLossConfig config{int(f.param("p")), f.param("margin"),
                                                             std::nullopt};
                    check_case<AD, In<2>, In<1, Int>>(
                        name, [&](const auto& x) { return config.init<BackendOf<decltype(x)>>(); });
                }
            }
        }
    }
    SECTION("class weights") {
        const auto config = loss::MultiMarginLossConfig{}.with_p(2).with_weights(
            std::vector<double>{0.5, 1.0, 2.0, 1.5});
        check_case<AD, In<2>, In<1, Int>>("multi_margin_weights", [&](const auto& x) {
            return config.init<BackendOf<decltype(x)>>();
        });
    }
    SECTION("display") {
        CHECK(show(loss::MultiMarginLossConfig{}.init<AD>()) ==
              "MultiMarginLoss {p: 1, margin: 1, weights: None}");
    }
}

TEMPLATE_LIST_TEST_CASE("SoftMarginLoss matches torch's soft_margin_loss", "[nn][loss]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;
    for (const char* red : kReductions) {
        const std::string name = std::string("soft_margin_") + red;
        DYNAMIC_SECTION(name) {
            const auto l = loss::SoftMarginLossConfig{}.init();
            check_case<AD, In<2>, In<2, ember::Float, false>>(name, [&](const auto&) { return l; });
        }
    }
}

TEMPLATE_LIST_TEST_CASE("TripletMarginLoss matches torch's triplet_margin_loss", "[nn][loss]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;
    for (const char* variant :
         {"2_1_noswap", "1_0.5_noswap", "3_1_noswap", "2_1_swap", "1.5_0.2_swap"}) {
        for (const char* red : kReductions) {
            const std::string name = std::string("triplet_") + variant + "_" + red;
            DYNAMIC_SECTION(name) {
                const auto f = fx(name);
                const auto l = loss::TripletMarginLossConfig{f.param("margin"), f.param("p"),
                                                             f.param("eps"), f.param("swap") != 0}
                                   .init();
                check_case<AD, In<2>, In<2>, In<2>>(name, [&](const auto&) { return l; });
            }
        }
    }
    SECTION("display") {
        CHECK(show(loss::TripletMarginLossConfig{}.with_swap(true).init()) ==
              "TripletMarginLoss {margin: 1, p: 2, eps: 1e-06, swap: true}");
    }
}

TEMPLATE_LIST_TEST_CASE("margin losses reject bad options, shapes and classes", "[nn][loss]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;
    SECTION("ArgumentError: options out of range") {
        CHECK_THROWS_WITH(loss::CosineEmbeddingLossConfig{1.5}.init(),
                          Catch::Contains("CosineEmbeddingLossConfig") && Catch::Contains("1.5"));
        CHECK_THROWS_AS(loss::MarginRankingLossConfig{-0.1}.init(), ember::ArgumentError);
        CHECK_THROWS_AS(loss::MultiMarginLossConfig{}.with_p(3).init<AD>(), ember::ArgumentError);
        CHECK_THROWS_AS(
            loss::MultiMarginLossConfig{}.with_weights(std::vector<double>{1.0, 0.0}).init<AD>(),
            ember::ArgumentError);
        CHECK_THROWS_AS(loss::TripletMarginLossConfig{}.with_p(0.0).init(), ember::ArgumentError);
        CHECK_THROWS_AS(loss::TripletMarginLossConfig{}.with_margin(-1.0).init(),
                        ember::ArgumentError);
        CHECK_THROWS_AS(loss::HingeEmbeddingLossConfig{}.with_margin(std::nan("")).init(),
                        ember::ArgumentError);
    }
    SECTION("ShapeError: inputs, labels and weights that do not match") {
        auto a = Tensor<AD, 2>::zeros({2, 3});
        auto b = Tensor<AD, 2>::zeros({3, 2});
        CHECK_THROWS_WITH(
            loss::CosineEmbeddingLossConfig{}.init().forward(a, b, Tensor<AD, 1, Int>::ones({2})),
            Catch::Contains("CosineEmbeddingLoss") && Catch::Contains("[2, 3]") &&
                Catch::Contains("[3, 2]"));
        CHECK_THROWS_AS(
            loss::CosineEmbeddingLossConfig{}.init().forward(a, a, Tensor<AD, 1, Int>::ones({3})),
            ember::ShapeError);
        CHECK_THROWS_AS(loss::HingeEmbeddingLossConfig{}.init().forward(a, b), ember::ShapeError);
        CHECK_THROWS_AS(loss::MarginRankingLossConfig{}.init().forward(a, a, b), ember::ShapeError);
        CHECK_THROWS_AS(loss::SoftMarginLossConfig{}.init().forward(a, b), ember::ShapeError);
        CHECK_THROWS_WITH(loss::TripletMarginLossConfig{}.init().forward(a, a, b),
                          Catch::Contains("TripletMarginLoss") && Catch::Contains("negative"));
        const auto mm = loss::MultiMarginLossConfig{}.init<AD>();
        CHECK_THROWS_AS(mm.forward(a, Tensor<AD, 1, Int>::zeros({3})), ember::ShapeError);
        const auto weighted =
            loss::MultiMarginLossConfig{}.with_weights(std::vector<double>{1.0, 2.0}).init<AD>();
        CHECK_THROWS_WITH(weighted.forward(a, Tensor<AD, 1, Int>::zeros({2})),
                          Catch::Contains("MultiMarginLoss") && Catch::Contains("2 class weights"));
    }
    SECTION("IndexError: a class out of range") {
        const auto mm = loss::MultiMarginLossConfig{}.init<AD>();
        auto classes =
            Tensor<AD, 1, Int>::from_data(ember::TensorData(std::vector<std::int64_t>{0, 3}, {2}));
        CHECK_THROWS_AS(mm.forward(Tensor<AD, 2>::zeros({2, 3}), classes), ember::IndexError);
    }
}

}  // namespace test_nn_loss_margin
