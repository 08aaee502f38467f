#pragma once
// Module-op options read back from a fixture case's params (written by gen_module_ops.py and
// gen_autodiff_modules.py with the same keys), and one name for the 1/2/3-d op variants.
#include <array>
#include <string>

#include "harness.hpp"

namespace ember::test {

/// A non-negative integer param.
inline std::size_t uparam(const Fixture& f, const std::string& key) {
    return static_cast<std::size_t>(f.param(key));
}
/// A boolean param (stored as 0/1).
inline bool bparam(const Fixture& f, const std::string& key) { return f.param(key) != 0.0; }

/// The params key0 .. key{N-1} as an array.
template <std::size_t N>
std::array<std::size_t, N> param_array(const Fixture& f, const std::string& key) {
    std::array<std::size_t, N> a{};
    for (std::size_t i = 0; i < N; ++i) a[i] = uparam(f, key + std::to_string(i));
    return a;
}

/// stride*, pad*, dil*, groups.
template <std::size_t N>
ConvOptions<N> conv_options(const Fixture& f) {
    ConvOptions<N> o;
    o.stride = param_array<N>(f, "stride");
    o.padding = param_array<N>(f, "pad");
    o.dilation = param_array<N>(f, "dil");
    o.groups = uparam(f, "groups");
    return o;
}

/// stride*, pad*, opad*, dil*, groups.
template <std::size_t N>
ConvTransposeOptions<N> conv_transpose_options(const Fixture& f) {
    ConvTransposeOptions<N> o;
    o.stride = param_array<N>(f, "stride");
    o.padding = param_array<N>(f, "pad");
    o.padding_out = param_array<N>(f, "opad");
    o.dilation = param_array<N>(f, "dil");
    o.groups = uparam(f, "groups");
    return o;
}

/// stride*, pad*, dil*, weight_groups, offset_groups.
inline DeformConvOptions deform_options(const Fixture& f) {
    DeformConvOptions o;
    o.stride = param_array<2>(f, "stride");
    o.padding = param_array<2>(f, "pad");
    o.dilation = param_array<2>(f, "dil");
    o.weight_groups = uparam(f, "weight_groups");
    o.offset_groups = uparam(f, "offset_groups");
    return o;
}

/// mode (0 nearest, 1 bilinear, 2 bicubic), align_corners.
inline InterpolateOptions interpolate_options(const Fixture& f) {
    const int mode = static_cast<int>(f.param("mode"));
    return {mode == 0   ? InterpolateMode::Nearest
            : mode == 1 ? InterpolateMode::Bilinear
                        : InterpolateMode::Bicubic,
            bparam(f, "align_corners")};
}

/// module::conv{N}d.
template <std::size_t N, typename X, typename W, typename Bias>
auto conv_nd(const X& x, const W& w, const Bias& b, const ConvOptions<N>& o) {
    if constexpr (N == 1) return module::conv1d(x, w, b, o);
    else if constexpr (N == 2) return module::conv2d(x, w, b, o);
    else return module::conv3d(x, w, b, o);
}

/// module::conv_transpose{N}d.
template <std::size_t N, typename X, typename W, typename Bias>
auto conv_transpose_nd(const X& x, const W& w, const Bias& b, const ConvTransposeOptions<N>& o) {
    if constexpr (N == 1) return module::conv_transpose1d(x, w, b, o);
    else if constexpr (N == 2) return module::conv_transpose2d(x, w, b, o);
    else return module::conv_transpose3d(x, w, b, o);
}

}  // namespace ember::test
