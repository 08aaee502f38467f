// CpuBackend's quantized Linear: activations quantized to u8 in one pass, the int8 GEMM on
// weights packed once (kept in the primitive's slot), zero points and scales applied after the
// integer sums. The arithmetic is PyTorch's: x · (1/scale) rounded half to even, parameters from
// the batch's min and max as MinMaxObserver computes them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ember/backend/cpu.hpp"
#include "kernels.hpp"
#include "qgemm.hpp"

namespace ember {
namespace k = detail::cpu;

namespace {

using QT = quant::QTensorPrimitive<k::CpuTensor, k::CpuTensor>;

// The packed form of weights [K, N], built on first use and shared by copies of `w`.
const k::PackedQWeights& packed(const QT& w) {
    ember::detail::call_once(w.packed->once, [&] {
        const TensorData values = k::to_data(w.values);
        const Shape s = w.values.shape;
        const auto scales = k::to_data(w.scale).to_vec<float>();
        std::vector<std::int32_t> zeros;
        if (w.offset)
            for (auto z : k::to_data(*w.offset).to_vec<std::int64_t>())
                zeros.push_back(static_cast<std::int32_t>(z));
        w.packed->data =
            k::pack_qweights(values.as_slice<std::int8_t>().data(), s[0], s[1], scales, zeros);
    });
    return *static_cast<const k::PackedQWeights*>(w.packed->data.get());
}

// The packed form of convolution weights [O, C, KH, KW] as a GEMM operand [C·KH·KW, O].
const k::PackedQWeights& packed_conv(const QT& w) {
    ember::detail::call_once(w.packed->once, [&] {
        const TensorData values = k::to_data(w.values);
        const Shape s = w.values.shape;
        const std::size_t o = s[0], kk = s[1] * s[2] * s[3];
        const auto* src = values.as_slice<std::int8_t>().data();
        std::vector<std::int8_t> t(kk * o);
        for (std::size_t r = 0; r < o; ++r)
            for (std::size_t c = 0; c < kk; ++c) t[c * o + r] = src[r * kk + c];
        const auto scales = k::to_data(w.scale).to_vec<float>();
        std::vector<std::int32_t> zeros;
        if (w.offset)
            for (auto z : k::to_data(*w.offset).to_vec<std::int64_t>())
                zeros.push_back(static_cast<std::int32_t>(z));
        w.packed->data = k::pack_qweights(t.data(), kk, o, scales, zeros);
    });
    return *static_cast<const k::PackedQWeights*>(w.packed->data.get());
}

// Per-tensor affine int8 parameters of `x` from its min and max, as MinMaxObserver: the range
// widened to contain 0, scale = max((max - min) / 255, eps), zero = -128 - round(min / scale).
std::pair<float, std::int32_t> dynamic_params(const float* x, std::size_t n) {
    float lo = 0.0f, hi = 0.0f;
    k::min_max(x, n, lo, hi);
    const float scale = std::max((hi - lo) / 255.0f, float(quant::detail::kScaleEps));
    const float zero = std::clamp(-128.0f - std::nearbyint(lo / scale), -128.0f, 127.0f);
    return {scale, static_cast<std::int32_t>(zero)};
}

}  // namespace

template <typename F>
auto CpuBackend<F>::q_linear(FT x, QT w, std::optional<FT> bias,
                             const quant::ActivationQuantization& act) -> FT {
    using Base = BackendBase<CpuBackend<F>>;
    const Shape ws = w.values.shape;
    const bool per_row = w.scheme.is_per_channel() && w.scheme.axis == 0;
    if (!std::is_same_v<F, float> || act.mode == quant::ActivationMode::Float || per_row ||
        ws.rank() != 2)
        return Base::q_linear(std::move(x), std::move(w), std::move(bias), act);

    const Shape xs = x.shape;
    const std::size_t kdim = ws[0], n = ws[1];
    EMBER_CHECK(xs.rank() >= 1 && xs[xs.rank() - 1] == kdim, Shape, "q_linear: input ",
                xs.to_string(), " does not end in the weight's ", kdim, " input features");
    const std::size_t m = kdim ? xs.num_elements() / kdim : 0;
    const k::PackedQWeights& pw = packed(w);
    x = k::contiguous(std::move(x));
    const float* xp = x.template data<float>();

    auto [scale, zero] = act.mode == quant::ActivationMode::Dynamic
                             ? dynamic_params(xp, m * kdim)
                             : std::pair<float, std::int32_t>{act.scale, act.offset};
    const float inv = 1.0f / scale;
    // u8 rows padded to a multiple of 4 bytes (the padding meets zero weights).
    std::vector<std::uint8_t> a(m * pw.kp, 0);
    for (std::size_t i = 0; i < m; ++i)
        k::quantize_u8(xp + i * kdim, kdim, inv, zero, a.data() + i * pw.kp);
    std::optional<k::CpuTensor> b;
    if (bias) b = k::contiguous(std::move(*bias));
    Shape ys = xs;
    ys[ys.rank() - 1] = n;
    FT y = k::empty(ys, DType::F32);
    k::qgemm_u8s8(a.data(), pw.kp, m, zero + 128, scale, pw,
                  b ? b->template data<float>() : nullptr, y.template data<float>(), n);
    return y;
}

template <typename F>
auto CpuBackend<F>::q_conv2d(FT x, QT w, std::optional<FT> bias, const ConvOptions<2>& o,
                             const quant::ActivationQuantization& act) -> FT {
    using Base = BackendBase<CpuBackend<F>>;
    const Shape xs = x.shape, ws = w.values.shape;
    const bool axis_ok = !w.scheme.is_per_channel() || w.scheme.axis == 0;
    if (!std::is_same_v<F, float> || act.mode == quant::ActivationMode::Float || o.groups != 1 ||
        !axis_ok || xs.rank() != 4 || ws.rank() != 4 || xs[1] != ws[1])
        return Base::q_conv2d(std::move(x), std::move(w), std::move(bias), o, act);
    const std::size_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3];
    const std::size_t oc = ws[0], kh = ws[2], kw = ws[3];
    const auto out_dim = [](std::size_t in, std::size_t k, std::size_t s, std::size_t p,
                            std::size_t d) {
        const std::int64_t span = std::int64_t(in + 2 * p) - std::int64_t(d * (k - 1) + 1);
        return span < 0 ? std::size_t{0} : std::size_t(span) / s + 1;
    };
    const std::size_t oh = out_dim(h, kh, o.stride[0], o.padding[0], o.dilation[0]);
    const std::size_t ow = out_dim(wd, kw, o.stride[1], o.padding[1], o.dilation[1]);
    EMBER_CHECK(oh > 0 && ow > 0, Shape, "q_conv2d: input ", xs.to_string(),
                " is smaller than the ", kh, "x", kw, " kernel (with padding and dilation)");
    const k::PackedQWeights& pw = packed_conv(w);
    x = k::contiguous(std::move(x));
    const float* xp = x.template data<float>();
    auto [scale, zero] = act.mode == quant::ActivationMode::Dynamic
                             ? dynamic_params(xp, xs.num_elements())
                             : std::pair<float, std::int32_t>{act.scale, act.offset};
    const float inv = 1.0f / scale;
    const std::uint8_t zu = static_cast<std::uint8_t>(zero + 128);  // the u8 that means 0.0
    std::vector<std::uint8_t> xu(xs.num_elements());
    k::quantize_u8(xp, xu.size(), inv, zero, xu.data());
    std::optional<k::CpuTensor> b;
    if (bias) b = k::contiguous(std::move(*bias));
    const std::size_t positions = oh * ow;
    // Locals: the byte stores below may alias anything, so fields would be reloaded each time.
    const std::size_t kp = pw.kp, sy = o.stride[0], sx = o.stride[1], dy = o.dilation[0],
                      dx = o.dilation[1];
    const std::int64_t py = std::int64_t(o.padding[0]), px = std::int64_t(o.padding[1]);
    std::vector<std::uint8_t> a(positions * pw.kp, 0);
    FT y = k::empty(Shape{n, oc, oh, ow}, DType::F32);
    float* yp = y.template data<float>();
    for (std::size_t img = 0; img < n; ++img) {
        // im2col: row p holds the receptive field of output p, in weight order (c, i, j);
        // taps outside the input read the zero point (the u8 that means 0.0).
        const std::uint8_t* src = xu.data() + img * c * h * wd;
        for (std::size_t r = 0; r < oh; ++r) {
            std::uint8_t* rows = a.data() + r * ow * kp;
            std::size_t col = 0;
            for (std::size_t ch = 0; ch < c; ++ch)
                for (std::size_t i = 0; i < kh; ++i, col += kw) {
                    const std::int64_t yy = std::int64_t(r * sy + i * dy) - py;
                    if (yy < 0 || yy >= std::int64_t(h)) {
                        for (std::size_t q = 0; q < ow; ++q)
                            std::memset(rows + q * kp + col, zu, kw);
                        continue;
                    }
                    const std::uint8_t* line = src + (ch * h + std::size_t(yy)) * wd;
                    for (std::size_t q = 0; q < ow; ++q) {
                        std::uint8_t* dst = rows + q * kp + col;
                        const std::int64_t x0 = std::int64_t(q * sx) - px;
                        if (dx == 1 && x0 >= 0 && x0 + std::int64_t(kw) <= std::int64_t(wd)) {
                            const std::uint8_t* from = line + x0;  // the usual case: no edge
                            if (kw == 3) {  // the common kernel, without a call to memcpy
                                dst[0] = from[0], dst[1] = from[1], dst[2] = from[2];
                            } else {
                                for (std::size_t j = 0; j < kw; ++j) dst[j] = from[j];
                            }
                        } else {
                            for (std::size_t j = 0; j < kw; ++j) {
                                const std::int64_t xx = x0 + std::int64_t(j * dx);
                                dst[j] = xx >= 0 && xx < std::int64_t(wd) ? line[xx] : zu;
                            }
                        }
                    }
                }
        }
        k::qgemm_u8s8(a.data(), pw.kp, positions, zero + 128, scale, pw,
                      b ? b->template data<float>() : nullptr, yp + img * oc * positions, 1,
                      positions);
    }
    return y;
}

template auto CpuBackend<float>::q_conv2d(FT, QT, std::optional<FT>, const ConvOptions<2>&,
                                          const quant::ActivationQuantization&) -> FT;
template auto CpuBackend<double>::q_conv2d(FT, QT, std::optional<FT>, const ConvOptions<2>&,
                                           const quant::ActivationQuantization&) -> FT;

template auto CpuBackend<float>::q_linear(FT, QT, std::optional<FT>,
                                          const quant::ActivationQuantization&) -> FT;
template auto CpuBackend<double>::q_linear(FT, QT, std::optional<FT>,
                                           const quant::ActivationQuantization&) -> FT;

namespace cpu {
std::string_view qgemm_kernel() {
    return detail::cpu::qgemm_kernel();
}
bool set_qgemm_kernel(std::string_view name) {
    return detail::cpu::set_qgemm_kernel(name);
}
}  // namespace cpu

}  // namespace ember
