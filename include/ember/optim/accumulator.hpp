#pragma once
// GradientsAccumulator: sums the gradients of several backward passes (Burn's), so that a batch
// too large for memory can be processed in parts and stepped once. With a loss that is a sum
// over examples divided by the full batch size, the parts' sum is the full batch's gradient.
#include <utility>

#include "gradients_params.hpp"

namespace ember::optim {

/// Accumulates GradientsParams per parameter id.
class GradientsAccumulator {
  public:
    /// Adds `grads` to the sum, for every parameter of `module` that has a gradient there
    /// (gradients of other ids are ignored, as in Burn).
    template <module::Module M>
    void accumulate(const M& module, GradientsParams grads) {
        module.visit([&](std::string_view path, const auto& p) {
            using T = detail::ParamTraits<module::detail::Bare<decltype(p)>>;
            if constexpr (T::is_float) {
                using G = typename T::Grad;
                using IB = InnerBackend<typename T::Backend>;
                constexpr std::size_t D = T::rank;
                auto g = grads.template remove<IB, D>(p.id());
                if (!g) return;
                if (auto prev = sum_.template remove<IB, D>(p.id())) {
                    EMBER_CHECK(prev->shape() == g->shape(), Shape,
                                "GradientsAccumulator::accumulate: the gradient of '", path,
                                "' has shape ", g->shape().to_string(), " but the sum has ",
                                prev->shape().to_string());
                    G sum = std::move(*prev).add(*g);
                    sum_.register_(p.id(), std::move(sum));
                } else {
                    sum_.register_(p.id(), std::move(*g));
                }
            }
        });
    }
    /// The accumulated gradients; the accumulator starts again from zero.
    GradientsParams grads() { return std::exchange(sum_, GradientsParams{}); }

  private:
    GradientsParams sum_;
};

}  // namespace ember::optim
