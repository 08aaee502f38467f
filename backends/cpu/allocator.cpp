// A caching host allocator: freed buffers are kept by size class and handed out again, so that
// a loop producing new tensors of the same sizes stops paying for malloc, page faults and
// zeroing (PyTorch's CPU allocator does not cache, which is why "add into a new tensor" is
// allocation-bound there).
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

}  // namespace

std::shared_ptr<Storage> allocate(std::size_t bytes) {
    const std::size_t cls = size_class(bytes);
    void* p = nullptr;
    {
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
    auto s = std::make_shared<Storage>();
    s->data = p;
    s->bytes = cls;
    return s;
}

Storage::~Storage() {
    if (!data) return;
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
