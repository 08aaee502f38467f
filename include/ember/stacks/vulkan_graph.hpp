#pragma once
// Whole steps recorded once into a Vulkan command buffer and resubmitted (Vulkan, Fusion<Vulkan>
// and the autodiff stacks over them): the same API as ember::cuda::capture (stacks/cuda_graph.hpp).
// A training step of a small model is a few hundred tiny dispatches, and its time is the host's
// recording cost; a replay is one queue submission of the recorded command buffer:
//
//     step(model, optim, batch);                     // one eager step first (warm-up)
//     auto graph = ember::vulkan::capture([&] { step(model, optim, batch); });  // runs it once
//     for (...) { copy the next batch into `batch`; graph.replay(); }
//     optim.add_steps(graph.replays());              // the host's count of Adam steps
//
// What a replay repeats is the device work the capture recorded, on the same buffers, with
// the same push constants and descriptors (push descriptors recorded in the command buffer):
//  - Tensors allocated while capturing come from a private pool that the captured step keeps,
//    so its buffers hold across replays and nothing else is handed them; tensors the step read
//    (its inputs, the parameters) must stay alive, and new inputs are copied into them (or
//    bound with StepGraph below).
//  - Kernel parameters live in host-visible chunks the captured step owns. Before each replay
//    the words that change are rewritten in place by the submission that queues it: the
//    optimizer's learning rate and bias corrections (Adam updates parameters and moments in
//    place inside a capture, as PyTorch's does) and the key of each random draw, which is the
//    key of the draw the same step would take eagerly: dropout masks differ from replay to
//    replay and equal the eager sequence from the same seed.
//  - An update that replaces its tensors (composed SGD, AdamW's decay, running statistics) makes
//    the capture not replayable: replayable() is false, and why_not() says which.
//  - Nothing inside may wait for the device or read host memory: into_data, into_scalar, sync,
//    from_data, an index check that reads values back — each is an ember::DeviceError naming
//    the op, and the capture is abandoned (nothing ran).
// Without a Vulkan device, capture throws ember::DeviceError as every Vulkan op does.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../autodiff/autodiff.hpp"
#include "../backend/vulkan.hpp"
#include "../detail/fields.hpp"
#include "../fusion/fusion.hpp"
#include "../tensor/tensor.hpp"

namespace ember::detail::vk {
struct Graph;  // the recorded command buffer and what its replays rewrite (graph.cpp)
}  // namespace ember::detail::vk

namespace ember::vulkan {

/// A step recorded into one Vulkan command buffer (made by capture()). Move-only; destroying it
/// waits for its queued replays and returns its private pool's buffers to the device's pool.
class CapturedStep {
  public:
    /// No captured step.
    CapturedStep() = default;
    /// Takes over `other`'s captured step.
    CapturedStep(CapturedStep&& other) noexcept = default;
    /// Drops this captured step (see the destructor) and takes over `other`'s.
    CapturedStep& operator=(CapturedStep&& other) noexcept = default;
    /// Waits for queued replays, frees the command buffer, returns its pool's buffers.
    ~CapturedStep();

    /// Runs the captured step again: one queue submission (queued; returns at once). Throws
    /// ArgumentError when nothing was captured or it is not replayable, DeviceError inside a
    /// capture.
    void replay();
    /// The learning rate of the optimizer updates from the next replay on (default: the one
    /// the capture saw).
    void set_learning_rate(double lr);
    /// Whether a step was captured.
    explicit operator bool() const { return g_ != nullptr; }
    /// Whether replay() may be called: false when the step replaced tensors that existed before
    /// the capture (their new values would not be where the next replay reads them).
    bool replayable() const;
    /// Why the captured step is not replayable (empty when it is).
    const std::string& why_not() const;
    /// Replays so far (the run at capture not counted).
    std::size_t replays() const;
    /// Dispatches recorded in the command buffer.
    std::size_t num_nodes() const;
    /// Random draws in the step (each replay moves the generator on by as many).
    std::size_t random_draws() const;
    /// Optimizer updates whose scalars each replay rewrites.
    std::size_t optimizer_updates() const;
    /// Bytes of the captured step's private pool.
    std::size_t pool_bytes() const;
    /// The device it runs on.
    VulkanDevice device() const;

  private:
    friend CapturedStep capture(const std::function<void()>& step, const VulkanDevice& device);
    std::shared_ptr<ember::detail::vk::Graph> g_;
};

/// Records the device work of `step` on `device` into one command buffer, runs it once (the step's
/// effect, as if it had been called), and returns it for replaying. Run the step once eagerly
/// before (Fusion's kernels are compiled and the optimizer has its state then). Pending Fusion
/// work is flushed first and at the end. DeviceError without a Vulkan device, or for a host
/// synchronisation inside `step` (naming the op); captures do not nest.
CapturedStep capture(const std::function<void()>& step, const VulkanDevice& device = {});

/// Whether this thread is capturing a step now (inside capture()'s `step`).
bool is_capturing();

namespace detail {

/// The Vulkan tensor behind a tensor of Vulkan, Fusion<Vulkan> or an autodiff stack over them
/// (pending Fusion values are computed).
template <typename P>
ember::detail::vk::VulkanTensor vulkan_primitive(const P& p) {
    if constexpr (std::is_same_v<P, ember::detail::vk::VulkanTensor>) {
        return p;
    } else if constexpr (std::is_same_v<P, FusionTensor<Vulkan>>) {
        return ember::detail::fusion::take<Vulkan>(p);
    } else if constexpr (requires {
                             p.primitive;
                             p.node;
                         }) {
        return vulkan_primitive(p.primitive);
    } else {
        static_assert(sizeof(P) == 0, "vulkan::StepGraph: not a tensor of a Vulkan backend stack");
    }
}
/// Whether vulkan_primitive reaches primitives of type P.
template <typename P>
struct IsVulkanPrimitive : std::false_type {};
template <>
struct IsVulkanPrimitive<ember::detail::vk::VulkanTensor> : std::true_type {};
template <>
struct IsVulkanPrimitive<FusionTensor<Vulkan>> : std::true_type {};
template <typename X>
struct IsVulkanPrimitive<AutodiffTensor<X>> : IsVulkanPrimitive<typename X::FloatTensorPrimitive> {
};
/// Vulkan, Fusion<Vulkan> and the autodiff stacks over them: the backends capture() records.
template <typename B>
concept VulkanStack = IsVulkanPrimitive<typename B::FloatTensorPrimitive>::value;

/// dst's buffer = src's values (same shape and dtype, both on one device; queued).
void bind_input(const ember::detail::vk::VulkanTensor& dst,
                const ember::detail::vk::VulkanTensor& src);
/// Whether int64 `src`'s known range lies inside the range `dst` was checked with when captured
/// (a captured index check is not run again on replay); true for other dtypes.
bool within_checked_range(const ember::detail::vk::VulkanTensor& dst,
                          const ember::detail::vk::VulkanTensor& src);

/// A tensor (of any backend).
template <typename T>
concept AnyTensor = requires(const T& x) {
    x.primitive();
    x.dims();
};
/// What StepGraph takes as inputs: a tensor, or a struct declared with EMBER_DETAIL_FIELDS
/// (its tensor fields are the inputs; other fields are ignored).
template <typename T>
concept StepInputs = AnyTensor<T> || ember::detail::HasFields<T>;

/// Calls f(vulkan tensor) for every tensor of `x` (see StepInputs), nested structs included.
template <typename T, typename F>
void for_each_vulkan_tensor(const T& x, F&& f) {
    if constexpr (AnyTensor<T>) {
        f(vulkan_primitive(x.primitive()));
    } else if constexpr (ember::detail::HasFields<T>) {
        ember::detail::for_each_field(
            x, [&](std::string_view, const auto& field) { for_each_vulkan_tensor(field, f); });
    }
}

}  // namespace detail

/// A step over inputs whose shapes may change (batches): replayed from its graph while they keep
/// the shapes it was captured with, captured (again) at the second step of a new shape, and run
/// eagerly otherwise — the first step of a shape, and a short last batch. `Inputs` is a tensor or
/// a struct of tensors declared with EMBER_DETAIL_FIELDS (a batch). Replays copy the new inputs
/// into the captured ones. An eager step drops the graph (it may have replaced the tensors the
/// graph updates). A step that cannot be captured (not replayable, or a host synchronisation
/// inside it) runs eagerly from then on; fallback() says why.
template <detail::StepInputs Inputs>
class StepGraph {
  public:
    /// How run() ran a step.
    enum class Ran { Eager, Captured, Replayed };

    /// Runs `step(inputs)` once, replayed, captured or eagerly (see the class comment). With
    /// `lr`, the captured optimizer updates use that learning rate.
    template <typename F>
    Ran run(const Inputs& inputs, F&& step, std::optional<double> lr = std::nullopt) {
        auto key = key_of(inputs);
        if (graph_ && key == key_ && in_range(inputs)) {
            bind(inputs);
            if (lr) graph_.set_learning_rate(*lr);
            graph_.replay();
            ++pending_replays_;
            return Ran::Replayed;
        }
        graph_ = CapturedStep();
        bound_.reset();
        if (fallback_.empty() && warm_ && key == warm_key_) {
            bound_.emplace(inputs);
            try {
                graph_ = capture([&] { step(*bound_); });
            } catch (const DeviceError& e) {
                // Nothing ran: the step runs eagerly now, and from now on.
                fallback_ = e.what();
                bound_.reset();
                step(inputs);
                return Ran::Eager;
            }
            key_ = std::move(key);
            if (!graph_.replayable()) {
                fallback_ = graph_.why_not();
                graph_ = CapturedStep();
                bound_.reset();
            }
            return Ran::Captured;
        }
        step(inputs);
        warm_ = true;
        warm_key_ = std::move(key);
        return Ran::Eager;
    }
    /// Replays since the last call (and resets the count): what optim.add_steps needs.
    std::size_t take_replays() { return std::exchange(pending_replays_, 0); }
    /// Why steps run eagerly for good (empty while capturing works).
    const std::string& fallback() const { return fallback_; }
    /// The graph now held (empty before a capture and after an eager step).
    const CapturedStep& graph() const { return graph_; }
    /// Drops the graph: the next step of any shape runs eagerly first.
    void reset() {
        graph_ = CapturedStep();
        bound_.reset();
        warm_ = false;
    }

  private:
    using Key = std::vector<std::pair<Shape, DType>>;
    static Key key_of(const Inputs& x) {
        Key k;
        detail::for_each_vulkan_tensor(
            x, [&](const ember::detail::vk::VulkanTensor& t) { k.emplace_back(t.shape, t.dtype); });
        return k;
    }
    std::vector<ember::detail::vk::VulkanTensor> tensors(const Inputs& x) const {
        std::vector<ember::detail::vk::VulkanTensor> v;
        detail::for_each_vulkan_tensor(
            x, [&](const ember::detail::vk::VulkanTensor& t) { v.push_back(t); });
        return v;
    }
    bool in_range(const Inputs& x) const {
        const auto dst = tensors(*bound_), src = tensors(x);
        for (std::size_t i = 0; i < dst.size(); ++i)
            if (!detail::within_checked_range(dst[i], src[i])) return false;
        return true;
    }
    void bind(const Inputs& x) {
        const auto dst = tensors(*bound_), src = tensors(x);
        for (std::size_t i = 0; i < dst.size(); ++i)
            if (dst[i].buffer != src[i].buffer) detail::bind_input(dst[i], src[i]);
    }

    CapturedStep graph_;
    std::optional<Inputs> bound_;
    Key key_, warm_key_;
    bool warm_ = false;
    std::string fallback_;
    std::size_t pending_replays_ = 0;
};

}  // namespace ember::vulkan
