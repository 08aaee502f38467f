#pragma once
// Checked size arithmetic: every element count, dim and byte size ember computes from a user's
// (or a file's) numbers goes through these, so that a product or sum that does not fit is an
// ember::Error naming the op and the values instead of a wrapped, too-small size (and then an
// out-of-bounds access) or a division fault.
#include <cstddef>
#include <cstdint>

#include "../../export.hpp"
#include "../error.hpp"

namespace ember {

/// The most elements a tensor may hold, and the largest dim: 2^60 - 1 (2^29 - 1 where size_t
/// has 32 bits, as on the firmware's Cortex-M). A tensor's size in bytes (at most 8 per element)
/// then fits a signed 64-bit integer (a size_t on 32-bit targets), so no element offset, stride
/// or byte count computed from its dims can overflow.
inline constexpr std::size_t kMaxElements =
    sizeof(std::size_t) >= 8 ? static_cast<std::size_t>((std::uint64_t{1} << 60) - 1)
                             : std::size_t(-1) / 8;  // 32-bit targets (firmware): 2^29 - 1

namespace detail {

/// Throws ShapeError: `op`'s `what` (`a` `sym` `b`) exceeds kMaxElements or does not fit.
[[noreturn]] EMBER_API void size_overflow(const char* op, const char* what, std::size_t a, char sym,
                                          std::size_t b);

/// a * b, for counts of elements or dims; throws ShapeError naming `op` when it exceeds
/// kMaxElements.
constexpr std::size_t checked_mul(std::size_t a, std::size_t b, const char* op,
                                  const char* what = "size") {
    std::size_t r = 0;
    if (__builtin_mul_overflow(a, b, &r) || r > kMaxElements) [[unlikely]]
        size_overflow(op, what, a, '*', b);
    return r;
}

/// a + b, for counts of elements or dims; throws ShapeError naming `op` when it exceeds
/// kMaxElements.
constexpr std::size_t checked_add(std::size_t a, std::size_t b, const char* op,
                                  const char* what = "size") {
    std::size_t r = 0;
    if (__builtin_add_overflow(a, b, &r) || r > kMaxElements) [[unlikely]]
        size_overflow(op, what, a, '+', b);
    return r;
}

/// The bytes of `elements` elements of `elem_size` bytes each; throws ShapeError naming `op`
/// when that does not fit a signed 64-bit size.
constexpr std::size_t checked_bytes(std::size_t elements, std::size_t elem_size, const char* op) {
    std::size_t r = 0;
    if (__builtin_mul_overflow(elements, elem_size, &r) || r > static_cast<std::size_t>(INT64_MAX))
        [[unlikely]]
        size_overflow(op, "byte size", elements, '*', elem_size);
    return r;
}

/// The number of elements of arange(start, end, step): throws ArgumentError naming `op` for a
/// zero step or a range running the other way, ShapeError when the count exceeds kMaxElements.
/// Computed in unsigned arithmetic, so INT64_MIN..INT64_MAX neither overflows nor faults.
EMBER_API std::size_t arange_length(std::int64_t start, std::int64_t end, std::int64_t step,
                                    const char* op = "arange");

/// Throws an ember::Error naming `op` and `bytes`: an allocation the device could not satisfy
/// (a std::bad_alloc caught, an allocator's null pointer).
[[noreturn]] EMBER_API void allocation_failed(const char* op, std::size_t bytes,
                                              const char* device);

}  // namespace detail
}  // namespace ember
