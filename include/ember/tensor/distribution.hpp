#pragma once
// Distribution: what random tensors are drawn from. Backends seed their generator with
// B::seed(u64) so that draws are reproducible.
#include <cstdint>
#include <string>

#include "../export.hpp"

namespace ember {

/// A probability distribution for `Tensor::random`.
struct EMBER_API Distribution {
    /// The family.
    enum class Kind : std::uint8_t { Default, Uniform, Normal, Bernoulli };
    Kind kind = Kind::Default;  ///< which family
    double a = 0.0;             ///< low (Uniform), mean (Normal), p (Bernoulli)
    double b = 1.0;             ///< high (Uniform), std (Normal)

    /// Uniform on [0, 1).
    static const Distribution Default;
    /// Uniform on [low, high).
    static constexpr Distribution Uniform(double low, double high) {
        return {Kind::Uniform, low, high};
    }
    /// Normal with the given mean and standard deviation.
    static constexpr Distribution Normal(double mean, double std) {
        return {Kind::Normal, mean, std};
    }
    /// 1 with probability p, else 0.
    static constexpr Distribution Bernoulli(double p) { return {Kind::Bernoulli, p, 0.0}; }
};
inline constexpr Distribution Distribution::Default{Distribution::Kind::Default, 0.0, 1.0};

}  // namespace ember
