#pragma once
// Small layers of Burn's nn that wrap one op: Identity, PixelShuffle, PixelUnshuffle, Unfold4d,
// Fold4d, CosineSimilarity, PairwiseDistance, GaussianNoise and LocalResponseNorm. Each runs on
// every backend (their ops are compositions of tensor ops, see tensor/module_ops_composed.hpp).
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../module/config.hpp"
#include "../module/module.hpp"
#include "../tensor/linalg.hpp"
#include "../tensor/module_ops_composed.hpp"

namespace ember::nn {

/// Passes its input through unchanged (Burn's and PyTorch's Identity): it stands where a
/// model's structure wants a layer.
struct Identity {
    EMBER_MODULE(Identity)
    /// The input itself.
    template <Backend B, std::size_t D, typename K>
    Tensor<B, D, K> forward(Tensor<B, D, K> input) const {
        return input;
    }
};

// ---- PixelShuffle / PixelUnshuffle -------------------------------------------------------------

/// [..., C·r², H, W] → [..., C, H·r, W·r] (torch.nn.PixelShuffle).
struct PixelShuffle {
    std::size_t upscale_factor = 1;  ///< r
    EMBER_MODULE(PixelShuffle, upscale_factor)
    /// module::pixel_shuffle(input, upscale_factor).
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(const Tensor<B, D>& input) const {
        return module::pixel_shuffle(input, upscale_factor);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("upscale_factor", upscale_factor);
    }
};

/// Configuration of PixelShuffle.
struct PixelShuffleConfig {
    std::size_t upscale_factor;  ///< r (>= 1)
    EMBER_CONFIG(PixelShuffleConfig, upscale_factor)
    /// Builds the layer; throws ArgumentError for a factor of 0.
    PixelShuffle init() const {
        EMBER_CHECK(upscale_factor >= 1, Argument,
                    "PixelShuffleConfig::init: upscale_factor must be >= 1, got ", upscale_factor);
        return {upscale_factor};
    }
};

/// [..., C, H·r, W·r] → [..., C·r², H, W] (torch.nn.PixelUnshuffle).
struct PixelUnshuffle {
    std::size_t downscale_factor = 1;  ///< r
    EMBER_MODULE(PixelUnshuffle, downscale_factor)
    /// module::pixel_unshuffle(input, downscale_factor).
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(const Tensor<B, D>& input) const {
        return module::pixel_unshuffle(input, downscale_factor);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("downscale_factor", downscale_factor);
    }
};

/// Configuration of PixelUnshuffle.
struct PixelUnshuffleConfig {
    std::size_t downscale_factor;  ///< r (>= 1)
    EMBER_CONFIG(PixelUnshuffleConfig, downscale_factor)
    /// Builds the layer; throws ArgumentError for a factor of 0.
    PixelUnshuffle init() const {
        EMBER_CHECK(downscale_factor >= 1, Argument,
                    "PixelUnshuffleConfig::init: downscale_factor must be >= 1, got ",
                    downscale_factor);
        return {downscale_factor};
    }
};

// ---- Unfold4d / Fold4d -------------------------------------------------------------------------

namespace detail::unfold {
inline void check(const char* who, const std::array<std::size_t, 2>& kernel,
                  const std::array<std::size_t, 2>& stride,
                  const std::array<std::size_t, 2>& dilation) {
    for (std::size_t d = 0; d < 2; ++d)
        EMBER_CHECK(kernel[d] >= 1 && stride[d] >= 1 && dilation[d] >= 1, Argument, who,
                    ": kernel_size, stride and dilation must be >= 1, got kernel_size (", kernel[0],
                    ", ", kernel[1], "), stride (", stride[0], ", ", stride[1], "), dilation (",
                    dilation[0], ", ", dilation[1], ")");
}
}  // namespace detail::unfold

/// Extracts sliding blocks: [N, C, H, W] → [N, C·kh·kw, L] (Burn's Unfold4d; torch.nn.Unfold).
struct Unfold4d {
    std::array<std::size_t, 2> kernel_size{1, 1};  ///< block size
    std::array<std::size_t, 2> stride{1, 1};       ///< step between blocks
    std::array<std::size_t, 2> padding{0, 0};      ///< zero padding on both sides
    std::array<std::size_t, 2> dilation{1, 1};     ///< spacing of a block's taps
    EMBER_MODULE(Unfold4d, kernel_size, stride, padding, dilation)
    /// module::unfold4d(input, kernel_size, {stride, padding, dilation}).
    template <Backend B>
    Tensor<B, 3> forward(const Tensor<B, 4>& input) const {
        return module::unfold4d(input, kernel_size, UnfoldOptions{stride, padding, dilation});
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("kernel_size", kernel_size)
            .add("stride", stride)
            .add("padding", padding)
            .add("dilation", dilation);
    }
};

/// Configuration of Unfold4d.
struct Unfold4dConfig {
    std::array<std::size_t, 2> kernel_size;     ///< block size
    std::array<std::size_t, 2> stride{1, 1};    ///< step between blocks
    std::array<std::size_t, 2> padding{0, 0};   ///< zero padding on both sides
    std::array<std::size_t, 2> dilation{1, 1};  ///< spacing of a block's taps
    EMBER_CONFIG(Unfold4dConfig, kernel_size, stride, padding, dilation)
    /// Builds the layer; throws ArgumentError for sizes below 1.
    Unfold4d init() const {
        detail::unfold::check("Unfold4dConfig::init", kernel_size, stride, dilation);
        return {kernel_size, stride, padding, dilation};
    }
};

/// Sums sliding blocks back into an image: [N, C·kh·kw, L] → [N, C, H, W] (torch.nn.Fold; the
/// adjoint of Unfold4d).
struct Fold4d {
    std::array<std::size_t, 2> output_size{1, 1};  ///< [H, W] of the output
    std::array<std::size_t, 2> kernel_size{1, 1};  ///< block size
    std::array<std::size_t, 2> stride{1, 1};       ///< step between blocks
    std::array<std::size_t, 2> padding{0, 0};      ///< zero padding on both sides
    std::array<std::size_t, 2> dilation{1, 1};     ///< spacing of a block's taps
    EMBER_MODULE(Fold4d, output_size, kernel_size, stride, padding, dilation)
    /// module::fold4d(input, output_size, kernel_size, {stride, padding, dilation}).
    template <Backend B>
    Tensor<B, 4> forward(const Tensor<B, 3>& input) const {
        return module::fold4d(input, output_size, kernel_size,
                              UnfoldOptions{stride, padding, dilation});
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("output_size", output_size)
            .add("kernel_size", kernel_size)
            .add("stride", stride)
            .add("padding", padding)
            .add("dilation", dilation);
    }
};

/// Configuration of Fold4d.
struct Fold4dConfig {
    std::array<std::size_t, 2> output_size;     ///< [H, W] of the output
    std::array<std::size_t, 2> kernel_size;     ///< block size
    std::array<std::size_t, 2> stride{1, 1};    ///< step between blocks
    std::array<std::size_t, 2> padding{0, 0};   ///< zero padding on both sides
    std::array<std::size_t, 2> dilation{1, 1};  ///< spacing of a block's taps
    EMBER_CONFIG(Fold4dConfig, output_size, kernel_size, stride, padding, dilation)
    /// Builds the layer; throws ArgumentError for sizes below 1.
    Fold4d init() const {
        detail::unfold::check("Fold4dConfig::init", kernel_size, stride, dilation);
        EMBER_CHECK(output_size[0] >= 1 && output_size[1] >= 1, Argument,
                    "Fold4dConfig::init: output_size must be positive, got (", output_size[0], ", ",
                    output_size[1], ")");
        return {output_size, kernel_size, stride, padding, dilation};
    }
};

// ---- CosineSimilarity / PairwiseDistance -------------------------------------------------------

/// Cosine similarity of two tensors along `dim`, which the output drops
/// (torch.nn.CosineSimilarity): Σ x1·x2 / max(‖x1‖·‖x2‖, eps). The inputs broadcast.
struct CosineSimilarity {
    long dim = 1;       ///< the dim reduced (negative counts from the end)
    double eps = 1e-8;  ///< lower bound of the norms' product
    EMBER_MODULE(CosineSimilarity, dim, eps)
    /// [..., n, ...] twice → [..., ...] (rank D - 1).
    template <Backend B, std::size_t D>
    Tensor<B, D - 1> forward(const Tensor<B, D>& x1, const Tensor<B, D>& x2) const {
        static_assert(D >= 2, "CosineSimilarity: the inputs need rank >= 2");
        const long d = static_cast<long>(normalize_dim(dim, D, "CosineSimilarity"));
        return linalg::cosine_similarity(x1, x2, d, eps).template squeeze<D - 1>(d);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("dim", dim).add("eps", eps); }
};

/// Configuration of CosineSimilarity.
struct CosineSimilarityConfig {
    long dim = 1;       ///< the dim reduced (PyTorch's default)
    double eps = 1e-8;  ///< lower bound of the norms' product (> 0)
    EMBER_CONFIG(CosineSimilarityConfig, dim, eps)
    /// Builds the layer; throws ArgumentError unless eps > 0.
    CosineSimilarity init() const {
        EMBER_CHECK(eps > 0.0, Argument, "CosineSimilarityConfig::init: eps must be positive, got ",
                    eps);
        return {dim, eps};
    }
};

/// The p-norm distance of two tensors' last-dim vectors (torch.nn.PairwiseDistance):
/// ‖x1 - x2 + eps‖_p over the last dim, kept with size 1 when keepdim. p may be infinite
/// (the largest |difference|).
struct PairwiseDistance {
    double p = 2.0;        ///< the norm's degree (> 0, or infinity)
    double eps = 1e-6;     ///< added to the differences (keeps the norm differentiable at 0)
    bool keepdim = false;  ///< keep the reduced dim (as size 1)
    EMBER_MODULE(PairwiseDistance, p, eps, keepdim)
    /// [..., n] twice (broadcasting) → [...] (or [..., 1] with keepdim; the output rank is
    /// D - 1 unless keepdim, so call forward_keepdim then).
    template <Backend B, std::size_t D>
    Tensor<B, D - 1> forward(const Tensor<B, D>& x1, const Tensor<B, D>& x2) const {
        static_assert(D >= 2,
                      "PairwiseDistance::forward: the inputs need rank >= 2 (rank 1 "
                      "has no dim left to return; use forward_keepdim)");
        EMBER_CHECK(!keepdim, Argument,
                    "PairwiseDistance::forward: keepdim is set; call forward_keepdim");
        return forward_keepdim(x1, x2).template squeeze<D - 1>(-1);
    }
    /// The distances with the last dim kept as size 1: [..., n] twice → [..., 1].
    template <Backend B, std::size_t D>
    Tensor<B, D> forward_keepdim(const Tensor<B, D>& x1, const Tensor<B, D>& x2) const {
        (void)broadcast_shapes(x1.shape(), x2.shape(), "PairwiseDistance");
        auto diff = (x1 - x2 + eps).abs();
        if (std::isinf(p)) return diff.max_dim(-1);
        if (p == 1.0) return diff.sum_dim(-1);
        return diff.powf_scalar(p).sum_dim(-1).powf_scalar(1.0 / p);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("p", p).add("eps", eps).add("keepdim", keepdim);
    }
};

/// Configuration of PairwiseDistance.
struct PairwiseDistanceConfig {
    double p = 2.0;        ///< the norm's degree (> 0, or infinity)
    double eps = 1e-6;     ///< added to the differences
    bool keepdim = false;  ///< keep the reduced dim
    EMBER_CONFIG(PairwiseDistanceConfig, p, eps, keepdim)
    /// Builds the layer; throws ArgumentError unless p > 0.
    PairwiseDistance init() const {
        EMBER_CHECK(p > 0.0, Argument, "PairwiseDistanceConfig::init: p must be positive, got ", p);
        return {p, eps, keepdim};
    }
};

// ---- GaussianNoise -----------------------------------------------------------------------------

/// Adds zero-mean Gaussian noise of standard deviation `std` while training (Burn's
/// GaussianNoise): as Dropout, only on autodiff backends with gradients on; on any other
/// backend (a `valid()` model: inference) it is the identity. The gradient passes through.
struct GaussianNoise {
    double std = 0.1;  ///< standard deviation of the noise
    EMBER_MODULE(GaussianNoise, std)
    /// input + N(0, std²) noise (training) or the input (inference).
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        if constexpr (!AutodiffBackend<B>) {
            return input;
        } else {
            if (std == 0.0 || !ad_enabled<B>(input.device())) return input;
            return input + Tensor<B, D>::random(input.shape(), Distribution::Normal(0.0, std),
                                                input.device());
        }
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("std", std); }
};

/// Configuration of GaussianNoise.
struct GaussianNoiseConfig {
    double std;  ///< standard deviation of the noise (>= 0)
    EMBER_CONFIG(GaussianNoiseConfig, std)
    /// Builds the layer; throws ArgumentError for a negative or non-finite std.
    GaussianNoise init() const {
        EMBER_CHECK(std >= 0.0 && std::isfinite(std), Argument,
                    "GaussianNoiseConfig::init: std must be finite and >= 0, got ", std);
        return {std};
    }
};

// ---- LocalResponseNorm -------------------------------------------------------------------------

/// Local response normalisation across channels (torch.nn.LocalResponseNorm):
/// b_c = a_c / (k + alpha/size · Σ a_{c'}²)^beta over the `size` channels c' from
/// c - ⌊size/2⌋ to c + ⌊(size-1)/2⌋ (missing ones count as zero). Input [N, C, ...].
struct LocalResponseNorm {
    std::size_t size = 1;  ///< channels in the window
    double alpha = 1e-4;   ///< scale of the window's mean square
    double beta = 0.75;    ///< exponent
    double k = 1.0;        ///< additive constant
    EMBER_MODULE(LocalResponseNorm, size, alpha, beta, k)
    /// [N, C, ...] → the same shape (rank 3 or more, as PyTorch).
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(const Tensor<B, D>& input) const {
        static_assert(D >= 3, "LocalResponseNorm: the input needs [N, C, d1, ...]");
        const Shape s = input.shape();
        const std::size_t before = size / 2, after = (size - 1) / 2, c = s[1];
        auto sq = input * input;
        // Zero channels either side, then the window sum as `size` shifted views.
        std::vector<Tensor<B, D>> parts;
        auto zeros = [&](std::size_t n) {
            Shape z = s;
            z[1] = n;
            return Tensor<B, D>::zeros(z, input.device());
        };
        if (before) parts.push_back(zeros(before));
        parts.push_back(sq);
        if (after) parts.push_back(zeros(after));
        auto padded = parts.size() == 1 ? sq : Tensor<B, D>::cat(parts, 1);
        Tensor<B, D> sum = padded.narrow(1, 0, c);
        for (std::size_t j = 1; j < size; ++j) sum = sum + padded.narrow(1, j, c);
        return input / (sum * (alpha / static_cast<double>(size)) + k).powf_scalar(beta);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("size", size).add("alpha", alpha).add("beta", beta).add("k", k);
    }
};

/// Configuration of LocalResponseNorm.
struct LocalResponseNormConfig {
    std::size_t size;     ///< channels in the window (>= 1)
    double alpha = 1e-4;  ///< scale of the window's mean square
    double beta = 0.75;   ///< exponent
    double k = 1.0;       ///< additive constant
    EMBER_CONFIG(LocalResponseNormConfig, size, alpha, beta, k)
    /// Builds the layer; throws ArgumentError for a size of 0.
    LocalResponseNorm init() const {
        EMBER_CHECK(size >= 1 && size <= kMaxElements, Argument,
                    "LocalResponseNormConfig::init: size must be >= 1, got ", size);
        return {size, alpha, beta, k};
    }
};

}  // namespace ember::nn
