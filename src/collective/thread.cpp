// ThreadCollective: a rendezvous per op between the threads of a group. Each op runs in three
// phases separated by barriers — post (every rank publishes its buffers), check (every rank
// validates every post, so all of them agree on the error), work (each rank reduces its share of
// the elements or copies what it needs from the others' buffers) — and all_reduce adds a copy out
// of the shared result. A rank's buffers are read by the others only between the barriers of
// the op that posted them, so a rank that returns may reuse its buffers at once.
#include <ember/collective/thread.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>

#include <ember/tensor/error.hpp>

namespace ember::collective {

const char* to_string(ReduceOp op) {
    return op == ReduceOp::Sum ? "sum" : "mean";
}

namespace detail {

struct Post {
    const char* op = nullptr;
    Buffer input;
    Buffer output;
    bool has_output = false;
    ReduceOp reduce = ReduceOp::Sum;
    std::size_t root = 0;
};

struct ThreadGroupState {
    std::size_t world = 0;
    std::optional<std::chrono::milliseconds> timeout;
    std::mutex mu;
    std::condition_variable cv;
    std::size_t arrived = 0, generation = 0;
    std::vector<char> here;  // which ranks reached the current barrier (timeout messages)
    bool aborted = false;
    std::string reason;
    std::vector<Post> posts;
    std::vector<std::byte> scratch;  // all_reduce's result, shared by the ranks
};

// The thread that runs one endpoint's started ops, one after another.
struct AsyncLane {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::packaged_task<void()>> tasks;
    bool stop = false;
    std::thread thread{[this] { run(); }};

    ~AsyncLane() {
        {
            std::lock_guard lock(mu);
            stop = true;
        }
        cv.notify_all();
        thread.join();
    }
    std::future<void> push(std::packaged_task<void()> task) {
        auto f = task.get_future();
        {
            std::lock_guard lock(mu);
            tasks.push_back(std::move(task));
        }
        cv.notify_all();
        return f;
    }

  private:
    void run() {
        for (;;) {
            std::packaged_task<void()> task;
            {
                std::unique_lock lock(mu);
                cv.wait(lock, [&] { return stop || !tasks.empty(); });
                if (tasks.empty()) return;
                task = std::move(tasks.front());
                tasks.pop_front();
            }
            task();  // an error is kept in the task's future, for Work::wait
        }
    }
};

}  // namespace detail

namespace {

using detail::Post;
using detail::ThreadGroupState;

std::string describe(const Buffer& b) {
    return b.shape.to_string() + " (" + std::string(dtype_name(b.dtype)) + ")";
}

[[noreturn]] void fail_aborted(const ThreadGroupState& s, const char* op, std::size_t rank) {
    EMBER_FAIL(Argument, "ThreadCollective ", op, " on rank ", rank,
               ": the group was aborted: ", s.reason);
}

// Waits until every rank has reached this barrier; throws when the group is (or gets) aborted
// or the timeout runs out (which aborts the group, so the other ranks stop waiting too).
void sync(ThreadGroupState& s, const char* op, std::size_t rank) {
    std::unique_lock lock(s.mu);
    if (s.aborted) fail_aborted(s, op, rank);
    s.here[rank] = 1;
    if (++s.arrived == s.world) {
        s.arrived = 0;
        std::fill(s.here.begin(), s.here.end(), 0);
        ++s.generation;
        s.cv.notify_all();
        return;
    }
    const std::size_t gen = s.generation;
    auto done = [&] { return s.generation != gen || s.aborted; };
    if (s.timeout) {
        if (!s.cv.wait_for(lock, *s.timeout, done)) {
            std::ostringstream missing;
            for (std::size_t r = 0; r < s.world; ++r)
                if (!s.here[r]) missing << (missing.tellp() > 0 ? ", " : "") << r;
            s.aborted = true;
            s.reason = "rank " + std::to_string(rank) + " waited " +
                       std::to_string(s.timeout->count()) + " ms in " + op + " for rank(s) " +
                       missing.str();
            s.cv.notify_all();
            fail_aborted(s, op, rank);
        }
    } else {
        s.cv.wait(lock, done);
    }
    if (s.generation == gen) fail_aborted(s, op, rank);
}

bool reducible(DType d) {
    return d == DType::F32 || d == DType::F64 || d == DType::I64 || d == DType::I32;
}

// The first inconsistency between the posts of one op, as a message ("" when they agree).
// Every rank runs it on the same posts, so every rank reaches the same verdict.
std::string check_posts(const ThreadGroupState& s, ErrorKind& kind) {
    kind = ErrorKind::Argument;
    const Post& p0 = s.posts[0];
    const std::string op = p0.op;
    std::ostringstream e;
    for (std::size_t r = 1; r < s.world; ++r) {
        if (std::strcmp(s.posts[r].op, p0.op) != 0) {
            e << "ThreadCollective: rank " << r << " called " << s.posts[r].op
              << " while rank 0 called " << op;
            return e.str();
        }
    }
    if (op == "barrier") return {};
    for (std::size_t r = 0; r < s.world; ++r) {
        const Post& p = s.posts[r];
        if (p.input.memory != Memory::Host || (p.has_output && p.output.memory != Memory::Host)) {
            e << "ThreadCollective " << op << ": rank " << r
              << " passed device memory (only host buffers are accepted)";
            return e.str();
        }
        if (r > 0 && (p.input.shape != p0.input.shape || p.input.dtype != p0.input.dtype)) {
            kind = ErrorKind::Shape;
            e << "ThreadCollective " << op << ": rank " << r << " passed a tensor of shape "
              << describe(p.input) << " but rank 0 passed " << describe(p0.input);
            return e.str();
        }
        if (r > 0 && p.reduce != p0.reduce) {
            e << "ThreadCollective " << op << ": rank " << r << " asked for a "
              << to_string(p.reduce) << " but rank 0 for a " << to_string(p0.reduce);
            return e.str();
        }
        if (r > 0 && p.root != p0.root) {
            e << "ThreadCollective " << op << ": rank " << r << " gave root " << p.root
              << " but rank 0 gave root " << p0.root;
            return e.str();
        }
    }
    if (op == "broadcast" && p0.root >= s.world) {
        e << "ThreadCollective broadcast: root " << p0.root << " is out of range for a group of "
          << s.world << " ranks";
        return e.str();
    }
    if ((op == "all_reduce" || op == "reduce_scatter") && !reducible(p0.input.dtype)) {
        kind = ErrorKind::DType;
        e << "ThreadCollective " << op << ": cannot reduce " << dtype_name(p0.input.dtype)
          << " tensors (f32, f64, i32 and i64 can be)";
        return e.str();
    }
    for (std::size_t r = 0; r < s.world; ++r) {
        const Post& p = s.posts[r];
        if (!p.has_output) continue;
        const std::size_t n = p.input.count(), m = p.output.count();
        const bool ok = op == "all_gather" ? m == n * s.world : m * s.world == n;
        if (!ok || p.output.dtype != p.input.dtype) {
            kind = ErrorKind::Shape;
            e << "ThreadCollective " << op << ": rank " << r << " passed an input of shape "
              << describe(p.input) << " and an output of shape " << describe(p.output) << "; with "
              << s.world << " ranks the output needs "
              << (op == "all_gather" ? n * s.world : n / s.world)
              << " elements of the input's dtype"
              << (op == "reduce_scatter" && n % s.world ? " (the input must split evenly)" : "");
            return e.str();
        }
    }
    return {};
}

template <typename T>
void reduce_range(const ThreadGroupState& s, std::size_t chunk_offset, T* out, std::size_t begin,
                  std::size_t end, ReduceOp op) {
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    for (std::size_t i = begin; i < end; ++i) {
        Acc acc = 0;  // in rank order: every rank's copy of the result is the same
        for (std::size_t r = 0; r < s.world; ++r)
            acc += static_cast<const T*>(s.posts[r].input.data)[chunk_offset + i];
        if (op == ReduceOp::Mean) acc /= static_cast<Acc>(s.world);
        out[i] = static_cast<T>(acc);
    }
}

void reduce(const ThreadGroupState& s, DType dtype, std::size_t chunk_offset, void* out,
            std::size_t begin, std::size_t end, ReduceOp op) {
    switch (dtype) {
        case DType::F32:
            return reduce_range(s, chunk_offset, static_cast<float*>(out), begin, end, op);
        case DType::F64:
            return reduce_range(s, chunk_offset, static_cast<double*>(out), begin, end, op);
        case DType::I64:
            return reduce_range(s, chunk_offset, static_cast<std::int64_t*>(out), begin, end, op);
        case DType::I32:
            return reduce_range(s, chunk_offset, static_cast<std::int32_t*>(out), begin, end, op);
        default:
            EMBER_FAIL(DType, "ThreadCollective: cannot reduce ", dtype_name(dtype), " tensors");
    }
}

// Posts this rank's op, waits for the others and validates; throws the same error on every rank.
void post_and_check(ThreadGroupState& s, std::size_t rank, Post post) {
    {
        std::lock_guard lock(s.mu);
        s.posts[rank] = post;
    }
    sync(s, post.op, rank);
    ErrorKind kind{};
    const std::string error = check_posts(s, kind);
    if (error.empty() && rank == 0 && std::strcmp(post.op, "all_reduce") == 0)
        s.scratch.resize(post.input.bytes());  // nobody touches it before the next barrier
    sync(s, post.op, rank);
    if (!error.empty()) ember::detail::raise(kind, error);
}

}  // namespace

ThreadCollective::ThreadCollective(std::shared_ptr<detail::ThreadGroupState> state,
                                   std::size_t rank)
    : state_(std::move(state)), rank_(rank) {}

ThreadCollective::~ThreadCollective() = default;

namespace {
struct LaneWork final : Work {
    std::future<void> done;
    void wait() override { done.get(); }
    // Never waited for (a step that failed): the lane may still use the buffer, whose owner
    // is about to free it. An aborted group makes the op end at once.
    ~LaneWork() override {
        if (done.valid()) done.wait();
    }
};
}  // namespace

std::unique_ptr<Work> ThreadCollective::all_reduce_async(const Buffer& buffer, ReduceOp op) {
    if (!lane_) lane_ = std::make_unique<detail::AsyncLane>();
    auto work = std::make_unique<LaneWork>();
    work->done =
        lane_->push(std::packaged_task<void()>([this, buffer, op] { all_reduce_now(buffer, op); }));
    return work;
}

void ThreadCollective::drain() {
    if (lane_) lane_->push(std::packaged_task<void()>([] {})).wait();
}

std::vector<std::unique_ptr<ThreadCollective>> ThreadCollective::group(
    std::size_t world_size, std::optional<std::chrono::milliseconds> timeout) {
    EMBER_CHECK(world_size >= 1, Argument,
                "ThreadCollective::group: the world size must be at least 1, got 0");
    EMBER_CHECK(!timeout || timeout->count() > 0, Argument,
                "ThreadCollective::group: the timeout must be positive, got ",
                timeout ? timeout->count() : 0, " ms");
    auto state = std::make_shared<ThreadGroupState>();
    state->world = world_size;
    state->timeout = timeout;
    state->here.assign(world_size, 0);
    state->posts.resize(world_size);
    std::vector<std::unique_ptr<ThreadCollective>> out;
    for (std::size_t r = 0; r < world_size; ++r)
        out.push_back(std::unique_ptr<ThreadCollective>(new ThreadCollective(state, r)));
    return out;
}

std::unique_ptr<ThreadCollective> ThreadCollective::join(const ThreadCollective& other,
                                                         std::size_t rank) {
    EMBER_CHECK(rank < other.world_size(), Argument, "ThreadCollective::join: rank ", rank,
                " is out of range for a group of ", other.world_size(), " ranks");
    return std::unique_ptr<ThreadCollective>(new ThreadCollective(other.state_, rank));
}

std::size_t ThreadCollective::world_size() const {
    return state_->world;
}

void ThreadCollective::all_reduce(const Buffer& buffer, ReduceOp op) {
    drain();
    all_reduce_now(buffer, op);
}

void ThreadCollective::all_reduce_now(const Buffer& buffer, ReduceOp op) {
    ThreadGroupState& s = *state_;
    post_and_check(s, rank_, Post{"all_reduce", buffer, {}, false, op, 0});
    const std::size_t n = buffer.count(), w = s.world;
    reduce(s, buffer.dtype, 0, s.scratch.data(), n * rank_ / w, n * (rank_ + 1) / w, op);
    // Each rank reduced a slice into the shared result: everyone copies all of it.
    sync(s, "all_reduce", rank_);
    if (n) std::memcpy(buffer.data, s.scratch.data(), buffer.bytes());
}

void ThreadCollective::broadcast(const Buffer& buffer, std::size_t root) {
    drain();
    ThreadGroupState& s = *state_;
    post_and_check(s, rank_, Post{"broadcast", buffer, {}, false, ReduceOp::Sum, root});
    if (rank_ != root && buffer.count())
        std::memcpy(buffer.data, s.posts[root].input.data, buffer.bytes());
    sync(s, "broadcast", rank_);
}

void ThreadCollective::all_gather(const Buffer& input, const Buffer& output) {
    drain();
    ThreadGroupState& s = *state_;
    post_and_check(s, rank_, Post{"all_gather", input, output, true, ReduceOp::Sum, 0});
    const std::size_t bytes = input.bytes();
    for (std::size_t r = 0; r < s.world && bytes; ++r)
        std::memcpy(static_cast<std::byte*>(output.data) + r * bytes, s.posts[r].input.data, bytes);
    sync(s, "all_gather", rank_);
}

void ThreadCollective::reduce_scatter(const Buffer& input, const Buffer& output, ReduceOp op) {
    drain();
    ThreadGroupState& s = *state_;
    post_and_check(s, rank_, Post{"reduce_scatter", input, output, true, op, 0});
    const std::size_t m = output.count();
    reduce(s, input.dtype, rank_ * m, output.data, 0, m, op);
    sync(s, "reduce_scatter", rank_);
}

void ThreadCollective::barrier() {
    drain();
    post_and_check(*state_, rank_, Post{"barrier", {}, {}, false, ReduceOp::Sum, 0});
}

void ThreadCollective::abort(const std::string& reason) {
    ThreadGroupState& s = *state_;
    std::lock_guard lock(s.mu);
    if (s.aborted) return;
    s.aborted = true;
    s.reason = "rank " + std::to_string(rank_) + ": " + reason;
    s.cv.notify_all();
}

}  // namespace ember::collective
