#pragma once
// The threads of data-parallel training: one per replica, alive for a whole fit, each running
// its replica's share of an iteration while the caller waits.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "../../export.hpp"

namespace ember::train::detail {

/// N worker threads that run `fn(r)` for r = 0..N-1 together (r on thread r).
class EMBER_API ReplicaWorkers {
  public:
    /// Starts `n` (≥ 1) threads.
    explicit ReplicaWorkers(std::size_t n);
    /// Stops and joins the threads.
    ~ReplicaWorkers();
    ReplicaWorkers(const ReplicaWorkers&) = delete;
    ReplicaWorkers& operator=(const ReplicaWorkers&) = delete;

    /// Number of threads.
    std::size_t size() const;
    /// Runs `fn(r)` on every thread and waits for all of them. When one throws, `on_error(r,
    /// what)` runs on that thread at once (to abort a collective the others may be waiting in),
    /// and the first exception thrown is rethrown here once every thread is done.
    void run(const std::function<void(std::size_t)>& fn,
             const std::function<void(std::size_t, const std::string&)>& on_error);

  private:
    // The threads and their hand-offs, in src/train/replica_workers.cpp: a file that includes
    // the Learner does not parse <thread>, <mutex> and <condition_variable> for them.
    struct State;
    std::unique_ptr<State> s_;
};

}  // namespace ember::train::detail
