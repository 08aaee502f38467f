#pragma once
// Initializer: how a layer's parameters are drawn (Burn's Initializer). Parameters are created
// lazily: init() returns a Param that draws its values on first use, so loading a record over a
// freshly built module never draws random weights.
#include <cmath>
#include <optional>
#include <string_view>

#include "../detail/fields.hpp"
#include "../module/param.hpp"

namespace ember::nn {

/// A parameter initialisation scheme. Kaiming and Xavier follow torch.nn.init: for Kaiming,
/// uniform bound gain·√(3/fan) and normal std gain/√fan (fan = fan_in, or fan_out when
/// `fan_out_only`); for Xavier, bound gain·√(6/(fan_in+fan_out)) and std gain·√(2/(fan_in+fan_out)).
struct Initializer {
    /// The scheme.
    enum class Kind : int {
        Constant,
        Ones,
        Zeros,
        Uniform,
        Normal,
        KaimingUniform,
        KaimingNormal,
        XavierUniform,
        XavierNormal
    };
    Kind kind = Kind::Zeros;    ///< which scheme
    double a = 0.0;             ///< value (Constant), min (Uniform), mean (Normal), gain (Kaiming, Xavier)
    double b = 0.0;             ///< max (Uniform), std (Normal)
    bool fan_out_only = false;  ///< Kaiming: use fan_out instead of fan_in
    EMBER_DETAIL_FIELDS(Initializer, kind, a, b, fan_out_only)

    /// Every element `value`.
    static constexpr Initializer Constant(double value) { return {Kind::Constant, value}; }
    /// Every element 1.
    static constexpr Initializer Ones() { return {Kind::Ones}; }
    /// Every element 0.
    static constexpr Initializer Zeros() { return {Kind::Zeros}; }
    /// Uniform on [min, max).
    static constexpr Initializer Uniform(double min, double max) { return {Kind::Uniform, min, max}; }
    /// Normal with mean and standard deviation.
    static constexpr Initializer Normal(double mean, double std) { return {Kind::Normal, mean, std}; }
    /// He et al., uniform.
    static constexpr Initializer KaimingUniform(double gain, bool fan_out_only = false) {
        return {Kind::KaimingUniform, gain, 0.0, fan_out_only};
    }
    /// He et al., normal.
    static constexpr Initializer KaimingNormal(double gain, bool fan_out_only = false) {
        return {Kind::KaimingNormal, gain, 0.0, fan_out_only};
    }
    /// Glorot and Bengio, uniform.
    static constexpr Initializer XavierUniform(double gain) { return {Kind::XavierUniform, gain}; }
    /// Glorot and Bengio, normal.
    static constexpr Initializer XavierNormal(double gain) { return {Kind::XavierNormal, gain}; }

    /// Equal schemes.
    friend bool operator==(const Initializer&, const Initializer&) = default;

    /// The scheme's name ("KaimingUniform").
    std::string_view name() const {
        constexpr std::string_view names[] = {"Constant",       "Ones",          "Zeros",
                                              "Uniform",        "Normal",        "KaimingUniform",
                                              "KaimingNormal",  "XavierUniform", "XavierNormal"};
        return names[int(kind)];
    }
    /// The distribution the scheme draws from for a tensor with these fans (nullopt for the
    /// constant schemes). Throws ArgumentError when a fan the scheme needs is missing or zero.
    std::optional<Distribution> distribution(std::optional<std::size_t> fan_in,
                                             std::optional<std::size_t> fan_out) const {
        auto need = [&](std::optional<std::size_t> fan, const char* which) {
            EMBER_CHECK(fan && *fan > 0, Argument, "Initializer::", name(), ": needs a non-zero ",
                        which);
            return double(*fan);
        };
        switch (kind) {
            case Kind::Uniform: return Distribution::Uniform(a, b);
            case Kind::Normal: return Distribution::Normal(a, b);
            case Kind::KaimingUniform: {
                double fan = fan_out_only ? need(fan_out, "fan_out") : need(fan_in, "fan_in");
                double bound = a * std::sqrt(3.0 / fan);
                return Distribution::Uniform(-bound, bound);
            }
            case Kind::KaimingNormal: {
                double fan = fan_out_only ? need(fan_out, "fan_out") : need(fan_in, "fan_in");
                return Distribution::Normal(0.0, a / std::sqrt(fan));
            }
            case Kind::XavierUniform: {
                double sum = need(fan_in, "fan_in") + need(fan_out, "fan_out");
                double bound = a * std::sqrt(6.0 / sum);
                return Distribution::Uniform(-bound, bound);
            }
            case Kind::XavierNormal: {
                double sum = need(fan_in, "fan_in") + need(fan_out, "fan_out");
                return Distribution::Normal(0.0, a * std::sqrt(2.0 / sum));
            }
            default: return std::nullopt;
        }
    }

    /// A lazy float parameter of `shape` drawn from this scheme on `device`.
    template <Backend B, std::size_t D>
    Param<Tensor<B, D>> init(const Shape& shape, const Device<B>& device,
                             std::optional<std::size_t> fan_in = std::nullopt,
                             std::optional<std::size_t> fan_out = std::nullopt) const;
};

// Defined out of their classes, so not inline: where an `extern template` declaration names an
// instance (include/ember/dispatch/nn.hpp for Dispatch), a file that calls it compiles the call
// only, not the body (compilers instantiate an inline function to consider inlining it, even
// one declared extern).

template <Backend B, std::size_t D>
Param<Tensor<B, D>> Initializer::init(const Shape& shape, const Device<B>& device,
                                      std::optional<std::size_t> fan_in,
                                      std::optional<std::size_t> fan_out) const {
    EMBER_CHECK(shape.rank() == D, Shape, "Initializer::init: shape ", shape.to_string(),
                " is not of rank ", D);
    auto dist = distribution(fan_in, fan_out);  // checks the fans now, not at first use
    double value = kind == Kind::Constant ? a : kind == Kind::Ones ? 1.0 : 0.0;
    auto make = [shape, dist, value](const Device<B>& dev) {
        if (dist) return Tensor<B, D>::random(shape, *dist, dev);
        return Tensor<B, D>::full(shape, value, dev);
    };
    return Param<Tensor<B, D>>::uninitialized(ParamId::make(), make, device, shape);
}

}  // namespace ember::nn
