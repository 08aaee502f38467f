#pragma once
// The CPU backend's thread pool: sized by EMBER_NUM_THREADS (default: hardware threads); in
// builds without threads (EMBER_CPU_THREADS=0) everything runs inline.
#include <cstddef>
#include <type_traits>

#include "ember/detail/sync.hpp"

namespace ember::detail::cpu {

using ember::detail::LockGuard;
using ember::detail::Mutex;

/// Number of threads the pool runs work on (>= 1).
std::size_t num_threads();
/// Sets the number of threads (1 = run inline); used by benchmarks and tests.
void set_num_threads(std::size_t n);

/// Runs `fn(ctx, begin, end)` over [0, n) split into chunks of at least `grain` items.
void parallel_for_raw(std::size_t n, std::size_t grain, void* ctx,
                      void (*fn)(void*, std::size_t, std::size_t));

/// Runs `f(begin, end)` over [0, n) in parallel chunks of at least `grain` items; runs inline
/// when the work is small or the pool has one thread.
template <typename F>
void parallel_for(std::size_t n, std::size_t grain, F&& f) {
    if (n == 0) return;
    if (n <= grain || num_threads() == 1) {
        f(std::size_t{0}, n);
        return;
    }
    // Nested calls (from inside a chunk) see num_threads() == 1 and run inline above.
    using Fn = std::remove_reference_t<F>;
    parallel_for_raw(
        n, grain, const_cast<void*>(static_cast<const void*>(&f)),
        [](void* ctx, std::size_t b, std::size_t e) { (*static_cast<Fn*>(ctx))(b, e); });
}

}  // namespace ember::detail::cpu
