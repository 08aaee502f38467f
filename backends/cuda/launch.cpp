// Kernel launches through the driver API (launch.hpp).
#include "launch.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "ember/tensor/error.hpp"

namespace ember::detail::cuda {
namespace {

/// The driver's entry point `name` into fn; false (fn null) where the driver lacks it.
template <typename F>
bool try_entry_point(const char* name, F*& fn, cudaError_t* error = nullptr) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess) (void)cudaGetLastError();
    if (error) *error = e;
    const bool ok = e == cudaSuccess && q == cudaDriverEntryPointSuccess && p != nullptr;
    fn = ok ? reinterpret_cast<F*>(p) : nullptr;
    return ok;
}

template <typename F>
void entry_point(const char* name, F*& fn) {
    cudaError_t e = cudaSuccess;
    EMBER_CHECK(try_entry_point(name, fn, &e), Device,
                "CUDA backend: the driver has no entry point ", name,
                " (cudaGetDriverEntryPointByVersion: ", cudaGetErrorName(e), ")");
}

bool use_runtime() {
    static const bool r = [] {
        const char* e = std::getenv("EMBER_CUDA_LAUNCH");
        return e != nullptr && std::strcmp(e, "runtime") == 0;
    }();
    return r;
}

}  // namespace

const DriverApi& driver_api() {
    static const DriverApi d = [] {
        DriverApi r;
        entry_point("cuModuleLoadData", r.module_load_data);
        entry_point("cuModuleGetFunction", r.module_get_function);
        entry_point("cuLaunchKernel", r.launch_kernel);
        entry_point("cuGetErrorName", r.get_error_name);
        return r;
    }();
    return d;
}

const VmmApi* vmm_api() {
    static const std::optional<VmmApi> v = []() -> std::optional<VmmApi> {
        VmmApi r;
        if (try_entry_point("cuMemAddressReserve", r.address_reserve) &&
            try_entry_point("cuMemAddressFree", r.address_free) &&
            try_entry_point("cuMemCreate", r.create) &&
            try_entry_point("cuMemRelease", r.release) && try_entry_point("cuMemMap", r.map) &&
            try_entry_point("cuMemUnmap", r.unmap) &&
            try_entry_point("cuMemSetAccess", r.set_access) &&
            try_entry_point("cuMemGetAllocationGranularity", r.granularity))
            return r;
        return std::nullopt;
    }();
    return v ? &*v : nullptr;
}

void check_cu(CUresult r, const char* call, const char* what) {
    if (r == CUDA_SUCCESS) [[likely]]
        return;
    const char* name = "unknown error";
    if (driver_api().get_error_name) driver_api().get_error_name(r, &name);
    EMBER_FAIL(Device, "CUDA driver error in ", call, " (", what, "): ", name);
}

void launch_fast(const void* kernel, KernelHandle& handle, int device, unsigned grid,
                 unsigned block, void** args, cudaStream_t stream, const char* name) {
    if (device >= 0 && device < KernelHandle::kDevices && !use_runtime()) [[likely]] {
        auto* slot = reinterpret_cast<std::atomic<void*>*>(&handle.fn[device]);
        void* fn = slot->load(std::memory_order_acquire);
        if (fn == nullptr) [[unlikely]] {
            cudaFunction_t f = nullptr;
            const cudaError_t e = cudaGetFuncBySymbol(&f, kernel);
            if (e != cudaSuccess) (void)cudaGetLastError();
            EMBER_CHECK(e == cudaSuccess, Device, "CUDA error in cudaGetFuncBySymbol (", name,
                        " kernel): ", cudaGetErrorName(e));
            fn = reinterpret_cast<void*>(f);
            slot->store(fn, std::memory_order_release);
        }
        check_cu(driver_api().launch_kernel(static_cast<CUfunction>(fn), grid, 1, 1, block, 1, 1, 0,
                                            reinterpret_cast<CUstream>(stream), args, nullptr),
                 "cuLaunchKernel", name);
        return;
    }
    const cudaError_t e = cudaLaunchKernel(kernel, dim3(grid), dim3(block), args, 0, stream);
    if (e != cudaSuccess) [[unlikely]] {
        (void)cudaGetLastError();
        EMBER_FAIL(Device, "CUDA error launching the ", name, " kernel: ", cudaGetErrorName(e));
    }
}

}  // namespace ember::detail::cuda
