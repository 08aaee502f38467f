#pragma once
// The Elman recurrent layer and the bidirectional wrappers Burn has beside BiLstm: Rnn, BiRnn
// and BiGru. Layout and initialisation as in rnn.hpp: Rnn's one gate holds PyTorch's nn.RNN
// weight_ih_l0 (transposed) as gate.input_transform.weight, weight_hh_l0 (transposed) as
// gate.hidden_transform.weight and bias_ih_l0 / bias_hh_l0 as their biases; a bidirectional
// layer's `*_l0_reverse` tensors go to its reverse_* member the same way.
#include <optional>
#include <string_view>
#include <utility>

#include "rnn.hpp"

namespace ember::nn {

/// The nonlinearity of an Rnn (PyTorch's nn.RNN `nonlinearity`).
enum class RnnActivation : int {
    Tanh,  ///< h' = tanh(...) (the default)
    Relu   ///< h' = max(..., 0)
};

/// A unidirectional Elman RNN layer (PyTorch's nn.RNN with one layer):
/// h' = act(W_ih·x + b_ih + W_hh·h + b_hh).
template <Backend B>
struct Rnn {
    GateController<B> gate;                            ///< the input and hidden transforms
    std::size_t d_hidden = 0;                          ///< hidden features
    RnnActivation nonlinearity = RnnActivation::Tanh;  ///< tanh or relu
    bool batch_first = true;  ///< input/output [batch, seq, F] (else [seq, batch, F])
    EMBER_MODULE(Rnn, gate, d_hidden, nonlinearity, batch_first)

    /// Runs the sequence. `input` is [batch, seq, d_input] ([seq, batch, d_input] when not
    /// batch_first); `state` [batch, d_hidden] defaults to zeros. Returns the hidden state of
    /// every step, [batch, seq, d_hidden] (or [seq, batch, d_hidden]), and the final one
    /// [batch, d_hidden].
    std::pair<Tensor<B, 3>, Tensor<B, 2>> forward(
        const Tensor<B, 3>& input, std::optional<Tensor<B, 2>> state = std::nullopt) const {
        return forward_direction(input, std::move(state), false);
    }

    /// forward(), running from the last step to the first when `reverse` (BiRnn's reverse
    /// direction); outputs stay in input order. `who` names the caller in error messages.
    std::pair<Tensor<B, 3>, Tensor<B, 2>> forward_direction(
        const Tensor<B, 3>& input, std::optional<Tensor<B, 2>> state, bool reverse,
        std::string_view who = "Rnn::forward") const {
        namespace r = detail::rnn;
        const Shape state_shape{r::check_input(who, input.shape(), r::d_input(gate), batch_first),
                                d_hidden};
        if (state) r::check_state(who, "hidden state", state->shape(), state_shape);
        // Both biases are added at every step, so they fold into the input projection.
        const auto x_proj =
            module::linear(input, gate.input_transform.weight.val(), r::gate_bias(gate));
        const auto w_h = gate.hidden_transform.weight.val();
        Tensor<B, 2> hidden = state ? *state : Tensor<B, 2>::zeros(state_shape, input.device());
        auto output = r::scan(x_proj, batch_first, reverse, [&](const Tensor<B, 2>& x) {
            auto pre = x + hidden.matmul(w_h);
            hidden = nonlinearity == RnnActivation::Relu ? activation::relu(std::move(pre))
                                                         : activation::tanh(std::move(pre));
            return hidden;
        });
        return {std::move(output), std::move(hidden)};
    }

    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        detail::rnn::display_sizes(c, gate, d_hidden)
            .add("nonlinearity", nonlinearity == RnnActivation::Relu ? "relu" : "tanh")
            .add("batch_first", batch_first);
    }
};

/// Configuration of an Rnn.
struct RnnConfig {
    std::size_t d_input;   ///< input features
    std::size_t d_hidden;  ///< hidden features
    bool bias = true;      ///< whether both transforms add biases (PyTorch's default)
    RnnActivation nonlinearity = RnnActivation::Tanh;  ///< tanh (default) or relu
    /// Initialiser of every weight and bias; the default is PyTorch's (±1/√d_hidden).
    Initializer initializer = rnn_default_initializer();
    /// Input/output [batch, seq, F] (Burn's layout) or [seq, batch, F] (PyTorch's default).
    bool batch_first = true;
    EMBER_CONFIG(RnnConfig, d_input, d_hidden, bias, nonlinearity, initializer, batch_first)

    /// Builds the layer on `device` (parameters are drawn on first use); throws ArgumentError
    /// for zero sizes.
    template <Backend B>
    Rnn<B> init(const Device<B>& device = {}) const {
        detail::rnn::check_sizes("RnnConfig::init", d_input, d_hidden);
        return {GateControllerConfig{d_input, d_hidden, bias, initializer}.init<B>(device),
                d_hidden, nonlinearity, batch_first};
    }
};

namespace detail::rnn {

// Runs both directions of a bidirectional layer whose directions take an optional [batch,
// d_hidden] state and return (output, final state): splits `state` [2, batch, d_hidden],
// concatenates the outputs on the feature dim and stacks the final states.
template <Backend B, typename Fwd, typename Rev>
std::pair<Tensor<B, 3>, Tensor<B, 3>> bidirectional(std::string_view who, const Tensor<B, 3>& input,
                                                    const std::optional<Tensor<B, 3>>& state,
                                                    std::size_t d_input, std::size_t d_hidden,
                                                    bool batch_first, Fwd&& fwd, Rev&& rev) {
    const std::size_t batch = check_input(who, input.shape(), d_input, batch_first);
    std::optional<Tensor<B, 2>> init_fwd, init_rev;
    if (state) {
        check_state(who, "hidden state", state->shape(), Shape{2, batch, d_hidden});
        init_fwd = state->narrow(0, 0, 1).template squeeze<2>(0);
        init_rev = state->narrow(0, 1, 1).template squeeze<2>(0);
    }
    auto [out_fwd, fin_fwd] = fwd(init_fwd);
    auto [out_rev, fin_rev] = rev(init_rev);
    return {Tensor<B, 3>::cat({out_fwd, out_rev}, 2),
            Tensor<B, 2>::template stack<3>({fin_fwd, fin_rev}, 0)};
}

}  // namespace detail::rnn

/// A bidirectional Elman RNN layer (Burn's BiRnn; PyTorch's nn.RNN(bidirectional=True), one
/// layer). The output concatenates both directions' hidden states on the feature dim.
template <Backend B>
struct BiRnn {
    Rnn<B> forward_rnn;        ///< reads the sequence first to last
    Rnn<B> reverse_rnn;        ///< reads the sequence last to first
    std::size_t d_hidden = 0;  ///< hidden features per direction
    bool batch_first = true;   ///< input/output [batch, seq, F] (else [seq, batch, F])
    EMBER_MODULE(BiRnn, forward_rnn, reverse_rnn, d_hidden, batch_first)

    /// Runs both directions. `input` is [batch, seq, d_input] ([seq, batch, d_input] when not
    /// batch_first); `state` [2, batch, d_hidden] (forward direction first) defaults to zeros.
    /// Returns [batch, seq, 2·d_hidden] (or [seq, batch, 2·d_hidden]): the forward direction's
    /// hidden states, then the reverse one's; and both final states [2, batch, d_hidden] (the
    /// reverse direction's is its state after the first step), as PyTorch's h_n.
    std::pair<Tensor<B, 3>, Tensor<B, 3>> forward(
        const Tensor<B, 3>& input, std::optional<Tensor<B, 3>> state = std::nullopt) const {
        constexpr std::string_view who = "BiRnn::forward";
        return detail::rnn::bidirectional<B>(
            who, input, state, detail::rnn::d_input(forward_rnn.gate), d_hidden, batch_first,
            [&](auto s) { return forward_rnn.forward_direction(input, s, false, who); },
            [&](auto s) { return reverse_rnn.forward_direction(input, s, true, who); });
    }

    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        detail::rnn::display_sizes(c, forward_rnn.gate, d_hidden)
            .add("nonlinearity", forward_rnn.nonlinearity == RnnActivation::Relu ? "relu" : "tanh")
            .add("batch_first", batch_first);
    }
};

/// Configuration of a BiRnn.
struct BiRnnConfig {
    std::size_t d_input;   ///< input features
    std::size_t d_hidden;  ///< hidden features per direction
    bool bias = true;      ///< whether the transforms add biases (PyTorch's default)
    RnnActivation nonlinearity = RnnActivation::Tanh;  ///< tanh (default) or relu
    /// Initialiser of every weight and bias; the default is PyTorch's (±1/√d_hidden).
    Initializer initializer = rnn_default_initializer();
    /// Input/output [batch, seq, F] (Burn's layout) or [seq, batch, F] (PyTorch's default).
    bool batch_first = true;
    EMBER_CONFIG(BiRnnConfig, d_input, d_hidden, bias, nonlinearity, initializer, batch_first)

    /// Builds the layer on `device` (parameters are drawn on first use).
    template <Backend B>
    BiRnn<B> init(const Device<B>& device = {}) const {
        detail::rnn::check_sizes("BiRnnConfig::init", d_input, d_hidden);
        const RnnConfig one{d_input, d_hidden, bias, nonlinearity, initializer, batch_first};
        auto fwd = one.init<B>(device);
        auto rev = one.init<B>(device);
        return {std::move(fwd), std::move(rev), d_hidden, batch_first};
    }
};

/// A bidirectional GRU layer (Burn's BiGru; PyTorch's nn.GRU(bidirectional=True), one layer,
/// when reset_after). The output concatenates both directions' hidden states on the feature dim.
template <Backend B>
struct BiGru {
    Gru<B> forward_gru;        ///< reads the sequence first to last
    Gru<B> reverse_gru;        ///< reads the sequence last to first
    std::size_t d_hidden = 0;  ///< hidden features per direction
    bool batch_first = true;   ///< input/output [batch, seq, F] (else [seq, batch, F])
    EMBER_MODULE(BiGru, forward_gru, reverse_gru, d_hidden, batch_first)

    /// Runs both directions. `input` is [batch, seq, d_input] ([seq, batch, d_input] when not
    /// batch_first); `state` [2, batch, d_hidden] (forward direction first) defaults to zeros.
    /// Returns [batch, seq, 2·d_hidden] (or [seq, batch, 2·d_hidden]) and both final states
    /// [2, batch, d_hidden], as PyTorch's h_n.
    std::pair<Tensor<B, 3>, Tensor<B, 3>> forward(
        const Tensor<B, 3>& input, std::optional<Tensor<B, 3>> state = std::nullopt) const {
        constexpr std::string_view who = "BiGru::forward";
        const long time_dim = batch_first ? 1 : 0;
        const std::size_t seq = input.dims()[time_dim];
        // A Gru returns every step's state; its final one is the last step's (forward) or the
        // first step's (reverse).
        auto run = [&](const Gru<B>& gru, bool reverse, auto s) {
            auto out = gru.forward_direction(input, s, reverse, who);
            auto fin = out.narrow(time_dim, reverse ? 0 : seq - 1, 1).template squeeze<2>(time_dim);
            return std::pair{out, fin};
        };
        return detail::rnn::bidirectional<B>(
            who, input, state, detail::rnn::d_input(forward_gru.update_gate), d_hidden, batch_first,
            [&](auto s) { return run(forward_gru, false, s); },
            [&](auto s) { return run(reverse_gru, true, s); });
    }

    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        detail::rnn::display_sizes(c, forward_gru.update_gate, d_hidden)
            .add("reset_after", forward_gru.reset_after)
            .add("batch_first", batch_first);
    }
};

/// Configuration of a BiGru.
struct BiGruConfig {
    std::size_t d_input;   ///< input features
    std::size_t d_hidden;  ///< hidden features per direction
    bool bias = true;      ///< whether the gates add biases (PyTorch's default)
    /// Reset gate after the new gate's hidden transform (PyTorch's GRU) or before it.
    bool reset_after = true;
    /// Initialiser of every weight and bias; the default is PyTorch's (±1/√d_hidden).
    Initializer initializer = rnn_default_initializer();
    /// Input/output [batch, seq, F] (Burn's layout) or [seq, batch, F] (PyTorch's default).
    bool batch_first = true;
    EMBER_CONFIG(BiGruConfig, d_input, d_hidden, bias, reset_after, initializer, batch_first)

    /// Builds the layer on `device` (parameters are drawn on first use).
    template <Backend B>
    BiGru<B> init(const Device<B>& device = {}) const {
        detail::rnn::check_sizes("BiGruConfig::init", d_input, d_hidden);
        const GruConfig one{d_input, d_hidden, bias, reset_after, initializer, batch_first};
        auto fwd = one.init<B>(device);
        auto rev = one.init<B>(device);
        return {std::move(fwd), std::move(rev), d_hidden, batch_first};
    }
};

}  // namespace ember::nn
