#pragma once
// What captured steps have in common on every GPU backend (stacks/cuda_graph.hpp,
// stacks/vulkan_graph.hpp): reaching the device tensor behind a tensor of any stack over the
// backend, walking the tensors of a batch, and StepGraph, which replays a step while its inputs
// keep their shapes and captures it again when they change; and CapturedStep, the handle every
// backend's capture() returns. Each backend supplies only what differs, through a small API
// struct:
//
//     struct Api {
//         using Backend = Cuda;                        // the leaf backend
//         using Captured = cuda::CapturedStep;         // what capture() returns
//         static Captured capture(const std::function<void()>& step);
//         static void bind_input(const Leaf& dst, const Leaf& src);           // copy, queued
//         static bool within_checked_range(const Leaf& dst, const Leaf& src);
//         static bool same_buffer(const Leaf& a, const Leaf& b);
//     };
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../autodiff/autodiff.hpp"
#include "../detail/fields.hpp"
#include "../export.hpp"
#include "../fusion/fusion.hpp"
#include "../tensor/tensor.hpp"

namespace ember::detail::graph {

/// A step captured on one GPU backend (ember::cuda::CapturedStep is CapturedStep<cuda Graph,
/// CudaDevice>, ember::vulkan::CapturedStep the Vulkan one), made by that backend's capture():
/// a handle on its Graph (the recorded work and what each replay rewrites), whose members are
/// defined once for every backend (backends/common/captured_step.hpp) and instantiated in each
/// backend's graph.cpp. Move-only; destroying it waits for its queued replays and returns its
/// private pool's memory to the device's pool.
template <typename Graph, typename Device>
class EMBER_API CapturedStep {
  public:
    /// No captured step.
    CapturedStep() = default;
    /// The step `g` (what the backend's capture() returns).
    explicit CapturedStep(std::shared_ptr<Graph> g) : g_(std::move(g)) {}
    /// Takes over `other`'s captured step.
    CapturedStep(CapturedStep&& other) noexcept = default;
    /// Drops this captured step (see the destructor) and takes over `other`'s.
    CapturedStep& operator=(CapturedStep&& other) noexcept = default;
    /// Waits for queued replays, frees the recorded work, returns its pool's memory.
    ~CapturedStep();

    /// Runs the captured step again: one graph launch on CUDA, one queue submission on Vulkan
    /// (queued; returns at once). Throws ArgumentError when nothing was captured or it is not
    /// replayable, DeviceError inside a capture.
    void replay();
    /// The learning rate of the optimizer updates from the next replay on (default: the one
    /// the capture saw). ArgumentError for a negative or non-finite rate.
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
    /// Nodes of the recorded work: kernels, copies and the few nodes a CUDA graph adds; the
    /// dispatches of a Vulkan command buffer.
    std::size_t num_nodes() const;
    /// Random draws in the step (each replay moves the generator on by as many).
    std::size_t random_draws() const;
    /// Optimizer updates whose scalars each replay rewrites.
    std::size_t optimizer_updates() const;
    /// Bytes of the captured step's private pool.
    std::size_t pool_bytes() const;
    /// The device it runs on.
    Device device() const;

  private:
    std::shared_ptr<Graph> g_;
};

/// The device tensor of backend B behind a primitive of B, Fusion<B> or an autodiff stack over
/// them (pending Fusion values are computed).
template <typename B, typename P>
typename B::FloatTensorPrimitive leaf(const P& p) {
    if constexpr (std::is_same_v<P, typename B::FloatTensorPrimitive>) {
        return p;
    } else if constexpr (std::is_same_v<P, FusionTensor<B>>) {
        return ember::detail::fusion::take<B>(p);
    } else if constexpr (requires {
                             p.primitive;
                             p.node;
                         }) {
        return leaf<B>(p.primitive);
    } else {
        static_assert(sizeof(P) == 0, "StepGraph: not a tensor of this backend's stacks");
    }
}

/// The primitive an autodiff primitive wraps (void for others).
template <typename P>
struct AutodiffInner {
    using type = void;
};
template <typename X>
struct AutodiffInner<AutodiffTensor<X>> {
    using type = typename X::FloatTensorPrimitive;
};

/// Whether leaf<B> reaches primitives of type P: B's own, Fusion<B>'s and autodiff's over them.
template <typename B, typename P>
constexpr bool reaches() {
    if constexpr (std::is_same_v<P, typename B::FloatTensorPrimitive> ||
                  std::is_same_v<P, FusionTensor<B>>)
        return true;
    else if constexpr (!std::is_void_v<typename AutodiffInner<P>::type>)
        return reaches<B, typename AutodiffInner<P>::type>();
    else
        return false;
}

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

/// Calls f(device tensor of B) for every tensor of `x` (see StepInputs), nested structs included.
template <typename B, typename T, typename F>
void for_each_leaf(const T& x, F&& f) {
    if constexpr (AnyTensor<T>) {
        f(leaf<B>(x.primitive()));
    } else if constexpr (ember::detail::HasFields<T>) {
        ember::detail::for_each_field(
            x, [&](std::string_view, const auto& field) { for_each_leaf<B>(field, f); });
    }
}

/// A step over inputs whose shapes may change (batches): replayed from its capture while they
/// keep the shapes it was captured with, captured (again) at the second step of a new shape, and
/// run eagerly otherwise — the first step of a shape, and a short last batch. `Inputs` is a
/// tensor or a struct of tensors declared with EMBER_DETAIL_FIELDS (a batch). Replays copy the
/// new inputs into the captured ones. An eager step drops the capture (it may have replaced the
/// tensors the capture updates). A step that cannot be captured (not replayable, or a host
/// synchronisation inside it) runs eagerly from then on; fallback() says why.
template <typename Api, StepInputs Inputs>
class StepGraph {
    using Leaf = typename Api::Backend::FloatTensorPrimitive;
    using Captured = typename Api::Captured;

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
        graph_ = Captured();
        bound_.reset();
        if (fallback_.empty() && warm_ && key == warm_key_) {
            bound_.emplace(inputs);
            try {
                graph_ = Api::capture([&] { step(*bound_); });
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
                graph_ = Captured();
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
    /// The captured step now held (empty before a capture and after an eager step).
    const Captured& graph() const { return graph_; }
    /// Drops the captured step: the next step of any shape runs eagerly first.
    void reset() {
        graph_ = Captured();
        bound_.reset();
        warm_ = false;
    }

  private:
    using Key = std::vector<std::pair<Shape, DType>>;
    static Key key_of(const Inputs& x) {
        Key k;
        for_each_leaf<typename Api::Backend>(
            x, [&](const Leaf& t) { k.emplace_back(t.shape, t.dtype); });
        return k;
    }
    static std::vector<Leaf> tensors(const Inputs& x) {
        std::vector<Leaf> v;
        for_each_leaf<typename Api::Backend>(x, [&](const Leaf& t) { v.push_back(t); });
        return v;
    }
    bool in_range(const Inputs& x) const {
        const auto dst = tensors(*bound_), src = tensors(x);
        for (std::size_t i = 0; i < dst.size(); ++i)
            if (!Api::within_checked_range(dst[i], src[i])) return false;
        return true;
    }
    void bind(const Inputs& x) {
        const auto dst = tensors(*bound_), src = tensors(x);
        for (std::size_t i = 0; i < dst.size(); ++i)
            if (!Api::same_buffer(dst[i], src[i])) Api::bind_input(dst[i], src[i]);
    }

    Captured graph_;
    std::optional<Inputs> bound_;
    Key key_, warm_key_;
    bool warm_ = false;
    std::string fallback_;
    std::size_t pending_replays_ = 0;
};

}  // namespace ember::detail::graph
