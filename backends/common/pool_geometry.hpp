#pragma once
// Pooling and interpolation geometry shared by every backend (the CPU's forward and backward
// kernels, Vulkan's, CUDA's): the pooling parameters, output sizes, window bounds and divisors,
// and interpolation taps, all as PyTorch computes them, so that the backends agree with
// PyTorch and with each other.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ember/tensor/detail/checked.hpp"
#include "ember/tensor/dtype.hpp"
#include "ember/tensor/error.hpp"
#include "ember/tensor/ops.hpp"
#include "ember/tensor/shape.hpp"

namespace ember::detail::pool {

using i64 = std::int64_t;

/// A pooling problem in dynamic-rank form: `n` spatial dims (1, 2 or 3).
struct PoolParams {
    std::size_t n = 2;
    std::array<std::size_t, 3> kernel{1, 1, 1}, stride{1, 1, 1}, padding{0, 0, 0},
        dilation{1, 1, 1};
    bool ceil_mode = false;
    bool count_include_pad = true;
};

/// PoolOptions<N> → PoolParams.
template <std::size_t N>
PoolParams pool_params(const PoolOptions<N>& o) {
    PoolParams p;
    p.n = N;
    for (std::size_t i = 0; i < N; ++i) {
        p.kernel[i] = o.kernel_size[i];
        p.stride[i] = o.stride[i];
        p.padding[i] = o.padding[i];
        p.dilation[i] = o.dilation[i];
    }
    p.ceil_mode = o.ceil_mode;
    p.count_include_pad = o.count_include_pad;
    return p;
}

/// Spatial sizes in 3-d form (leading unit dims for 1-d and 2-d problems).
struct Dims3 {
    std::array<i64, 3> in{1, 1, 1}, out{1, 1, 1};
    i64 in_size() const { return in[0] * in[1] * in[2]; }
    i64 out_size() const { return out[0] * out[1] * out[2]; }
};

/// PyTorch's div_rtn: division rounding toward negative infinity.
inline i64 div_floor(i64 a, i64 b) {
    i64 q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
}

/// PyTorch's pooling_output_shape. pool_geometry has bounded the operands (each at most
/// kMaxElements, the padding at most half the window), so nothing here overflows.
inline i64 pool_out_size(i64 in, i64 k, i64 pad, i64 stride, i64 dil, bool ceil_mode) {
    i64 out =
        div_floor(in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0), stride) + 1;
    // The last window must start inside the input or the left padding.
    if (ceil_mode && (out - 1) * stride >= in + pad) --out;
    return out;
}

/// Validates a pooling problem and returns its sizes and output shape.
/// `suffix` follows the op name in messages ("avg_pool2d" + "_backward").
template <typename T>
Dims3 pool_geometry(const char* base, const T& x, const PoolParams& p, bool max_pool,
                    Shape& out_shape, const char* suffix = "") {
    EMBER_CHECK(p.n >= 1 && p.n <= 3, Argument, base,
                ": 1, 2 or 3 spatial dims are supported, got ", p.n, " (input ", x.shape, ")");
    const std::string op = std::string(base) + std::to_string(p.n) + "d" + suffix;
    EMBER_CHECK(x.shape.rank() == p.n + 2, Shape, op, ": input must have rank ", p.n + 2,
                " [N, C, spatial...], got ", x.shape);
    EMBER_CHECK(is_float(x.dtype), DType, op, ": needs a float input, got ", dtype_name(x.dtype),
                " ", x.shape);
    Dims3 g;
    out_shape = Shape{x.shape[0], x.shape[1]};
    for (std::size_t d = 0; d < p.n; ++d) {
        const std::size_t s = 3 - p.n + d;
        EMBER_CHECK(p.kernel[d] >= 1 && p.stride[d] >= 1 && p.dilation[d] >= 1, Argument, op,
                    ": kernel, stride and dilation must be >= 1 (input ", x.shape, ")");
        // Bounded like a dim, so that the signed 64-bit arithmetic of the output size cannot
        // wrap (a padding of SIZE_MAX would turn into -1 and pass the check below).
        EMBER_CHECK(p.kernel[d] <= kMaxElements && p.stride[d] <= kMaxElements &&
                        p.padding[d] <= kMaxElements && p.dilation[d] <= kMaxElements,
                    Argument, op, ": kernel ", p.kernel[d], ", stride ", p.stride[d], ", padding ",
                    p.padding[d], " and dilation ", p.dilation[d], " must be at most ",
                    kMaxElements, " (input ", x.shape, ")");
        const std::size_t eff =
            checked_add(checked_mul(p.kernel[d] - 1, max_pool ? p.dilation[d] : 1, op.c_str(),
                                    "window extent (kernel - 1) * dilation"),
                        1, op.c_str(), "window extent");
        EMBER_CHECK(p.padding[d] <= eff / 2, Argument, op, ": padding ", p.padding[d],
                    " must be at most half of the kernel size ", p.kernel[d], " (input ", x.shape,
                    ")");
        g.in[s] = static_cast<i64>(x.shape[2 + d]);
        g.out[s] = pool_out_size(g.in[s], static_cast<i64>(p.kernel[d]),
                                 static_cast<i64>(p.padding[d]), static_cast<i64>(p.stride[d]),
                                 max_pool ? static_cast<i64>(p.dilation[d]) : 1, p.ceil_mode);
        EMBER_CHECK(g.out[s] >= 1, Shape, op, ": kernel ", p.kernel[d], " (padding ", p.padding[d],
                    ") is larger than the input ", x.shape, " in spatial dim ", d);
        out_shape.push_back(static_cast<std::size_t>(g.out[s]));
    }
    return g;
}

/// The pooling parameters in 3-d form.
struct Window3 {
    std::array<i64, 3> k{1, 1, 1}, s{1, 1, 1}, pad{0, 0, 0}, dil{1, 1, 1};
};
inline Window3 window3(const PoolParams& p) {
    Window3 w;
    for (std::size_t d = 0; d < p.n; ++d) {
        const std::size_t s = 3 - p.n + d;
        w.k[s] = static_cast<i64>(p.kernel[d]);
        w.s[s] = static_cast<i64>(p.stride[d]);
        w.pad[s] = static_cast<i64>(p.padding[d]);
        w.dil[s] = static_cast<i64>(p.dilation[d]);
    }
    return w;
}

/// The windows of one axis, per output index: the clipped input range [lo, hi) and the
/// divisor factor (the window's extent over input and padding, or over input only).
struct AxisWindows {
    std::vector<i64> lo, hi, count;
};

/// Average pooling windows along one axis, as PyTorch's avg_pool kernels clip them.
inline AxisWindows avg_windows(i64 in, i64 out, i64 k, i64 s, i64 pad, bool count_include_pad) {
    AxisWindows w;
    for (i64 o = 0; o < out; ++o) {
        const i64 start = o * s - pad;
        const i64 end = std::min(start + k, in + pad);
        const i64 lo = std::max<i64>(start, 0), hi = std::min(end, in);
        w.lo.push_back(lo);
        w.hi.push_back(hi);
        w.count.push_back(count_include_pad ? end - start : hi - lo);
    }
    return w;
}

/// PyTorch's adaptive pooling window [start, end) of output cell i.
inline i64 adaptive_start(i64 i, i64 out, i64 in) {
    return (i / out) * in + ((i % out) * in) / out;
}
inline i64 adaptive_end(i64 i, i64 out, i64 in) {
    return 1 + ((i + 1) * in - 1) / out;
}

/// PyTorch's nearest_idx (legacy 'nearest'), computed in float as PyTorch does.
inline i64 nearest_index(i64 dst, i64 in, i64 out) {
    if (out == in) return dst;
    if (out == 2 * in) return dst >> 1;
    const float scale = static_cast<float>(in) / static_cast<float>(out);
    return std::min(static_cast<i64>(std::floor(static_cast<float>(dst) * scale)), in - 1);
}

/// PyTorch's area_pixel_compute_scale.
template <typename T>
T pixel_scale(i64 in, i64 out, bool align_corners) {
    if (align_corners) return out > 1 ? T(in - 1) / T(out - 1) : T(0);
    return T(in) / T(out);
}

/// PyTorch's area_pixel_compute_source_index.
template <typename T>
T source_index(T scale, i64 dst, bool align_corners, bool cubic) {
    if (align_corners) return scale * T(dst);
    const T src = scale * (T(dst) + T(0.5)) - T(0.5);
    return (!cubic && src < T(0)) ? T(0) : src;
}

/// Per output position along one axis, `Taps` source indices and their weights.
template <typename T, int Taps>
struct AxisWeights {
    std::vector<i64> idx;  ///< [output position * Taps + tap]
    std::vector<T> wt;     ///< same layout as idx
};

template <typename T>
AxisWeights<T, 2> linear_weights(i64 in, i64 out, bool align_corners) {
    AxisWeights<T, 2> a;
    a.idx.resize(std::size_t(2 * out));
    a.wt.resize(std::size_t(2 * out));
    const T scale = pixel_scale<T>(in, out, align_corners);
    for (i64 o = 0; o < out; ++o) {
        i64 i0 = o, i1 = o;
        T l1 = T(0);
        if (in != out) {
            const T real = source_index<T>(scale, o, align_corners, false);
            i0 = static_cast<i64>(real);
            i1 = i0 + (i0 < in - 1 ? 1 : 0);
            l1 = std::clamp(real - T(i0), T(0), T(1));
        }
        a.idx[std::size_t(2 * o)] = i0;
        a.idx[std::size_t(2 * o + 1)] = i1;
        a.wt[std::size_t(2 * o)] = T(1) - l1;
        a.wt[std::size_t(2 * o + 1)] = l1;
    }
    return a;
}

template <typename T>
AxisWeights<T, 4> cubic_weights(i64 in, i64 out, bool align_corners) {
    AxisWeights<T, 4> a;
    a.idx.resize(std::size_t(4 * out));
    a.wt.resize(std::size_t(4 * out));
    const T scale = pixel_scale<T>(in, out, align_corners);
    constexpr T A = T(-0.75);
    auto conv1 = [](T x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
    auto conv2 = [](T x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
    for (i64 o = 0; o < out; ++o) {
        const T real = source_index<T>(scale, o, align_corners, true);
        const i64 i = std::min(static_cast<i64>(std::floor(real)), in - 1);
        const T t = std::clamp(real - T(i), T(0), T(1));
        const T w[4] = {conv2(t + 1), conv1(t), conv1(1 - t), conv2(2 - t)};
        for (int j = 0; j < 4; ++j) {
            // Taps past the border read the border sample.
            a.idx[std::size_t(4 * o + j)] = std::clamp<i64>(i - 1 + j, 0, in - 1);
            a.wt[std::size_t(4 * o + j)] = w[j];
        }
    }
    return a;
}

}  // namespace ember::detail::pool
