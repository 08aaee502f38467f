// The data loader's threading, compiled once for every batch type: workers claim batch
// indices in order, never more than `prefetch` ahead of the caller (a bounded queue), and put
// what they made in a reorder buffer keyed by batch index, from which next() takes the batches
// in order. The batch a worker makes depends only on its index, not on which worker makes it,
// so the sequence is the same for any number of workers.
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "ember/data/dataloader.hpp"

namespace ember::data::detail {

namespace {
/// What a job left for one batch: the batch, or the exception it threw.
struct Result {
    std::shared_ptr<void> value;
    std::exception_ptr error;
};
}  // namespace

struct BatchPool::State {
    std::size_t prefetch = 1;
    std::mutex mutex;
    std::condition_variable work_cv;   // workers: a batch may be claimed, or stop
    std::condition_variable ready_cv;  // caller: a batch is ready
    std::size_t claimed = 0;           // the next batch index to hand to a worker
    std::size_t consumed = 0;          // the next batch index the caller takes
    bool stop = false;
    std::map<std::size_t, Result> ready;  // the reorder buffer
    std::vector<std::thread> threads;
};

BatchPool::BatchPool(std::size_t num_batches, std::size_t num_workers, std::size_t prefetch,
                     Job job)
    : num_batches_(num_batches), job_(std::move(job)), state_(std::make_unique<State>()) {
    state_->prefetch = std::max<std::size_t>(1, prefetch);
    try {
        for (std::size_t i = 0; i < num_workers; ++i)
            state_->threads.emplace_back([this] { work(); });
    } catch (...) {
        stop_and_join();  // the threads already started
        throw;
    }
}

BatchPool::~BatchPool() {
    stop_and_join();
}

void BatchPool::stop_and_join() {
    {
        std::lock_guard lock(state_->mutex);
        state_->stop = true;
    }
    state_->work_cv.notify_all();
    for (auto& t : state_->threads)
        if (t.joinable()) t.join();
    state_->threads.clear();
}

void BatchPool::work() {
    State& s = *state_;
    for (;;) {
        std::size_t b;
        {
            std::unique_lock lock(s.mutex);
            s.work_cv.wait(lock, [&] {
                return s.stop || s.claimed >= num_batches_ || s.claimed < s.consumed + s.prefetch;
            });
            if (s.stop || s.claimed >= num_batches_) return;
            b = s.claimed++;
        }
        Result r;
        try {
            r.value = job_(b);
        } catch (...) {
            r.error = std::current_exception();
        }
        {
            std::lock_guard lock(s.mutex);
            s.ready.emplace(b, std::move(r));
        }
        s.ready_cv.notify_all();
    }
}

std::shared_ptr<void> BatchPool::next() {
    if (failed_ || next_ >= num_batches_) return nullptr;
    State& s = *state_;
    if (s.threads.empty()) {
        try {
            auto v = job_(next_);
            ++next_;
            return v;
        } catch (...) {
            failed_ = true;
            throw;
        }
    }
    Result r;
    {
        std::unique_lock lock(s.mutex);
        s.ready_cv.wait(lock, [&] { return s.ready.count(next_) > 0; });
        auto it = s.ready.find(next_);
        r = std::move(it->second);
        s.ready.erase(it);
        s.consumed = ++next_;
        if (r.error) s.stop = true;  // the epoch ends here: no more work
    }
    s.work_cv.notify_all();
    if (r.error) {
        failed_ = true;
        std::rethrow_exception(r.error);
    }
    return r.value;
}

}  // namespace ember::data::detail
