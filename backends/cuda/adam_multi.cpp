// CudaBackend::float_adam_steps and float_sgd_steps: the multi-tensor Adam and SGD steps
// (adam_multi.cu). The tensors are checked and prepared as float_adam_step prepares one
// (f16/bf16 updated in f32 and cast back, walked flat in the parameter's layout), then grouped
// by compute dtype and by the scalars a launch shares, and each group is updated in one launch
// per 28 (Adam) or 40 (SGD) tensors.
#include <cmath>
#include <cstdint>
#include <vector>

#include "batch_norm.hpp"
#include "graph.hpp"
#include "ops.hpp"

namespace ember {
namespace k = detail::cuda;

namespace {
/// Checks the multi-tensor step `op`'s operands (one group of K tensors a parameter, the same
/// count of scalars, every tensor of a group of one shape, float, on one device) and brings each
/// group to its compute dtype, walked flat in the parameter's layout: contiguous, or
/// channels-last for a convolution's weight stored so (then its gradient comes from cuDNN in
/// that layout too). Returns each parameter's own dtype, the results' dtype.
template <std::size_t K>
std::vector<DType> prepare_groups(const char* op, std::vector<std::array<k::CudaTensor, K>>& ts,
                                  std::size_t scalars) {
    EMBER_CHECK(ts.size() == scalars, Argument, op, ": ", ts.size(), " tensor groups but ", scalars,
                " sets of scalars");
    std::vector<DType> result(ts.size());
    for (std::size_t i = 0; i < ts.size(); ++i) {
        auto& group = ts[i];
        const k::CudaTensor& p = group[0];
        for (std::size_t j = 1; j < K; ++j)
            EMBER_CHECK(group[j].shape == p.shape, Shape, op, ": tensor ", i, ": param ", p.shape,
                        " but ", j == 1 ? "grad " : "state ", group[j].shape,
                        ": a group must have one shape");
        EMBER_CHECK(is_float(p.dtype), DType, op, ": tensor ", i, ": needs float tensors, got ",
                    dtype_name(p.dtype));
        for (const k::CudaTensor& t : group) k::check_same_device(op, ts[0][0], t);
        result[i] = p.dtype;
        const DType cd = k::compute_dtype(p.dtype);
        const bool cl = k::is_channels_last(p);
        for (k::CudaTensor& t : group) t = k::to_layout(k::cast(std::move(t), cd), cl);
    }
    return result;
}
}  // namespace

auto CudaBackend::float_adam_steps(std::vector<std::array<FT, 4>> tensors,
                                   const std::vector<AdamStepsScalars>& scalars)
    -> std::vector<std::array<FT, 3>> {
    const std::vector<DType> result = prepare_groups("adam_steps", tensors, scalars.size());
    const std::size_t count = tensors.size();
    if (count == 0) return {};
    const int dev = tensors[0][0].device();
    std::vector<std::array<FT, 3>> out(count);
    k::use_device(dev);
    // Groups of tensors one launch can take: one compute dtype, one set of shared scalars.
    std::vector<bool> done(count, false);
    std::vector<k::AdamMultiTensor> group;
    for (std::size_t first = 0; first < count; ++first) {
        if (done[first]) continue;
        const DType cd = tensors[first][0].dtype;
        const AdamStepsScalars& f = scalars[first];
        group.clear();
        for (std::size_t i = first; i < count; ++i) {
            const AdamStepsScalars& s = scalars[i];
            if (done[i] || tensors[i][0].dtype != cd || s.step.beta_1 != f.step.beta_1 ||
                s.step.beta_2 != f.step.beta_2 || s.step.epsilon != f.step.epsilon || s.l2 != f.l2)
                continue;
            done[i] = true;
            auto& [p, g, m, v] = tensors[i];
            // Inside a captured step the update is in place, as float_adam_step's: the next
            // replay reads the parameter and moments where this one wrote them.
            const double* replayed = k::adam_slot(dev, s.step);
            auto out_of = [&](const FT& t) {
                if (replayed) return k::reuse(t);
                return t.is_unique() ? k::reuse(t) : k::empty_like_layout(t, t.shape, cd);
            };
            out[i] = {out_of(p), out_of(m), out_of(v)};
            k::AdamMultiTensor e;
            e.p_out = out[i][0].ptr();
            e.m_out = out[i][1].ptr();
            e.v_out = out[i][2].ptr();
            e.p = p.ptr();
            e.g = g.ptr();
            e.m = m.ptr();
            e.v = v.ptr();
            e.n = static_cast<std::int64_t>(p.num_elements());
            e.replayed = replayed;
            e.s = s;
            group.push_back(e);
        }
        k::launch_adam_multi(cd, group.data(), group.size(), k::stream(dev));
    }
    for (std::size_t i = 0; i < count; ++i)
        for (auto& t : out[i]) t = k::cast(std::move(t), result[i]);
    return out;
}

auto CudaBackend::float_sgd_steps(std::vector<std::array<FT, 3>> tensors,
                                  const std::vector<SgdStepScalars>& scalars)
    -> std::vector<std::array<FT, 2>> {
    const std::vector<DType> result = prepare_groups("sgd_steps", tensors, scalars.size());
    const std::size_t count = tensors.size();
    if (count == 0) return {};
    const int dev = tensors[0][0].device();
    std::vector<std::array<FT, 2>> out(count);
    k::use_device(dev);
    std::vector<bool> done(count, false);
    std::vector<k::SgdMultiTensor> group;
    for (std::size_t first = 0; first < count; ++first) {
        if (done[first]) continue;
        const DType cd = tensors[first][0].dtype;
        const SgdStepScalars& f = scalars[first];
        group.clear();
        for (std::size_t i = first; i < count; ++i) {
            const SgdStepScalars& s = scalars[i];
            if (done[i] || tensors[i][0].dtype != cd || s.momentum != f.momentum ||
                s.dampening != f.dampening || s.weight_decay != f.weight_decay ||
                s.nesterov != f.nesterov)
                continue;
            done[i] = true;
            auto& [p, g, v] = tensors[i];
            // In place inside a captured step, with the rate from the graph's slot, as
            // float_sgd_step's (no bias corrections: they stay 1).
            const double* replayed =
                k::adam_slot(dev, AdamStepScalars{0.0, 0.0, 0.0, s.lr, 1.0, 1.0});
            auto out_of = [&](const FT& t) {
                if (replayed) return k::reuse(t);
                return t.is_unique() ? k::reuse(t) : k::empty_like_layout(t, t.shape, cd);
            };
            out[i] = {out_of(p), out_of(v)};
            k::SgdMultiTensor e;
            e.p_out = out[i][0].ptr();
            e.v_out = out[i][1].ptr();
            e.p = p.ptr();
            e.g = g.ptr();
            e.v = v.ptr();
            e.n = static_cast<std::int64_t>(p.num_elements());
            e.replayed = replayed;
            e.lr = s.lr;
            group.push_back(e);
        }
        k::launch_sgd_multi(cd, group.data(), group.size(), f, k::stream(dev));
    }
    for (std::size_t i = 0; i < count; ++i)
        for (auto& t : out[i]) t = k::cast(std::move(t), result[i]);
    return out;
}

}  // namespace ember
