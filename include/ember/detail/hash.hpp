#pragma once
// FNV-1a (64 bits), the one hash ember uses for cache keys and on-disk checksums (fused kernel
// names, SPIR-V and CUBIN cache files). Not cryptographic: it detects corruption and names
// structures, nothing more.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ember::detail {

/// FNV-1a's offset basis: the hash of nothing.
inline constexpr std::uint64_t kFnv1aBasis = 0xcbf29ce484222325ULL;

/// FNV-1a of `n` bytes at `data`, continuing from `h` (chain calls to hash several pieces).
inline std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = kFnv1aBasis) {
    const auto* b = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/// FNV-1a of the bytes of `s`.
inline std::uint64_t fnv1a(std::string_view s, std::uint64_t h = kFnv1aBasis) {
    return fnv1a(s.data(), s.size(), h);
}

}  // namespace ember::detail
