// Losses against torch.nn.functional (tests/fixtures/gen_nn_general.py): every option of
// CrossEntropyLoss, BinaryCrossEntropyLoss, MseLoss and HuberLoss, with the gradients of the
// predictions (and of float targets).
#include <sstream>

#include <ember/nn/loss.hpp>

#include "grad_check.hpp"
#include "nn_general_check.hpp"

namespace test_nn_loss {

using namespace ember::test::general;
using ember::Distribution;
using ember::Int;
using ember::Tensor;
using ember::test::check_close;
namespace loss = ember::nn::loss;

namespace {

std::vector<double> numbers(const std::string& list) {
    std::vector<double> out;
    std::stringstream ss(list);
    for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stod(item));
    return out;
}

// Output and gradient of the predictions ("input") against the case.
template <typename Y, typename X>
void check_loss(const ember::test::Fixture& f, const X& input, const Y& y) {
    check_close(y.to_data(), f.named("output"));
    auto grads = (y * Y::from_data(f.named("gout"))).sum().backward();
    auto g = input.grad(grads);
    REQUIRE(g.has_value());
    check_close(g->to_data(), f.named("grad.input"));
}

// The cross-entropy config a case describes.
loss::CrossEntropyLossConfig ce_config(const ember::test::Fixture& f) {
    loss::CrossEntropyLossConfig config;
    if (f.has_param("weights")) config.weights = numbers(f.str("weights"));
    if (f.has_param("smoothing")) config.smoothing = f.param("smoothing");
    if (f.has_param("pad")) {
        std::vector<std::size_t> pad;
        for (double p : numbers(f.str("pad"))) pad.push_back(std::size_t(p));
        config.pad_tokens = pad;
    }
    return config;
}

// Losses have no parameters: predictions wrapped as one reuse the parameter gradient check.
template <ember::Backend B>
struct Logits {
    ember::Param<Tensor<B, 2>> x;
    EMBER_MODULE(Logits, x)
};

}  // namespace

TEMPLATE_LIST_TEST_CASE("CrossEntropyLoss matches torch's cross_entropy", "[nn][loss]", ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;  // every autodiff stack
    for (const char* name :
         {"ce_plain", "ce_weights", "ce_smoothing", "ce_weights_smoothing", "ce_pad",
          "ce_pad_weights_smoothing", "ce_multi_pad", "ce_pad_not_a_class"}) {
        DYNAMIC_SECTION(name) {
            auto f = fx(name);
            auto ce = ce_config(f).init<AD>();
            auto x = f.named_tensor<AD, 2>("input").require_grad();
            auto t = f.named_tensor<AD, 1, Int>("target");
            check_loss(f, x, ce.forward(x, t));
        }
    }
    SECTION("probabilities as input (logits = false)") {
        for (const char* name : {"ce_probabilities", "ce_probabilities_smoothing"}) {
            INFO(name);
            auto f = fx(name);
            auto ce = ce_config(f).with_logits(false).init<AD>();
            auto p = f.named_tensor<AD, 2>("input").require_grad();
            check_loss(f, p, ce.forward(p, f.named_tensor<AD, 1, Int>("target")));
        }
    }
    SECTION("works on the inference backend") {
        auto f = fx("ce_weights_smoothing");
        auto ce = ce_config(f).init<AD>().valid();
        using Inner = ember::InnerBackend<AD>;
        auto y = ce.forward(f.named_tensor<Inner, 2>("input"),
                            f.named_tensor<Inner, 1, Int>("target"));
        check_close(y.to_data(), f.named("output"));
    }
    SECTION("finite differences of the logits' gradient") {
        if (!std::is_same_v<AD, ember::Autodiff<ember::Cpu>>) return;  // f64 on the CPU: once
        Logits<F64> m{ember::Param<Tensor<F64, 2>>(
            Tensor<F64, 2>::random({4, 3}, Distribution::Normal(0, 2)))};
        auto t = Tensor<F64, 1, Int>::from_data(
            ember::TensorData(std::vector<std::int64_t>{2, 0, 1, 2}, {4}));
        auto ce = loss::CrossEntropyLossConfig{}
                      .with_weights(std::vector<double>{1.0, 2.0, 0.5})
                      .with_smoothing(0.1)
                      .with_pad_tokens(std::vector<std::size_t>{1})
                      .init<F64>();
        ember::test::check_param_grads_fd(
            m, [&](const Logits<F64>& l) { return ce.forward(l.x.val(), t); }, 12);
    }
    SECTION("display") {
        std::ostringstream os;
        os << loss::CrossEntropyLossConfig{}.with_smoothing(0.1).init<AD>();
        CHECK(os.str() ==
              "CrossEntropyLoss {pad_tokens: None, weights: None, smoothing: 0.1, "
              "logits: true}");
    }
    SECTION("errors") {
        using C = loss::CrossEntropyLossConfig;
        CHECK_THROWS_AS(C{}.with_smoothing(1.5).init<AD>(), ember::ArgumentError);
        CHECK_THROWS_AS(C{}.with_weights(std::vector<double>{1.0, -1.0}).init<AD>(),
                        ember::ArgumentError);
        auto x = Tensor<AD, 2>::zeros({3, 4});
        auto ce = C{}.init<AD>();
        auto short_targets = Tensor<AD, 1, Int>::zeros({2});
        CHECK_THROWS_AS(ce.forward(x, short_targets), ember::ShapeError);
        CHECK_THROWS_WITH(ce.forward(x, short_targets), Catch::Contains("CrossEntropyLoss") &&
                                                            Catch::Contains("[3, 4]") &&
                                                            Catch::Contains("[2]"));
        auto weighted = C{}.with_weights(std::vector<double>{1.0, 2.0}).init<AD>();
        CHECK_THROWS_AS(weighted.forward(x, Tensor<AD, 1, Int>::zeros({3})), ember::ShapeError);
        auto out_of_range = Tensor<AD, 1, Int>::from_data(
            ember::TensorData(std::vector<std::int64_t>{0, 4, 1}, {3}));
        CHECK_THROWS_AS(ce.forward(x, out_of_range), ember::IndexError);
    }
}

TEMPLATE_LIST_TEST_CASE("BinaryCrossEntropyLoss matches torch's binary_cross_entropy", "[nn][loss]", ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;  // every autodiff stack
    for (const char* name :
         {"bce_probs", "bce_logits", "bce_probs_weights", "bce_probs_smoothing"}) {
        DYNAMIC_SECTION(name) {
            auto f = fx(name);
            loss::BinaryCrossEntropyLossConfig config;
            if (f.has_param("logits")) config.logits = f.param("logits") != 0;
            if (f.has_param("weights")) config.weights = numbers(f.str("weights"));
            if (f.has_param("smoothing")) config.smoothing = f.param("smoothing");
            auto bce = config.init<AD>();
            auto x = f.named_tensor<AD, 1>("input").require_grad();
            check_loss(f, x, bce.forward(x, f.named_tensor<AD, 1, Int>("target")));
        }
    }
    SECTION("multi-label [N, C] with logits, class weights and smoothing") {
        auto f = fx("bce_multilabel_logits_weights_smoothing");
        auto bce = loss::BinaryCrossEntropyLossConfig{}
                       .with_logits(true)
                       .with_weights(std::vector<double>{0.5, 1.0, 3.0})
                       .with_smoothing(0.1)
                       .init<AD>();
        auto x = f.named_tensor<AD, 2>("input").require_grad();
        check_loss(f, x, bce.forward(x, f.named_tensor<AD, 2, Int>("target")));
    }
    SECTION("probabilities of exactly 0 and 1: log clamped at -100, as torch") {
        auto f = fx("bce_probs_clamped");
        auto y = loss::BinaryCrossEntropyLossConfig{}.init<AD>().forward(
            f.named_tensor<AD, 1>("input"), f.named_tensor<AD, 1, Int>("target"));
        check_close(y.to_data(), f.named("output"));
    }
    SECTION("errors") {
        using C = loss::BinaryCrossEntropyLossConfig;
        CHECK_THROWS_AS(C{}.with_smoothing(-0.1).init<AD>(), ember::ArgumentError);
        auto bce = C{}.init<AD>();
        auto p = Tensor<AD, 2>::full({2, 3}, 0.5);
        CHECK_THROWS_AS(bce.forward(p, Tensor<AD, 2, Int>::zeros({3, 2})), ember::ShapeError);
        CHECK_THROWS_WITH(bce.forward(p, Tensor<AD, 2, Int>::zeros({3, 2})),
                          Catch::Contains("BinaryCrossEntropyLoss") && Catch::Contains("[2, 3]") &&
                              Catch::Contains("[3, 2]"));
        auto weighted = C{}.with_weights(std::vector<double>{1.0, 2.0}).init<AD>();
        CHECK_THROWS_AS(weighted.forward(p, Tensor<AD, 2, Int>::zeros({2, 3})), ember::ShapeError);
    }
}

namespace {
loss::Reduction reduction_of(const ember::test::Fixture& f) {
    const auto& r = f.str("reduction");
    return r == "sum"    ? loss::Reduction::Sum
           : r == "none" ? loss::Reduction::None
                         : loss::Reduction::Mean;
}

// A regression loss case: output, and the gradients of both predictions and targets.
template <typename L>
void regression_case(const L& l, const std::string& name) {
    auto f = fx(name);
    auto x = f.named_tensor<AD, 2>("input").require_grad();
    auto t = f.named_tensor<AD, 2>("target").require_grad();
    const auto reduction = reduction_of(f);
    auto grads_of = [&](const auto& y) {
        check_close(y.to_data(), f.named("output"));
        using Y = std::remove_cvref_t<decltype(y)>;
        auto grads = (y * Y::from_data(f.named("gout"))).sum().backward();
        check_close(x.grad(grads)->to_data(), f.named("grad.input"));
        check_close(t.grad(grads)->to_data(), f.named("grad.target"));
    };
    if (reduction == loss::Reduction::None) {
        SECTION("forward_no_reduction keeps the shape") {
            grads_of(l.forward_no_reduction(x, t));
        }
        SECTION("forward with Reduction::None flattens") {
            auto y = l.forward(x, t, reduction);
            CHECK(y.dims()[0] == x.num_elements());
            auto flat = Tensor<ember::Cpu, 2>::from_data(f.named("output")).reshape<1>({-1});
            check_close(y.to_data(), flat.to_data());
        }
    } else {
        grads_of(l.forward(x, t, reduction));
    }
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("MseLoss matches torch's mse_loss", "[nn][loss]", ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;  // every autodiff stack
    for (const char* red : {"mean", "sum", "none"}) {
        DYNAMIC_SECTION(red) {
            regression_case(loss::MseLoss{}, std::string("mse_") + red);
        }
    }
    SECTION("Auto is the mean; the default is the mean") {
        auto f = fx("mse_mean");
        auto x = f.named_tensor<AD, 2>("input");
        auto t = f.named_tensor<AD, 2>("target");
        check_close(loss::MseLoss{}.forward(x, t, loss::Reduction::Auto).to_data(),
                    f.named("output"));
        check_close(loss::MseLoss{}.forward(x, t).to_data(), f.named("output"));
    }
    SECTION("errors") {
        CHECK_THROWS_AS(
            loss::MseLoss{}.forward(Tensor<AD, 2>::zeros({2, 3}), Tensor<AD, 2>::zeros({3, 2})),
            ember::ShapeError);
    }
}

TEMPLATE_LIST_TEST_CASE("HuberLoss matches torch's huber_loss", "[nn][loss]", ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;  // every autodiff stack
    for (double delta : {1.0, 0.5}) {
        for (const char* red : {"mean", "sum", "none"}) {
            std::ostringstream name;
            name << "huber_" << delta << '_' << red;
            DYNAMIC_SECTION(name.str()) {
                regression_case(loss::HuberLossConfig{delta}.init(), name.str());
            }
        }
    }
    SECTION("display and errors") {
        std::ostringstream os;
        os << loss::HuberLossConfig{0.5}.init();
        CHECK(os.str() == "HuberLoss {delta: 0.5}");
        CHECK_THROWS_AS(loss::HuberLossConfig{0.0}.init(), ember::ArgumentError);
        CHECK_THROWS_AS(loss::HuberLossConfig{}.init().forward(Tensor<AD, 1>::zeros({2}),
                                                               Tensor<AD, 1>::zeros({3})),
                        ember::ShapeError);
    }
}

}  // namespace test_nn_loss
