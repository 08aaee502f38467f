#pragma once
// Recurrent layers, as Burn's nn::rnn: GateController, Lstm, BiLstm and Gru (Rnn, BiRnn and
// BiGru are in rnn_elman.hpp).
//
// Layout. Every gate is a GateController of two Linear layers in Burn's layout: input_transform
// [d_input, d_hidden] and hidden_transform [d_hidden, d_hidden]. PyTorch packs the gates of a
// layer into weight_ih_l0 [G·d_hidden, d_input], weight_hh_l0 [G·d_hidden, d_hidden], bias_ih_l0
// and bias_hh_l0 [G·d_hidden], one block of d_hidden rows per gate, in the order
//   nn.LSTM: i, f, g, o  →  input_gate, forget_gate, cell_gate, output_gate
//   nn.GRU:  r, z, n     →  reset_gate, update_gate, new_gate
// Block k of weight_ih_l0, transposed, is gate k's input_transform.weight; block k of
// weight_hh_l0, transposed, its hidden_transform.weight; block k of bias_ih_l0 / bias_hh_l0 its
// input_transform.bias / hidden_transform.bias. A bidirectional nn.LSTM's `*_l0_reverse`
// tensors go to BiLstm::reverse_lstm the same way.
//
// Speed. forward() gives what stepping each gate's gate_product() through time gives (Burn's
// loop), but concatenates the gates' weights once per call: the inputs of the whole sequence are
// projected by one matmul, and each time step does one matmul of the hidden state for all gates.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "../module/config.hpp"
#include "../module/module.hpp"
#include "../tensor/activation.hpp"
#include "../tensor/module_ops.hpp"
#include "initializer.hpp"
#include "linear.hpp"

namespace ember::nn {

/// PyTorch's initialisation of recurrent layers: every weight and bias uniform on
/// ±1/√d_hidden. Through LinearConfig, whose fan_out is d_output = d_hidden for both transforms
/// and their biases, Kaiming-uniform on fan_out with gain 1/√3 is exactly that bound.
inline Initializer rnn_default_initializer() {
    return Initializer::KaimingUniform(1.0 / std::sqrt(3.0), /*fan_out_only=*/true);
}

/// One gate of a recurrent layer: a pair of linear maps whose sum is the gate's pre-activation.
template <Backend B>
struct GateController {
    Linear<B> input_transform;   ///< [d_input, d_output]: applied to the step's input
    Linear<B> hidden_transform;  ///< [d_output, d_output]: applied to the previous hidden state
    EMBER_MODULE(GateController, input_transform, hidden_transform)

    /// input_transform(input) + hidden_transform(hidden): input [..., d_input] and hidden
    /// [..., d_output] give [..., d_output].
    template <std::size_t D>
    Tensor<B, D> gate_product(const Tensor<B, D>& input, const Tensor<B, D>& hidden) const {
        return input_transform.forward(input) + hidden_transform.forward(hidden);
    }
};

/// Configuration of a GateController.
struct GateControllerConfig {
    std::size_t d_input;   ///< input features
    std::size_t d_output;  ///< output (hidden) features
    bool bias = true;      ///< whether both transforms add a bias
    /// Weight and bias initialiser; the default is PyTorch's for recurrent layers (±1/√d_output).
    Initializer initializer = rnn_default_initializer();
    EMBER_CONFIG(GateControllerConfig, d_input, d_output, bias, initializer)

    /// Builds the gate on `device` (parameters are drawn on first use).
    template <Backend B>
    GateController<B> init(const Device<B>& device = {}) const {
        EMBER_CHECK(d_input > 0 && d_output > 0, Argument,
                    "GateControllerConfig::init: d_input and d_output must be positive, got ",
                    d_input, " and ", d_output);
        auto linear = [&](std::size_t in) {
            return LinearConfig{in, d_output, bias, initializer}.template init<B>(device);
        };
        return {linear(d_input), linear(d_output)};
    }
};

/// The cell and hidden state of an LSTM: [batch, d_hidden] for Lstm (D = 2), [2, batch, d_hidden]
/// for BiLstm (D = 3, forward direction first).
template <Backend B, std::size_t D>
struct LstmState {
    Tensor<B, D> cell;    ///< the memory cell c
    Tensor<B, D> hidden;  ///< the hidden state h (the layer's output at the last step)
};

namespace detail::rnn {

// Gates of one layer, in the order their columns are concatenated.
template <Backend B>
using Gates = std::vector<const GateController<B>*>;

// The `transform` (&GateController::input_transform or ::hidden_transform) weights of `gates`
// side by side: [rows, G·d_hidden].
template <Backend B>
Tensor<B, 2> cat_weights(const Gates<B>& gates, Linear<B> GateController<B>::*transform) {
    std::vector<Tensor<B, 2>> ws;
    for (const auto* g : gates) ws.push_back((g->*transform).weight.val());
    return ws.size() == 1 ? ws[0] : Tensor<B, 2>::cat(ws, 1);
}

// The sum of the biases the given transforms have (nullopt when none has one).
template <Backend B>
std::optional<Tensor<B, 1>> sum_biases(std::initializer_list<const Linear<B>*> parts) {
    std::optional<Tensor<B, 1>> sum;
    for (const auto* l : parts)
        if (l->bias) sum = sum ? *sum + l->bias->val() : l->bias->val();
    return sum;
}

// The sum of both biases of a gate (nullopt without biases).
template <Backend B>
std::optional<Tensor<B, 1>> gate_bias(const GateController<B>& g) {
    return sum_biases<B>({&g.input_transform, &g.hidden_transform});
}

// Per-gate biases side by side [G·d_hidden], zeros for a gate without one; nullopt when no gate
// has a bias.
template <Backend B>
std::optional<Tensor<B, 1>> cat_biases(std::vector<std::optional<Tensor<B, 1>>> biases,
                                       std::size_t d_hidden, const Device<B>& device) {
    if (std::none_of(biases.begin(), biases.end(), [](const auto& b) { return b.has_value(); }))
        return std::nullopt;
    std::vector<Tensor<B, 1>> parts;
    for (auto& b : biases) parts.push_back(b ? *b : Tensor<B, 1>::zeros(Shape{d_hidden}, device));
    return parts.size() == 1 ? parts[0] : Tensor<B, 1>::cat(parts, 0);
}

// A layer's d_input, read off one of its gates.
template <Backend B>
std::size_t d_input(const GateController<B>& gate) {
    return gate.input_transform.weight.shape()[0];
}

// The display entries every recurrent layer starts with: d_input, d_hidden and bias, read off
// its first gate.
template <Backend B>
module::DisplayContent& display_sizes(module::DisplayContent& c, const GateController<B>& gate,
                                      std::size_t d_hidden) {
    return c.add("d_input", d_input(gate))
        .add("d_hidden", d_hidden)
        .add("bias", gate.input_transform.bias.has_value());
}

// Checks the sizes of a layer config; `who` is "<Config>::init".
inline void check_sizes(std::string_view who, std::size_t d_input, std::size_t d_hidden) {
    EMBER_CHECK(d_input > 0 && d_hidden > 0, Argument, who,
                ": d_input and d_hidden must be positive, got ", d_input, " and ", d_hidden);
}

// Checks an input against the layer; returns its batch size.
inline std::size_t check_input(std::string_view who, const Shape& s, std::size_t d_input,
                               bool batch_first) {
    const char* layout = batch_first ? "[batch, seq, d_input]" : "[seq, batch, d_input]";
    EMBER_CHECK(s[2] == d_input, Shape, who, ": input ", s.to_string(), " (", layout, ") has ",
                s[2], " features but the layer's d_input is ", d_input);
    const std::size_t batch = batch_first ? s[0] : s[1], seq = batch_first ? s[1] : s[0];
    EMBER_CHECK(seq > 0, Shape, who, ": input ", s.to_string(), " (", layout,
                ") has an empty sequence");
    return batch;
}

// Checks an initial state tensor's shape.
inline void check_state(std::string_view who, std::string_view what, const Shape& s,
                        const Shape& want) {
    EMBER_CHECK(s == want, Shape, who, ": initial ", what, " has shape ", s.to_string(),
                " but this input needs ", want.to_string());
}

// Checks both tensors of an initial LSTM state.
template <Backend B, std::size_t D>
void check_state(std::string_view who, const LstmState<B, D>& state, const Shape& want) {
    check_state(who, "cell state", state.cell.shape(), want);
    check_state(who, "hidden state", state.hidden.shape(), want);
}

// Columns [k·n, (k+1)·n) of x [batch, G·n]: gate k's share.
template <Backend B>
Tensor<B, 2> gate(const Tensor<B, 2>& x, std::size_t k, std::size_t n) {
    return x.narrow(1, k * n, n);
}

// Steps through the sequence x ([batch, seq, F], or [seq, batch, F] when not batch_first), from
// its last step to its first when `reverse`: `step(x_t)` takes the step's [batch, F] slice and
// returns the new hidden state. Returns the hidden states stacked in input order.
template <Backend B, typename Step>
Tensor<B, 3> scan(const Tensor<B, 3>& x, bool batch_first, bool reverse, Step&& step) {
    const long time_dim = batch_first ? 1 : 0;
    const std::size_t seq = x.dims()[time_dim];
    std::vector<Tensor<B, 2>> outputs;
    outputs.reserve(seq);
    for (std::size_t k = 0; k < seq; ++k) {
        const std::size_t t = reverse ? seq - 1 - k : k;
        outputs.push_back(step(x.narrow(time_dim, t, 1).template squeeze<2>(time_dim)));
    }
    if (reverse) std::reverse(outputs.begin(), outputs.end());
    return Tensor<B, 2>::template stack<3>(outputs, time_dim);
}

}  // namespace detail::rnn

/// A unidirectional LSTM layer (Burn's Lstm; PyTorch's nn.LSTM with one layer).
template <Backend B>
struct Lstm {
    GateController<B> input_gate;   ///< i: how much of the candidate enters the cell
    GateController<B> forget_gate;  ///< f: how much of the cell is kept
    GateController<B> output_gate;  ///< o: how much of the cell is shown as the hidden state
    GateController<B> cell_gate;    ///< g: the candidate cell values
    std::size_t d_hidden = 0;       ///< hidden features
    bool batch_first = true;        ///< input/output [batch, seq, F] (else [seq, batch, F])
    EMBER_MODULE(Lstm, input_gate, forget_gate, output_gate, cell_gate, d_hidden, batch_first)

    /// Runs the sequence. `input` is [batch, seq, d_input] ([seq, batch, d_input] when not
    /// batch_first); `state` (cell and hidden [batch, d_hidden]) defaults to zeros. Returns the
    /// hidden state of every step, [batch, seq, d_hidden] (or [seq, batch, d_hidden]), and the
    /// final state.
    std::pair<Tensor<B, 3>, LstmState<B, 2>> forward(
        const Tensor<B, 3>& input, std::optional<LstmState<B, 2>> state = std::nullopt) const;

    /// forward(), running through the sequence from its last step to its first when `reverse`
    /// (BiLstm's reverse direction); outputs stay in input order. `who` names the caller in
    /// error messages.
    std::pair<Tensor<B, 3>, LstmState<B, 2>> forward_direction(
        const Tensor<B, 3>& input, std::optional<LstmState<B, 2>> state, bool reverse,
        std::string_view who = "Lstm::forward") const {
        namespace r = detail::rnn;
        const std::size_t h = d_hidden;
        const Shape state_shape{
            r::check_input(who, input.shape(), r::d_input(input_gate), batch_first), h};
        if (state) r::check_state(who, *state, state_shape);
        const auto device = input.device();
        // Concatenated in PyTorch's gate order i, f, g, o (any fixed order would do).
        const r::Gates<B> gates{&input_gate, &forget_gate, &cell_gate, &output_gate};
        const auto w_x = r::cat_weights(gates, &GateController<B>::input_transform);
        const auto w_h = r::cat_weights(gates, &GateController<B>::hidden_transform);
        std::vector<std::optional<Tensor<B, 1>>> biases;
        for (const auto* g : gates) biases.push_back(r::gate_bias(*g));
        // Both biases of a gate are added unconditionally, so they fold into the projection.
        const auto x_proj = module::linear(input, w_x, r::cat_biases(biases, h, device));

        Tensor<B, 2> cell = state ? state->cell : Tensor<B, 2>::zeros(state_shape, device);
        Tensor<B, 2> hidden = state ? state->hidden : Tensor<B, 2>::zeros(state_shape, device);
        auto output = r::scan(x_proj, batch_first, reverse, [&](const Tensor<B, 2>& x) {
            auto pre = x + hidden.matmul(w_h);
            auto i = activation::sigmoid(r::gate(pre, 0, h));
            auto f = activation::sigmoid(r::gate(pre, 1, h));
            auto g = activation::tanh(r::gate(pre, 2, h));
            auto o = activation::sigmoid(r::gate(pre, 3, h));
            cell = f * cell + i * g;
            hidden = o * activation::tanh(cell);
            return hidden;
        });
        return {std::move(output), LstmState<B, 2>{std::move(cell), std::move(hidden)}};
    }

    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        detail::rnn::display_sizes(c, input_gate, d_hidden).add("batch_first", batch_first);
    }
};

/// Configuration of an Lstm.
struct LstmConfig {
    std::size_t d_input;   ///< input features
    std::size_t d_hidden;  ///< hidden features
    bool bias = true;      ///< whether the gates add biases (PyTorch's default; required in Burn)
    /// Initialiser of every weight and bias; the default is PyTorch's (±1/√d_hidden). Burn's
    /// default is XavierNormal(1).
    Initializer initializer = rnn_default_initializer();
    /// Input/output [batch, seq, F] (Burn's layout) or [seq, batch, F] (PyTorch's default).
    bool batch_first = true;
    EMBER_CONFIG(LstmConfig, d_input, d_hidden, bias, initializer, batch_first)

    /// Builds the layer on `device` (parameters are drawn on first use).
    template <Backend B>
    Lstm<B> init(const Device<B>& device = {}) const;
};

/// A bidirectional LSTM layer (Burn's BiLstm; PyTorch's nn.LSTM(bidirectional=True), one layer).
/// The output concatenates both directions' hidden states on the feature dim.
template <Backend B>
struct BiLstm {
    Lstm<B> forward_lstm;      ///< reads the sequence first to last (Burn's `forward`)
    Lstm<B> reverse_lstm;      ///< reads the sequence last to first (Burn's `reverse`)
    std::size_t d_hidden = 0;  ///< hidden features per direction
    bool batch_first = true;   ///< input/output [batch, seq, F] (else [seq, batch, F])
    EMBER_MODULE(BiLstm, forward_lstm, reverse_lstm, d_hidden, batch_first)

    /// Runs both directions. `input` is [batch, seq, d_input] ([seq, batch, d_input] when not
    /// batch_first); `state` (cell and hidden [2, batch, d_hidden], forward direction first)
    /// defaults to zeros. Returns [batch, seq, 2·d_hidden] (or [seq, batch, 2·d_hidden]): the
    /// forward direction's hidden states, then the reverse one's; and both final states
    /// [2, batch, d_hidden] (the reverse direction's is its state after the first step).
    std::pair<Tensor<B, 3>, LstmState<B, 3>> forward(
        const Tensor<B, 3>& input, std::optional<LstmState<B, 3>> state = std::nullopt) const {
        namespace r = detail::rnn;
        constexpr std::string_view who = "BiLstm::forward";
        const std::size_t batch =
            r::check_input(who, input.shape(), r::d_input(forward_lstm.input_gate), batch_first);
        std::optional<LstmState<B, 2>> init_fwd, init_rev;
        if (state) {
            r::check_state(who, *state, Shape{2, batch, d_hidden});
            auto direction = [&](std::size_t d) {
                return LstmState<B, 2>{state->cell.narrow(0, d, 1).template squeeze<2>(0),
                                       state->hidden.narrow(0, d, 1).template squeeze<2>(0)};
            };
            init_fwd = direction(0);
            init_rev = direction(1);
        }
        auto [out_fwd, fin_fwd] = forward_lstm.forward_direction(input, init_fwd, false, who);
        auto [out_rev, fin_rev] = reverse_lstm.forward_direction(input, init_rev, true, who);
        return {
            Tensor<B, 3>::cat({out_fwd, out_rev}, 2),
            LstmState<B, 3>{Tensor<B, 2>::template stack<3>({fin_fwd.cell, fin_rev.cell}, 0),
                            Tensor<B, 2>::template stack<3>({fin_fwd.hidden, fin_rev.hidden}, 0)}};
    }

    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        detail::rnn::display_sizes(c, forward_lstm.input_gate, d_hidden)
            .add("batch_first", batch_first);
    }
};

/// Configuration of a BiLstm.
struct BiLstmConfig {
    std::size_t d_input;   ///< input features
    std::size_t d_hidden;  ///< hidden features per direction
    bool bias = true;      ///< whether the gates add biases (PyTorch's default; required in Burn)
    /// Initialiser of every weight and bias; the default is PyTorch's (±1/√d_hidden). Burn's
    /// default is XavierNormal(1).
    Initializer initializer = rnn_default_initializer();
    /// Input/output [batch, seq, F] (Burn's layout) or [seq, batch, F] (PyTorch's default).
    bool batch_first = true;
    EMBER_CONFIG(BiLstmConfig, d_input, d_hidden, bias, initializer, batch_first)

    /// Builds the layer on `device` (parameters are drawn on first use).
    template <Backend B>
    BiLstm<B> init(const Device<B>& device = {}) const {
        detail::rnn::check_sizes("BiLstmConfig::init", d_input, d_hidden);
        const LstmConfig one{d_input, d_hidden, bias, initializer, batch_first};
        auto fwd = one.init<B>(device);
        auto rev = one.init<B>(device);
        return {std::move(fwd), std::move(rev), d_hidden, batch_first};
    }
};

/// A GRU layer (Burn's Gru; PyTorch's nn.GRU with one layer when reset_after).
template <Backend B>
struct Gru {
    GateController<B> update_gate;  ///< z: how much of the previous hidden state is kept
    GateController<B> reset_gate;   ///< r: how much of the hidden state the candidate sees
    GateController<B> new_gate;     ///< n: the candidate hidden state
    std::size_t d_hidden = 0;       ///< hidden features
    /// Where the reset gate applies: after the new gate's hidden transform, n = tanh(W_in·x +
    /// b_in + r ⊙ (W_hn·h + b_hn)) (PyTorch, cuDNN), or before it, n = tanh(W_in·x + b_in +
    /// W_hn·(r ⊙ h) + b_hn) (the original GRU).
    bool reset_after = true;
    bool batch_first = true;  ///< input/output [batch, seq, F] (else [seq, batch, F])
    EMBER_MODULE(Gru, update_gate, reset_gate, new_gate, d_hidden, reset_after, batch_first)

    /// Runs the sequence. `input` is [batch, seq, d_input] ([seq, batch, d_input] when not
    /// batch_first); `state` [batch, d_hidden] defaults to zeros. Returns the hidden state of
    /// every step, [batch, seq, d_hidden] (or [seq, batch, d_hidden]); the last step's is the
    /// final state. h' = (1 - z) ⊙ n + z ⊙ h.
    Tensor<B, 3> forward(const Tensor<B, 3>& input,
                         std::optional<Tensor<B, 2>> state = std::nullopt) const;

    /// forward(), running through the sequence from its last step to its first when `reverse`
    /// (BiGru's reverse direction); outputs stay in input order, so the reverse direction's
    /// final state is its output at the first step. `who` names the caller in error messages.
    Tensor<B, 3> forward_direction(const Tensor<B, 3>& input, std::optional<Tensor<B, 2>> state,
                                   bool reverse, std::string_view who = "Gru::forward") const {
        namespace r = detail::rnn;
        const std::size_t h = d_hidden;
        const Shape state_shape{
            r::check_input(who, input.shape(), r::d_input(update_gate), batch_first), h};
        if (state) r::check_state(who, "hidden state", state->shape(), state_shape);
        const auto device = input.device();
        // PyTorch's gate order r, z, n.
        const auto &gr = reset_gate, &gz = update_gate, &gn = new_gate;
        auto w_x = r::cat_weights<B>({&gr, &gz, &gn}, &GateController<B>::input_transform);
        // Reset-after keeps b_hn inside r ⊙ (...); otherwise it is added unconditionally and
        // folds into the projection like the other biases.
        auto bias_n = reset_after ? r::sum_biases<B>({&gn.input_transform}) : r::gate_bias(gn);
        auto b_x =
            r::cat_biases<B>({r::gate_bias(gr), r::gate_bias(gz), std::move(bias_n)}, h, device);
        const auto x_proj = module::linear(input, w_x, b_x);
        // Reset-after: one hidden matmul for all three gates; else r and z only.
        auto w_h =
            r::cat_weights<B>(reset_after ? r::Gates<B>{&gr, &gz, &gn} : r::Gates<B>{&gr, &gz},
                              &GateController<B>::hidden_transform);
        const auto w_hn = gn.hidden_transform.weight.val();
        const auto b_hn = reset_after ? r::sum_biases<B>({&gn.hidden_transform}) : std::nullopt;

        Tensor<B, 2> hidden = state ? *state : Tensor<B, 2>::zeros(state_shape, device);
        return r::scan(x_proj, batch_first, reverse, [&](const Tensor<B, 2>& x) {
            auto hp = hidden.matmul(w_h);
            auto reset = activation::sigmoid(r::gate(x, 0, h) + r::gate(hp, 0, h));
            auto update = activation::sigmoid(r::gate(x, 1, h) + r::gate(hp, 1, h));
            Tensor<B, 2> candidate = r::gate(x, 2, h);
            if (reset_after) {
                auto hn = r::gate(hp, 2, h);
                if (b_hn) hn = hn + b_hn->template unsqueeze_dim<2>(0);
                candidate = activation::tanh(candidate + reset * hn);
            } else {
                candidate = activation::tanh(candidate + (reset * hidden).matmul(w_hn));
            }
            hidden = candidate + update * (hidden - candidate);
            return hidden;
        });
    }

    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        detail::rnn::display_sizes(c, update_gate, d_hidden)
            .add("reset_after", reset_after)
            .add("batch_first", batch_first);
    }
};

/// Configuration of a Gru.
struct GruConfig {
    std::size_t d_input;   ///< input features
    std::size_t d_hidden;  ///< hidden features
    bool bias = true;      ///< whether the gates add biases (PyTorch's default; required in Burn)
    /// Reset gate after the new gate's hidden transform (PyTorch's GRU) or before it.
    bool reset_after = true;
    /// Initialiser of every weight and bias; the default is PyTorch's (±1/√d_hidden). Burn's
    /// default is XavierNormal(1).
    Initializer initializer = rnn_default_initializer();
    /// Input/output [batch, seq, F] (Burn's layout) or [seq, batch, F] (PyTorch's default).
    bool batch_first = true;
    EMBER_CONFIG(GruConfig, d_input, d_hidden, bias, reset_after, initializer, batch_first)

    /// Builds the layer on `device` (parameters are drawn on first use).
    template <Backend B>
    Gru<B> init(const Device<B>& device = {}) const;
};

// Defined out of their classes, so not inline: where an `extern template` declaration names an
// instance (include/ember/dispatch/nn.hpp for Dispatch), a file that calls it compiles the call
// only, not the body (compilers instantiate an inline function to consider inlining it, even
// one declared extern).

template <Backend B>
std::pair<Tensor<B, 3>, LstmState<B, 2>> Lstm<B>::forward(
    const Tensor<B, 3>& input, std::optional<LstmState<B, 2>> state) const {
    return forward_direction(input, std::move(state), false);
}

template <Backend B>
Lstm<B> LstmConfig::init(const Device<B>& device) const {
    detail::rnn::check_sizes("LstmConfig::init", d_input, d_hidden);
    auto gate = [&] {
        return GateControllerConfig{d_input, d_hidden, bias, initializer}.init<B>(device);
    };
    return {gate(), gate(), gate(), gate(), d_hidden, batch_first};
}

template <Backend B>
Tensor<B, 3> Gru<B>::forward(const Tensor<B, 3>& input, std::optional<Tensor<B, 2>> state) const {
    return forward_direction(input, std::move(state), false);
}

template <Backend B>
Gru<B> GruConfig::init(const Device<B>& device) const {
    detail::rnn::check_sizes("GruConfig::init", d_input, d_hidden);
    auto gate = [&] {
        return GateControllerConfig{d_input, d_hidden, bias, initializer}.init<B>(device);
    };
    return {gate(), gate(), gate(), d_hidden, reset_after, batch_first};
}

}  // namespace ember::nn
