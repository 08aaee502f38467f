// The thread pool behind parallel_for. A region's chunks are taken by compare-and-swap on one
// word that names the region (below), so the threads that join it take no lock. Workers that
// find nothing to take spin up to 50 µs for the next region (the caller likewise for the last
// chunks of its own) where the pool has 4 threads or more, then wait passively (condition
// variable); EMBER_CPU_SPIN_US=N sets the spin (0: none). Spinning saves the futex wake-up of
// every region, tens of microseconds at 16 threads, where nothing else wants the cores.
#include "parallel.hpp"

#include <algorithm>
#include <cstdlib>

#if EMBER_CPU_THREADS
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#endif

namespace ember::detail::cpu {

#if EMBER_CPU_THREADS
namespace {

std::size_t default_threads() {
    if (const char* e = std::getenv("EMBER_NUM_THREADS")) {
        const long n = std::strtol(e, nullptr, 10);
        if (n >= 1) return static_cast<std::size_t>(n);
    }
    return std::max(1u, std::thread::hardware_concurrency());
}

/// How long a thread spins for work before it sleeps, for a pool of `threads`:
/// EMBER_CPU_SPIN_US where set (0: never), else 50 µs from 4 threads on and never below. On the
/// GPU machine's 16-core Xeon, spinning 50 µs took a 16-thread batch-1 MLP's forward pass from
/// 0.08 to 0.03 ms and the MLP's and guide CNN's 16-thread training steps 5-28 % down
/// (results/cpu-pool-claim-ab-2026-12-01-h200.jsonl), as ONNX Runtime's and OpenMP's pools spin
/// by default; a pool of 2 or 3 threads (a small machine, likely shared with other work, as CI's
/// 2-core runners are) sleeps at once.
std::chrono::microseconds spin_time(std::size_t threads) {
    const char* e = std::getenv("EMBER_CPU_SPIN_US");
    if (e && *e) {
        const long us = std::strtol(e, nullptr, 10);
        return std::chrono::microseconds(std::clamp(us, 0L, 100000L));
    }
    return std::chrono::microseconds(threads >= 4 ? 50 : 0);
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
}

/// Spins until `done()` or `limit` has passed; whether `done()` held.
template <typename F>
bool spin_until(std::chrono::microseconds limit, F&& done) {
    if (limit.count() == 0) return done();
    const auto until = std::chrono::steady_clock::now() + limit;
    for (unsigned i = 0;; ++i) {
        if (done()) return true;
        // The clock is read every 64 rounds only: it costs as much as a few dozen pauses.
        if (i % 64 == 63 && std::chrono::steady_clock::now() >= until) return false;
        cpu_relax();
    }
}

/// The pool. A region is published in one atomic word, `claim_`: its generation, its number of
/// chunks and the next chunk to take. A thread takes a chunk by compare-and-swap on that word,
/// so it takes only chunks of the region the word names, and that region's fields (ctx_, fn_,
/// n_), written before the word was, cannot change while it runs one of them: the caller
/// publishes the next region only once every chunk of this one is done. Spinning workers thus
/// join a region without a lock. Before 2026-12-01 every worker took the pool's mutex at the
/// start and the end of each region, and on the GPU machine's 16-core Xeon, with the workers
/// spinning, a 784 × 512 batch-1 product took 29-42 µs at 16 threads against 8-11 at 8; with
/// the word, 9-11 at 16 (results/cpu-pool-claim-ab-2026-12-01-h200.jsonl). Only sleeping
/// workers use the mutex and the condition variable.
class Pool {
  public:
    explicit Pool(std::size_t n) { resize(n); }
    ~Pool() { stop(); }
    std::size_t size() const { return size_; }
    void resize(std::size_t n) {
        stop();
        size_ = std::min<std::size_t>(std::max<std::size_t>(1, n), kMaxChunks / 4);
        spin_ = spin_time(size_);
        quit_ = false;
        for (std::size_t i = 1; i < size_; ++i) workers_.emplace_back([this] { loop(); });
    }
    void run(std::size_t n, std::size_t grain, void* ctx,
             void (*fn)(void*, std::size_t, std::size_t)) {
        std::lock_guard run_lock(run_mu_);  // one parallel region at a time
        const std::size_t chunks = std::min(size_ * 4, (n + grain - 1) / grain);
        // The previous region is done (every chunk ran and was counted): nobody reads these.
        ctx_ = ctx;
        fn_ = fn;
        n_ = n;
        done_.store(0, std::memory_order_relaxed);
        generation_ = (generation_ + 1) & 0xffffffffu;
        claim_.store(pack(generation_, chunks, 0), std::memory_order_release);
        // Wake sleepers, only as many as there are chunks beyond the caller's own (a region of
        // two chunks on a pool of 16 would otherwise wake 15 threads that find nothing to do).
        // Under mu_: a worker checks for work and goes to sleep under it, so it either sees
        // this region or is counted in sleepers_ here.
        const std::size_t wake = chunks > 1 ? std::min(chunks, size_) - 1 : 0;
        if (wake > 0) {
            std::lock_guard lock(mu_);
            if (sleepers_ > 0) {
                if (wake >= sleepers_)
                    cv_.notify_all();
                else
                    for (std::size_t i = 0; i < wake; ++i) cv_.notify_one();
            }
        }
        work();
        if (spin_until(spin_, [&] { return done_.load(std::memory_order_acquire) == chunks; }))
            return;
        std::unique_lock lock(mu_);
        done_cv_.wait(lock, [&] { return done_.load(std::memory_order_acquire) == chunks; });
    }

  private:
    static constexpr std::size_t kMaxChunks = 0xffff;
    static std::uint64_t pack(std::uint64_t generation, std::uint64_t chunks, std::uint64_t next) {
        return generation << 32 | chunks << 16 | next;
    }
    static std::size_t chunks_of(std::uint64_t c) { return (c >> 16) & kMaxChunks; }
    static std::size_t next_of(std::uint64_t c) { return c & kMaxChunks; }
    bool claimable() const {
        const std::uint64_t c = claim_.load(std::memory_order_acquire);
        return next_of(c) < chunks_of(c);
    }
    /// Takes and runs chunks of the published region until none is left; whether it ran any.
    /// The chunks it ran are counted once, when it has no more to take: until then the region is
    /// not done, so the word cannot name another region.
    bool work() {
        std::size_t finished = 0, chunks = 0;
        std::uint64_t c = claim_.load(std::memory_order_acquire);
        for (;;) {
            chunks = chunks_of(c);
            const std::size_t i = next_of(c);
            if (i >= chunks) break;
            if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel,
                                              std::memory_order_acquire))
                continue;  // c now holds the word as it is
            fn_(ctx_, n_ * i / chunks, n_ * (i + 1) / chunks);
            ++finished;
            c = claim_.load(std::memory_order_acquire);
        }
        // The last chunks done: wake the caller if it sleeps. Under mu_, so that the caller
        // cannot miss it between its check and its wait.
        if (finished && done_.fetch_add(finished, std::memory_order_acq_rel) + finished == chunks) {
            std::lock_guard lock(mu_);
            done_cv_.notify_all();
        }
        return finished > 0;
    }
    void loop() {
        for (;;) {
            if (work()) continue;
            if (spin_until(spin_, [&] {
                    return claimable() || quit_flag_.load(std::memory_order_relaxed);
                })) {
                if (quit_flag_.load(std::memory_order_relaxed)) return;
                continue;
            }
            std::unique_lock lock(mu_);
            ++sleepers_;
            cv_.wait(lock, [&] { return quit_ || claimable(); });
            --sleepers_;
            if (quit_) return;
        }
    }
    void stop() {
        {
            std::lock_guard lock(mu_);
            quit_ = true;
            quit_flag_.store(true, std::memory_order_relaxed);
        }
        cv_.notify_all();
        for (auto& t : workers_) t.join();
        workers_.clear();
        quit_flag_.store(false, std::memory_order_relaxed);
    }

    std::chrono::microseconds spin_{0};  // written by resize() only, with no worker running
    std::size_t size_ = 1;
    std::vector<std::thread> workers_;
    std::mutex mu_, run_mu_;
    std::condition_variable cv_, done_cv_;
    bool quit_ = false;                   // under mu_
    std::size_t sleepers_ = 0;            // under mu_: workers waiting on cv_
    std::atomic<bool> quit_flag_{false};  // the same, for spinning workers
    std::uint64_t generation_ = 0;        // the caller's (under run_mu_)
    // The region's fields: written by the caller before it publishes claim_, read by the
    // threads that took one of its chunks.
    void* ctx_ = nullptr;
    void (*fn_)(void*, std::size_t, std::size_t) = nullptr;
    std::size_t n_ = 0;
    // The words every thread writes have cache lines of their own: next to the fields above
    // (read for every chunk) each update would evict them from the other cores' caches.
    alignas(64) std::atomic<std::uint64_t> claim_{0};
    alignas(64) std::atomic<std::size_t> done_{0};
};

Pool& pool() {
    static Pool p(default_threads());
    return p;
}
thread_local bool t_in_parallel = false;

}  // namespace

std::size_t num_threads() {
    return t_in_parallel ? 1 : pool().size();
}
void set_num_threads(std::size_t n) {
    pool().resize(n);
}

void parallel_for_raw(std::size_t n, std::size_t grain, void* ctx,
                      void (*fn)(void*, std::size_t, std::size_t)) {
    struct Wrap {
        void* ctx;
        void (*fn)(void*, std::size_t, std::size_t);
    } w{ctx, fn};
    // Nested regions run inline in the calling worker.
    pool().run(n, std::max<std::size_t>(grain, 1), &w, [](void* c, std::size_t b, std::size_t e) {
        auto* w = static_cast<Wrap*>(c);
        const bool prev = t_in_parallel;
        t_in_parallel = true;
        w->fn(w->ctx, b, e);
        t_in_parallel = prev;
    });
}
#else
std::size_t num_threads() {
    return 1;
}
void set_num_threads(std::size_t) {}
void parallel_for_raw(std::size_t n, std::size_t, void* ctx,
                      void (*fn)(void*, std::size_t, std::size_t)) {
    fn(ctx, 0, n);
}
#endif

}  // namespace ember::detail::cpu
