#pragma once
// What the CUDA backend's ops need to know about a step being captured into a CUDA graph
// (graph.cpp; the public API is include/ember/stacks/cuda_graph.hpp): the capture in progress on
// this thread, its private memory pool, the generator's draws, the optimizer updates whose
// scalars change from replay to replay, and the guard that turns a host synchronisation inside a
// capture into an ember::Error naming the op.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "ember/tensor/ops.hpp"

namespace ember::detail::cuda {

/// The blocks of one captured graph: allocations made while it was captured come from here (and
/// blocks freed during the capture come back here), so that their addresses stay the graph's
/// across replays and nothing else is handed them while it lives. When the graph goes, its
/// memory returns (to the driver, or to the device's caching pool for cudaMalloc'd segments)
/// as soon as none of its blocks is held.
///
/// A request takes the smallest free block that holds it and splits it, and a freed block
/// merges with its free neighbours, as PyTorch's graph pools do. Splitting a free block is safe
/// for the same reason reusing it is: one stream runs the captured work in the order it was
/// recorded, so the block's earlier users have run before its later ones start. The memory is
/// two growable arenas (one for requests of up to 1 MiB, one for larger ones, so that small
/// buffers do not split the large blocks): address ranges reserved once, into which the driver
/// maps more memory at the end when no free block holds a request, so that every free block of
/// an arena can merge with its neighbours (the expandable segments of PyTorch's allocator).
/// Where the driver lacks virtual memory management, each arena is a list of cudaMalloc'd
/// segments instead, whose free blocks merge only within a segment.
struct PrivatePool {
    /// A range blocks are carved from and merge back into: an arena's reserved address range
    /// (growable) or one cudaMalloc (or a block adopted from before the capture).
    struct Segment {
        std::byte* base = nullptr;
        std::size_t size = 0;      ///< bytes usable: mapped (an arena) or allocated
        std::size_t held = 0;      ///< blocks handed out and not yet given back
        bool small = false;        ///< for requests of up to 1 MiB
        bool arena = false;        ///< a reserved range the driver maps memory into
        std::size_t reserved = 0;  ///< an arena's address range
        std::size_t granularity = 0;  ///< an arena's mapping granularity
        std::vector<std::pair<unsigned long long, std::size_t>> chunks;  ///< an arena's mappings
    };
    /// A block of a segment, free or handed out.
    struct Block {
        Segment* segment = nullptr;
        std::size_t size = 0;
        bool free = false;
    };
    int device = 0;
    std::mutex mu;
    bool open = true;    ///< false once the graph is gone: segments go back as they empty
    bool arenas = true;  ///< grow arenas where the driver can (EMBER_CUDA_GRAPH_ARENAS=0: not)
    std::vector<std::unique_ptr<Segment>> segments;
    Segment* arena_small = nullptr;  ///< the growable arenas (null until used, or without VMM)
    Segment* arena_large = nullptr;
    std::map<std::byte*, Block> blocks;  ///< every block of every segment, by address
    /// The free blocks by (size, address), small segments' and large segments' apart.
    std::set<std::pair<std::size_t, std::byte*>> free_small, free_large;
    std::size_t bytes = 0;        ///< bytes of the pool's segments (mapped or allocated)
    std::size_t in_use = 0;       ///< bytes of the blocks handed out now
    std::size_t peak_in_use = 0;  ///< the most bytes handed out at once
};

/// One optimizer update inside a capture whose scalars move on at each replay (Adam's bias
/// corrections and learning rate): the three doubles a replay writes for it.
struct AdamSlot {
    AdamStepScalars at_capture;  ///< the scalars the capture saw
    double time = 0;             ///< their step count t (0: not 1 − βᵗ; they stay as captured)
};

/// The capture in progress on a thread.
struct CaptureState {
    int device = 0;
    cudaStream_t stream = nullptr;
    std::shared_ptr<PrivatePool> pool;
    std::uint64_t counter_base = 0;      ///< the generator's host counter when the capture began
    std::uint64_t draws = 0;             ///< random launches recorded
    const std::uint64_t* rng = nullptr;  ///< the device's {seed, offset}
    std::vector<AdamSlot> adam;          ///< updates recorded, in order
    std::vector<double*> adam_blocks;    ///< device scalars, kAdamSlotsPerNode slots a block
    std::vector<cudaGraphNode_t> adam_nodes;  ///< the node that writes each block
    std::size_t replaced = 0;                 ///< tensors from before the capture freed during it
    std::size_t replaced_bytes = 0;           ///< their bytes
};

/// Adam slots one scalar-writing node covers (3 doubles each, within a kernel's 4 KiB of
/// parameters).
inline constexpr int kAdamSlotsPerNode = 128;

/// The capture in progress on this thread, or null.
CaptureState* active_capture();
/// The capture in progress on this thread when it records work for `device`, or null.
inline CaptureState* capturing(int device) {
    CaptureState* c = active_capture();
    return c != nullptr && c->device == device ? c : nullptr;
}
/// Throws ember::Error when this thread is capturing a step: `op` waits for the device or
/// reads host memory, which a replayed graph cannot do.
void forbid_in_capture(const char* op);

/// Held shared by the ops that the data loader's worker threads run on a device (from_data,
/// to_data) and exclusively by a capture: other threads' copies wait for the capture to end
/// instead of landing on the capturing stream (which would join or break the graph).
std::shared_lock<std::shared_mutex> capture_gate();

/// A block of `size` bytes (a size class) from the capture's private pool: carved from the
/// smallest free block that holds it, else from memory the arena maps at its end (or a new
/// segment). `*block_size` gets its size (what
/// the block is given back as: `size`, or the whole free block when the rest would be under
/// 512 bytes).
void* pool_take(CaptureState& c, std::size_t size, std::size_t* block_size = nullptr);
/// Gives a block back to `pool` (a closed pool gives its memory back as its segments empty).
void pool_give(PrivatePool& pool, void* block);
/// Takes a block freed during a capture, from before it, into the capture's private pool (and
/// counts it as replaced).
void pool_adopt(CaptureState& c, void* block, std::size_t size);
/// Gives a block back to `pool` if that pool's graph still lives; false otherwise.
bool pool_give_if_open(PrivatePool& pool, void* block);
/// Counts a tensor from before the capture freed during it.
void note_replaced(CaptureState& c, std::size_t size);
/// Puts a free block into the device's caching pool (runtime.cpp).
void cache_block(int device, void* block, std::size_t size);
/// Counts a cudaMalloc (or a mapping) made for a private pool in the device's memory statistics
/// (runtime.cpp).
void note_driver_alloc(int device, std::size_t size);
/// Counts memory a private pool gave back to the driver (runtime.cpp).
void note_driver_free(int device, std::size_t size);

/// One draw of the counter-based generator: element i of the draw hashes (seed, counter, i).
/// Outside a capture `state` is null and seed/counter are the host's; inside, `counter` is the
/// draw's index within the step and the kernel adds the device's offset to it (state[1]) and
/// takes the device's seed (state[0]), which every replay moves on.
struct RngDraw {
    std::uint64_t seed = 0;
    std::uint64_t counter = 0;
    const std::uint64_t* state = nullptr;
};
/// The next draw on `device` (the host counter moves on either way).
RngDraw next_draw(int device);
/// Seeds the generator (the counter restarts at 0).
void seed_generator(std::uint64_t seed);

/// Inside a capture: registers an Adam update and returns the device scalars its kernel reads
/// ({lr, correction_1, correction_2}); null outside a capture.
const double* adam_slot(int device, const AdamStepScalars& s);

}  // namespace ember::detail::cuda
