// Indexing kernels: gather (also index_select through a broadcast index view), scatter-add
// (also index_add) through atomics, argwhere through a CUB scan, and row sorts through CUB's
// stable segmented sort (NaN last ascending, first descending, as PyTorch).
#include <cub/cub.cuh>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "device.cuh"

namespace ember::detail::cuda {
namespace {

template <typename U>
__global__ void gather_kernel(Iter<3> it, std::int64_t dim_stride, U* out, const std::int64_t* idx,
                              const U* t) {
    EMBER_GRID_LOOP(i, it.n) {
        std::int64_t off[3];
        offsets(it, i, off);
        out[off[0]] = t[off[2] + idx[off[1]] * dim_stride];
    }
}

__device__ __forceinline__ void atomic_add(float* p, float v) {
    atomicAdd(p, v);
}
__device__ __forceinline__ void atomic_add(double* p, double v) {
    atomicAdd(p, v);
}
__device__ __forceinline__ void atomic_add(std::int64_t* p, std::int64_t v) {
    // Two's complement: an unsigned add wraps to the same bits.
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}

template <typename T>
__global__ void scatter_kernel(Iter<3> it, std::int64_t dim_stride, T* out, const std::int64_t* idx,
                               const T* values) {
    EMBER_GRID_LOOP(i, it.n) {
        std::int64_t off[3];
        offsets(it, i, off);
        atomic_add(out + off[0] + idx[off[1]] * dim_stride, values[off[2]]);
    }
}

__global__ void seg_offsets_kernel(std::int64_t* out, std::int64_t n, std::int64_t cols) {
    EMBER_GRID_LOOP(i, n) out[i] = i * cols;
}

/// An unsigned key whose order is PyTorch's sort order of x: -0 and +0 equal, every NaN above
/// +inf (so that NaN sorts last ascending and first descending).
template <typename T, typename U>
__global__ void radix_key_kernel(const T* in, U* key, std::int64_t n) {
    EMBER_GRID_LOOP(i, n) {
        const T x = in[i];
        U u;
        if constexpr (std::is_integral_v<T>) {
            u = static_cast<U>(x) ^ (U(1) << (sizeof(U) * 8 - 1));
        } else if (x != x) {
            u = ~U(0);
        } else {
            const T y = x == T(0) ? T(0) : x;  // -0 → +0
            U bits;
            memcpy(&bits, &y, sizeof bits);
            const U sign = U(1) << (sizeof(U) * 8 - 1);
            u = (bits & sign) ? ~bits : (bits | sign);
        }
        key[i] = u;
    }
}

template <typename T>
__global__ void gather_rows_kernel(const T* in, const std::int64_t* idx, T* out, std::int64_t n,
                                   std::int64_t cols) {
    EMBER_GRID_LOOP(i, n) out[i] = in[(i / cols) * cols + idx[i]];
}

__global__ void iota_rows_kernel(std::int64_t* out, std::int64_t n, std::int64_t cols) {
    EMBER_GRID_LOOP(i, n) out[i] = i % cols;
}

template <typename T>
__global__ void nonzero_kernel(Iter<1> it, const T* in, std::int64_t* flag) {
    EMBER_GRID_LOOP(i, it.n) {
        std::int64_t off[1];
        offsets(it, i, off);
        flag[i] = in[off[0]] != T(0);
    }
}

template <typename T>
__global__ void argwhere_kernel(Iter<1> it, const T* in, const std::int64_t* pos, int rank,
                                Iter<1> shape, std::int64_t* out) {
    EMBER_GRID_LOOP(i, it.n) {
        std::int64_t off[1];
        offsets(it, i, off);
        if (in[off[0]] == T(0)) continue;
        std::int64_t* row = out + pos[i] * rank;
        std::int64_t rem = i;
        for (int d = rank - 1; d >= 0; --d) {
            row[d] = rem % shape.shape[d];
            rem /= shape.shape[d];
        }
    }
}

/// Calls f(T{}) for the storage type of dtype dt as seen by argwhere (half types as raw bits
/// compare wrongly for -0.0, so they are cast by the host first).
template <typename F>
void visit_storage(DType dt, F&& f) {
    switch (dtype_size(dt)) {
        case 8:
            if (dt == DType::F64) return f(double{});
            return f(std::int64_t{});
        case 4:
            if (dt == DType::F32) return f(float{});
            return f(std::int32_t{});
        case 2:
            return f(std::int16_t{});
        default:
            return f(std::uint8_t{});
    }
}

}  // namespace

void launch_gather(int elem_bytes, const Iter<3>& it, std::int64_t dim_stride, void* out,
                   const std::int64_t* idx, const void* t, cudaStream_t s) {
    if (it.n == 0) return;
    const unsigned g = blocks_for(it.n);
    switch (elem_bytes) {
        case 8:
            gather_kernel<<<g, kThreads, 0, s>>>(it, dim_stride, static_cast<std::uint64_t*>(out),
                                                 idx, static_cast<const std::uint64_t*>(t));
            break;
        case 4:
            gather_kernel<<<g, kThreads, 0, s>>>(it, dim_stride, static_cast<std::uint32_t*>(out),
                                                 idx, static_cast<const std::uint32_t*>(t));
            break;
        case 2:
            gather_kernel<<<g, kThreads, 0, s>>>(it, dim_stride, static_cast<std::uint16_t*>(out),
                                                 idx, static_cast<const std::uint16_t*>(t));
            break;
        default:
            gather_kernel<<<g, kThreads, 0, s>>>(it, dim_stride, static_cast<std::uint8_t*>(out),
                                                 idx, static_cast<const std::uint8_t*>(t));
            break;
    }
    check_launch("gather");
}

void launch_scatter_add(DType cd, const Iter<3>& it, std::int64_t dim_stride, void* out,
                        const std::int64_t* idx, const void* values, cudaStream_t s) {
    if (it.n == 0) return;
    const unsigned g = blocks_for(it.n);
    switch (cd) {
        case DType::F64:
            scatter_kernel<<<g, kThreads, 0, s>>>(it, dim_stride, static_cast<double*>(out), idx,
                                                  static_cast<const double*>(values));
            break;
        case DType::I64:
            scatter_kernel<<<g, kThreads, 0, s>>>(it, dim_stride, static_cast<std::int64_t*>(out),
                                                  idx, static_cast<const std::int64_t*>(values));
            break;
        default:
            scatter_kernel<<<g, kThreads, 0, s>>>(it, dim_stride, static_cast<float*>(out), idx,
                                                  static_cast<const float*>(values));
            break;
    }
    check_launch("scatter_add");
}

void launch_sort_rows(DType cd, std::int64_t rows, std::int64_t cols, const void* keys_in,
                      void* keys_out, std::int64_t* idx_out, bool descending, int device,
                      cudaStream_t s) {
    const std::int64_t n = rows * cols;
    if (n == 0) return;
    EMBER_CHECK(n <= INT32_MAX && rows <= INT32_MAX, Shape, "sort: ", n,
                " elements exceed the sort's 32-bit limit");
    auto idx_in = allocate(static_cast<std::size_t>(n) * 8, device);
    auto* iin = static_cast<std::int64_t*>(idx_in->data);
    iota_rows_kernel<<<blocks_for(n), kThreads, 0, s>>>(iin, n, cols);
    // Segment offsets: row r spans [r·cols, (r+1)·cols).
    auto seg = allocate(static_cast<std::size_t>(rows + 1) * 8, device);
    auto* offsets_begin = static_cast<std::int64_t*>(seg->data);
    seg_offsets_kernel<<<blocks_for(rows + 1), kThreads, 0, s>>>(offsets_begin, rows + 1, cols);
    check_launch("sort");
    const std::int64_t* offsets_end = offsets_begin + 1;
    // Radix sort on order-preserving unsigned keys (a stable sort with PyTorch's order: NaN
    // above +inf, -0 equal to +0), then the values gathered by the sorted positions.
    auto run = [&]<typename T, typename U>(T, U) {
        auto keys = allocate(static_cast<std::size_t>(n) * sizeof(U) * 2, device);
        U* kin = static_cast<U*>(keys->data);
        U* kout = kin + n;
        radix_key_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(keys_in), kin, n);
        check_launch("sort");
        const int num = static_cast<int>(n), segs = static_cast<int>(rows);
        std::size_t temp = 0;
        auto sort = [&](void* t) {
            if (descending)
                check(cub::DeviceSegmentedRadixSort::SortPairsDescending(
                          t, temp, kin, kout, iin, idx_out, num, segs, offsets_begin, offsets_end,
                          0, int(sizeof(U) * 8), s),
                      "cub::DeviceSegmentedRadixSort::SortPairsDescending");
            else
                check(cub::DeviceSegmentedRadixSort::SortPairs(
                          t, temp, kin, kout, iin, idx_out, num, segs, offsets_begin, offsets_end,
                          0, int(sizeof(U) * 8), s),
                      "cub::DeviceSegmentedRadixSort::SortPairs");
        };
        sort(nullptr);
        // At least one byte: a null scratch pointer would make CUB only report the size again.
        auto scratch = allocate(std::max<std::size_t>(temp, 16), device);
        sort(scratch->data);
        gather_rows_kernel<<<blocks_for(n), kThreads, 0, s>>>(
            static_cast<const T*>(keys_in), idx_out, static_cast<T*>(keys_out), n, cols);
        check_launch("sort");
    };
    if (cd == DType::F64)
        run(double{}, std::uint64_t{});
    else if (cd == DType::I64)
        run(std::int64_t{}, std::uint64_t{});
    else
        run(float{}, std::uint32_t{});
}

void launch_argwhere_scan(const Iter<1>& it, DType dt, const void* in, std::int64_t* pos,
                          std::int64_t* count, int device, cudaStream_t s) {
    const std::int64_t n = it.n;
    auto flags = allocate(static_cast<std::size_t>(n + 1) * 8, device);
    auto* f = static_cast<std::int64_t*>(flags->data);
    visit_storage(dt, [&]<typename T>(T) {
        nonzero_kernel<<<blocks_for(n), kThreads, 0, s>>>(it, static_cast<const T*>(in), f);
    });
    check_launch("argwhere");
    // A zero after the last flag makes the exclusive scan's last entry the total.
    check(cudaMemsetAsync(f + n, 0, 8, s), "cudaMemsetAsync");
    std::size_t temp = 0;
    check(cub::DeviceScan::ExclusiveSum(nullptr, temp, f, pos, n + 1, s),
          "cub::DeviceScan::ExclusiveSum");
    auto scratch = allocate(std::max<std::size_t>(temp, 16), device);  // never null (see sort)
    check(cub::DeviceScan::ExclusiveSum(scratch->data, temp, f, pos, n + 1, s),
          "cub::DeviceScan::ExclusiveSum");
    check(cudaMemcpyAsync(count, pos + n, 8, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
}

void launch_argwhere_write(const Iter<1>& it, DType dt, const void* in, const std::int64_t* pos,
                           int rank, const std::int64_t* shape, std::int64_t* out, cudaStream_t s) {
    if (it.n == 0) return;
    Iter<1> sh;
    sh.rank = rank;
    for (int d = 0; d < rank; ++d) sh.shape[d] = shape[d];
    visit_storage(dt, [&]<typename T>(T) {
        argwhere_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(it, static_cast<const T*>(in), pos,
                                                              rank, sh, out);
    });
    check_launch("argwhere");
}

}  // namespace ember::detail::cuda
