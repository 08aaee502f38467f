#pragma once
// A std::allocator-compatible allocator for objects made and freed once per op (the CPU
// backend's tensor storage blocks, each with its shared_ptr control block from allocate_shared,
// and Dispatch's tensor handles): a per-thread list keeps up to kKeep freed single-object blocks of
// each type for the next op, so that a loop of ops costs no malloc and free. Blocks freed after
// the thread's list is gone (static tensors at exit) go straight to the heap.
#include <cstddef>
#include <new>

namespace ember::detail {

template <typename T>
struct RecyclingAllocator {
    using value_type = T;  ///< what it allocates
    /// A stateless allocator: every instance shares the thread's lists.
    RecyclingAllocator() = default;
    /// Rebinding, as std::allocator's (allocate_shared allocates its combined block type).
    template <typename U>
    RecyclingAllocator(const RecyclingAllocator<U>&) {}  // NOLINT
    static constexpr std::size_t kKeep = 64;             ///< blocks kept per type and thread
    /// One thread's freed blocks of type T.
    struct FreeList {
        void* items[kKeep];  ///< the kept blocks
        std::size_t n = 0;   ///< how many are kept
        bool alive = true;   ///< false once the thread's list is destroyed
        /// Frees the kept blocks at thread exit.
        ~FreeList() {
            alive = false;
            for (std::size_t i = 0; i < n; ++i) ::operator delete(items[i]);
            n = 0;
        }
    };
    /// This thread's list.
    static FreeList& list() {
        thread_local FreeList l;
        return l;
    }
    /// A block for `n` objects (from the list when it has one).
    T* allocate(std::size_t n) {
        if (n == 1) {
            FreeList& l = list();
            if (l.alive && l.n) return static_cast<T*>(l.items[--l.n]);
        }
        return static_cast<T*>(::operator new(n * sizeof(T)));
    }
    /// Returns a block to the list (to the heap when the list is full or gone).
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
    /// Any two are interchangeable (no state).
    template <typename U>
    bool operator==(const RecyclingAllocator<U>&) const {
        return true;
    }
};

}  // namespace ember::detail
