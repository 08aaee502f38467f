#pragma once
// Whole steps captured once and replayed as one CUDA graph launch (Cuda, Fusion<Cuda> and the
// autodiff stacks over them). A training step of a small model is a few hundred tiny kernels,
// and its time is the host's launch cost; a replay launches them all at once:
//
//     step(model, optim, batch);                     // one eager step first (warm-up)
//     auto graph = ember::cuda::capture([&] { step(model, optim, batch); });   // runs it once
//     for (...) { copy the next batch into `batch`; graph.replay(); }
//     optim.add_steps(graph.replays());              // the host's count of Adam steps
//
// What a replay repeats is the device work the capture recorded, on the same buffers:
//  - Tensors allocated while capturing come from a private pool that the graph keeps, so their
//    addresses hold across replays; tensors the step read (its inputs, the parameters) must
//    stay alive, and new inputs are copied into them (or bound with StepGraph below).
//  - The optimizer writes parameters and its state in place (as PyTorch's does) and its
//    learning rate and bias corrections move on at each replay (set_learning_rate changes the
//    rate): Adam and AdamW, and SGD with momentum after its first step (its velocity exists);
//    BatchNorm's running statistics are written in place too. An update that replaces its
//    tensors (SGD without momentum, a composed norm's running statistics) makes the capture not
//    replayable: replayable() is false, and why_not() says how many.
//  - Random draws (dropout) read the generator's seed and offset from the device; each replay
//    moves the offset on, so the masks differ from step to step and equal the ones the same
//    steps would draw eagerly from the same seed.
//  - Nothing inside may wait for the device or read host memory: into_data, into_scalar, sync,
//    from_data, an index check that reads values back — each is an ember::DeviceError naming
//    the op, and the capture is abandoned (nothing ran).
// Without a GPU, capture throws ember::DeviceError as every CUDA op does.
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
#include "../backend/cuda.hpp"
#include "../detail/fields.hpp"
#include "../export.hpp"
#include "../fusion/fusion.hpp"
#include "../tensor/tensor.hpp"
#include "step_graph.hpp"

namespace ember::detail::cuda {
struct EMBER_API Graph;  // the instantiated graph and what its replays rewrite (graph.cpp)
}  // namespace ember::detail::cuda

namespace ember::cuda {

/// A step captured by capture() (ember::detail::graph::CapturedStep, stacks/step_graph.hpp).
using CapturedStep = ember::detail::graph::CapturedStep<ember::detail::cuda::Graph, CudaDevice>;

/// Records the device work of `step` on `device` as one CUDA graph, runs it once (the step's
/// effect, as if it had been called), and returns it for replaying. Run the step once eagerly
/// before (Fusion's kernels are compiled and the optimizer has its state then). Pending Fusion
/// work is flushed first and at the end. DeviceError without a GPU, for a host synchronisation
/// inside `step` (naming the op), or when the driver refuses the capture; captures do not nest.
EMBER_API CapturedStep capture(const std::function<void()>& step, const CudaDevice& device = {});

/// Whether this thread is capturing a step now (inside capture()'s `step`).
EMBER_API bool is_capturing();

namespace detail {

/// Cuda, Fusion<Cuda> and the autodiff stacks over them: the backends capture() records.
template <typename B>
concept CudaStack = ember::detail::graph::reaches<Cuda, typename B::FloatTensorPrimitive>();
/// What StepGraph takes as inputs: a tensor, or a struct declared with EMBER_DETAIL_FIELDS.
using ember::detail::graph::StepInputs;

/// dst's buffer = src's values (same shape and dtype, both on one device; queued).
EMBER_API void bind_input(const ember::detail::cuda::CudaTensor& dst,
                          const ember::detail::cuda::CudaTensor& src);
/// Whether int64 `src`'s known range lies inside the range `dst` was checked with when captured
/// (a captured index check is not run again on replay); true for other dtypes.
EMBER_API bool within_checked_range(const ember::detail::cuda::CudaTensor& dst,
                                    const ember::detail::cuda::CudaTensor& src);

/// What StepGraph needs of Cuda (stacks/step_graph.hpp).
struct GraphApi {
    using Backend = Cuda;
    using Captured = CapturedStep;
    static CapturedStep capture(const std::function<void()>& step) {
        return ember::cuda::capture(step);
    }
    static void bind_input(const ember::detail::cuda::CudaTensor& dst,
                           const ember::detail::cuda::CudaTensor& src) {
        detail::bind_input(dst, src);
    }
    static bool within_checked_range(const ember::detail::cuda::CudaTensor& dst,
                                     const ember::detail::cuda::CudaTensor& src) {
        return detail::within_checked_range(dst, src);
    }
    static bool same_buffer(const ember::detail::cuda::CudaTensor& a,
                            const ember::detail::cuda::CudaTensor& b) {
        return a.storage == b.storage;
    }
};

}  // namespace detail

/// A step over batches replayed from its CUDA graph while their shapes hold, captured again when
/// they change, eager for the first step of a shape and a short last batch (see
/// ember::detail::graph::StepGraph).
template <detail::StepInputs Inputs>
using StepGraph = ember::detail::graph::StepGraph<detail::GraphApi, Inputs>;

}  // namespace ember::cuda
