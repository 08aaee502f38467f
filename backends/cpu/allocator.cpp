// A caching host allocator: freed buffers are kept by size class and handed out again, so that
// a loop producing new tensors of the same sizes stops paying for malloc, page faults and
// zeroing (PyTorch's CPU allocator does not cache, which is why "add into a new tensor" is
// allocation-bound there).
//
// Firmware builds (EMBER_FREESTANDING) keep none of that: no threads, no caches; buffers come
// from the installed BufferSource (an Arena over a static array) or else from malloc.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#if !EMBER_FREESTANDING
#include <mutex>
#include <unordered_map>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#include <vector>
#endif

#include "ember/backend/arena.hpp"
#include "ember/backend/detail/cpu_tensor.hpp"
#include "ember/detail/recycling_allocator.hpp"
#include "ember/tensor/detail/checked.hpp"
#include "ember/tensor/error.hpp"

namespace ember::detail::cpu {
namespace {

// Bytes held by live tensors (cached free blocks excluded), and the high-water mark.
std::atomic<std::size_t> g_live{0};
std::atomic<std::size_t> g_peak{0};

void count_alloc(std::size_t bytes) {
    const std::size_t now = g_live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::size_t peak = g_peak.load(std::memory_order_relaxed);
    while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
}

const ember::cpu::BufferSource* g_source = nullptr;

// A buffer from the installed source, or nullptr when none is installed.
std::shared_ptr<Storage> from_source(std::size_t bytes) {
    const ember::cpu::BufferSource* src = g_source;
    if (!src) return nullptr;
    const std::size_t n = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
    void* p = src->allocate(src->ctx, n, 64);
    EMBER_CHECK(p != nullptr, Generic, "CPU backend: the buffer source has no block of ", n,
                " bytes left (", g_live.load(std::memory_order_relaxed),
                " bytes held by live tensors)");
    auto s = std::make_shared<Storage>();
    s->data = p;
    s->bytes = n;
    s->source = src;
    count_alloc(n);
    return s;
}

// Gives a source's buffer back; false when it came from the default allocator.
bool to_source(Storage& s) {
    if (!s.source) return false;
    g_live.fetch_sub(s.bytes, std::memory_order_relaxed);
    s.source->deallocate(s.source->ctx, s.data, s.bytes);
    return true;
}

}  // namespace

void release_dropped_packed_weights();  // matmul.cpp (kernels.hpp)

MemoryStats memory_stats() {
    release_dropped_packed_weights();
    return {g_live.load(std::memory_order_relaxed), g_peak.load(std::memory_order_relaxed)};
}

void reset_peak_memory() {
    g_peak.store(g_live.load(std::memory_order_relaxed));
}

}  // namespace ember::detail::cpu

void ember::cpu::set_buffer_source(const BufferSource* source) noexcept {
    ember::detail::cpu::g_source = source;
}

#if EMBER_FREESTANDING
namespace ember::detail::cpu {

std::shared_ptr<Storage> allocate(std::size_t bytes) {
    if (auto s = from_source(bytes)) return s;
    // No source: malloc, aligned by hand (newlib's C++ library may lack std::aligned_alloc).
    const std::size_t n = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
    void* raw = std::malloc(n + 64);
    EMBER_CHECK(raw != nullptr, Generic, "CPU backend: malloc of ", n, " bytes failed");
    auto addr = reinterpret_cast<std::uintptr_t>(raw);
    auto* p = reinterpret_cast<unsigned char*>((addr + 64) & ~std::uintptr_t{63});
    p[-1] = static_cast<unsigned char>(p - static_cast<unsigned char*>(raw));  // 1..64
    auto s = std::make_shared<Storage>();
    s->data = p;
    s->bytes = n;
    count_alloc(n);
    return s;
}

Storage::~Storage() {
    if (!data || to_source(*this)) return;
    g_live.fetch_sub(bytes, std::memory_order_relaxed);
    auto* p = static_cast<unsigned char*>(data);
    std::free(p - p[-1]);
}

}  // namespace ember::detail::cpu
#else
namespace ember::detail::cpu {
namespace {

constexpr std::size_t kAlign = 64;

// Small sizes round to a power of two; larger ones to one of 8 classes per power of two, which
// bounds the waste at 12.5%.
std::size_t size_class(std::size_t bytes) {
    if (bytes <= kAlign) return kAlign;
    std::size_t p = std::size_t{1} << (63 - __builtin_clzll(bytes - 1) + 1);  // next pow2
    if (bytes <= 65536) return p;
    const std::size_t step = p / 16;
    return (bytes + step - 1) / step * step;
}

struct Cache {
    std::mutex mu;
    std::unordered_map<std::size_t, std::vector<void*> > free;
    std::size_t cached_bytes = 0;
    std::size_t limit = [] {
        if (const char* e = std::getenv("EMBER_CPU_CACHE_BYTES"))
            return std::size_t(std::strtoull(e, nullptr, 10));
        return std::size_t{2} << 30;
    }();
    ~Cache() {
        for (auto& [size, v] : free)
            for (void* p : v) std::free(p);
    }
};
Cache& cache() {
    static Cache* c = new Cache;  // never destroyed: tensors may outlive static destruction
    return *c;
}

// Large buffers are asked to live on transparent huge pages (where the kernel's THP mode is
// "madvise", as Debian's is, nothing else gets them): a tensor streamed from end to end then
// costs one TLB entry every 2 MiB instead of every 4 KiB, which matters most in a virtual
// machine, where each TLB miss walks two sets of page tables. The classes above kHugeMin are
// multiples of 2 MiB already (a sixteenth of a power of two of at least 32 MiB).
constexpr std::size_t kHuge = std::size_t{2} << 20;
constexpr std::size_t kHugeMin = std::size_t{32} << 20;

// EMBER_CPU_HUGE_PAGES=0 turns it off.
bool huge_pages_wanted() {
    static const bool on = [] {
        const char* e = std::getenv("EMBER_CPU_HUGE_PAGES");
        return !(e && e[0] == '0' && e[1] == '\0');
    }();
    return on;
}

void* allocate_block(std::size_t cls) {
    void* p = nullptr;
    if (cls >= kHugeMin && huge_pages_wanted()) {
        p = std::aligned_alloc(kHuge, cls);
#if defined(MADV_HUGEPAGE)
        if (p) ::madvise(p, cls, MADV_HUGEPAGE);
#endif
    } else {
        p = std::aligned_alloc(kAlign, cls);
    }
    // An ember::Error naming the size, not std::bad_alloc (docs/security.md).
    if (!p) ember::detail::allocation_failed("CPU backend", cls, "the host");
    return p;
}

// Small buffers (the per-op overhead case) come from a per-thread cache without locking.
constexpr std::size_t kSmallMax = 16384;
constexpr std::size_t kSmallClasses = 9;  // 64 B .. 16 KiB
constexpr std::size_t kSmallKeep = 32;    // buffers kept per class and thread
std::size_t small_index(std::size_t cls) {
    return static_cast<std::size_t>(__builtin_ctzll(cls)) - 6;
}

struct SmallCache {
    void* slots[kSmallClasses][kSmallKeep];
    std::size_t count[kSmallClasses] = {};
    bool alive = true;  // storages freed after thread exit (statics) bypass the cache
    ~SmallCache() {
        alive = false;
        for (std::size_t c = 0; c < kSmallClasses; ++c)
            for (std::size_t i = 0; i < count[c]; ++i) std::free(slots[c][i]);
        for (auto& c : count) c = 0;
    }
};
thread_local SmallCache t_small;

// Storage objects and their shared_ptr control blocks are recycled too (one block per tensor).
using ::ember::detail::RecyclingAllocator;

}  // namespace

std::shared_ptr<Storage> allocate(std::size_t bytes) {
    if (auto s = from_source(bytes)) return s;
    const std::size_t cls = size_class(bytes);
    void* p = nullptr;
    if (cls <= kSmallMax) {
        SmallCache& sc = t_small;
        const std::size_t k = small_index(cls);
        if (sc.alive && sc.count[k]) p = sc.slots[k][--sc.count[k]];
    }
    if (!p && cls > kSmallMax) {
        Cache& c = cache();
        std::lock_guard lock(c.mu);
        auto it = c.free.find(cls);
        if (it != c.free.end() && !it->second.empty()) {
            p = it->second.back();
            it->second.pop_back();
            c.cached_bytes -= cls;
        }
    }
    if (!p) p = allocate_block(cls);
    auto s = std::allocate_shared<Storage>(RecyclingAllocator<Storage>{});
    s->data = p;
    s->bytes = cls;
    count_alloc(cls);
    return s;
}

Storage::~Storage() {
    if (!data || to_source(*this)) return;
    g_live.fetch_sub(bytes, std::memory_order_relaxed);
    if (bytes <= kSmallMax) {
        SmallCache& sc = t_small;
        const std::size_t k = small_index(bytes);
        if (sc.alive && sc.count[k] < kSmallKeep) {
            sc.slots[k][sc.count[k]++] = data;
            return;
        }
        std::free(data);
        return;
    }
    Cache& c = cache();
    {
        std::lock_guard lock(c.mu);
        if (c.cached_bytes + bytes <= c.limit) {
            c.free[bytes].push_back(data);
            c.cached_bytes += bytes;
            return;
        }
    }
    std::free(data);
}

}  // namespace ember::detail::cpu
#endif
