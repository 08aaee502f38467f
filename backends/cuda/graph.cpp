// Whole steps captured as CUDA graphs (include/ember/stacks/cuda_graph.hpp): the stream
// capture around the step, the private pool that keeps the step's buffers for its replays, the
// generator's device-side seed and offset, and the node that rewrites the optimizer's scalars
// before each replay.
#include "graph.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "../common/captured_step.hpp"
#include "ember/stacks/cuda_graph.hpp"
#include "graph_kernels.hpp"
#include "launch.hpp"
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

namespace {

constexpr std::size_t kSmallRequest = std::size_t{1} << 20;  // up to this: the small arena
constexpr std::size_t kSmallSegment = std::size_t{2} << 20;  // a cudaMalloc'd small segment
constexpr std::size_t kMinSplit = 512;  // a smaller rest stays with the block it came from

std::set<std::pair<std::size_t, std::byte*>>& free_set(PrivatePool& p,
                                                       const PrivatePool::Segment& s) {
    return s.small ? p.free_small : p.free_large;
}

/// Adds a segment of `size` bytes at `base` to the pool, one free block.
PrivatePool::Segment* add_segment(PrivatePool& p, void* base, std::size_t size, bool small) {
    auto seg = std::make_unique<PrivatePool::Segment>();
    seg->base = static_cast<std::byte*>(base);
    seg->size = size;
    seg->small = small;
    if (size > 0) {
        p.blocks[seg->base] = PrivatePool::Block{seg.get(), size, true};
        free_set(p, *seg).insert({size, seg->base});
    }
    p.bytes += size;
    p.segments.push_back(std::move(seg));
    return p.segments.back().get();
}

CUmemAllocationProp device_memory(int device) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    return prop;
}

/// The pool's growable arena for small or large requests: an address range as large as the
/// device's memory, reserved at its first use, nothing mapped yet. Null where the driver has no
/// virtual memory management (or refuses the reservation): the pool then cudaMallocs segments.
PrivatePool::Segment* arena(PrivatePool& p, bool small) {
    PrivatePool::Segment*& a = small ? p.arena_small : p.arena_large;
    if (a != nullptr || !p.arenas) return a;
    const VmmApi* v = vmm_api();
    if (v == nullptr) return nullptr;
    const CUmemAllocationProp prop = device_memory(p.device);
    std::size_t gran = 0;
    if (v->granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || gran == 0)
        return nullptr;
    std::size_t free_bytes = 0, total = 0;
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
        (void)cudaGetLastError();
        return nullptr;
    }
    const std::size_t reserve = (total + gran - 1) / gran * gran;
    CUdeviceptr base = 0;
    if (v->address_reserve(&base, reserve, 0, 0, 0) != CUDA_SUCCESS) return nullptr;
    a = add_segment(p, reinterpret_cast<void*>(base), 0, small);
    a->arena = true;
    a->reserved = reserve;
    a->granularity = gran;
    return a;
}

/// Maps what arena `a` lacks for a request of `size` bytes at its end (the free block that ends
/// it counts; the driver's granularity) and returns the free block that now ends the arena.
std::map<std::byte*, PrivatePool::Block>::iterator grow(PrivatePool& p, PrivatePool::Segment& a,
                                                        std::size_t size) {
    const VmmApi& v = *vmm_api();
    std::byte* const end = a.base + a.size;
    auto last = p.blocks.lower_bound(end);
    if (last != p.blocks.begin() && std::prev(last)->second.segment == &a &&
        std::prev(last)->second.free)
        last = std::prev(last);
    else
        last = p.blocks.end();
    const std::size_t tail = last != p.blocks.end() ? last->second.size : 0;
    const std::size_t add = (size - tail + a.granularity - 1) / a.granularity * a.granularity;
    const CUmemAllocationProp prop = device_memory(p.device);
    EMBER_CHECK(a.size + add <= a.reserved, Device, "cuda::capture: the step's private pool needs ",
                a.size + add, " bytes, more than device ", p.device, " has");
    CUmemGenericAllocationHandle h = 0;
    const CUresult r = v.create(&h, add, &prop, 0);
    EMBER_CHECK(r == CUDA_SUCCESS, Device, "cuda::capture: mapping ", add,
                " more bytes for the step's private pool failed on device ", p.device,
                " (cuMemCreate: error ", static_cast<int>(r), ")");
    const auto at = reinterpret_cast<CUdeviceptr>(a.base + a.size);
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (const CUresult m = v.map(at, add, 0, h, 0); m != CUDA_SUCCESS) {
        (void)v.release(h);
        check_cu(m, "cuMemMap", "a captured step's private pool");
    }
    if (const CUresult m = v.set_access(at, add, &access, 1); m != CUDA_SUCCESS) {
        (void)v.unmap(at, add);
        (void)v.release(h);
        check_cu(m, "cuMemSetAccess", "a captured step's private pool");
    }
    a.chunks.emplace_back(h, add);
    note_driver_alloc(p.device, add);
    a.size += add;
    p.bytes += add;
    auto& set = free_set(p, a);
    if (last != p.blocks.end()) {
        set.erase({last->second.size, last->first});
        last->second.size += add;
        set.insert({last->second.size, last->first});
        return last;
    }
    auto it = p.blocks.emplace(end, PrivatePool::Block{&a, add, true}).first;
    set.insert({add, end});
    return it;
}

/// Hands out `size` bytes of the free block at `it`, splitting off the rest when it is large
/// enough to hold another buffer; returns the bytes handed out.
std::size_t hand_out(PrivatePool& p, std::map<std::byte*, PrivatePool::Block>::iterator it,
                     std::size_t size) {
    PrivatePool::Block& b = it->second;
    auto& set = free_set(p, *b.segment);
    set.erase({b.size, it->first});
    if (b.size - size >= kMinSplit) {
        p.blocks[it->first + size] = PrivatePool::Block{b.segment, b.size - size, true};
        set.insert({b.size - size, it->first + size});
        b.size = size;
    }
    b.free = false;
    ++b.segment->held;
    p.in_use += b.size;
    p.peak_in_use = std::max(p.peak_in_use, p.in_use);
    return b.size;
}

/// Gives the segment's memory back (the pool is closed and none of its blocks is held: it is
/// one free block, or none for an arena that never mapped any): an arena's to the driver, a
/// cudaMalloc'd segment to the device's caching pool.
void release_segment(PrivatePool& p, PrivatePool::Segment* seg) {
    if (seg->size > 0) {
        free_set(p, *seg).erase({seg->size, seg->base});
        p.blocks.erase(seg->base);
    }
    p.bytes -= seg->size;
    if (seg->arena) {
        const VmmApi& v = *vmm_api();
        const auto base = reinterpret_cast<CUdeviceptr>(seg->base);
        if (seg->size > 0) (void)v.unmap(base, seg->size);
        for (const auto& [h, bytes] : seg->chunks) (void)v.release(h);
        (void)v.address_free(base, seg->reserved);
        note_driver_free(p.device, seg->size);
        (seg->small ? p.arena_small : p.arena_large) = nullptr;
    } else {
        cache_block(p.device, seg->base, seg->size);
    }
    std::erase_if(p.segments, [&](const auto& s) { return s.get() == seg; });
}

/// Marks the block at `block` free and merges it with free neighbours of its segment; returns
/// its segment, whose last held block this may have been. Throws for an address that is not one
/// of the pool's blocks handed out (a bug of the backend).
PrivatePool::Segment* give_back(PrivatePool& p, void* block) {
    auto it = p.blocks.find(static_cast<std::byte*>(block));
    EMBER_CHECK(it != p.blocks.end() && !it->second.free, Device,
                "cuda::capture: a block given back to a step's private pool is not one it handed "
                "out");
    PrivatePool::Segment* seg = it->second.segment;
    auto& set = free_set(p, *seg);
    p.in_use -= it->second.size;
    --seg->held;
    it->second.free = true;
    if (auto next = std::next(it);
        next != p.blocks.end() && next->second.segment == seg && next->second.free) {
        set.erase({next->second.size, next->first});
        it->second.size += next->second.size;
        p.blocks.erase(next);
    }
    if (it != p.blocks.begin()) {
        if (auto prev = std::prev(it); prev->second.segment == seg && prev->second.free) {
            set.erase({prev->second.size, prev->first});
            prev->second.size += it->second.size;
            p.blocks.erase(it);
            it = prev;
        }
    }
    set.insert({it->second.size, it->first});
    return seg;
}

}  // namespace

void* pool_take(CaptureState& c, std::size_t size, std::size_t* block_size) {
    PrivatePool& p = *c.pool;
    const bool small = size <= kSmallRequest;
    std::lock_guard lock(p.mu);
    auto& set = small ? p.free_small : p.free_large;
    std::map<std::byte*, PrivatePool::Block>::iterator at;
    if (auto fit = set.lower_bound({size, nullptr}); fit != set.end()) {
        at = p.blocks.find(fit->second);
    } else if (PrivatePool::Segment* a = arena(p, small)) {
        at = grow(p, *a, size);  // no free block holds it: the arena maps what it lacks
    } else {
        // No virtual memory management: a new segment (small requests share 2 MiB ones).
        const std::size_t bytes = small ? kSmallSegment : size;
        void* b = nullptr;
        const cudaError_t e = cudaMalloc(&b, bytes);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            // The caching pool cannot be trimmed here: that waits for the device.
            EMBER_FAIL(Device, "cuda::capture: cudaMalloc of ", bytes,
                       " bytes for the step's private pool failed on device ", c.device, ": ",
                       cudaGetErrorName(e));
        }
        note_driver_alloc(c.device, bytes);
        add_segment(p, b, bytes, small);
        at = p.blocks.find(static_cast<std::byte*>(b));
    }
    std::byte* const addr = at->first;
    const std::size_t got = hand_out(p, at, size);
    if (block_size) *block_size = got;
    return addr;
}

void pool_give(PrivatePool& pool, void* block) {
    std::lock_guard lock(pool.mu);
    PrivatePool::Segment* seg = give_back(pool, block);
    if (!pool.open && seg->held == 0) release_segment(pool, seg);
}

bool pool_give_if_open(PrivatePool& pool, void* block) {
    std::lock_guard lock(pool.mu);
    if (!pool.open) return false;
    give_back(pool, block);
    return true;
}

void note_replaced(CaptureState& c, std::size_t size) {
    ++c.replaced;
    c.replaced_bytes += size;
}

void pool_adopt(CaptureState& c, void* block, std::size_t size) {
    note_replaced(c, size);
    std::lock_guard lock(c.pool->mu);
    // A caching-pool block: a segment of its own, which goes back whole (to the caching pool).
    add_segment(*c.pool, block, size, size <= kSmallSegment);
}

namespace {
/// Closes a pool: the segments none of whose blocks is held go to the device's caching pool now,
/// the others when their last block is given back.
void close_pool(PrivatePool& pool) {
    std::lock_guard lock(pool.mu);
    pool.open = false;
    std::vector<PrivatePool::Segment*> idle;
    for (const auto& s : pool.segments)
        if (s->held == 0) idle.push_back(s.get());
    for (PrivatePool::Segment* s : idle) release_segment(pool, s);
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
        for (double* b : adam_blocks) pool_give(*pool, b);
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
    const char* arenas = std::getenv("EMBER_CUDA_GRAPH_ARENAS");
    g->pool->arenas = arenas == nullptr || std::strcmp(arenas, "0") != 0;
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
