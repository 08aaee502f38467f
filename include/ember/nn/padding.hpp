#pragma once
// Padding of convolution and pooling layers (Burn's PaddingConfig1d/2d/3d): Valid (none),
// Same (the output keeps the input's spatial size) or Explicit (given zero padding per side).
#include <array>
#include <concepts>
#include <cstddef>
#if !EMBER_FREESTANDING
#include <ostream>
#endif
#include <string>
#include <string_view>

#include "../detail/fields.hpp"
#include "../tensor/error.hpp"

namespace ember::nn {

namespace detail::conv {
/// "[a, b, c]", as Burn prints sizes (for messages and display).
template <std::size_t N>
std::string array_str(const std::array<std::size_t, N>& a) {
    std::string s = "[";
    for (std::size_t i = 0; i < N; ++i) s += (i ? ", " : "") + std::to_string(a[i]);
    return s + "]";
}
}  // namespace detail::conv

/// How much zero padding an N-d convolution or pooling layer adds on each side of each spatial
/// dim. Use the aliases PaddingConfig1d, PaddingConfig2d and PaddingConfig3d.
///
/// Same is symmetric, so (as in Burn) it needs odd kernel sizes; as in PyTorch's
/// `padding="same"` it also needs stride 1. Layers check both when built. Its padding is
/// dilation·(kernel−1)/2 per side, PyTorch's value (Burn's formula ignores dilation, so a dilated
/// Burn layer with Same padding shrinks its input; ember's keeps the size).
template <std::size_t N>
struct PaddingConfig {
    /// The scheme.
    enum class Kind : int { Valid, Same, Explicit };
    Kind kind = Kind::Valid;              ///< which scheme
    std::array<std::size_t, N> values{};  ///< per-side padding of each spatial dim (Explicit)
    EMBER_DETAIL_FIELDS(PaddingConfig, kind, values)

    /// No padding: the kernel only visits positions inside the input.
    static constexpr PaddingConfig Valid() { return {}; }
    /// Padding that keeps the spatial size (odd kernels, stride 1).
    static constexpr PaddingConfig Same() { return {Kind::Same, {}}; }
    /// The given padding per side, one value per spatial dim (`Explicit(1, 2)` in 2-d).
    template <std::convertible_to<std::size_t>... P>
    requires(sizeof...(P) == N) static constexpr PaddingConfig Explicit(P... padding) {
        return {Kind::Explicit, {static_cast<std::size_t>(padding)...}};
    }

    /// Equal configurations.
    friend bool operator==(const PaddingConfig&, const PaddingConfig&) = default;

    /// "Valid", "Same" or "Explicit(1, 2)", as Burn displays it.
    std::string to_string() const {
        if (kind == Kind::Valid) return "Valid";
        if (kind == Kind::Same) return "Same";
        std::string s = detail::conv::array_str(values);
        return "Explicit(" + s.substr(1, s.size() - 2) + ")";
    }
#if !EMBER_FREESTANDING
    /// Writes to_string().
    friend std::ostream& operator<<(std::ostream& os, const PaddingConfig& p) {
        return os << p.to_string();
    }
#endif

    /// Throws ArgumentError (naming `layer`) when Same is asked of an even kernel or a stride
    /// other than 1. Layers call it from their config's init().
    void check(std::string_view layer, const std::array<std::size_t, N>& kernel_size,
               const std::array<std::size_t, N>& stride) const {
        if (kind != Kind::Same) return;
        for (std::size_t d = 0; d < N; ++d) {
            EMBER_CHECK(kernel_size[d] % 2 == 1, Argument, layer,
                        ": Same padding with an even kernel size is not supported (kernel_size ",
                        detail::conv::array_str(kernel_size), "); use Explicit padding");
            EMBER_CHECK(stride[d] == 1, Argument, layer,
                        ": Same padding needs stride 1, got stride ",
                        detail::conv::array_str(stride));
        }
    }
    /// The per-side padding for this kernel (Same: dilation·(kernel−1)/2 in each dim).
    std::array<std::size_t, N> resolve(const std::array<std::size_t, N>& kernel_size,
                                       const std::array<std::size_t, N>& dilation) const {
        if (kind == Kind::Explicit) return values;
        std::array<std::size_t, N> p{};
        if (kind == Kind::Same)
            for (std::size_t d = 0; d < N; ++d) p[d] = dilation[d] * (kernel_size[d] - 1) / 2;
        return p;
    }
};

/// Padding of 1-d layers: Valid, Same or Explicit(p).
using PaddingConfig1d = PaddingConfig<1>;
/// Padding of 2-d layers: Valid, Same or Explicit(h, w).
using PaddingConfig2d = PaddingConfig<2>;
/// Padding of 3-d layers: Valid, Same or Explicit(d, h, w).
using PaddingConfig3d = PaddingConfig<3>;

}  // namespace ember::nn
