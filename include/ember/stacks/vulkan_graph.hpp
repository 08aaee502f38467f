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
#include "../export.hpp"
#include "../fusion/fusion.hpp"
#include "../tensor/tensor.hpp"
#include "step_graph.hpp"

namespace ember::detail::vk {
struct EMBER_API Graph;  // the recorded command buffer and what its replays rewrite (graph.cpp)
}  // namespace ember::detail::vk

namespace ember::vulkan {

/// A step captured by capture() (ember::detail::graph::CapturedStep, stacks/step_graph.hpp).
using CapturedStep = ember::detail::graph::CapturedStep<ember::detail::vk::Graph, VulkanDevice>;

/// Records the device work of `step` on `device` into one command buffer, runs it once (the step's
/// effect, as if it had been called), and returns it for replaying. Run the step once eagerly
/// before (Fusion's kernels are compiled and the optimizer has its state then). Pending Fusion
/// work is flushed first and at the end. DeviceError without a Vulkan device, or for a host
/// synchronisation inside `step` (naming the op); captures do not nest.
EMBER_API CapturedStep capture(const std::function<void()>& step, const VulkanDevice& device = {});

/// Whether this thread is capturing a step now (inside capture()'s `step`).
EMBER_API bool is_capturing();

namespace detail {

/// Vulkan, Fusion<Vulkan> and the autodiff stacks over them: the backends capture() records.
template <typename B>
concept VulkanStack = ember::detail::graph::reaches<Vulkan, typename B::FloatTensorPrimitive>();
/// What StepGraph takes as inputs: a tensor, or a struct declared with EMBER_DETAIL_FIELDS.
using ember::detail::graph::StepInputs;

/// dst's buffer = src's values (same shape and dtype, both on one device; queued).
EMBER_API void bind_input(const ember::detail::vk::VulkanTensor& dst,
                          const ember::detail::vk::VulkanTensor& src);
/// Whether int64 `src`'s known range lies inside the range `dst` was checked with when captured
/// (a captured index check is not run again on replay); true for other dtypes.
EMBER_API bool within_checked_range(const ember::detail::vk::VulkanTensor& dst,
                                    const ember::detail::vk::VulkanTensor& src);

/// What StepGraph needs of Vulkan (stacks/step_graph.hpp).
struct GraphApi {
    using Backend = Vulkan;
    using Captured = CapturedStep;
    static CapturedStep capture(const std::function<void()>& step) {
        return ember::vulkan::capture(step);
    }
    static void bind_input(const ember::detail::vk::VulkanTensor& dst,
                           const ember::detail::vk::VulkanTensor& src) {
        detail::bind_input(dst, src);
    }
    static bool within_checked_range(const ember::detail::vk::VulkanTensor& dst,
                                     const ember::detail::vk::VulkanTensor& src) {
        return detail::within_checked_range(dst, src);
    }
    static bool same_buffer(const ember::detail::vk::VulkanTensor& a,
                            const ember::detail::vk::VulkanTensor& b) {
        return a.buffer == b.buffer;
    }
};

}  // namespace detail

/// A step over batches replayed from its command buffer while their shapes hold, captured again
/// when they change, eager for the first step of a shape and a short last batch (see
/// ember::detail::graph::StepGraph).
template <detail::StepInputs Inputs>
using StepGraph = ember::detail::graph::StepGraph<detail::GraphApi, Inputs>;

}  // namespace ember::vulkan
