// The thread pool behind parallel_for. Workers wait passively (condition variable) by default,
// so that they do not fight OpenBLAS's own threads for the cores; EMBER_CPU_SPIN_US=N lets them
// (and the caller, for the last chunks) spin up to N microseconds for the next region first,
// which saves the futex wake-up of every region (tens of microseconds at 16 threads) where no
// other pool wants the cores (EMBER_CPU_GEMM=portable).
#include "parallel.hpp"

#include <algorithm>
#include <cstdlib>

#if EMBER_CPU_THREADS
#include <atomic>
#include <chrono>
#include <condition_variable>
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

/// EMBER_CPU_SPIN_US: how long a thread spins for work before it sleeps (0, the default: never).
std::chrono::microseconds spin_time() {
    if (const char* e = std::getenv("EMBER_CPU_SPIN_US")) {
        const long us = std::strtol(e, nullptr, 10);
        if (us > 0) return std::chrono::microseconds(std::min(us, 100000L));
    }
    return std::chrono::microseconds(0);
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

class Pool {
  public:
    explicit Pool(std::size_t n) : spin_(spin_time()) { resize(n); }
    ~Pool() { stop(); }
    std::size_t size() const { return size_; }
    void resize(std::size_t n) {
        stop();
        size_ = std::max<std::size_t>(1, n);
        quit_ = false;
        for (std::size_t i = 1; i < size_; ++i) workers_.emplace_back([this] { loop(); });
    }
    void run(std::size_t n, std::size_t grain, void* ctx,
             void (*fn)(void*, std::size_t, std::size_t)) {
        std::lock_guard run_lock(run_mu_);  // one parallel region at a time
        const std::size_t chunks = std::min(size_ * 4, (n + grain - 1) / grain);
        {
            // Workers still inside the previous region's work() read these fields: wait them out.
            std::unique_lock lock(mu_);
            done_cv_.wait(lock, [&] { return active_ == 0; });
            ctx_ = ctx;
            fn_ = fn;
            n_ = n;
            chunks_ = chunks;
            next_.store(0, std::memory_order_relaxed);
            done_.store(0, std::memory_order_relaxed);
            generation_.store(generation_.load(std::memory_order_relaxed) + 1,
                              std::memory_order_release);
        }
        // Wake only as many workers as there are chunks beyond the caller's own: a region of two
        // chunks on a pool of 16 would otherwise wake 15 threads that all queue for mu_ and find
        // nothing to do. (A worker woken for nothing, or late, just sees no chunk left; one
        // still spinning needs no notification and takes a chunk on its own.)
        const std::size_t wake = chunks > 1 ? std::min(chunks, size_) - 1 : 0;
        if (wake > 0 && wake + 1 >= size_) {
            cv_.notify_all();
        } else {
            for (std::size_t i = 0; i < wake; ++i) cv_.notify_one();
        }
        work();
        // Every chunk done means no worker calls fn_ on this region's ctx any more; a worker
        // still leaving work() is waited for by the next region (active_ above).
        if (spin_until(spin_, [&] { return done_.load(std::memory_order_acquire) == chunks; }))
            return;
        std::unique_lock lock(mu_);
        done_cv_.wait(lock, [&] { return done_.load(std::memory_order_acquire) == chunks; });
    }

  private:
    void work() {
        std::size_t finished = 0;
        for (;;) {
            const std::size_t c = next_.fetch_add(1, std::memory_order_relaxed);
            if (c >= chunks_) break;
            const std::size_t b = n_ * c / chunks_, e = n_ * (c + 1) / chunks_;
            fn_(ctx_, b, e);
            ++finished;
        }
        if (finished &&
            done_.fetch_add(finished, std::memory_order_acq_rel) + finished == chunks_) {
            // Under mu_, so that the caller cannot miss it between its check and its wait.
            std::lock_guard lock(mu_);
            done_cv_.notify_all();
        }
    }
    void loop() {
        std::size_t seen = 0;
        for (;;) {
            spin_until(spin_, [&] {
                return generation_.load(std::memory_order_acquire) != seen ||
                       quit_flag_.load(std::memory_order_relaxed);
            });
            {
                std::unique_lock lock(mu_);
                cv_.wait(lock, [&] {
                    return quit_ || generation_.load(std::memory_order_relaxed) != seen;
                });
                if (quit_) return;
                seen = generation_.load(std::memory_order_relaxed);
                ++active_;
            }
            work();
            std::lock_guard lock(mu_);
            if (--active_ == 0) done_cv_.notify_all();
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

    const std::chrono::microseconds spin_;
    std::size_t size_ = 1;
    std::vector<std::thread> workers_;
    std::mutex mu_, run_mu_;
    std::condition_variable cv_, done_cv_;
    bool quit_ = false;                       // under mu_
    std::atomic<bool> quit_flag_{false};      // the same, for spinning workers
    std::atomic<std::size_t> generation_{0};  // written under mu_, read by spinning workers too
    void* ctx_ = nullptr;
    void (*fn_)(void*, std::size_t, std::size_t) = nullptr;
    std::size_t n_ = 0, chunks_ = 0, active_ = 0;
    // The counters every thread writes have cache lines of their own: next to the fields above
    // (read by every worker for every chunk) each increment would evict them from the other
    // cores' caches, a cost that grows with the thread count. (done_ is the last member: the
    // class's alignment pads the line after it.)
    alignas(64) std::atomic<std::size_t> next_{0};
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
