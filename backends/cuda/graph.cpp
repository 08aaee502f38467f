// Whole steps captured as CUDA graphs (include/ember/stacks/cuda_graph.hpp): the stream
// capture around the step, the private pool that keeps the step's buffers for its replays, the
// generator's device-side seed and offset, and the node that rewrites the optimizer's scalars
// before each replay.
#include "graph.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <optional>

#include "../common/captured_step.hpp"
#include "ember/stacks/cuda_graph.hpp"
#include "graph_kernels.hpp"
#include "runtime.hpp"

namespace ember::detail::cuda {

namespace {

constinit thread_local CaptureState* t_capture = nullptr;
std::shared_mutex g_gate;

std::atomic<std::uint64_t> g_seed{0x853c49e6748fea9bull};
std::atomic<std::uint64_t> g_counter{0};

/// The generator's device copy, per device: {seed, offset}, which captured draws read, and what
/// the host knows the device will hold once the queued work has run.
struct DeviceRng {
    std::uint64_t* state = nullptr;
    bool known = false;
    std::uint64_t seed = 0, offset = 0;
};
std::mutex g_rng_mu;
std::unordered_map<int, DeviceRng> g_rng;

DeviceRng& device_rng(int device) {
    std::lock_guard lock(g_rng_mu);
    DeviceRng& r = g_rng[device];
    if (r.state == nullptr) {
        use_device(device);
        EMBER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&r.state), 2 * sizeof(std::uint64_t)));
    }
    return r;
}

/// Queues a write of the host's seed and counter to the device's copy when they differ from
/// what it will hold (eager draws or a new seed since the last replay).
void sync_rng(DeviceRng& r, cudaStream_t s) {
    const std::uint64_t seed = g_seed.load(), offset = g_counter.load();
    if (r.known && r.seed == seed && r.offset == offset) return;
    launch_rng_set(r.state, seed, offset, s);
    r.known = true;
    r.seed = seed;
    r.offset = offset;
}

}  // namespace

std::shared_lock<std::shared_mutex> capture_gate() {
    if (t_capture != nullptr) return {};  // the capturing thread holds it already
    return std::shared_lock(g_gate);
}

CaptureState* active_capture() {
    return t_capture;
}

void forbid_in_capture(const char* op) {
    if (t_capture == nullptr) [[likely]]
        return;
    EMBER_FAIL(Device, "cuda::capture: ", op,
               " inside a captured step: it waits for the device or reads host memory, which a "
               "replayed CUDA graph cannot do (read results after capture() or replay() returns; "
               "copy new inputs into the captured ones)");
}

RngDraw next_draw(int device) {
    RngDraw d;
    d.seed = g_seed.load();
    d.counter = g_counter.fetch_add(1);
    if (CaptureState* c = capturing(device)) {
        d.counter = c->draws++;
        d.state = c->rng;
    }
    return d;
}

void seed_generator(std::uint64_t seed) {
    g_seed = seed;
    g_counter = 0;
}

void* pool_take(CaptureState& c, std::size_t size, std::size_t* block_size) {
    PrivatePool& p = *c.pool;
    if (block_size) *block_size = size;
    {
        // Best fit within 2×: a step's buffers come in a few sizes (f32 and bf16 copies of one
        // shape among them), and a block of another class that would do saves a new one (exact
        // classes only left the ResNet step's pool 12 % above its peak in use). A larger block
        // is never split: the graph reads it at fixed addresses.
        std::lock_guard lock(p.mu);
        const std::size_t most = block_size ? 2 * size : size;  // no size to report: exact
        for (auto it = p.free.lower_bound(size); it != p.free.end() && it->first <= most; ++it) {
            if (it->second.empty()) continue;
            void* b = it->second.back();
            it->second.pop_back();
            if (block_size) *block_size = it->first;
            return b;
        }
    }
    void* b = nullptr;
    const cudaError_t e = cudaMalloc(&b, size);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        // The caching pool cannot be trimmed here: that waits for the device.
        EMBER_FAIL(Device, "cuda::capture: cudaMalloc of ", size,
                   " bytes for the step's private pool failed on device ", c.device, ": ",
                   cudaGetErrorName(e));
    }
    note_driver_alloc(c.device, size);
    std::lock_guard lock(p.mu);
    p.bytes += size;
    return b;
}

void pool_give(PrivatePool& pool, void* block, std::size_t size) {
    {
        std::lock_guard lock(pool.mu);
        if (pool.open) {
            pool.free[size].push_back(block);
            return;
        }
    }
    cache_block(pool.device, block, size);
}

bool pool_give_if_open(PrivatePool& pool, void* block, std::size_t size) {
    std::lock_guard lock(pool.mu);
    if (!pool.open) return false;
    pool.free[size].push_back(block);
    return true;
}

void note_replaced(CaptureState& c, std::size_t size) {
    ++c.replaced;
    c.replaced_bytes += size;
}

void pool_adopt(CaptureState& c, void* block, std::size_t size) {
    note_replaced(c, size);
    std::lock_guard lock(c.pool->mu);
    c.pool->free[size].push_back(block);
    c.pool->bytes += size;
}

namespace {
/// Closes a pool: its free blocks go to the device's caching pool, and so will the blocks its
/// tensors still hold when they go.
void close_pool(PrivatePool& pool) {
    std::map<std::size_t, std::vector<void*>> blocks;
    {
        std::lock_guard lock(pool.mu);
        pool.open = false;
        blocks.swap(pool.free);
    }
    for (auto& [size, list] : blocks)
        for (void* b : list) cache_block(pool.device, b, size);
}

/// The step count t behind Adam's corrections (1 − βᵗ, as ember::optim computes them), or 0 when
/// they are not of that form (then they stay as captured). β₂ᵗ underflows far later than β₁ᵗ,
/// so t is read from either and checked against both.
double adam_time(const AdamStepScalars& a) {
    auto from = [](double beta, double c) {
        if (!(beta > 0 && beta < 1 && c > 0 && c < 1)) return 0.0;
        const double t = std::round(std::log1p(-c) / std::log(beta));
        return std::isfinite(t) && t >= 1 ? t : 0.0;
    };
    for (double t : {from(a.beta_2, a.correction_2), from(a.beta_1, a.correction_1)})
        if (t > 0 && 1 - std::pow(a.beta_1, t) == a.correction_1 &&
            1 - std::pow(a.beta_2, t) == a.correction_2)
            return t;
    return 0;
}

/// {lr, correction_1, correction_2} of slot `a` at replay `r` (0: the run at capture), with the
/// optimizer's own formula, so that the values are the ones an eager step would pass.
void slot_values(const AdamSlot& a, std::size_t r, std::optional<double> lr, double* out) {
    const AdamStepScalars& s = a.at_capture;
    out[0] = lr.value_or(s.lr);
    if (a.time > 0) {
        const double t = a.time + double(r);
        out[1] = 1 - std::pow(s.beta_1, t);
        out[2] = 1 - std::pow(s.beta_2, t);
    } else {
        out[1] = s.correction_1;
        out[2] = s.correction_2;
    }
}
}  // namespace

const double* adam_slot(int device, const AdamStepScalars& s) {
    CaptureState* c = capturing(device);
    if (c == nullptr) return nullptr;
    const std::size_t i = c->adam.size();
    if (i % kAdamSlotsPerNode == 0) {
        // A new block of device scalars, written by a node of its own ahead of the update.
        auto* block = static_cast<double*>(pool_take(*c, 3 * sizeof(double) * kAdamSlotsPerNode));
        AdamScalarBlock b;
        b.dst = block;
        b.n = kAdamSlotsPerNode;
        launch_adam_scalars(b, c->stream);
        cudaStreamCaptureStatus status{};
        const cudaGraphNode_t* deps = nullptr;
        std::size_t n = 0;
        EMBER_CUDA_CHECK(
            cudaStreamGetCaptureInfo(c->stream, &status, nullptr, nullptr, &deps, nullptr, &n));
        EMBER_CHECK(status == cudaStreamCaptureStatusActive && n == 1, Device,
                    "cuda::capture: the capture of the optimizer's scalars failed");
        c->adam_blocks.push_back(block);
        c->adam_nodes.push_back(deps[0]);
    }
    c->adam.push_back({s, adam_time(s)});
    return c->adam_blocks.back() + 3 * (i % kAdamSlotsPerNode);
}

/// A captured step: the executable graph, its pool, and what each replay rewrites.
struct Graph {
    int device = 0;
    cudaStream_t stream = nullptr;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    std::shared_ptr<PrivatePool> pool;
    DeviceRng* rng = nullptr;
    std::uint64_t draws = 0;
    std::vector<AdamSlot> adam;
    std::vector<double*> adam_blocks;
    std::vector<cudaGraphNode_t> adam_nodes;
    std::optional<double> lr;
    std::size_t replays = 0;
    std::size_t nodes = 0;
    std::string why_not;

    std::size_t random_draws() const { return draws; }
    std::size_t pool_bytes() const {
        std::lock_guard lock(pool->mu);
        return pool->bytes;
    }
    CudaDevice device_handle() const { return CudaDevice{static_cast<std::size_t>(device)}; }
    static void forbid_in_capture(const char* op) { ember::detail::cuda::forbid_in_capture(op); }

    /// Rewrites the optimizer scalars for run `r` and launches the graph.
    void launch(std::size_t r) {
        use_device(device);
        for (std::size_t b = 0; b < adam_nodes.size(); ++b) {
            AdamScalarBlock block;
            block.dst = adam_blocks[b];
            block.n = kAdamSlotsPerNode;
            const std::size_t first = b * kAdamSlotsPerNode;
            for (std::size_t i = first; i < std::min(adam.size(), first + kAdamSlotsPerNode); ++i)
                slot_values(adam[i], r, lr, &block.v[3 * (i - first)]);
            void* args[] = {&block};
            cudaKernelNodeParams kp{};
            kp.func = const_cast<void*>(adam_scalars_function());
            kp.gridDim = dim3(1);
            kp.blockDim = dim3(128);
            kp.kernelParams = args;
            EMBER_CUDA_CHECK(cudaGraphExecKernelNodeSetParams(exec, adam_nodes[b], &kp));
        }
        if (draws > 0) {
            // The run at capture follows the seed and offset written just before the capture
            // began (and the host counted its draws as they were recorded); a replay first
            // catches the device up with eager draws or a new seed since, then counts its own.
            std::lock_guard lock(g_rng_mu);
            if (r > 0) {
                sync_rng(*rng, stream);
                g_counter += draws;
            }
            rng->offset += draws;
        }
        EMBER_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    }

    ~Graph() {
        // Replays still queued use the pool's blocks and the executable graph: let them finish.
        if (stream != nullptr) (void)cudaStreamSynchronize(stream);
        if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
        if (graph != nullptr) (void)cudaGraphDestroy(graph);
        (void)cudaGetLastError();
        if (!pool) return;
        for (double* b : adam_blocks) pool_give(*pool, b, 3 * sizeof(double) * kAdamSlotsPerNode);
        close_pool(*pool);
    }
};

}  // namespace ember::detail::cuda

namespace ember::cuda {

namespace k = ember::detail::cuda;

CapturedStep capture(const std::function<void()>& step, const CudaDevice& device) {
    const int dev = static_cast<int>(device.index);
    EMBER_CHECK(k::active_capture() == nullptr, Device,
                "cuda::capture: a step is already being captured on this thread (captures do not "
                "nest)");
    k::use_device(dev);  // DeviceError without a GPU
    // Work pending in Fusion's stream belongs before the step, not in its graph.
    Fusion<Cuda>::flush();
    auto g = std::make_shared<k::Graph>();
    g->device = dev;
    g->stream = k::stream(dev);
    g->pool = std::make_shared<k::PrivatePool>();
    g->pool->device = dev;
    g->rng = &k::device_rng(dev);
    {
        std::lock_guard lock(k::g_rng_mu);
        k::sync_rng(*g->rng, g->stream);
    }
    std::unique_lock gate(k::g_gate);
    k::CaptureState st;
    st.device = dev;
    st.stream = g->stream;
    st.pool = g->pool;
    st.counter_base = k::g_counter.load();
    st.rng = g->rng->state;
    EMBER_CUDA_CHECK(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeRelaxed));
    k::t_capture = &st;
    auto abandon = [&] {
        k::t_capture = nullptr;
        cudaGraph_t partial = nullptr;
        (void)cudaStreamEndCapture(g->stream, &partial);
        if (partial != nullptr) (void)cudaGraphDestroy(partial);
        (void)cudaGetLastError();
        k::g_counter = st.counter_base;              // nothing was drawn
        g->stream = nullptr;                         // nothing to wait for
        g->adam_blocks = std::move(st.adam_blocks);  // back to the pool with the rest
    };
    try {
        step();
        Fusion<Cuda>::flush();
        if (st.draws > 0)
            k::launch_rng_advance(const_cast<std::uint64_t*>(st.rng), st.draws, g->stream);
    } catch (...) {
        abandon();
        throw;
    }
    k::t_capture = nullptr;
    const cudaError_t e = cudaStreamEndCapture(g->stream, &g->graph);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        k::g_counter = st.counter_base;
        g->stream = nullptr;
        g->adam_blocks = std::move(st.adam_blocks);
        EMBER_FAIL(Device,
                   "cuda::capture: the driver refused the captured step: ", cudaGetErrorName(e),
                   " (", cudaGetErrorString(e),
                   "); an op that synchronises the stream or a thread working on the same device "
                   "during the capture invalidates it");
    }
    g->draws = st.draws;
    g->adam = std::move(st.adam);
    g->adam_blocks = std::move(st.adam_blocks);
    g->adam_nodes = std::move(st.adam_nodes);
    EMBER_CUDA_CHECK(cudaGraphGetNodes(g->graph, nullptr, &g->nodes));
    EMBER_CUDA_CHECK(cudaGraphInstantiate(&g->exec, g->graph, 0));
    if (st.replaced > 0)
        g->why_not = ember::detail::cat_str(
            "the step replaced ", st.replaced, " tensor(s) (", st.replaced_bytes,
            " bytes) that existed before it was captured: a replay would read their old "
            "values. Update state in place (Adam does; composed SGD, AdamW's decay and running "
            "statistics do not), and keep outputs that outlive the step out of it");
    g->launch(0);
    return CapturedStep(std::move(g));
}

bool is_capturing() {
    return k::active_capture() != nullptr;
}

namespace detail {

void bind_input(const k::CudaTensor& dst, const k::CudaTensor& src) {
    EMBER_CHECK(dst.shape == src.shape && dst.dtype == src.dtype, Shape,
                "cuda::StepGraph: an input of shape ", src.shape, " (", dtype_name(src.dtype),
                ") cannot be copied into the captured one of shape ", dst.shape, " (",
                dtype_name(dst.dtype), ")");
    k::check_same_device("cuda::StepGraph", dst, src);
    k::forbid_in_capture("cuda::StepGraph input copy");
    k::copy_into(dst, src);
}

bool within_checked_range(const k::CudaTensor& dst, const k::CudaTensor& src) {
    if (dst.dtype != DType::I64 || !dst.storage || !src.storage) return true;
    const auto& d = *dst.storage;
    const auto& s = *src.storage;
    if (d.lo > d.hi) return true;  // nothing was checked against a range at capture
    if (s.lo > s.hi) return false;
    return s.lo >= d.lo && s.hi <= d.hi;
}

}  // namespace detail

}  // namespace ember::cuda

template class ember::detail::graph::CapturedStep<ember::detail::cuda::Graph, ember::CudaDevice>;
