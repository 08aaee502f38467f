#pragma once
// ThreadCollective: the ranks are threads of this process. Each op is a rendezvous: every rank
// posts its buffer, the ranks check that they called the same op on the same shapes (every rank
// sees every description, so all of them throw the same error), each reduces its share of the
// elements, and each copies the result out. Works for tensors of any backend through host
// buffers (ops.hpp copies device tensors to the host and back).
//
//   auto ranks = ember::collective::ThreadCollective::group(4);   // endpoints 0..3
//   std::thread t([&] { ember::collective::all_reduce(*ranks[1], x1, ReduceOp::Mean); });
#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "../export.hpp"
#include "collective.hpp"

namespace ember::collective {

namespace detail {
struct ThreadGroupState;
struct AsyncLane;
}  // namespace detail

/// One rank of an in-process group of threads.
class EMBER_API ThreadCollective final : public Collective {
  public:
    /// The `world_size` (≥ 1) endpoints of a new group, rank i at index i. `timeout` bounds how
    /// long a rank waits for the others in one op (ember::Error naming the op and the missing
    /// ranks when it runs out); none by default.
    static std::vector<std::unique_ptr<ThreadCollective>> group(
        std::size_t world_size, std::optional<std::chrono::milliseconds> timeout = std::nullopt);

    /// Endpoint `rank` of the group `other` belongs to (the same group). ArgumentError when
    /// `rank` is not below the world size.
    static std::unique_ptr<ThreadCollective> join(const ThreadCollective& other, std::size_t rank);

    ~ThreadCollective() override;

    std::size_t rank() const override { return rank_; }
    std::size_t world_size() const override;
    std::string name() const override { return "threads"; }
    /// Host memory only.
    bool accepts(Memory memory) const override { return memory == Memory::Host; }

    void all_reduce(const Buffer& buffer, ReduceOp op) override;
    /// Runs on a thread of this endpoint's own (started on first use), in start order.
    std::unique_ptr<Work> all_reduce_async(const Buffer& buffer, ReduceOp op) override;
    void broadcast(const Buffer& buffer, std::size_t root) override;
    void all_gather(const Buffer& input, const Buffer& output) override;
    void reduce_scatter(const Buffer& input, const Buffer& output, ReduceOp op) override;
    void barrier() override;
    void abort(const std::string& reason) override;

  private:
    ThreadCollective(std::shared_ptr<detail::ThreadGroupState> state, std::size_t rank);
    // Waits for the ops started by all_reduce_async (the others keep the start order).
    void drain();
    void all_reduce_now(const Buffer& buffer, ReduceOp op);

    std::shared_ptr<detail::ThreadGroupState> state_;
    std::size_t rank_;
    std::unique_ptr<detail::AsyncLane> lane_;
};

}  // namespace ember::collective
