// A caching host allocator: freed buffers are kept by size class and handed out again, so that
// a loop producing new tensors of the same sizes stops paying for malloc, page faults and
// zeroing (PyTorch's CPU allocator does not cache, which is why "add into a new tensor" is
// allocation-bound there).
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "ember/backend/detail/cpu_tensor.hpp"

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
    std::unordered_map<std::size_t, std::vector<void*>> free;
    std::size_t cached_bytes = 0;
    std::size_t limit = [] {
        if (const char* e = std::getenv("EMBER_CPU_CACHE_BYTES")) return std::size_t(std::strtoull(e, nullptr, 10));
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

// Small buffers (the per-op overhead case) come from a per-thread cache without locking.
constexpr std::size_t kSmallMax = 16384;
constexpr std::size_t kSmallClasses = 9;  // 64 B .. 16 KiB
constexpr std::size_t kSmallKeep = 32;    // buffers kept per class and thread
std::size_t small_index(std::size_t cls) { return static_cast<std::size_t>(__builtin_ctzll(cls)) - 6; }

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
template <typename T>
struct RecyclingAllocator {
    using value_type = T;
    RecyclingAllocator() = default;
    template <typename U>
    RecyclingAllocator(const RecyclingAllocator<U>&) {}  // NOLINT
    static constexpr std::size_t kKeep = 64;
    struct FreeList {
        void* items[kKeep];
        std::size_t n = 0;
        bool alive = true;
        ~FreeList() {
            alive = false;
            for (std::size_t i = 0; i < n; ++i) ::operator delete(items[i]);
            n = 0;
        }
    };
    static FreeList& list() {
        thread_local FreeList l;
        return l;
    }
    T* allocate(std::size_t n) {
        if (n == 1) {
            FreeList& l = list();
            if (l.alive && l.n) return static_cast<T*>(l.items[--l.n]);
        }
        return static_cast<T*>(::operator new(n * sizeof(T)));
    }
    void deallocate(T* p, std::size_t n) {
        if (n == 1) {
            FreeList& l = list();
            if (l.alive && l.n < kKeep) {
                l.items[l.n++] = p;
                return;
            }
        }
        ::operator delete(p);
    }
    friend bool operator==(const RecyclingAllocator&, const RecyclingAllocator&) { return true; }
};

// Bytes held by live tensors (cached free blocks excluded), and the high-water mark.
std::atomic<std::size_t> g_live{0};
std::atomic<std::size_t> g_peak{0};

void count_alloc(std::size_t bytes) {
    const std::size_t now = g_live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::size_t peak = g_peak.load(std::memory_order_relaxed);
    while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
}

}  // namespace

MemoryStats memory_stats() {
    return {g_live.load(std::memory_order_relaxed), g_peak.load(std::memory_order_relaxed)};
}

void reset_peak_memory() { g_peak.store(g_live.load(std::memory_order_relaxed)); }

std::shared_ptr<Storage> allocate(std::size_t bytes) {
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
    if (!p) {
        p = std::aligned_alloc(kAlign, cls);
        if (!p) throw std::bad_alloc();
    }
    auto s = std::allocate_shared<Storage>(RecyclingAllocator<Storage>{});
    s->data = p;
    s->bytes = cls;
    count_alloc(cls);
    return s;
}

Storage::~Storage() {
    if (!data) return;
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
