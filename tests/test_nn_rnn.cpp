// Recurrent layers (include/ember/nn/rnn.hpp): Lstm, BiLstm and Gru against torch.nn.LSTM,
// LSTM(bidirectional=True) and GRU (tests/fixtures/gen_nn_rnn.py), gradients against finite
// differences, PyTorch's default initialisation, display, and errors.
#include <ember/nn/rnn.hpp>

#include "grad_check.hpp"
#include "module_check.hpp"

namespace test_nn_rnn {

namespace {

using CpuB = ember::Autodiff<ember::Cpu>;  // the stack of the CPU-only cases
using F64 = ember::test::AutodiffF64;
using Catch::Contains;
using ember::test::Fixture;
using ember::test::load_params;

constexpr std::size_t kInput = 3, kHidden = 4;  // the fixture's d_input and d_hidden

bool flag(const Fixture& f, const char* key) {
    return f.param(key) != 0.0;
}

// The gradient of `t` against the fixture's "grad.<name>".
template <typename T>
void check_grad(const T& t, const Fixture& f, const std::string& name, const auto& grads) {
    INFO("gradient of " << name);
    auto g = t.grad(grads);
    REQUIRE(g.has_value());
    ember::test::check_close(g->to_data(), f.named("grad." + name));
}

// Every parameter's gradient against the fixture's "grad.<path>".
template <typename M, typename G>
void check_param_grads(const M& model, const Fixture& f, const G& grads) {
    std::size_t n = 0;
    model.visit([&](std::string_view path, const auto& p) {
        check_grad(p.val(), f, std::string(path), grads);
        ++n;
    });
    CHECK(n > 0);
}

// A fixture tensor marked as a leaf, so that its gradient can be checked.
template <typename B, std::size_t D>
ember::Tensor<B, D> leaf(const Fixture& f, const std::string& name) {
    return f.named_tensor<B, D>(name).require_grad();
}

// An Lstm (Config = LstmConfig, states of rank D = 2) or a BiLstm (BiLstmConfig, D = 3) set up
// as the fixture says: outputs, final states and every gradient against torch.
template <typename B, typename Config, std::size_t D>
void lstm_case(const Fixture& f) {
    auto model = load_params(Config{kInput, kHidden}
                                 .with_bias(flag(f, "bias"))
                                 .with_batch_first(flag(f, "batch_first"))
                                 .template init<B>(),
                             f);
    auto input = leaf<B, 3>(f, "input");
    std::optional<ember::nn::LstmState<B, D>> state;
    if (flag(f, "with_state")) state = {{leaf<B, D>(f, "state.cell"), leaf<B, D>(f, "state.hidden")}};
    auto [out, fin] = model.forward(input, state);
    ember::test::check_close(out.to_data(), f.named("output"));
    ember::test::check_close(fin.cell.to_data(), f.named("final.cell"));
    ember::test::check_close(fin.hidden.to_data(), f.named("final.hidden"));
    auto loss = (out * f.named_tensor<B, 3>("gout")).sum() +
                (fin.cell * f.named_tensor<B, D>("gout.cell")).sum() +
                (fin.hidden * f.named_tensor<B, D>("gout.hidden")).sum();
    auto grads = loss.backward();
    check_param_grads(model, f, grads);
    check_grad(input, f, "input", grads);
    if (state) {
        check_grad(state->cell, f, "state.cell", grads);
        check_grad(state->hidden, f, "state.hidden", grads);
    }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("Lstm and BiLstm match torch.nn.LSTM", "[nn][rnn]", ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;  // every autodiff stack
    for (const std::string name : {"lstm", "lstm_state", "lstm_seq_first_state", "lstm_no_bias",
                                   "bilstm", "bilstm_seq_first_state", "bilstm_no_bias_state"}) {
        SECTION(name) {
            const Fixture f("nn_rnn", name);
            if (flag(f, "bidirectional"))
                lstm_case<B, ember::nn::BiLstmConfig, 3>(f);
            else
                lstm_case<B, ember::nn::LstmConfig, 2>(f);
        }
    }
}

TEMPLATE_LIST_TEST_CASE("Gru matches torch.nn.GRU (reset_after) and the original GRU", "[nn][rnn]", ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;  // every autodiff stack
    for (const std::string name : {"gru", "gru_state", "gru_seq_first_state", "gru_no_bias",
                                   "gru_reset_before", "gru_reset_before_seq_first_state"}) {
        SECTION(name) {
            const Fixture f("nn_rnn", name);
            auto model = load_params(ember::nn::GruConfig{kInput, kHidden}
                                         .with_bias(flag(f, "bias"))
                                         .with_reset_after(flag(f, "reset_after"))
                                         .with_batch_first(flag(f, "batch_first"))
                                         .init<B>(),
                                     f);
            auto input = leaf<B, 3>(f, "input");
            std::optional<ember::Tensor<B, 2>> state;
            if (flag(f, "with_state")) state = leaf<B, 2>(f, "state");
            auto out = model.forward(input, state);
            ember::test::check_close(out.to_data(), f.named("output"));
            auto grads = (out * f.named_tensor<B, 3>("gout")).sum().backward();
            check_param_grads(model, f, grads);
            check_grad(input, f, "input", grads);
            if (state) check_grad(*state, f, "state", grads);
        }
    }
}

TEST_CASE("recurrent gradients match finite differences", "[nn][rnn]") {
    auto normal = [](ember::Shape s) {
        return ember::Tensor<F64, 3>::random(s, ember::Distribution::Normal(0, 1));
    };
    SECTION("Lstm with an initial state, sequence first") {
        auto model = ember::nn::LstmConfig{3, 4}.with_batch_first(false).init<F64>();
        auto x = normal({4, 2, 3});
        auto c0 = ember::Tensor<F64, 2>::random({2, 4}, ember::Distribution::Normal(0, 1));
        auto h0 = ember::Tensor<F64, 2>::random({2, 4}, ember::Distribution::Normal(0, 1));
        auto gout = normal({4, 2, 4});
        ember::test::check_param_grads_fd(model, [&](const auto& m) {
            auto [out, fin] = m.forward(x, ember::nn::LstmState<F64, 2>{c0, h0});
            return (out * gout).sum() + fin.cell.sum();
        });
    }
    SECTION("BiLstm") {
        auto model = ember::nn::BiLstmConfig{3, 2}.init<F64>();
        auto x = normal({2, 4, 3});
        auto gout = normal({2, 4, 4});
        ember::test::check_param_grads_fd(model, [&](const auto& m) {
            auto [out, fin] = m.forward(x);
            return (out * gout).sum() + (fin.cell * fin.hidden).sum();
        });
    }
    for (bool reset_after : {true, false}) {
        SECTION(reset_after ? "Gru, reset after" : "Gru, reset before") {
            auto model = ember::nn::GruConfig{3, 4}.with_reset_after(reset_after).init<F64>();
            auto x = normal({2, 4, 3});
            auto h0 = ember::Tensor<F64, 2>::random({2, 4}, ember::Distribution::Normal(0, 1));
            auto gout = normal({2, 4, 4});
            ember::test::check_param_grads_fd(
                model, [&](const auto& m) { return (m.forward(x, h0) * gout).sum(); });
        }
    }
}

TEST_CASE("recurrent layers: structure, initialisation and display", "[nn][rnn]") {
    using B = CpuB;
    SECTION("parameters follow Burn's layout and paths") {
        auto lstm = ember::nn::LstmConfig{3, 5}.init<B>();
        std::vector<std::string> paths;
        lstm.visit([&](std::string_view path, const auto& p) {
            paths.emplace_back(path);
            const bool input = path.find("input_transform") != std::string_view::npos;
            const bool weight = path.ends_with("weight");
            INFO(path);
            CHECK(p.shape() == (weight ? ember::Shape{input ? 3u : 5u, 5} : ember::Shape{5}));
        });
        REQUIRE(paths.size() == 16);
        CHECK(paths[0] == "input_gate.input_transform.weight");
        CHECK(paths[15] == "cell_gate.hidden_transform.bias");
        CHECK(lstm.num_params() == 4 * (3 * 5 + 5 * 5 + 2 * 5));
        CHECK(ember::nn::GruConfig{3, 5}.with_bias(false).init<B>().num_params() ==
              3 * (3 * 5 + 5 * 5));
        auto bi = ember::nn::BiLstmConfig{3, 5}.init<B>();
        CHECK(bi.num_params() == 2 * lstm.num_params());
    }
    SECTION("the default initialisation is PyTorch's: uniform on ±1/sqrt(d_hidden)") {
        // d_input differs from d_hidden both ways, so a bound taken from d_input would show.
        for (std::size_t d_input : {3u, 64u}) {
            auto gru = ember::nn::GruConfig{d_input, 16}.init<B>();
            gru.visit([&](std::string_view path, const auto& p) {
                INFO(path << " with d_input " << d_input);
                auto v = p.val().inner();
                const double max = v.abs().max().into_scalar();
                CHECK(max <= 0.25);
                if (p.num_params() >= 256) CHECK(max > 0.2);
            });
        }
    }
    SECTION("a custom initializer reaches every gate") {
        auto lstm = ember::nn::LstmConfig{2, 3}
                        .with_initializer(ember::nn::Initializer::Constant(0.5))
                        .init<B>();
        lstm.visit([](std::string_view path, const auto& p) {
            INFO(path);
            CHECK((p.val().inner() - 0.5).abs().max().into_scalar() == 0.0f);
        });
    }
    SECTION("GateController::gate_product adds both transforms") {
        auto gate = ember::nn::GateControllerConfig{2, 3}
                        .with_initializer(ember::nn::Initializer::Ones())
                        .init<B>();
        auto x = ember::Tensor<B, 2>::from_data(ember::TensorData({1.f, 2.f}, {1, 2}), {});
        auto h = ember::Tensor<B, 2>::from_data(ember::TensorData({1.f, 1.f, 1.f}, {1, 3}), {});
        // (1 + 2 + bias 1) + (1 + 1 + 1 + bias 1) = 8 in every column.
        ember::test::check_close(gate.gate_product(x, h).to_data(),
                                 ember::TensorData({8.f, 8.f, 8.f}, {1, 3}));
    }
    SECTION("valid() runs the same layer on the inner backend") {
        auto gru = ember::nn::GruConfig{3, 4}.init<B>();
        auto x = ember::Tensor<B, 3>::random({2, 3, 3}, ember::Distribution::Default);
        auto inner = gru.valid();
        static_assert(std::is_same_v<decltype(inner), ember::nn::Gru<ember::Cpu>>);
        ember::test::check_close(inner.forward(x.inner()).to_data(), gru.forward(x).to_data());
        auto lstm = ember::nn::BiLstmConfig{3, 4}.init<B>();
        static_assert(std::is_same_v<decltype(lstm.valid()), ember::nn::BiLstm<ember::Cpu>>);
        auto [out, fin] = lstm.valid().forward(x.inner());
        CHECK(out.dims() == std::array<std::size_t, 3>{2, 3, 8});
        CHECK(fin.hidden.dims() == std::array<std::size_t, 3>{2, 2, 4});
    }
    SECTION("records round-trip") {
        auto lstm = ember::nn::LstmConfig{3, 4}.init<B>();
        auto loaded = ember::nn::LstmConfig{3, 4}.init<B>().load_record(lstm.into_record());
        CHECK(loaded.forget_gate.hidden_transform.weight.val().to_data() ==
              lstm.forget_gate.hidden_transform.weight.val().to_data());
        CHECK(loaded.forget_gate.hidden_transform.weight.id() ==
              lstm.forget_gate.hidden_transform.weight.id());
    }
    SECTION("display") {
        std::ostringstream os;
        os << ember::nn::LstmConfig{3, 4}.init<B>();
        CHECK(os.str() ==
              "Lstm {d_input: 3, d_hidden: 4, bias: true, batch_first: true, params: 144}");
        os.str("");
        os << ember::nn::GruConfig{3, 4}.with_bias(false).with_reset_after(false).init<B>();
        CHECK(os.str() ==
              "Gru {d_input: 3, d_hidden: 4, bias: false, reset_after: false, batch_first: true, "
              "params: 84}");
    }
}

TEST_CASE("recurrent layers reject bad configs and inputs", "[nn][rnn]") {
    using B = CpuB;
    SECTION("zero sizes") {
        CHECK_THROWS_AS((ember::nn::LstmConfig{0, 4}.init<B>()), ember::ArgumentError);
        CHECK_THROWS_AS((ember::nn::BiLstmConfig{3, 0}.init<B>()), ember::ArgumentError);
        CHECK_THROWS_WITH((ember::nn::GruConfig{3, 0}.init<B>()),
                          Contains("GruConfig::init") && Contains("d_hidden"));
        CHECK_THROWS_AS((ember::nn::GateControllerConfig{0, 2}.init<B>()), ember::ArgumentError);
    }
    auto x = ember::Tensor<B, 3>::zeros({2, 5, 3});
    SECTION("wrong d_input") {
        auto bad = ember::Tensor<B, 3>::zeros({2, 5, 7});
        auto lstm = ember::nn::LstmConfig{3, 4}.init<B>();
        CHECK_THROWS_AS(lstm.forward(bad), ember::ShapeError);
        CHECK_THROWS_WITH(lstm.forward(bad), Contains("Lstm::forward") && Contains("[2, 5, 7]") &&
                                                 Contains("d_input is 3"));
        CHECK_THROWS_WITH((ember::nn::BiLstmConfig{3, 4}.init<B>().forward(bad)),
                          Contains("BiLstm::forward") && Contains("[2, 5, 7]"));
        CHECK_THROWS_WITH((ember::nn::GruConfig{3, 4}.init<B>().forward(bad)),
                          Contains("Gru::forward") && Contains("[2, 5, 7]"));
    }
    SECTION("empty sequence") {
        auto empty = ember::Tensor<B, 3>::zeros({2, 0, 3});
        CHECK_THROWS_WITH((ember::nn::GruConfig{3, 4}.init<B>().forward(empty)),
                          Contains("empty sequence"));
    }
    SECTION("wrong state shape") {
        auto lstm = ember::nn::LstmConfig{3, 4}.init<B>();
        auto good = ember::Tensor<B, 2>::zeros({2, 4});
        auto bad = ember::Tensor<B, 2>::zeros({5, 4});
        CHECK_THROWS_AS(lstm.forward(x, ember::nn::LstmState<B, 2>{good, bad}), ember::ShapeError);
        CHECK_THROWS_WITH(lstm.forward(x, ember::nn::LstmState<B, 2>{bad, good}),
                          Contains("cell state") && Contains("[5, 4]") && Contains("[2, 4]"));
        // Sequence-first: the batch is dim 1 of the input.
        auto seq_first = ember::nn::LstmConfig{3, 4}.with_batch_first(false).init<B>();
        auto five = ember::Tensor<B, 2>::zeros({5, 4});
        CHECK_NOTHROW(seq_first.forward(x, ember::nn::LstmState<B, 2>{five, five}));
        auto bi = ember::nn::BiLstmConfig{3, 4}.init<B>();
        auto one = ember::Tensor<B, 3>::zeros({1, 2, 4});
        CHECK_THROWS_WITH(
            bi.forward(x, ember::nn::LstmState<B, 3>{one, one}),
            Contains("BiLstm::forward") && Contains("[1, 2, 4]") && Contains("[2, 2, 4]"));
        CHECK_THROWS_WITH(
            (ember::nn::GruConfig{3, 4}.init<B>().forward(x, bad)),
            Contains("Gru::forward") && Contains("hidden state") && Contains("[5, 4]"));
    }
}

}  // namespace test_nn_rnn
