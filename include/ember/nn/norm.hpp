#pragma once
// Normalisation layers: BatchNorm, GroupNorm, InstanceNorm, LayerNorm and RmsNorm, with Burn's
// names and parameter layouts (gamma/beta instead of PyTorch's weight/bias).
//
// From a PyTorch state_dict: weight → gamma, bias → beta, running_mean → running_mean,
// running_var → running_var (num_batches_tracked has no counterpart and is dropped).
#include <optional>
#include <utility>

#include "../module/config.hpp"
#include "../module/module.hpp"
#include "../tensor/activation.hpp"
#include "../tensor/module_ops.hpp"
#include "initializer.hpp"

namespace ember::nn {

namespace detail {
// [C] → [1, C, 1, ..., 1] of rank D, to broadcast a per-channel vector over [N, C, ...].
template <std::size_t D, Backend B>
Tensor<B, D> per_channel(const Tensor<B, 1>& v) {
    Shape s = Shape::filled(D, 1);
    s[1] = v.dims()[0];
    return v.template reshape<D>(s);
}
// [d] → [1, ..., 1, d] of rank D, to broadcast over the last dim.
template <std::size_t D, Backend B>
Tensor<B, D> per_feature(const Tensor<B, 1>& v) {
    Shape s = Shape::filled(D, 1);
    s[D - 1] = v.dims()[0];
    return v.template reshape<D>(s);
}
// Checks that `input` is [N, C, ...] with C == channels.
template <Backend B, std::size_t D>
void check_channels(const Tensor<B, D>& input, std::size_t channels, const char* module) {
    EMBER_CHECK(input.dims()[1] == channels, Shape, module, ": input of shape ",
                input.shape().to_string(), " has ", input.dims()[1],
                " channels at dim 1, but the module was built for ", channels);
}
// Checks that `input` is [..., d_model].
template <Backend B, std::size_t D>
void check_last_dim(const Tensor<B, D>& input, std::size_t d_model, const char* module) {
    EMBER_CHECK(input.dims()[D - 1] == d_model, Shape, module, ": input of shape ",
                input.shape().to_string(), " does not end in d_model = ", d_model);
}
// Checks a config setting that must be positive; `who` is "<Config>::init".
template <typename T>
void check_positive(const char* who, const char* what, T value) {
    EMBER_CHECK(value > T{0}, Argument, who, ": ", what, " must be positive, got ", value);
}
}  // namespace detail

// ---- BatchNorm ------------------------------------------------------------------------------

/// Batch normalisation over [N, C], [N, C, L] or [N, C, H, W] (any rank >= 2, channels at
/// dim 1). On an autodiff backend (training) it normalises with the batch statistics and updates
/// the running ones; on any other backend (a `valid()` model: inference) it uses the running
/// statistics, as Burn and PyTorch's train()/eval() do.
template <Backend B>
struct BatchNorm {
    Param<Tensor<B, 1>> gamma;                ///< scale [C] (PyTorch: weight)
    Param<Tensor<B, 1>> beta;                 ///< shift [C] (PyTorch: bias)
    RunningState<Tensor<B, 1>> running_mean;  ///< running mean [C]
    RunningState<Tensor<B, 1>> running_var;   ///< running unbiased variance [C]
    double momentum = 0.1;                    ///< weight of the batch in the running update
    double epsilon = 1e-5;                    ///< added to the variance
    EMBER_MODULE(BatchNorm, gamma, beta, running_mean, running_var, momentum, epsilon)

    /// Normalises `input` [N, C, ...] per channel. Under an ember::Autocast guard an f16/bf16
    /// input is normalised in f32 (statistics included) and the result cast back to its dtype.
    template <std::size_t D>
    Tensor<B, D> forward(const Tensor<B, D>& input) const;
    /// relu(forward(input)). In training on a backend with float_batch_norm_relu (CUDA, the
    /// CPU) the ReLU and its gradient run inside batch norm's own passes, one elementwise pass
    /// each way fewer; elsewhere the ops are composed. Same values either way.
    template <std::size_t D>
    Tensor<B, D> forward_relu(const Tensor<B, D>& input) const;
    /// relu(forward(input) + residual), ResNet's block ending; `residual` has input's shape.
    /// Fused as forward_relu is (the addition too). Throws ShapeError for another shape.
    template <std::size_t D>
    Tensor<B, D> forward_add_relu(const Tensor<B, D>& input, const Tensor<B, D>& residual) const;
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("num_features", gamma.shape()[0]).add("momentum", momentum).add("epsilon", epsilon);
    }

  private:
    // forward_relu and forward_add_relu (residual null: none).
    template <std::size_t D>
    Tensor<B, D> relu_forward(const Tensor<B, D>& input, const Tensor<B, D>* residual) const;
    // forward on the backend's batch-norm ops; nothing when the backend declines the operands.
    template <std::size_t D>
    std::optional<Tensor<B, D>> fused_forward(const Tensor<B, D>& input) const {
        if (ad_enabled<B>(input.device())) {
            const std::size_t n = input.shape().num_elements() / gamma.shape()[0];
            EMBER_CHECK(n > 1, Argument, "BatchNorm: training needs more than one value ",
                        "per channel, got input of shape ", input.shape().to_string());
            auto r = B::float_batch_norm(
                input.primitive(), gamma.val().primitive(), beta.val().primitive(),
                running_mean.value().detach().primitive(), running_var.value().detach().primitive(),
                BatchNormScalars{epsilon, momentum});
            if (!r) return std::nullopt;
            running_mean.update(Tensor<B, 1>::from_primitive(std::move((*r)[3])));
            running_var.update(Tensor<B, 1>::from_primitive(std::move((*r)[4])));
            return Tensor<B, D>::from_primitive(std::move((*r)[0]));
        }
        auto y = B::float_batch_norm_eval(input.primitive(), gamma.val().primitive(),
                                          beta.val().primitive(), running_mean.value().primitive(),
                                          running_var.value().primitive(), epsilon);
        if (!y) return std::nullopt;
        return Tensor<B, D>::from_primitive(std::move(*y));
    }
};

/// Configuration of BatchNorm (PyTorch's BatchNorm1d/2d defaults: gamma 1, beta 0, running
/// mean 0, running variance 1).
struct BatchNormConfig {
    std::size_t num_features;  ///< channels C
    double epsilon = 1e-5;     ///< added to the variance
    double momentum = 0.1;     ///< running = (1 - momentum)·running + momentum·batch
    EMBER_CONFIG(BatchNormConfig, num_features, epsilon, momentum)

    /// Builds the layer on `device`.
    template <Backend B>
    BatchNorm<B> init(const Device<B>& device = {}) const;
};

// ---- GroupNorm and InstanceNorm -------------------------------------------------------------

namespace detail {
// Normalises [N, C, ...] over each of `groups` groups of channels (and all positions).
// Under an ember::Autocast guard an f16/bf16 input is normalised in f32.
template <Backend B, std::size_t D>
Tensor<B, D> group_norm(const Tensor<B, D>& input, std::size_t groups, double epsilon,
                        const std::optional<Param<Tensor<B, 1>>>& gamma,
                        const std::optional<Param<Tensor<B, 1>>>& beta) {
    const Shape shape = input.shape();
    auto x = ::ember::detail::autocast::widen(input).template reshape<3>(
        {long(shape[0]), long(groups), -1});
    auto [var, mean] = x.var_mean_bias(2);
    auto y = ((x - mean) / (var + epsilon).sqrt()).template reshape<D>(shape);
    if (gamma) y = y * per_channel<D>(gamma->val());
    if (beta) y = y + per_channel<D>(beta->val());
    return y;
}
// The affine parameters of GroupNorm and InstanceNorm: gamma 1 and beta 0 of [channels] when
// `affine`, none otherwise.
template <Backend B>
std::pair<std::optional<Param<Tensor<B, 1>>>, std::optional<Param<Tensor<B, 1>>>> affine_params(
    bool affine, std::size_t channels, const Device<B>& device) {
    if (!affine) return {std::nullopt, std::nullopt};
    return {Initializer::Ones().init<B, 1>(Shape{channels}, device),
            Initializer::Zeros().init<B, 1>(Shape{channels}, device)};
}
}  // namespace detail

/// Group normalisation over [N, C, ...]: statistics per sample and group of C / num_groups
/// channels; the same in training and inference.
template <Backend B>
struct GroupNorm {
    std::optional<Param<Tensor<B, 1>>> gamma;  ///< scale [C], when affine (PyTorch: weight)
    std::optional<Param<Tensor<B, 1>>> beta;   ///< shift [C], when affine (PyTorch: bias)
    std::size_t num_groups = 1;                ///< groups the channels are split into
    std::size_t num_channels = 1;              ///< channels C
    double epsilon = 1e-5;                     ///< added to the variance
    bool affine = true;                        ///< whether gamma and beta exist
    EMBER_MODULE(GroupNorm, gamma, beta, num_groups, num_channels, epsilon, affine)

    /// Normalises `input` [N, C, ...].
    template <std::size_t D>
    Tensor<B, D> forward(const Tensor<B, D>& input) const;
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("num_groups", num_groups)
            .add("num_channels", num_channels)
            .add("epsilon", epsilon)
            .add("affine", affine);
    }
};

/// Configuration of GroupNorm (PyTorch's defaults: gamma 1, beta 0).
struct GroupNormConfig {
    std::size_t num_groups;    ///< groups; must divide num_channels
    std::size_t num_channels;  ///< channels C
    double epsilon = 1e-5;     ///< added to the variance
    bool affine = true;        ///< learn a per-channel scale and shift
    EMBER_CONFIG(GroupNormConfig, num_groups, num_channels, epsilon, affine)

    /// Builds the layer on `device`.
    template <Backend B>
    GroupNorm<B> init(const Device<B>& device = {}) const;
};

/// Instance normalisation over [N, C, ...]: statistics per sample and channel, no running
/// statistics (PyTorch's InstanceNorm with track_running_stats=False).
template <Backend B>
struct InstanceNorm {
    std::optional<Param<Tensor<B, 1>>> gamma;  ///< scale [C], when affine (PyTorch: weight)
    std::optional<Param<Tensor<B, 1>>> beta;   ///< shift [C], when affine (PyTorch: bias)
    std::size_t num_channels = 1;              ///< channels C
    double epsilon = 1e-5;                     ///< added to the variance
    bool affine = true;                        ///< whether gamma and beta exist
    EMBER_MODULE(InstanceNorm, gamma, beta, num_channels, epsilon, affine)

    /// Normalises `input` [N, C, ...].
    template <std::size_t D>
    Tensor<B, D> forward(const Tensor<B, D>& input) const {
        static_assert(D >= 3, "InstanceNorm: the input needs batch, channel and spatial dims");
        detail::check_channels(input, num_channels, "InstanceNorm");
        return detail::group_norm(input, num_channels, epsilon, gamma, beta);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("num_channels", num_channels).add("epsilon", epsilon).add("affine", affine);
    }
};

/// Configuration of InstanceNorm. `affine` defaults to true as in Burn (PyTorch's default is
/// false).
struct InstanceNormConfig {
    std::size_t num_channels;  ///< channels C
    double epsilon = 1e-5;     ///< added to the variance
    bool affine = true;        ///< learn a per-channel scale (1) and shift (0)
    EMBER_CONFIG(InstanceNormConfig, num_channels, epsilon, affine)

    /// Builds the layer on `device`.
    template <Backend B>
    InstanceNorm<B> init(const Device<B>& device = {}) const {
        detail::check_positive("InstanceNormConfig::init", "num_channels", num_channels);
        detail::check_positive("InstanceNormConfig::init", "epsilon", epsilon);
        auto [gamma, beta] = detail::affine_params<B>(affine, num_channels, device);
        return {std::move(gamma), std::move(beta), num_channels, epsilon, affine};
    }
};

// ---- LayerNorm and RmsNorm ------------------------------------------------------------------

/// Layer normalisation over the last dim (PyTorch's LayerNorm with normalized_shape = d_model).
template <Backend B>
struct LayerNorm {
    Param<Tensor<B, 1>> gamma;  ///< scale [d_model] (PyTorch: weight)
    Param<Tensor<B, 1>> beta;   ///< shift [d_model] (PyTorch: bias)
    double epsilon = 1e-5;      ///< added to the variance
    EMBER_MODULE(LayerNorm, gamma, beta, epsilon)

    /// Normalises `input` [..., d_model].
    template <std::size_t D>
    Tensor<B, D> forward(const Tensor<B, D>& input) const;
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("d_model", gamma.shape()[0]).add("epsilon", epsilon);
    }
};

/// Configuration of LayerNorm (gamma 1, beta 0, as PyTorch).
struct LayerNormConfig {
    std::size_t d_model;    ///< size of the normalised last dim
    double epsilon = 1e-5;  ///< added to the variance
    EMBER_CONFIG(LayerNormConfig, d_model, epsilon)

    /// Builds the layer on `device`.
    template <Backend B>
    LayerNorm<B> init(const Device<B>& device = {}) const;
};

/// Root-mean-square normalisation over the last dim: x / √(mean(x²) + ε) · gamma.
template <Backend B>
struct RmsNorm {
    Param<Tensor<B, 1>> gamma;  ///< scale [d_model]
    double epsilon = 1e-5;      ///< added to the mean square
    EMBER_MODULE(RmsNorm, gamma, epsilon)

    /// Normalises `input` [..., d_model] (in f32 under an ember::Autocast guard).
    template <std::size_t D>
    Tensor<B, D> forward(const Tensor<B, D>& input_in) const;
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("d_model", gamma.shape()[0]).add("epsilon", epsilon);
    }
};

/// Configuration of RmsNorm (gamma 1).
struct RmsNormConfig {
    std::size_t d_model;    ///< size of the normalised last dim
    double epsilon = 1e-5;  ///< added to the mean square
    EMBER_CONFIG(RmsNormConfig, d_model, epsilon)

    /// Builds the layer on `device`.
    template <Backend B>
    RmsNorm<B> init(const Device<B>& device = {}) const;
};

// Defined out of their classes, so not inline: where an `extern template` declaration names an
// instance (include/ember/dispatch/nn.hpp for Dispatch), a file that calls it compiles the call
// only, not the body (compilers instantiate an inline function to consider inlining it, even
// one declared extern).

template <Backend B>
template <std::size_t D>
Tensor<B, D> BatchNorm<B>::forward(const Tensor<B, D>& input) const {
    if (::ember::detail::autocast::current()) [[unlikely]] {
        const DType dt = input.dtype();
        if (dt == DType::F16 || dt == DType::BF16) {
            if constexpr (BatchNormForwardBackend<B>) {
                // The backend's kernels read and write f16/bf16 with f32 statistics and
                // arithmetic: the same values as the casts around f32 below, without them.
                detail::check_channels(input, gamma.shape()[0], "BatchNorm");
                if (auto y = fused_forward(input)) return std::move(*y);
            }
            const Autocast off(*autocast_dtype(), false);  // the f32 ops stay f32
            return forward(input.cast(DType::F32)).cast(dt);
        }
    }
    static_assert(D >= 2, "BatchNorm: the input needs a batch and a channel dim");
    const std::size_t channels = gamma.shape()[0];
    detail::check_channels(input, channels, "BatchNorm");
    if constexpr (BatchNormForwardBackend<B>) {
        // The backend's own kernels where it has them (CUDA): statistics, normalisation
        // and the running update in a few launches instead of a transpose and reductions.
        if (auto y = fused_forward(input)) return std::move(*y);
    }
    auto [mean, var] = [&]() -> std::pair<Tensor<B, D>, Tensor<B, D>> {
        // Batch statistics where the graph is recorded (training), running ones elsewhere.
        if (ad_enabled<B>(input.device())) {
            // [N, C, ...] → [C, N·...]: one row of samples per channel.
            auto rows = input.swap_dims(0, 1).template reshape<2>({long(channels), -1});
            const std::size_t n = rows.dims()[1];
            EMBER_CHECK(n > 1, Argument, "BatchNorm: training needs more than one value ",
                        "per channel, got input of shape ", input.shape().to_string());
            auto [v, m] = rows.var_mean_bias(1);
            auto batch_mean = m.template reshape<1>({long(channels)});
            auto batch_var = v.template reshape<1>({long(channels)});
            // The running variance is the unbiased estimate, as in PyTorch.
            const double unbias = double(n) / double(n - 1);
            running_mean.update(running_mean.value() * (1.0 - momentum) +
                                batch_mean.detach() * momentum);
            running_var.update(running_var.value() * (1.0 - momentum) +
                               batch_var.detach() * (unbias * momentum));
            return {detail::per_channel<D>(batch_mean), detail::per_channel<D>(batch_var)};
        } else {
            return {detail::per_channel<D>(running_mean.value()),
                    detail::per_channel<D>(running_var.value())};
        }
    }();
    auto x = (input - mean) / (var + epsilon).sqrt();
    return x * detail::per_channel<D>(gamma.val()) + detail::per_channel<D>(beta.val());
}

template <Backend B>
template <std::size_t D>
Tensor<B, D> BatchNorm<B>::forward_relu(const Tensor<B, D>& input) const {
    return relu_forward<D>(input, nullptr);
}

template <Backend B>
template <std::size_t D>
Tensor<B, D> BatchNorm<B>::forward_add_relu(const Tensor<B, D>& input,
                                            const Tensor<B, D>& residual) const {
    EMBER_CHECK(residual.shape() == input.shape(), Shape,
                "BatchNorm::forward_add_relu: residual of shape ", residual.shape().to_string(),
                " for an input of shape ", input.shape().to_string());
    return relu_forward(input, &residual);
}

template <Backend B>
template <std::size_t D>
Tensor<B, D> BatchNorm<B>::relu_forward(const Tensor<B, D>& input,
                                        const Tensor<B, D>* residual) const {
    if constexpr (BatchNormReluForwardBackend<B>) {
        // Training only: inference has no backward pass to save, and its batch norm is one
        // elementwise kernel already.
        if (ad_enabled<B>(input.device())) {
            detail::check_channels(input, gamma.shape()[0], "BatchNorm");
            const std::size_t n = input.shape().num_elements() / gamma.shape()[0];
            EMBER_CHECK(n > 1, Argument, "BatchNorm: training needs more than one value ",
                        "per channel, got input of shape ", input.shape().to_string());
            std::optional<typename B::FloatTensorPrimitive> r;
            if (residual) r = residual->primitive();
            auto out = B::float_batch_norm_relu(
                input.primitive(), gamma.val().primitive(), beta.val().primitive(),
                running_mean.value().detach().primitive(), running_var.value().detach().primitive(),
                std::move(r), BatchNormScalars{epsilon, momentum});
            if (out) {
                running_mean.update(Tensor<B, 1>::from_primitive(std::move((*out)[3])));
                running_var.update(Tensor<B, 1>::from_primitive(std::move((*out)[4])));
                return Tensor<B, D>::from_primitive(std::move((*out)[0]));
            }
        }
    }
    auto y = forward(input);
    if (residual) y = y + *residual;
    return activation::relu(std::move(y));
}

template <Backend B>
BatchNorm<B> BatchNormConfig::init(const Device<B>& device) const {
    detail::check_positive("BatchNormConfig::init", "num_features", num_features);
    detail::check_positive("BatchNormConfig::init", "epsilon", epsilon);
    EMBER_CHECK(momentum >= 0.0 && momentum <= 1.0, Argument,
                "BatchNormConfig::init: momentum must be in [0, 1], got ", momentum);
    const Shape s{num_features};
    return BatchNorm<B>{Initializer::Ones().init<B, 1>(s, device),
                        Initializer::Zeros().init<B, 1>(s, device),
                        RunningState<Tensor<B, 1>>(Tensor<B, 1>::zeros(s, device)),
                        RunningState<Tensor<B, 1>>(Tensor<B, 1>::ones(s, device)),
                        momentum,
                        epsilon};
}

template <Backend B>
template <std::size_t D>
Tensor<B, D> GroupNorm<B>::forward(const Tensor<B, D>& input) const {
    static_assert(D >= 2, "GroupNorm: the input needs a batch and a channel dim");
    detail::check_channels(input, num_channels, "GroupNorm");
    return detail::group_norm(input, num_groups, epsilon, gamma, beta);
}

template <Backend B>
GroupNorm<B> GroupNormConfig::init(const Device<B>& device) const {
    EMBER_CHECK(num_groups > 0 && num_channels > 0 && num_channels % num_groups == 0, Argument,
                "GroupNormConfig::init: num_groups (", num_groups,
                ") must be positive and divide num_channels (", num_channels, ")");
    detail::check_positive("GroupNormConfig::init", "epsilon", epsilon);
    auto [gamma, beta] = detail::affine_params<B>(affine, num_channels, device);
    return {std::move(gamma), std::move(beta), num_groups, num_channels, epsilon, affine};
}

template <Backend B>
template <std::size_t D>
Tensor<B, D> LayerNorm<B>::forward(const Tensor<B, D>& input) const {
    detail::check_last_dim(input, gamma.shape()[0], "LayerNorm");
    return module::layer_norm(input, gamma.val(), beta.val(), epsilon);
}

template <Backend B>
LayerNorm<B> LayerNormConfig::init(const Device<B>& device) const {
    detail::check_positive("LayerNormConfig::init", "d_model", d_model);
    detail::check_positive("LayerNormConfig::init", "epsilon", epsilon);
    return {Initializer::Ones().init<B, 1>(Shape{d_model}, device),
            Initializer::Zeros().init<B, 1>(Shape{d_model}, device), epsilon};
}

template <Backend B>
template <std::size_t D>
Tensor<B, D> RmsNorm<B>::forward(const Tensor<B, D>& input_in) const {
    detail::check_last_dim(input_in, gamma.shape()[0], "RmsNorm");
    const auto input = ::ember::detail::autocast::widen(input_in);
    auto rms = ((input * input).mean_dim(long(D) - 1) + epsilon).sqrt();
    return input / rms * detail::per_feature<D>(gamma.val());
}

template <Backend B>
RmsNorm<B> RmsNormConfig::init(const Device<B>& device) const {
    detail::check_positive("RmsNormConfig::init", "d_model", d_model);
    detail::check_positive("RmsNormConfig::init", "epsilon", epsilon);
    return {Initializer::Ones().init<B, 1>(Shape{d_model}, device), epsilon};
}

}  // namespace ember::nn
