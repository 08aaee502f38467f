// The fixed-region allocator for firmware (ember/backend/arena.hpp). The region is a sequence
// of blocks, each a 64-byte header followed by its payload; a header records the block's whole
// size and whether it is free, so the next block is found by adding the size. Allocation takes
// the first free block that fits and splits off the rest; freeing merges the block with free
// neighbours, so the region does not fragment into unusable pieces under a steady workload.
#include <cstdint>

#include "ember/backend/arena.hpp"

namespace ember::cpu {
namespace {

constexpr std::size_t kAlign = 64;
constexpr std::size_t kHeader = kAlign;  // keeps every payload 64-byte aligned

struct Header {
    std::size_t size;  // header + payload bytes
    bool free;
};

Header* at(std::byte* p) {
    return reinterpret_cast<Header*>(p);
}
std::size_t round_up(std::size_t n) {
    return (n + kAlign - 1) / kAlign * kAlign;
}

}  // namespace

Arena::Arena(std::span<std::byte> region) noexcept
    : source_{[](void* ctx, std::size_t bytes, std::size_t align) {
                  return static_cast<Arena*>(ctx)->allocate(bytes, align);
              },
              [](void* ctx, void* p, std::size_t) { static_cast<Arena*>(ctx)->deallocate(p); },
              this} {
    const auto addr = reinterpret_cast<std::uintptr_t>(region.data());
    const std::size_t skip = (kAlign - addr % kAlign) % kAlign;
    if (region.size() < skip + 2 * kHeader) return;  // too small: every allocate fails
    base_ = region.data() + skip;
    size_ = (region.size() - skip) / kAlign * kAlign;
    *at(base_) = Header{size_, true};
}

void* Arena::allocate(std::size_t bytes, std::size_t align) noexcept {
    if (align > kAlign || size_ == 0) return nullptr;
    const std::size_t need = kHeader + round_up(bytes == 0 ? 1 : bytes);
    for (std::size_t off = 0; off < size_; off += at(base_ + off)->size) {
        Header* h = at(base_ + off);
        if (!h->free || h->size < need) continue;
        if (h->size - need >= 2 * kHeader) {  // split: the rest stays a free block
            *at(base_ + off + need) = Header{h->size - need, true};
            h->size = need;
        }
        h->free = false;
        in_use_ += h->size;
        if (in_use_ > peak_) peak_ = in_use_;
        return base_ + off + kHeader;
    }
    return nullptr;
}

void Arena::deallocate(void* p) noexcept {
    if (!p) return;
    Header* h = at(static_cast<std::byte*>(p) - kHeader);
    h->free = true;
    in_use_ -= h->size;
    // Merge every run of free blocks (one pass: the region holds few blocks).
    for (std::size_t off = 0; off < size_;) {
        Header* b = at(base_ + off);
        if (b->free) {
            std::size_t next = off + b->size;
            while (next < size_ && at(base_ + next)->free) {
                b->size += at(base_ + next)->size;
                next = off + b->size;
            }
        }
        off += b->size;
    }
}

std::size_t Arena::largest_free_block() const noexcept {
    std::size_t best = 0;
    for (std::size_t off = 0; off < size_; off += at(base_ + off)->size) {
        const Header* h = at(base_ + off);
        if (h->free && h->size - kHeader > best) best = h->size - kHeader;
    }
    return best;
}

}  // namespace ember::cpu
