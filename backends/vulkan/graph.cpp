// Whole steps recorded once and resubmitted (include/ember/stacks/vulkan_graph.hpp): the
// recording around the step, the private pool that keeps the step's buffers for its replays,
// and the parameter words each replay rewrites (random keys, the optimizer's scalars).
#include "graph.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <thread>

#include "../common/captured_step.hpp"
#include "ember/stacks/vulkan_fusion.hpp"
#include "ember/stacks/vulkan_graph.hpp"
#include "kernels.hpp"

namespace ember::detail::vk {

namespace {

/// A random draw inside a capture: where its key is, and its counter within the step.
struct DrawSlot {
    std::size_t chunk;
    VkDeviceSize offset;
    std::uint64_t index;
};
/// An Adam update inside a capture: where its two per-step words are, and its scalars.
struct AdamSlot {
    std::size_t chunk;
    VkDeviceSize offset;
    AdamStepScalars at_capture;
    double time = 0;  ///< the step count t behind the corrections (0: they stay as captured)
};

/// The capture in progress on a thread.
struct CaptureState {
    Context* cx = nullptr;
    std::uint32_t device = 0;
    std::uint64_t counter_base = 0;  ///< the generator's counter when the capture began
    std::vector<DrawSlot> draws;
    std::vector<AdamSlot> adam;
};

constinit thread_local CaptureState* t_capture = nullptr;

/// The step count t behind Adam's corrections (1 − βᵗ, as ember::optim computes them), or 0 when
/// they are not of that form (then they stay as captured).
double adam_time(const AdamStepScalars& a) {
    auto from = [](double beta, double c) {
        if (!(beta > 0 && beta < 1 && c > 0 && c < 1)) return 0.0;
        const double t = std::round(std::log1p(-c) / std::log(beta));
        return std::isfinite(t) && t >= 1 ? t : 0.0;
    };
    for (double t : {from(a.beta_2, a.correction_2), from(a.beta_1, a.correction_1)})
        if (t > 0 && 1 - std::pow(a.beta_1, t) == a.correction_1 &&
            1 - std::pow(a.beta_2, t) == a.correction_2)
            return t;
    return 0;
}

std::uint32_t bits(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

}  // namespace

bool capturing(std::uint32_t device) {
    return t_capture != nullptr && t_capture->device == device;
}

void forbid_in_capture(const char* op) {
    if (t_capture == nullptr) [[likely]]
        return;
    EMBER_FAIL(Device, "vulkan::capture: ", op,
               " inside a captured step: it waits for the device or reads host memory, which a "
               "resubmitted command buffer cannot do (read results after capture() or replay() "
               "returns; copy new inputs into the captured ones)");
}

void note_draw(Context& cx, std::uint64_t counter, std::size_t word) {
    CaptureState* c = t_capture;
    if (c == nullptr || c->cx != &cx) return;
    const auto [chunk, at] = cx.recorder().last_params();
    c->draws.push_back({chunk, at + 4 * word, counter - c->counter_base});
}

void note_adam(Context& cx, const AdamStepScalars& s, std::size_t word) {
    CaptureState* c = t_capture;
    if (c == nullptr || c->cx != &cx) return;
    const auto [chunk, at] = cx.recorder().last_params();
    c->adam.push_back({chunk, at + 4 * word, s, adam_time(s)});
}

/// A captured step: the command buffer, its pool, and what each replay rewrites.
struct Graph {
    Context* cx = nullptr;
    std::uint32_t device = 0;
    CapturedCommands commands;
    std::unique_ptr<PoolCapture> pool;
    std::vector<DrawSlot> draws;
    std::vector<AdamSlot> adam;
    std::optional<double> lr;
    std::size_t replays = 0;
    std::size_t nodes = 0;  ///< dispatches recorded
    std::string why_not;

    std::size_t random_draws() const { return draws.size(); }
    std::size_t pool_bytes() const { return pool->bytes; }
    VulkanDevice device_handle() const { return VulkanDevice{device}; }
    static void forbid_in_capture(const char* op) { ember::detail::vk::forbid_in_capture(op); }

    /// Queues run `r` (0: the run at capture, with the words as recorded).
    void launch(std::size_t r) {
        std::vector<ParamPatch> patches;
        if (r > 0) {
            patches.reserve(draws.size() + adam.size());
            // The draws this replay takes: the next ones of the generator, as an eager step's.
            const std::uint64_t base = draws.empty() ? 0 : take_draws(draws.size());
            for (const DrawSlot& d : draws) {
                const std::uint64_t key = draw_key(base + d.index);
                patches.push_back(
                    {d.chunk,
                     d.offset,
                     {static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32)}});
            }
            for (const AdamSlot& a : adam) {
                const AdamStepScalars& s = a.at_capture;
                double c1 = s.correction_1, c2 = s.correction_2;
                if (a.time > 0) {
                    const double t = a.time + double(r);
                    c1 = 1 - std::pow(s.beta_1, t);
                    c2 = 1 - std::pow(s.beta_2, t);
                }
                float w[2];
                adam_words(lr.value_or(s.lr), c1, c2, w);
                patches.push_back({a.chunk, a.offset, {bits(w[0]), bits(w[1])}});
            }
        } else if (lr) {
            for (const AdamSlot& a : adam) {
                float w[2];
                adam_words(*lr, a.at_capture.correction_1, a.at_capture.correction_2, w);
                patches.push_back({a.chunk, a.offset, {bits(w[0]), bits(w[1])}});
            }
        }
        cx->recorder().submit_captured(commands, patches);
    }

    ~Graph() {
        if (cx == nullptr) return;
        try {
            cx->recorder().free_captured(commands);  // waits for the queued replays
        } catch (...) {
            // A lost device: nothing more can be done with its memory.
        }
        pool.reset();  // the kept buffers go back to the device's pool (or with their tensors)
    }
};

}  // namespace ember::detail::vk

namespace ember::vulkan {

namespace k = ember::detail::vk;

CapturedStep capture(const std::function<void()>& step, const VulkanDevice& device) {
    EMBER_CHECK(k::t_capture == nullptr, Device,
                "vulkan::capture: a step is already being captured on this thread (captures do "
                "not nest)");
    const std::uint32_t dev = device.resolved();
    k::Context& cx = k::Context::get(dev);  // DeviceError without a device
    // Work pending in Fusion's stream belongs before the step, not in its command buffer.
    Fusion<Vulkan>::flush();
    auto g = std::make_shared<k::Graph>();
    g->device = dev;
    g->pool = std::make_unique<k::PoolCapture>();
    g->pool->thread = std::this_thread::get_id();
    k::CaptureState st;
    st.cx = &cx;
    st.device = dev;
    st.counter_base = k::draw_counter();
    // From here until end_capture, other threads' work on this device waits (it would land in
    // the step): the recorder is this thread's.
    cx.recorder().begin_capture();
    cx.pool().set_capture(g->pool.get());
    k::t_capture = &st;
    try {
        step();
        Fusion<Vulkan>::flush();
    } catch (...) {
        k::t_capture = nullptr;
        cx.pool().set_capture(nullptr);
        cx.recorder().abort_capture();
        k::set_draw_counter(st.counter_base);  // nothing was drawn
        throw;
    }
    k::t_capture = nullptr;
    cx.pool().set_capture(nullptr);
    g->commands = cx.recorder().end_capture();
    g->cx = &cx;
    g->nodes = g->commands.dispatches;
    g->draws = std::move(st.draws);
    g->adam = std::move(st.adam);
    if (g->pool->replaced > 0)
        g->why_not = ember::detail::cat_str(
            "the step replaced ", g->pool->replaced, " tensor(s) (", g->pool->replaced_bytes,
            " bytes) that existed before it was captured: a replay would read their old "
            "values. Update state in place (Adam does; composed SGD, AdamW's decay and running "
            "statistics do not), and keep outputs that outlive the step out of it");
    g->launch(0);
    return CapturedStep(std::move(g));
}

bool is_capturing() {
    return k::t_capture != nullptr;
}

namespace detail {

void bind_input(const k::VulkanTensor& dst, const k::VulkanTensor& src) {
    EMBER_CHECK(dst.shape == src.shape && dst.dtype == src.dtype, Shape,
                "vulkan::StepGraph: an input of shape ", src.shape, " (", dtype_name(src.dtype),
                ") cannot be copied into the captured one of shape ", dst.shape, " (",
                dtype_name(dst.dtype), ")");
    EMBER_CHECK(dst.device == src.device, Device, "vulkan::StepGraph: an input on Vulkan device ",
                src.device, " for a step captured on device ", dst.device);
    k::forbid_in_capture("vulkan::StepGraph input copy");
    // The range the capture checked the captured input's indices against stays its own.
    const std::int64_t lo = dst.buffer->lo, hi = dst.buffer->hi;
    k::copy_into(src, dst);
    dst.buffer->lo = lo;
    dst.buffer->hi = hi;
}

bool within_checked_range(const k::VulkanTensor& dst, const k::VulkanTensor& src) {
    if (dst.dtype != DType::I64 || !dst.buffer || !src.buffer) return true;
    const k::Buffer& d = *dst.buffer;
    const k::Buffer& s = *src.buffer;
    if (d.lo > d.hi) return true;  // nothing was checked against a range at capture
    if (s.lo > s.hi) return false;
    return s.lo >= d.lo && s.hi <= d.hi;
}

}  // namespace detail

}  // namespace ember::vulkan

template class ember::detail::graph::CapturedStep<ember::detail::vk::Graph, ember::VulkanDevice>;
