#pragma once
// Dynamic loss scaling for f16 mixed precision (PyTorch's torch.cuda.amp.GradScaler). f16 keeps
// values down to 6e-8 only, so the small gradients of an f16 forward pass (ember::Autocast with
// DType::F16) underflow to zero in its backward. Multiplying the loss by a large scale S lifts
// them into f16's range; the gradients of the f32 parameters are then divided by S before the
// optimizer step. A scale too large overflows some gradient to inf: that step is skipped and S
// halved. After `growth_interval` finite steps in a row S doubles, so it stays near the largest
// value that does not overflow. bf16 has f32's range and needs none of this.
//
//     auto scaler = ember::optim::GradScalerConfig{}.init();
//     std::optional<Tensor<B, 1>> loss;
//     { const ember::Autocast f16(ember::DType::F16); loss = model.loss(batch); }
//     auto grads = GradientsParams::from_grads(scaler.scale(*loss).backward(), model);
//     if (auto g = scaler.unscale(std::move(grads), model))  // nullopt: inf/NaN, step skipped
//         model = optim.step(lr, std::move(model), std::move(*g));
#include <any>
#include <cmath>
#include <functional>
#include <optional>
#include <string_view>
#include <typeinfo>

#include "../module/config.hpp"
#include "gradients_params.hpp"

namespace ember::optim {

class GradScaler;

/// Configuration of GradScaler (PyTorch's defaults).
struct GradScalerConfig {
    double init_scale = 65536.0;         ///< the first scale, 2^16
    double growth_factor = 2.0;          ///< the scale's factor after growth_interval good steps
    double backoff_factor = 0.5;         ///< the scale's factor after a step with inf or NaN
    std::size_t growth_interval = 2000;  ///< finite steps in a row before the scale grows
    EMBER_CONFIG(GradScalerConfig, init_scale, growth_factor, backoff_factor, growth_interval)

    /// The scaler. Throws ArgumentError unless init_scale is positive and finite,
    /// growth_factor > 1, backoff_factor in (0, 1) and growth_interval >= 1.
    GradScaler init() const;
};

/// Scales losses and unscales gradients, adapting the scale (see the header's comment).
class GradScaler {
  public:
    /// `loss` times the current scale: its backward gives the scaled gradients.
    template <Backend B, std::size_t D>
    Tensor<B, D> scale(const Tensor<B, D>& loss) const {
        return loss.mul_scalar(scale_);
    }

    /// The gradients of `module`'s float parameters in `grads` divided by the scale, or nullopt
    /// when any of them holds inf or NaN (the step must then be skipped). Updates the scale: the
    /// backoff after an overflow, the growth after growth_interval finite steps in a row. Reads
    /// one value back from the device per call (whether all gradients were finite).
    template <module::Module M>
    std::optional<GradientsParams> unscale(GradientsParams grads, const M& module) {
        const double inv = 1.0 / scale_;
        // g - g summed over every gradient: 0 while all are finite, NaN once one holds inf or
        // NaN. Accumulated on the device; read once at the end.
        std::any probe;
        std::function<double(const std::any&)> read;
        bool found = false;
        module.visit([&](std::string_view, const auto& p) {
            using T = detail::ParamTraits<module::detail::Bare<decltype(p)>>;
            if constexpr (T::is_float) {
                using IB = InnerBackend<typename T::Backend>;
                auto g = grads.template remove<IB, T::rank>(p.id());
                if (!g) return;
                auto unscaled = std::move(*g).mul_scalar(inv);
                auto zero = (unscaled - unscaled).sum();
                using P = Tensor<IB, 1>;
                if (!probe.has_value()) {
                    probe = std::move(zero);
                    read = [](const std::any& a) {
                        return double(std::any_cast<P>(a).into_scalar());
                    };
                } else if (probe.type() == typeid(P)) {
                    probe = std::any_cast<P>(probe) + zero;
                } else {  // a module spread over backends: this one read on its own
                    found = found || !std::isfinite(double(zero.into_scalar()));
                }
                grads.register_(p.id(), std::move(unscaled));
            }
        });
        if (probe.has_value()) found = found || !std::isfinite(read(probe));
        if (found) {
            scale_ *= backoff_factor_;
            good_steps_ = 0;
            ++skipped_;
            return std::nullopt;
        }
        if (++good_steps_ == growth_interval_) {
            scale_ *= growth_factor_;
            good_steps_ = 0;
        }
        return grads;
    }

    /// The current scale.
    double current_scale() const { return scale_; }
    /// Steps skipped so far because a gradient held inf or NaN.
    std::size_t skipped_steps() const { return skipped_; }

  private:
    friend struct GradScalerConfig;
    explicit GradScaler(const GradScalerConfig& c)
        : scale_(c.init_scale),
          growth_factor_(c.growth_factor),
          backoff_factor_(c.backoff_factor),
          growth_interval_(c.growth_interval) {}
    double scale_;
    double growth_factor_;
    double backoff_factor_;
    std::size_t growth_interval_;
    std::size_t good_steps_ = 0;
    std::size_t skipped_ = 0;
};

inline GradScaler GradScalerConfig::init() const {
    EMBER_CHECK(init_scale > 0 && std::isfinite(init_scale), Argument,
                "GradScalerConfig::init: init_scale must be positive and finite, got ", init_scale);
    EMBER_CHECK(growth_factor > 1 && std::isfinite(growth_factor), Argument,
                "GradScalerConfig::init: growth_factor must be finite and > 1, got ",
                growth_factor);
    EMBER_CHECK(backoff_factor > 0 && backoff_factor < 1, Argument,
                "GradScalerConfig::init: backoff_factor must be in (0, 1), got ", backoff_factor);
    EMBER_CHECK(growth_interval >= 1, Argument,
                "GradScalerConfig::init: growth_interval must be at least 1, got ",
                growth_interval);
    return GradScaler(*this);
}

}  // namespace ember::optim
