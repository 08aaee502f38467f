// The CUDA runtime of the backend: device discovery (a clear DeviceError without a GPU), one
// stream and cuBLAS handle per device, and the caching, stream-ordered memory pool. Blocks freed
// by tensors go back to per-size free lists, not to the driver: every kernel of a device runs on
// its one stream, so a block freed after the ops that read it were queued can be handed to the
// next op at once — the stream orders the reuse after those reads.
#include "runtime.hpp"
#include "../common/promotion.hpp"
#include "lt.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "ember/backend/cuda.hpp"
#include "graph.hpp"
#include "launch.hpp"

namespace ember::detail::cuda {

void check(cudaError_t e, const char* call) {
    if (e == cudaSuccess) [[likely]]
        return;
    (void)cudaGetLastError();  // clear a sticky-free error so later calls are not blamed
    EMBER_FAIL(Device, "CUDA error in ", call, ": ", cudaGetErrorName(e), " (",
               cudaGetErrorString(e), ")");
}

void check_cublas(cublasStatus_t st, const char* call) {
    if (st == CUBLAS_STATUS_SUCCESS) [[likely]]
        return;
    EMBER_FAIL(Device, "cuBLAS error in ", call, ": ", blas().cublasGetStatusName(st), " (",
               blas().cublasGetStatusString(st), ")");
}

int multiprocessors(int device) {
    static std::array<std::atomic<int>, 64> count{};
    if (device < 0) EMBER_CUDA_CHECK(cudaGetDevice(&device));
    if (device >= static_cast<int>(count.size())) device = 0;
    int n = count[device].load(std::memory_order_relaxed);
    if (n == 0) {
        EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
        count[device].store(n, std::memory_order_relaxed);
    }
    return n;
}

void check_launch(const char* kernel) {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) [[unlikely]]
        EMBER_FAIL(Device, "CUDA error launching the ", kernel, " kernel: ", cudaGetErrorName(e),
                   " (", cudaGetErrorString(e), ")");
}

namespace {

/// Block sizes: 512-byte classes up to 1 MiB, 2 MiB classes above (few distinct sizes, so
/// that the free lists hit often; at most 2 MiB of slack per large block).
std::size_t size_class(std::size_t bytes) {
    constexpr std::size_t kSmall = 512, kLarge = std::size_t{2} << 20;
    if (bytes <= (std::size_t{1} << 20)) return (bytes + kSmall - 1) / kSmall * kSmall;
    return (bytes + kLarge - 1) / kLarge * kLarge;
}

struct DeviceState {
    int index = 0;
    cudaStream_t stream = nullptr;
    cublasHandle_t cublas = nullptr;
    void* workspace = nullptr;
    std::size_t workspace_bytes = 0;
    std::mutex mu;  // guards the pool and the counters below
    // Free blocks by size: the 512-byte classes up to 1 MiB in an array (no hashing on the
    // small tensors' hot path), the 2 MiB classes above in a map.
    std::vector<std::vector<void*>> small_blocks = std::vector<std::vector<void*>>(2049);
    std::unordered_map<std::size_t, std::vector<void*>> free_blocks;
    std::vector<void*>& bucket(std::size_t size) {
        return size <= (std::size_t{1} << 20) ? small_blocks[size / 512] : free_blocks[size];
    }
    ember::cuda::MemoryStats stats;
    void* pinned = nullptr;  // staging for readbacks
    std::size_t pinned_bytes = 0;
    // Staging for a Transaction's reads (pinned, so that the copies into it stay asynchronous
    // and one wait covers them all); guarded by its own mutex, not the pool's.
    std::mutex tr_mu;
    std::byte* tr_pinned = nullptr;
    std::size_t tr_pinned_bytes = 0;
    std::atomic<std::size_t> host_waits{0};  // cudaStreamSynchronize calls on this device
};

struct Runtime {
    std::once_flag once;
    int count = 0;
    cudaError_t init_error = cudaSuccess;
    std::vector<std::unique_ptr<DeviceState>> devices;
    std::mutex init_mu;
};

// Leaked on purpose: tensors in static storage may outlive any destructor order we pick, and
// the driver reclaims device memory at exit.
Runtime& runtime() {
    static Runtime* r = new Runtime;
    std::call_once(r->once, [] {
        Runtime& rt = *r;
        rt.init_error = cudaGetDeviceCount(&rt.count);
        if (rt.init_error != cudaSuccess) {
            (void)cudaGetLastError();
            rt.count = 0;
        }
        for (int i = 0; i < rt.count; ++i) {
            rt.devices.push_back(std::make_unique<DeviceState>());
            rt.devices.back()->index = i;
        }
    });
    return *r;
}

DeviceState& state(int device) {
    Runtime& rt = runtime();
    if (rt.count == 0) {
        EMBER_FAIL(Device, "CUDA backend: no CUDA device is available",
                   rt.init_error != cudaSuccess
                       ? cat_str(" (cudaGetDeviceCount: ", cudaGetErrorName(rt.init_error), ")")
                       : std::string());
    }
    EMBER_CHECK(device >= 0 && device < rt.count, Device, "CUDA backend: device ", device,
                " does not exist (", rt.count, " device(s) found)");
    DeviceState& d = *rt.devices[static_cast<std::size_t>(device)];
    if (d.stream == nullptr) {
        std::lock_guard lock(rt.init_mu);
        if (d.stream == nullptr) {
            (void)blas();  // cuBLAS loaded (or its absence reported) before anything is made
            EMBER_CUDA_CHECK(cudaSetDevice(device));
            cudaStream_t s = nullptr;
            EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
            EMBER_CUBLAS_CHECK(blas().cublasCreate_v2(&d.cublas));
            EMBER_CUBLAS_CHECK(blas().cublasSetStream_v2(d.cublas, s));
            d.workspace_bytes = std::size_t{32} << 20;
            EMBER_CUDA_CHECK(cudaMalloc(&d.workspace, d.workspace_bytes));
            EMBER_CUBLAS_CHECK(
                blas().cublasSetWorkspace_v2(d.cublas, d.workspace, d.workspace_bytes));
            d.stream = s;
        }
    }
    return d;
}

thread_local int t_current = -1;

/// Returns every cached block of `d` to the driver (its stream is synchronised first, so no
/// queued kernel still reads one).
void release_cache(DeviceState& d) {
    forbid_in_capture(
        "trimming the caching pool (empty_cache, or an allocation that ran out of memory)");
    EMBER_CUDA_CHECK(cudaStreamSynchronize(d.stream));
    for (auto& [size, blocks] : d.free_blocks) {
        for (void* p : blocks) {
            EMBER_CUDA_CHECK(cudaFree(p));
            d.stats.bytes_reserved -= size;
        }
    }
    d.free_blocks.clear();
    for (std::size_t c = 0; c < d.small_blocks.size(); ++c) {
        for (void* p : d.small_blocks[c]) {
            EMBER_CUDA_CHECK(cudaFree(p));
            d.stats.bytes_reserved -= c * 512;
        }
        d.small_blocks[c].clear();
    }
}

}  // namespace

int current_device() {
    return t_current;
}

void use_device(int device) {
    DeviceState& d = state(device);
    if (t_current != device) {
        EMBER_CUDA_CHECK(cudaSetDevice(d.index));
        t_current = device;
    }
}

cudaStream_t stream(int device) {
    // Every op asks for its stream: answer repeated asks of the current device from the thread's
    // cache, without the device lookup.
    thread_local int cached_device = -1;
    thread_local cudaStream_t cached = nullptr;
    if (device == cached_device && device == t_current) [[likely]]
        return cached;
    use_device(device);
    cached = state(device).stream;
    cached_device = device;
    return cached;
}

cublasHandle_t cublas(int device) {
    use_device(device);
    return state(device).cublas;
}

cublasLtHandle_t cublas_lt(int device) {
    static std::mutex mu;
    static std::vector<cublasLtHandle_t> handles;
    std::lock_guard lock(mu);
    if (handles.size() <= static_cast<std::size_t>(device))
        handles.resize(static_cast<std::size_t>(device) + 1, nullptr);
    auto& h = handles[static_cast<std::size_t>(device)];
    if (h == nullptr) {
        use_device(device);
        EMBER_CUBLAS_CHECK(blas().cublasLtCreate(&h));
    }
    return h;
}

void* cublas_workspace(int device, std::size_t* bytes) {
    DeviceState& d = state(device);
    *bytes = d.workspace_bytes;
    return d.workspace;
}

void synchronize(int device) {
    forbid_in_capture("sync");
    EMBER_CUDA_CHECK(cudaStreamSynchronize(stream(device)));
    ++state(device).host_waits;
}

void read_many(int device, std::span<const void* const> src, std::span<const std::size_t> bytes,
               std::span<std::byte* const> dst) {
    forbid_in_capture("into_data (Transaction::execute)");
    DeviceState& d = state(device);
    std::vector<std::size_t> at(src.size());
    std::size_t total = 0;
    for (std::size_t i = 0; i < src.size(); ++i) {
        at[i] = total;
        total += (bytes[i] + 255) / 256 * 256;
    }
    if (total == 0) return;
    cudaStream_t s = stream(device);
    std::lock_guard lock(d.tr_mu);
    if (d.tr_pinned_bytes < total) {
        // The last Transaction waited for its copies, so the old buffer is free to go.
        if (d.tr_pinned != nullptr) EMBER_CUDA_CHECK(cudaFreeHost(d.tr_pinned));
        d.tr_pinned = nullptr;
        d.tr_pinned_bytes = 0;
        void* p = nullptr;
        EMBER_CUDA_CHECK(cudaMallocHost(&p, total));
        d.tr_pinned = static_cast<std::byte*>(p);
        d.tr_pinned_bytes = total;
    }
    for (std::size_t i = 0; i < src.size(); ++i)
        if (bytes[i] > 0)
            EMBER_CUDA_CHECK(
                cudaMemcpyAsync(d.tr_pinned + at[i], src[i], bytes[i], cudaMemcpyDeviceToHost, s));
    EMBER_CUDA_CHECK(cudaStreamSynchronize(s));
    ++d.host_waits;
    for (std::size_t i = 0; i < src.size(); ++i)
        if (bytes[i] > 0) std::memcpy(dst[i], d.tr_pinned + at[i], bytes[i]);
    // A large staging buffer is not kept: pinned memory is scarce.
    if (d.tr_pinned_bytes > (std::size_t{64} << 20)) {
        EMBER_CUDA_CHECK(cudaFreeHost(d.tr_pinned));
        d.tr_pinned = nullptr;
        d.tr_pinned_bytes = 0;
    }
}

std::shared_ptr<Storage> allocate(std::size_t bytes, int device) {
    DeviceState& d = state(device);  // one lookup: it also validates the device
    if (t_current != device) [[unlikely]] {
        EMBER_CUDA_CHECK(cudaSetDevice(device));
        t_current = device;
    }
    auto s = std::make_shared<Storage>();
    s->device = device;
    if (bytes == 0) return s;
    const std::size_t size = size_class(bytes);
    if (CaptureState* c = capturing(device)) [[unlikely]] {
        // A captured step's buffers stay its own: from its private pool.
        std::size_t block = size;
        s->data = pool_take(*c, size, &block);
        s->pool = c->pool;
        s->bytes = block;
        std::lock_guard lock(d.mu);
        d.stats.bytes_in_use += block;
        d.stats.peak_bytes_in_use = std::max(d.stats.peak_bytes_in_use, d.stats.bytes_in_use);
        return s;
    }
    std::lock_guard lock(d.mu);
    std::vector<void*>& free = d.bucket(size);
    if (!free.empty()) {
        s->data = free.back();
        free.pop_back();
    } else {
        cudaError_t e = cudaMalloc(&s->data, size);
        if (e == cudaErrorMemoryAllocation) {
            // Out of memory with blocks cached: give them back and try once more.
            (void)cudaGetLastError();
            release_cache(d);
            e = cudaMalloc(&s->data, size);
        }
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            EMBER_FAIL(Device, "CUDA backend: cudaMalloc of ", size, " bytes failed on device ",
                       device, ": ", cudaGetErrorName(e), " (", d.stats.bytes_in_use,
                       " bytes in use by tensors)");
        }
        d.stats.bytes_reserved += size;
        ++d.stats.num_driver_allocs;
    }
    s->bytes = size;
    d.stats.bytes_in_use += size;
    d.stats.peak_bytes_in_use = std::max(d.stats.peak_bytes_in_use, d.stats.bytes_in_use);
    return s;
}

Storage::~Storage() {
    if (data == nullptr) return;
    DeviceState& d = *runtime().devices[static_cast<std::size_t>(device)];
    {
        std::lock_guard lock(d.mu);
        d.stats.bytes_in_use -= bytes;
    }
    if (CaptureState* c = capturing(device); c != nullptr && pool != c->pool) [[unlikely]] {
        // A tensor from before the capture, freed while a step is captured: the graph may read
        // it on every replay, so nothing else may have it while the graph lives (pool_adopt
        // also counts it: the step replaced a tensor it may read).
        if (pool && pool_give_if_open(*pool, data)) {
            note_replaced(*c, bytes);  // another live graph's: it stays that graph's
            return;
        }
        pool_adopt(*c, data, bytes);
        return;
    }
    if (pool) [[unlikely]] {
        pool_give(*pool, data);
        return;
    }
    std::lock_guard lock(d.mu);
    d.bucket(bytes).push_back(data);
}

void cache_block(int device, void* block, std::size_t size) {
    DeviceState& d = *runtime().devices[static_cast<std::size_t>(device)];
    std::lock_guard lock(d.mu);
    d.bucket(size).push_back(block);
}

void note_driver_free(int device, std::size_t size) {
    DeviceState& d = *runtime().devices[static_cast<std::size_t>(device)];
    std::lock_guard lock(d.mu);
    d.stats.bytes_reserved -= size;
}

void note_driver_alloc(int device, std::size_t size) {
    DeviceState& d = *runtime().devices[static_cast<std::size_t>(device)];
    std::lock_guard lock(d.mu);
    d.stats.bytes_reserved += size;
    ++d.stats.num_driver_allocs;
}

CudaTensor empty(const Shape& shape, DType dtype, int device) {
    CudaTensor t;
    t.storage = allocate(shape.num_elements() * dtype_size(dtype), device);
    t.shape = shape;
    t.strides = contiguous_strides(shape);
    t.dtype = dtype;
    return t;
}

void copy_into(const CudaTensor& dst, const CudaTensor& src) {
    if (dst.num_elements() == 0) return;
    const auto it = make_elementwise_iter<2>(dst.shape, {&dst.strides, &src.strides});
    launch_copy(it, dst.ptr(), dst.dtype, src.ptr(), src.dtype, stream(dst.device()));
}

CudaTensor fresh_copy(const CudaTensor& t) {
    CudaTensor out = empty(t.shape, t.dtype, t.device());
    copy_into(out, t);
    return out;
}

CudaTensor contiguous(CudaTensor t) {
    if (t.is_contiguous()) return t;
    return fresh_copy(t);
}

bool dense_layout(const CudaTensor& t) {
    // The dims of size > 1 ordered by stride, largest first: dense when each stride is the
    // product of the sizes after it.
    std::array<std::size_t, kMaxRank> order{};
    std::size_t r = 0;
    for (std::size_t d = 0; d < t.shape.rank(); ++d) {
        if (t.shape[d] == 1) continue;
        std::size_t j = r++;
        for (; j > 0 && t.strides[order[j - 1]] < t.strides[d]; --j) order[j] = order[j - 1];
        order[j] = d;
    }
    std::int64_t expect = 1;
    for (std::size_t k = r; k-- > 0;) {
        if (t.strides[order[k]] != expect) return false;
        expect *= static_cast<std::int64_t>(t.shape[order[k]]);
    }
    return true;
}

CudaTensor empty_like_layout(const CudaTensor& like, const Shape& shape, DType dtype) {
    CudaTensor out = empty(shape, dtype, like.device());
    if (like.shape == shape && !like.is_contiguous() && dense_layout(like))
        out.strides = like.strides;
    return out;
}

Strides channels_last_strides(const Shape& s) {
    Strides st = contiguous_strides(s);
    const std::size_t r = s.rank();
    if (r < 3) return st;
    const auto c = static_cast<std::int64_t>(s[1]);
    std::int64_t acc = c;
    st[1] = 1;
    for (std::size_t d = r; d-- > 2;) {
        st[d] = acc;
        acc *= static_cast<std::int64_t>(s[d]);
    }
    st[0] = acc;
    return st;
}

bool is_channels_last(const CudaTensor& t) {
    if (t.shape.rank() < 3 || t.is_contiguous()) return false;
    const Strides want = channels_last_strides(t.shape);
    for (std::size_t d = 0; d < t.shape.rank(); ++d)
        if (t.shape[d] != 1 && t.strides[d] != want[d]) return false;
    return true;
}

CudaTensor to_channels_last(CudaTensor t) {
    if (is_channels_last(t) || t.shape.rank() < 3) return t;
    CudaTensor out = empty(t.shape, t.dtype, t.device());
    out.strides = channels_last_strides(t.shape);
    copy_into(out, t);
    return out;
}

CudaTensor to_layout(CudaTensor t, bool channels_last) {
    return channels_last ? to_channels_last(std::move(t)) : contiguous(std::move(t));
}

CudaTensor to_layout_of(CudaTensor t, const CudaTensor& like) {
    return to_layout(std::move(t), is_channels_last(like));
}

CudaTensor cast(CudaTensor t, DType dtype) {
    if (t.dtype == dtype) return t;
    CudaTensor out = empty_like_layout(t, t.shape, dtype);
    copy_into(out, t);
    return out;
}

std::int64_t read_i64(const void* device_ptr, int device, const char* op) {
    forbid_in_capture(op);
    DeviceState& d = state(device);
    std::int64_t v = 0;
    {
        std::lock_guard lock(d.mu);
        if (d.pinned == nullptr) {
            d.pinned_bytes = 64;
            EMBER_CUDA_CHECK(cudaMallocHost(&d.pinned, d.pinned_bytes));
        }
    }
    EMBER_CUDA_CHECK(
        cudaMemcpyAsync(d.pinned, device_ptr, sizeof v, cudaMemcpyDeviceToHost, stream(device)));
    EMBER_CUDA_CHECK(cudaStreamSynchronize(d.stream));
    ++d.host_waits;
    std::memcpy(&v, d.pinned, sizeof v);
    return v;
}

void check_same_device(const char* op, const CudaTensor& a, const CudaTensor& b) {
    EMBER_CHECK(a.device() == b.device(), Device, op, ": tensors are on different devices (Cuda(",
                a.device(), ") and Cuda(", b.device(), "))");
}

Strides broadcast_strides(const CudaTensor& t, const Shape& out) {
    Strides st{};
    const std::size_t off = out.rank() - t.shape.rank();
    for (std::size_t i = 0; i < t.shape.rank(); ++i)
        st[i + off] = t.shape[i] == out[i + off] ? t.strides[i] : 0;
    return st;
}

DType compute_dtype(DType d) {
    switch (d) {
        case DType::F16:
        case DType::BF16:
            return DType::F32;
        case DType::I32:
        case DType::I16:
        case DType::I8:
        case DType::U8:
            return DType::I64;
        default:
            return d;
    }
}

DType promote(DType a, DType b) {
    return ember::detail::promote(a, b);
}

}  // namespace ember::detail::cuda

namespace ember::cuda {

bool is_available() {
    return detail::cuda::runtime().count > 0;
}
std::size_t device_count() {
    return static_cast<std::size_t>(detail::cuda::runtime().count);
}

MemoryStats memory_stats(const CudaDevice& device) {
    auto& d = detail::cuda::state(static_cast<int>(device.index));
    std::lock_guard lock(d.mu);
    return d.stats;
}

SyncStats sync_stats(const CudaDevice& device) {
    return {detail::cuda::state(static_cast<int>(device.index)).host_waits.load()};
}

void empty_cache(const CudaDevice& device) {
    auto& d = detail::cuda::state(static_cast<int>(device.index));
    detail::cuda::use_device(d.index);
    std::lock_guard lock(d.mu);
    detail::cuda::release_cache(d);
}

void reset_peak_memory(const CudaDevice& device) {
    auto& d = detail::cuda::state(static_cast<int>(device.index));
    std::lock_guard lock(d.mu);
    d.stats.peak_bytes_in_use = d.stats.bytes_in_use;
}

}  // namespace ember::cuda
