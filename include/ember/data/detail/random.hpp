#pragma once
// The random numbers of the data layer: a small generator whose stream is defined here (not by
// the standard library, whose distributions differ between implementations), so that a seed
// gives the same shuffles and samples on every platform and in every release.
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

namespace ember::data::detail {

/// SplitMix64's output function: a bijective mix of 64 bits, used to derive independent seeds
/// (a seed and an epoch number) and as the generator's step.
constexpr std::uint64_t mix64(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/// SplitMix64: tiny, fast, and good enough for shuffling and sampling indices.
class Rng {
  public:
    /// A generator whose stream depends only on `seed`.
    explicit Rng(std::uint64_t seed) : state_(seed) {}
    /// The next 64 random bits.
    std::uint64_t next() {
        state_ += 0x9e3779b97f4a7c15ULL;
        return mix64(state_);
    }
    /// Uniform in [0, n) for n > 0, without modulo bias (rejects the short last bucket).
    std::uint64_t uniform(std::uint64_t n) {
        const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n + 1) % n;
        std::uint64_t x;
        do x = next();
        while (x > limit);
        return x % n;
    }

  private:
    std::uint64_t state_;
};

/// A seeded random permutation of 0..n-1 (Fisher-Yates).
inline std::vector<std::size_t> permutation(std::size_t n, std::uint64_t seed) {
    std::vector<std::size_t> p(n);
    std::iota(p.begin(), p.end(), std::size_t{0});
    Rng rng(seed);
    for (std::size_t i = n; i > 1; --i) {
        const auto j = static_cast<std::size_t>(rng.uniform(i));
        std::swap(p[i - 1], p[j]);
    }
    return p;
}

}  // namespace ember::data::detail
