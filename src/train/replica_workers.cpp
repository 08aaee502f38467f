// ReplicaWorkers: persistent threads, so that an iteration of data-parallel training costs two
// condition-variable hand-offs per replica rather than a thread start.
#include <ember/train/detail/replica_workers.hpp>

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <ember/tensor/error.hpp>

namespace ember::train::detail {

struct ReplicaWorkers::State {
    void loop(std::size_t r);

    std::vector<std::thread> threads_;
    std::mutex mu_;
    std::condition_variable start_cv_, done_cv_;
    const std::function<void(std::size_t)>* fn_ = nullptr;
    const std::function<void(std::size_t, const std::string&)>* on_error_ = nullptr;
    std::size_t generation_ = 0, done_ = 0;
    bool quit_ = false;
    std::exception_ptr first_;
};

ReplicaWorkers::ReplicaWorkers(std::size_t n) : s_(std::make_unique<State>()) {
    EMBER_CHECK(n >= 1, Argument, "ReplicaWorkers: at least one replica is needed");
    for (std::size_t r = 0; r < n; ++r)
        s_->threads_.emplace_back([s = s_.get(), r] { s->loop(r); });
}

ReplicaWorkers::~ReplicaWorkers() {
    {
        std::lock_guard lock(s_->mu_);
        s_->quit_ = true;
    }
    s_->start_cv_.notify_all();
    for (auto& t : s_->threads_) t.join();
}

std::size_t ReplicaWorkers::size() const {
    return s_->threads_.size();
}

void ReplicaWorkers::run(const std::function<void(std::size_t)>& fn,
                         const std::function<void(std::size_t, const std::string&)>& on_error) {
    State& s = *s_;
    std::unique_lock lock(s.mu_);
    s.fn_ = &fn;
    s.on_error_ = &on_error;
    s.done_ = 0;
    s.first_ = nullptr;
    ++s.generation_;
    s.start_cv_.notify_all();
    s.done_cv_.wait(lock, [&] { return s.done_ == s.threads_.size(); });
    s.fn_ = nullptr;
    s.on_error_ = nullptr;
    if (s.first_) std::rethrow_exception(std::exchange(s.first_, nullptr));
}

void ReplicaWorkers::State::loop(std::size_t r) {
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
