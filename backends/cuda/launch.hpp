#pragma once
// Kernel launches with the least host work: the driver's cuLaunchKernel on the CUfunction of a
// kernel compiled into the library (found once per device with cudaGetFuncBySymbol), skipping
// the runtime's per-launch lookups and the separate cudaGetLastError. The driver's entry points
// come from the runtime (cudaGetDriverEntryPointByVersion): nothing links libcuda.
// EMBER_CUDA_LAUNCH=runtime launches through cudaLaunchKernel instead (to compare the two).
#include <cuda.h>
#include <cuda_runtime.h>

namespace ember::detail::cuda {

/// The driver API calls the backend makes, through the runtime's entry points.
struct DriverApi {
    CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;  ///< cuModuleLoadData
    CUresult (*module_get_function)(CUfunction*, CUmodule,
                                    const char*) = nullptr;  ///< cuModuleGetFunction
    CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**,
                              void**) = nullptr;                   ///< cuLaunchKernel
    CUresult (*get_error_name)(CUresult, const char**) = nullptr;  ///< cuGetErrorName
};

/// The driver's entry points (throws DeviceError naming the one the driver lacks).
const DriverApi& driver_api();

/// The driver's virtual memory management calls (a captured step's growable pool, graph.cpp).
struct VmmApi {
    CUresult (*address_reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr,
                                unsigned long long) = nullptr;  ///< cuMemAddressReserve
    CUresult (*address_free)(CUdeviceptr, size_t) = nullptr;    ///< cuMemAddressFree
    CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                       unsigned long long) = nullptr;             ///< cuMemCreate
    CUresult (*release)(CUmemGenericAllocationHandle) = nullptr;  ///< cuMemRelease
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                    unsigned long long) = nullptr;     ///< cuMemMap
    CUresult (*unmap)(CUdeviceptr, size_t) = nullptr;  ///< cuMemUnmap
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*,
                           size_t) = nullptr;  ///< cuMemSetAccess
    CUresult (*granularity)(size_t*, const CUmemAllocationProp*,
                            CUmemAllocationGranularity_flags) = nullptr;  ///< ...Granularity
};
/// The virtual memory calls, or null where the driver lacks one of them.
const VmmApi* vmm_api();
/// Throws DeviceError naming `call` and `what` when `r` is not CUDA_SUCCESS.
void check_cu(CUresult r, const char* call, const char* what);

/// The device current on this thread (the one the last stream() or use_device() named).
int current_device();

/// Per-device CUfunction cache of one kernel (a function-local static at each launch site).
struct KernelHandle {
    static constexpr int kDevices = 64;  ///< devices with a cached handle; others use the runtime
    void* fn[kDevices] = {};             ///< CUfunction by device, once resolved
};

/// Launches `kernel` (a __global__ function's address) with `args` on `stream` of `device`,
/// 1-d grid and block; throws DeviceError naming `name` when the launch fails.
void launch_fast(const void* kernel, KernelHandle& handle, int device, unsigned grid,
                 unsigned block, void** args, cudaStream_t stream, const char* name);

}  // namespace ember::detail::cuda
