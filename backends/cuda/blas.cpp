// Loads cuBLAS and cuBLASLt at the first use of a CUDA device (blas.hpp says why they are not
// linked). The libraries are looked up by their sonames (libcublas.so.<major> of the headers
// ember was compiled against), the way the program's own libraries are found (its RUNPATH,
// LD_LIBRARY_PATH, the loader's cache), and then in the toolkit's library folder that ember was
// built with: a program run from its build tree finds the toolkit it was linked beside, as it
// did when cuBLAS was a link dependency.
#include "blas.hpp"

#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "ember/tensor/error.hpp"

namespace ember::detail::cuda {
namespace {

void* open_library(const std::string& soname, std::string& tried) {
    if (void* lib = ::dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
    const char* e = ::dlerror();
    tried += soname + ": " + (e ? e : "unknown error");
#ifdef EMBER_CUDA_LIBRARY_DIR
    const std::string path = std::string(EMBER_CUDA_LIBRARY_DIR) + "/" + soname;
    if (void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
    e = ::dlerror();
    tried += "; " + path + ": " + (e ? e : "unknown error");
#endif
    return nullptr;
}

BlasApi load() {
    const std::string major = std::to_string(CUBLAS_VER_MAJOR);
    BlasApi api;
    void* libs[2] = {nullptr, nullptr};
    const std::string names[2] = {"libcublasLt.so." + major, "libcublas.so." + major};
    for (int i = 0; i < 2; ++i) {
        std::string tried;
        libs[i] = open_library(names[i], tried);
        EMBER_CHECK(libs[i] != nullptr, Device, "CUDA backend: cannot load ", names[i], " (", tried,
                    "); install the CUDA toolkit's cuBLAS ", major,
                    " or add its folder to LD_LIBRARY_PATH");
    }
    auto get = [&](auto& fn, void* lib, const std::string& lib_name, const char* sym) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, sym));
        EMBER_CHECK(fn != nullptr, Device, "CUDA backend: ", lib_name, " has no symbol ", sym);
    };
#define EMBER_BLAS_LOAD(lib, sym) get(api.sym, libs[lib], names[lib], #sym)
    EMBER_BLAS_LOAD(1, cublasCreate_v2);
    EMBER_BLAS_LOAD(1, cublasSetStream_v2);
    EMBER_BLAS_LOAD(1, cublasSetWorkspace_v2);
    EMBER_BLAS_LOAD(1, cublasGetStatusName);
    EMBER_BLAS_LOAD(1, cublasGetStatusString);
    EMBER_BLAS_LOAD(1, cublasGemmStridedBatchedEx);
    EMBER_BLAS_LOAD(0, cublasLtCreate);
    EMBER_BLAS_LOAD(0, cublasLtMatmul);
    EMBER_BLAS_LOAD(0, cublasLtMatmulAlgoGetHeuristic);
    EMBER_BLAS_LOAD(0, cublasLtMatmulDescCreate);
    EMBER_BLAS_LOAD(0, cublasLtMatmulDescDestroy);
    EMBER_BLAS_LOAD(0, cublasLtMatmulDescSetAttribute);
    EMBER_BLAS_LOAD(0, cublasLtMatmulPreferenceCreate);
    EMBER_BLAS_LOAD(0, cublasLtMatmulPreferenceDestroy);
    EMBER_BLAS_LOAD(0, cublasLtMatmulPreferenceSetAttribute);
    EMBER_BLAS_LOAD(0, cublasLtMatrixLayoutCreate);
    EMBER_BLAS_LOAD(0, cublasLtMatrixLayoutDestroy);
#undef EMBER_BLAS_LOAD
    return api;
}

}  // namespace

const BlasApi& blas() {
    // A static whose initialiser throws is initialised again by the next call.
    static const BlasApi api = load();
    return api;
}

}  // namespace ember::detail::cuda
