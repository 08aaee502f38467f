// The fused Adam update (shaders/adam.comp): one pass over parameter, gradient and moments.
// Inside a captured step it writes in place, so that each replay reads the parameter and
// moments where the last one left them, and it tells the capture where its per-step scalars
// are (graph.cpp rewrites them before each replay).
#include <cmath>

#include "graph.hpp"
#include "kernels.hpp"

namespace ember::detail::vk {

namespace {
constexpr std::uint32_t kLocal = 256;

/// `t` as a contiguous f32-word tensor of its own (t itself when it already is one).
VT prepared(VT t) {
    if (t.dtype != DType::F32) t = cast(std::move(t), DType::F32);
    return contiguous(std::move(t));
}
}  // namespace

void adam_words(double lr, double c1, double c2, float out[2]) {
    out[0] = static_cast<float>(lr / c1);
    out[1] = static_cast<float>(1.0 / std::sqrt(c2));
}

/// {param, m, v} after one Adam update (shaders/adam.comp); float operands of one shape.
std::array<VT, 3> adam_step(VT p, VT g, VT m, VT v, const AdamStepScalars& s) {
    EMBER_CHECK(p.shape == g.shape && p.shape == m.shape && p.shape == v.shape, Shape,
                "adam_step: param ", p.shape, ", grad ", g.shape, ", moments ", m.shape, " and ",
                v.shape, " must have one shape");
    EMBER_CHECK(is_float(p.dtype) && is_float(g.dtype) && is_float(m.dtype) && is_float(v.dtype),
                DType, "adam_step: needs float tensors, got ", dtype_name(p.dtype), ", ",
                dtype_name(g.dtype), ", ", dtype_name(m.dtype), ", ", dtype_name(v.dtype));
    EMBER_CHECK(p.device == g.device && p.device == m.device && p.device == v.device, Device,
                "adam_step: operands on different Vulkan devices (", p.device, ", ", g.device, ", ",
                m.device, ", ", v.device, ")");
    const DType result = p.dtype;
    p = prepared(std::move(p));
    g = prepared(std::move(g));
    m = prepared(std::move(m));
    v = prepared(std::move(v));
    const bool in_place = capturing(p.device);
    auto out = [&](const VT& t) {
        return in_place || t.is_unique() ? t : empty(t.shape, DType::F32, t.device);
    };
    VT po = out(p), mo = out(m), vo = out(v);
    const std::size_t n = p.num_elements();
    if (n > 0) {
        float w[2];
        adam_words(s.lr, s.correction_1, s.correction_2, w);
        Params prm;
        prm.push(static_cast<i64>(n));
        prm.push_f(static_cast<float>(s.beta_1));
        prm.push_f(static_cast<float>(s.beta_2));
        prm.push_f(static_cast<float>(s.epsilon));
        prm.push_f(w[0]);
        prm.push_f(w[1]);
        Context& cx = ctx(p);
        const Pipeline& pipe = cx.pipeline("adam", {}, 7, kLocal);
        const Binding bs[] = {bind(po, true), bind(mo, true), bind(vo, true), bind(p, false),
                              bind(g, false), bind(m, false), bind(v, false)};
        cx.dispatch(pipe, bs, prm.w, (n + kLocal - 1) / kLocal);
        if (in_place) note_adam(cx, s, 4);
    }
    if (result != DType::F32)
        return {cast(std::move(po), result), cast(std::move(mo), result),
                cast(std::move(vo), result)};
    return {std::move(po), std::move(mo), std::move(vo)};
}

}  // namespace ember::detail::vk

// ---- VulkanBackend's ops on the kernels above ----
namespace ember {
namespace k = detail::vk;

auto VulkanBackend::float_adam_step(FT param, FT grad, FT m, FT v, const AdamStepScalars& s)
    -> std::array<FT, 3> {
    return k::adam_step(std::move(param), std::move(grad), std::move(m), std::move(v), s);
}

}  // namespace ember
