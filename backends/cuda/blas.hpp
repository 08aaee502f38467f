#pragma once
// cuBLAS and cuBLASLt, loaded with dlopen on first use instead of linked. Both libraries run
// large static initialisers when a process loads them (about 0.4 s and 200 MB of touched memory
// on an x86 host, GPU or not): linked, every program built with ember::cuda paid that at start,
// even one that never touches a GPU (the CPU examples on Dispatch, each CTest case of
// ember_tests). Only cublas_v2.h's and cublasLt.h's types and signatures are used at compile
// time; the entry points are resolved from the toolkit's libraries of the same major version.
#include <cublasLt.h>
#include <cublas_v2.h>

namespace ember::detail::cuda {

/// The cuBLAS and cuBLASLt entry points ember calls, named as the libraries export them
/// (cublas_v2.h maps cublasCreate to cublasCreate_v2, and so on).
struct BlasApi {
    // The exported function: C++ also sees an inline overload taking the legacy cudaDataType
    // compute type.
    using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t,
                                                    cublasOperation_t, int, int, int, const void*,
                                                    const void*, cudaDataType, int, long long,
                                                    const void*, cudaDataType, int, long long,
                                                    const void*, void*, cudaDataType, int,
                                                    long long, int, cublasComputeType_t,
                                                    cublasGemmAlgo_t);

    decltype(&::cublasCreate_v2) cublasCreate_v2 = nullptr;
    decltype(&::cublasSetStream_v2) cublasSetStream_v2 = nullptr;
    decltype(&::cublasSetWorkspace_v2) cublasSetWorkspace_v2 = nullptr;
    decltype(&::cublasGetStatusName) cublasGetStatusName = nullptr;
    decltype(&::cublasGetStatusString) cublasGetStatusString = nullptr;
    GemmStridedBatchedEx cublasGemmStridedBatchedEx = nullptr;
    decltype(&::cublasLtCreate) cublasLtCreate = nullptr;
    decltype(&::cublasLtMatmul) cublasLtMatmul = nullptr;
    decltype(&::cublasLtMatmulAlgoGetHeuristic) cublasLtMatmulAlgoGetHeuristic = nullptr;
    decltype(&::cublasLtMatmulDescCreate) cublasLtMatmulDescCreate = nullptr;
    decltype(&::cublasLtMatmulDescDestroy) cublasLtMatmulDescDestroy = nullptr;
    decltype(&::cublasLtMatmulDescSetAttribute) cublasLtMatmulDescSetAttribute = nullptr;
    decltype(&::cublasLtMatmulPreferenceCreate) cublasLtMatmulPreferenceCreate = nullptr;
    decltype(&::cublasLtMatmulPreferenceDestroy) cublasLtMatmulPreferenceDestroy = nullptr;
    decltype(&::cublasLtMatmulPreferenceSetAttribute) cublasLtMatmulPreferenceSetAttribute =
        nullptr;
    decltype(&::cublasLtMatrixLayoutCreate) cublasLtMatrixLayoutCreate = nullptr;
    decltype(&::cublasLtMatrixLayoutDestroy) cublasLtMatrixLayoutDestroy = nullptr;
};

/// The entry points, loaded at the first call (thread-safe). Throws ember::DeviceError naming
/// the library and the loader's message when libcublas/libcublasLt of the headers' major
/// version cannot be loaded or lacks a symbol; the next call tries again.
const BlasApi& blas();

}  // namespace ember::detail::cuda
