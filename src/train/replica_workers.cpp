// ReplicaWorkers: persistent threads, so that an iteration of data-parallel training costs two
// condition-variable hand-offs per replica rather than a thread start.
#include <ember/train/detail/replica_workers.hpp>

#include <utility>

#include <ember/tensor/error.hpp>

namespace ember::train::detail {

ReplicaWorkers::ReplicaWorkers(std::size_t n) {
    EMBER_CHECK(n >= 1, Argument, "ReplicaWorkers: at least one replica is needed");
    for (std::size_t r = 0; r < n; ++r) threads_.emplace_back([this, r] { loop(r); });
}

ReplicaWorkers::~ReplicaWorkers() {
    {
        std::lock_guard lock(mu_);
        quit_ = true;
    }
    start_cv_.notify_all();
    for (auto& t : threads_) t.join();
}

void ReplicaWorkers::run(const std::function<void(std::size_t)>& fn,
                         const std::function<void(std::size_t, const std::string&)>& on_error) {
    std::unique_lock lock(mu_);
    fn_ = &fn;
    on_error_ = &on_error;
    done_ = 0;
    first_ = nullptr;
    ++generation_;
    start_cv_.notify_all();
    done_cv_.wait(lock, [&] { return done_ == threads_.size(); });
    fn_ = nullptr;
    on_error_ = nullptr;
    if (first_) std::rethrow_exception(std::exchange(first_, nullptr));
}

void ReplicaWorkers::loop(std::size_t r) {
    std::size_t seen = 0;
    for (;;) {
        const std::function<void(std::size_t)>* fn = nullptr;
        const std::function<void(std::size_t, const std::string&)>* on_error = nullptr;
        {
            std::unique_lock lock(mu_);
            start_cv_.wait(lock, [&] { return quit_ || generation_ != seen; });
            if (quit_) return;
            seen = generation_;
            fn = fn_;
            on_error = on_error_;
        }
        std::exception_ptr error;
        std::string what;
        try {
            (*fn)(r);
        } catch (const std::exception& e) {
            error = std::current_exception();
            what = e.what();
        } catch (...) {
            error = std::current_exception();
            what = "unknown exception";
        }
        if (error) {
            {
                std::lock_guard lock(mu_);
                if (!first_) first_ = error;  // the cause; the others fail because of it
            }
            (*on_error)(r, what);
        }
        std::lock_guard lock(mu_);
        if (++done_ == threads_.size()) done_cv_.notify_all();
    }
}

}  // namespace ember::train::detail
