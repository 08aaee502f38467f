// ParamId::make: one definition in the ember library, so that every module of a process (the
// program's and those made in ember's shared libraries) draws from one counter.
#include "ember/module/param.hpp"

#if !EMBER_FREESTANDING
#include <atomic>
#include <random>
#endif

namespace ember {

ParamId ParamId::make() {
    static const std::uint64_t seed = [] {
#if EMBER_FREESTANDING
        return std::uint64_t{0x5eed};  // no entropy source; ids stay unique by the counter
#else
        std::random_device rd;
        return (std::uint64_t(rd()) << 32) ^ rd();
#endif
    }();
#if EMBER_FREESTANDING
    static std::uint64_t counter = 0;  // one thread; 32-bit cores have no 64-bit atomics
#else
    static std::atomic<std::uint64_t> counter{0};
#endif
    // splitmix64 is a bijection, so distinct counters never collide.
    std::uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (++counter);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return {z ^ (z >> 31)};
}

}  // namespace ember
