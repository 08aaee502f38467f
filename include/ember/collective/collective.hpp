#pragma once
// The collective layer: what data-parallel training needs from a group of participants (ranks)
// that each hold a tensor of the same shape — all-reduce, broadcast, all-gather and
// reduce-scatter — behind one interface, as torch.distributed's process groups and Burn's
// collective crate do. A `Collective` is ONE rank's endpoint: every rank calls the same ops in the
// same order, each from its own thread (or process), and each call returns when the rank's part
// is done.
//
// Implementations: ThreadCollective (thread.hpp: ranks are threads of one process, any backend,
// through host memory) and NcclCollective (nccl.hpp, built with EMBER_CUDA and NCCL: ranks are
// CUDA devices, in one process or many, on one host or many). Users call the tensor functions of
// ops.hpp; the raw-buffer methods below are what an implementation provides.
#include <cstddef>
#include <memory>
#include <string>

#include "../export.hpp"
#include "../tensor/dtype.hpp"
#include "../tensor/shape.hpp"

namespace ember::collective {

/// How all_reduce and reduce_scatter combine the ranks' values.
enum class ReduceOp {
    Sum,   ///< the sum over ranks
    Mean,  ///< the sum divided by the world size
};

/// "sum" or "mean".
EMBER_API const char* to_string(ReduceOp op);

/// Where a buffer's bytes live.
enum class Memory {
    Host,  ///< ordinary process memory
    Cuda,  ///< memory of a CUDA device (`Buffer::device`)
};

/// A contiguous, row-major array that a collective reads or writes in place.
struct Buffer {
    void* data = nullptr;          ///< the first element
    Shape shape;                   ///< its dims (the element count is shape.num_elements())
    DType dtype = DType::F32;      ///< element type
    Memory memory = Memory::Host;  ///< host or device memory
    int device = 0;                ///< the device ordinal when memory is a device's

    /// Number of elements.
    std::size_t count() const { return shape.num_elements(); }
    /// Number of bytes.
    std::size_t bytes() const { return count() * dtype_size(dtype); }
};

/// An op started by Collective::all_reduce_async, running beside the caller's later work.
/// Destroyed without wait(), it first lets the op finish (or orders the device after it), so
/// that the buffer may be freed after it.
class Work {
  public:
    virtual ~Work() = default;
    /// Returns once the result may be used: for host buffers, once it is in place; for device
    /// buffers, once the device's later work is ordered after it (the host need not block).
    /// Throws the op's ember::Error when it failed. Called at most once.
    virtual void wait() = 0;
};

/// One rank's endpoint of a group. Ops are collective: every rank of the group must call the
/// same op with buffers of the same shape and dtype (all_gather's and reduce_scatter's inputs
/// of the same shape), in the same order; a mismatch throws ember::Error on every rank where the
/// implementation can see it (ThreadCollective always does). An endpoint is used by one thread
/// at a time.
class Collective {
  public:
    virtual ~Collective() = default;

    /// This endpoint's rank, in [0, world_size()).
    virtual std::size_t rank() const = 0;
    /// Number of ranks in the group.
    virtual std::size_t world_size() const = 0;
    /// "threads" or "nccl" (for messages and logs).
    virtual std::string name() const = 0;
    /// Whether buffers in `memory` can be passed directly (others go through host copies).
    virtual bool accepts(Memory memory) const = 0;

    /// Replaces `buffer` on every rank by the reduction over ranks of their buffers.
    virtual void all_reduce(const Buffer& buffer, ReduceOp op) = 0;
    /// Replaces `buffer` on every rank by rank `root`'s.
    virtual void broadcast(const Buffer& buffer, std::size_t root) = 0;
    /// `output` (world_size × input's elements) receives every rank's `input`, in rank order.
    virtual void all_gather(const Buffer& input, const Buffer& output) = 0;
    /// `input` is world_size equal chunks; rank r's `output` receives the reduction over ranks
    /// of chunk r.
    virtual void reduce_scatter(const Buffer& input, const Buffer& output, ReduceOp op) = 0;
    /// Starts the all-reduce of `buffer` and returns, where the implementation can run it beside
    /// the caller's later work (a thread of its own, a stream of its own); the others run it at
    /// once. Started ops run in the order they were started, the same on every rank; `buffer`
    /// must stay alive and untouched until the returned Work's wait() returned, and the other
    /// ops of this endpoint first finish what was started. This is how gradients are reduced
    /// while backward still runs (GradientReducer).
    virtual std::unique_ptr<Work> all_reduce_async(const Buffer& buffer, ReduceOp op);
    /// Returns when every rank has called it.
    virtual void barrier() = 0;
    /// Marks the group failed (a rank hit an error): every rank blocked in, or later entering,
    /// an op throws ember::Error with `reason` instead of waiting for this rank forever.
    virtual void abort(const std::string& reason) = 0;
};

namespace detail {
/// A Work that was done when it was made.
struct DoneWork final : Work {
    void wait() override {}
};
}  // namespace detail

inline std::unique_ptr<Work> Collective::all_reduce_async(const Buffer& buffer, ReduceOp op) {
    all_reduce(buffer, op);
    return std::make_unique<detail::DoneWork>();
}

}  // namespace ember::collective
