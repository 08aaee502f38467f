// Kernel launches through the driver API (launch.hpp).
#include "launch.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "ember/tensor/error.hpp"

namespace ember::detail::cuda {
namespace {

template <typename F>
void entry_point(const char* name, F*& fn) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess) (void)cudaGetLastError();
    EMBER_CHECK(e == cudaSuccess && q == cudaDriverEntryPointSuccess && p != nullptr, Device,
                "CUDA backend: the driver has no entry point ", name,
                " (cudaGetDriverEntryPointByVersion: ", cudaGetErrorName(e), ")");
    fn = reinterpret_cast<F*>(p);
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
