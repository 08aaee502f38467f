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
            if constexpr (T::is_float)
                add<InnerBackend<typename T::Backend>, T::rank>(p.id(), path, grads);
        });
    }
    /// The accumulated gradients; the accumulator starts again from zero.
    GradientsParams grads() { return std::exchange(sum_, GradientsParams{}); }

    /// Adds the gradient of parameter `id` (at `path`, for messages), a float tensor of rank D
    /// on B, from `grads` to the sum: what accumulate does for each parameter, whatever the
    /// module (defined out of the class: ember_dispatch compiles the Dispatch instances once).
    template <Backend B, std::size_t D>
    void add(ParamId id, std::string_view path, GradientsParams& grads);

  private:
    GradientsParams sum_;
};

template <Backend B, std::size_t D>
void GradientsAccumulator::add(ParamId id, std::string_view path, GradientsParams& grads) {
    auto g = grads.template remove<B, D>(id);
    if (!g) return;
    if (auto prev = sum_.template remove<B, D>(id)) {
        EMBER_CHECK(prev->shape() == g->shape(), Shape,
                    "GradientsAccumulator::accumulate: the gradient of '", path, "' has shape ",
                    g->shape().to_string(), " but the sum has ", prev->shape().to_string());
        sum_.register_(id, std::move(*prev).add(*g));
    } else {
        sum_.register_(id, std::move(*g));
    }
}

}  // namespace ember::optim
