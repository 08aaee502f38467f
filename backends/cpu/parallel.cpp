// The thread pool behind parallel_for. Workers wait passively (condition variable) so that they
// do not fight OpenBLAS's own threads for the cores.
#include "parallel.hpp"

#include <algorithm>
#include <cstdlib>

#if EMBER_CPU_THREADS
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>
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

class Pool {
public:
    explicit Pool(std::size_t n) { resize(n); }
    ~Pool() { stop(); }
    std::size_t size() const { return size_; }
    void resize(std::size_t n) {
        stop();
        size_ = std::max<std::size_t>(1, n);
        quit_ = false;
        for (std::size_t i = 1; i < size_; ++i) workers_.emplace_back([this] { loop(); });
    }
    void run(std::size_t n, std::size_t grain, void* ctx, void (*fn)(void*, std::size_t, std::size_t)) {
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
            next_.store(0);
            done_ = 0;
            ++generation_;
        }
        cv_.notify_all();
        work();
        std::unique_lock lock(mu_);
        done_cv_.wait(lock, [&] { return done_ == chunks_ && active_ == 0; });
    }

private:
    void work() {
        std::size_t finished = 0;
        for (;;) {
            const std::size_t c = next_.fetch_add(1);
            if (c >= chunks_) break;
            const std::size_t b = n_ * c / chunks_, e = n_ * (c + 1) / chunks_;
            fn_(ctx_, b, e);
            ++finished;
        }
        if (finished) {
            std::lock_guard lock(mu_);
            done_ += finished;
            if (done_ == chunks_) done_cv_.notify_all();
        }
    }
    void loop() {
        std::size_t seen = 0;
        for (;;) {
            {
                std::unique_lock lock(mu_);
                cv_.wait(lock, [&] { return quit_ || generation_ != seen; });
                if (quit_) return;
                seen = generation_;
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
        }
        cv_.notify_all();
        for (auto& t : workers_) t.join();
        workers_.clear();
    }

    std::size_t size_ = 1;
    std::vector<std::thread> workers_;
    std::mutex mu_, run_mu_;
    std::condition_variable cv_, done_cv_;
    bool quit_ = false;
    std::size_t generation_ = 0;
    void* ctx_ = nullptr;
    void (*fn_)(void*, std::size_t, std::size_t) = nullptr;
    std::size_t n_ = 0, chunks_ = 0, done_ = 0, active_ = 0;
    std::atomic<std::size_t> next_{0};
};

Pool& pool() {
    static Pool p(default_threads());
    return p;
}
thread_local bool t_in_parallel = false;

}  // namespace

std::size_t num_threads() { return t_in_parallel ? 1 : pool().size(); }
void set_num_threads(std::size_t n) { pool().resize(n); }

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
std::size_t num_threads() { return 1; }
void set_num_threads(std::size_t) {}
void parallel_for_raw(std::size_t n, std::size_t, void* ctx,
                      void (*fn)(void*, std::size_t, std::size_t)) {
    fn(ctx, 0, n);
}
#endif

}  // namespace ember::detail::cpu
