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

/// parallel_for's chunk: `f(begin, end)` through the erased pointer. Not inlined: the inline
/// (small or single-threaded) path calls it too, so that a kernel's body is compiled once, not
/// once inlined there and once more here (0.9 MB less code in the elementwise kernels; the
/// call costs a nanosecond against the microsecond of an op).
template <typename Fn>
[[gnu::noinline]] void parallel_chunk(void* ctx, std::size_t b, std::size_t e) {
    (*static_cast<Fn*>(ctx))(b, e);
}

/// Runs `f(begin, end)` over [0, n) in parallel chunks of at least `grain` items; runs inline
/// when the work is small or the pool has one thread.
template <typename F>
void parallel_for(std::size_t n, std::size_t grain, F&& f) {
    if (n == 0) return;
    using Fn = std::remove_reference_t<F>;
    void* ctx = const_cast<void*>(static_cast<const void*>(&f));
    if (n <= grain || num_threads() == 1) {
        parallel_chunk<Fn>(ctx, 0, n);
        return;
    }
    // Nested calls (from inside a chunk) see num_threads() == 1 and run inline above.
    parallel_for_raw(n, grain, ctx, &parallel_chunk<Fn>);
}

}  // namespace ember::detail::cpu
