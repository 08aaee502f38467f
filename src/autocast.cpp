// The thread's autocast cast cache (tensor/autocast.hpp): parameter casts by (leaf id, target
// dtype), kept here so that the tensor API's header does not include <unordered_map>.
#include <unordered_map>

#include "ember/tensor/autocast.hpp"

namespace ember::detail::autocast {
namespace {

using Cache = std::unordered_map<std::uint64_t, std::any>;

Cache& cache() noexcept {
#if defined(EMBER_FREESTANDING) && EMBER_FREESTANDING
    static Cache c;  // firmware has no threads (and maybe no TLS)
#else
    thread_local Cache c;
#endif
    return c;
}

}  // namespace

const std::any* cache_find(std::uint64_t key) {
    const auto it = cache().find(key);
    return it == cache().end() ? nullptr : &it->second;
}

void cache_store(std::uint64_t key, std::any cast) {
    cache().insert_or_assign(key, std::move(cast));
}

void cache_clear() noexcept {
    cache().clear();
}

std::size_t cached_casts() noexcept {
    return cache().size();
}

}  // namespace ember::detail::autocast
