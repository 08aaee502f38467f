#pragma once
// L2 weight decay added to the gradient (Burn's WeightDecayConfig; torch's weight_decay
// argument of SGD, Adam, RMSprop and Adagrad). AdamW's decoupled decay is a plain number of
// its own config.
#include <cmath>
#include <string_view>

#include "../module/config.hpp"
#include "../tensor/tensor.hpp"

namespace ember::optim {

/// Weight decay: the gradient becomes grad + penalty · param.
struct WeightDecayConfig {
    double penalty;  ///< the L2 coefficient (torch's weight_decay)
    EMBER_CONFIG(WeightDecayConfig, penalty)

    /// Throws ArgumentError unless the penalty is non-negative and finite.
    void check(std::string_view who) const {
        EMBER_CHECK(penalty >= 0 && std::isfinite(penalty), Argument, who,
                    ": the weight decay penalty must be non-negative and finite, got ", penalty);
    }
    /// grad + penalty · param.
    template <Backend B, std::size_t D>
    Tensor<B, D> transform(Tensor<B, D> grad, const Tensor<B, D>& param) const {
        return std::move(grad).add(param.mul_scalar(penalty));
    }
};

}  // namespace ember::optim
