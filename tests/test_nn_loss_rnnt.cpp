// RnntLoss against a reference RNN-T loss written with torch ops (tests/fixtures/gen_nn_loss.py,
// rnnt_ref: the cell-by-cell alpha recursion, differentiated by autograd) on every autodiff
// stack: loss and logits' gradient, and the gradient against finite differences, for every
// reduction, a blank other than 0, log-probabilities as input and an empty target.
#include <sstream>

#include <ember/nn/loss_rnnt.hpp>

#include "loss_check.hpp"

namespace test_nn_loss_rnnt {

using ember::Int;
using ember::Tensor;
using ember::test::In;
using ember::test::loss_check::fx;
using ember::test::loss_check::reduction_of;
namespace loss = ember::nn::loss;

TEMPLATE_LIST_TEST_CASE("RnntLoss matches the reference RNN-T loss", "[nn][loss]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;
    for (const char* name : {"rnnt_mean", "rnnt_sum", "rnnt_none", "rnnt_blank3_mean",
                             "rnnt_log_probs_sum", "rnnt_empty_target_none"}) {
        DYNAMIC_SECTION(name) {
            const auto f = fx(name);
            const auto l = loss::RnntLossConfig{}
                               .with_blank(std::size_t(f.param("blank")))
                               .with_logits(f.param("logits") != 0)
                               .init();
            const auto reduction = reduction_of(f);
            ember::test::check_gradients<AD, In<4>, In<2, Int>, In<1, Int>, In<1, Int>>(
                "nn_loss", name, [&](const auto& x, const auto& y, const auto& tl, const auto& ul) {
                    return l.forward(x, y, tl, ul, reduction);
                });
        }
    }
    SECTION("display") {
        std::ostringstream os;
        os << loss::RNNTLossConfig{}.init();
        CHECK(os.str() == "RnntLoss {blank: 0, logits: true}");
    }
    SECTION("errors") {
        const auto l = loss::RnntLossConfig{}.init();
        auto x = Tensor<AD, 4>::zeros({2, 4, 3, 5});
        auto y = Tensor<AD, 2, Int>::ones({2, 2});
        auto len = [](std::vector<std::int64_t> v) {
            const std::size_t n = v.size();
            return Tensor<AD, 1, Int>::from_data(ember::TensorData(std::move(v), {n}));
        };
        // ShapeError: U + 1 label positions need targets of U columns.
        CHECK_THROWS_WITH(l.forward(x, Tensor<AD, 2, Int>::ones({2, 3}), len({4, 4}), len({2, 2})),
                          Catch::Contains("RnntLoss") && Catch::Contains("[2, 4, 3, 5]") &&
                              Catch::Contains("[2, 3]"));
        CHECK_THROWS_AS(l.forward(x, y, len({4}), len({2, 2})), ember::ShapeError);
        // ArgumentError: the blank, the lengths.
        CHECK_THROWS_AS(
            loss::RnntLossConfig{}.with_blank(5).init().forward(x, y, len({4, 4}), len({2, 2})),
            ember::ArgumentError);
        CHECK_THROWS_WITH(l.forward(x, y, len({5, 4}), len({2, 2})),
                          Catch::Contains("logit length 5") && Catch::Contains("[1, 4]"));
        CHECK_THROWS_AS(l.forward(x, y, len({4, 4}), len({2, 3})), ember::ArgumentError);
        // IndexError: a label outside the vocabulary.
        CHECK_THROWS_AS(l.forward(x, Tensor<AD, 2, Int>::full({2, 2}, 7), len({4, 4}), len({2, 2})),
                        ember::IndexError);
    }
}

}  // namespace test_nn_loss_rnnt
