// CtcLoss against torch's ctc_loss (tests/fixtures/gen_nn_loss.py) on every autodiff stack: the
// loss of log_softmax(logits) and the logits' gradient against torch's and against finite
// differences, for every reduction, a blank other than 0, empty targets, short inputs and
// zero_infinity.
#include <cmath>
#include <sstream>

#include <ember/nn/loss_ctc.hpp>

#include "loss_check.hpp"

namespace test_nn_loss_ctc {

using ember::Int;
using ember::Tensor;
using ember::test::In;
using ember::test::loss_check::fx;
using ember::test::loss_check::reduction_of;
namespace loss = ember::nn::loss;

namespace {
// Case `name`: the loss of log_softmax(x, 2) as the case's reduction asks.
template <typename AD>
void ctc_case(const std::string& name) {
    const auto f = fx(name);
    const auto l = loss::CtcLossConfig{}
                       .with_blank(std::size_t(f.param("blank")))
                       .with_zero_infinity(f.param("zero_infinity") != 0)
                       .init();
    const auto reduction = reduction_of(f);
    ember::test::check_gradients<AD, In<3>, In<2, Int>, In<1, Int>, In<1, Int>>(
        "nn_loss", name, [&](const auto& x, const auto& y, const auto& il, const auto& tl) {
            return l.forward(ember::activation::log_softmax(x, 2), y, il, tl, reduction);
        });
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("CtcLoss matches torch's ctc_loss", "[nn][loss]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;
    for (const char* name :
         {"ctc_mean", "ctc_sum", "ctc_none", "ctc_blank4_mean", "ctc_empty_target_none",
          "ctc_empty_target_sum", "ctc_zero_infinity_none", "ctc_zero_infinity_mean"}) {
        DYNAMIC_SECTION(name) {
            ctc_case<AD>(name);
        }
    }
    SECTION("an impossible alignment is +inf without zero_infinity") {
        const ember::test::Fixture f("nn_loss", "ctc_zero_infinity_none");
        auto x = Tensor<AD, 3>::from_data(f.input(0));
        auto y = Tensor<AD, 2, Int>::from_data(f.input(1));
        auto il = Tensor<AD, 1, Int>::from_data(f.input(2));
        auto tl = Tensor<AD, 1, Int>::from_data(f.input(3));
        auto per = loss::CtcLossConfig{}.init().forward_no_reduction(
            ember::activation::log_softmax(x, 2), y, il, tl);
        const auto v = per.to_data().template to_vec<double>();
        CHECK(std::isinf(v[0]));
        CHECK(v[0] > 0);
        const auto want = f.output(0).to_vec<double>();
        CHECK(v[1] == Approx(want[1]).epsilon(1e-4));
    }
    SECTION("display") {
        std::ostringstream os;
        os << loss::CTCLossConfig{}.with_blank(3).init();
        CHECK(os.str() == "CtcLoss {blank: 3, zero_infinity: false}");
    }
    SECTION("errors") {
        const auto l = loss::CtcLossConfig{}.init();
        auto lp = Tensor<AD, 3>::zeros({6, 2, 4});
        auto y = Tensor<AD, 2, Int>::ones({2, 3});
        auto len = [](std::vector<std::int64_t> v) {
            const std::size_t n = v.size();
            return Tensor<AD, 1, Int>::from_data(ember::TensorData(std::move(v), {n}));
        };
        // ShapeError: batch sizes disagree.
        CHECK_THROWS_WITH(l.forward(lp, Tensor<AD, 2, Int>::ones({3, 3}), len({6, 6}), len({3, 3})),
                          Catch::Contains("CtcLoss") && Catch::Contains("[6, 2, 4]") &&
                              Catch::Contains("[3, 3]"));
        CHECK_THROWS_AS(l.forward(lp, y, len({6, 6, 6}), len({3, 3})), ember::ShapeError);
        // ArgumentError: a blank outside the classes, lengths out of range.
        CHECK_THROWS_AS(
            loss::CtcLossConfig{}.with_blank(4).init().forward(lp, y, len({6, 6}), len({3, 3})),
            ember::ArgumentError);
        CHECK_THROWS_WITH(l.forward(lp, y, len({7, 6}), len({3, 3})),
                          Catch::Contains("input length 7") && Catch::Contains("[1, 6]"));
        CHECK_THROWS_AS(l.forward(lp, y, len({6, 0}), len({3, 3})), ember::ArgumentError);
        CHECK_THROWS_AS(l.forward(lp, y, len({6, 6}), len({4, 3})), ember::ArgumentError);
        // IndexError: a target class outside the classes.
        CHECK_THROWS_AS(
            l.forward(lp, Tensor<AD, 2, Int>::full({2, 3}, 4), len({6, 6}), len({3, 3})),
            ember::IndexError);
    }
}

}  // namespace test_nn_loss_ctc
