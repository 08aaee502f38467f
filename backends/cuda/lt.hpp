#pragma once
// cuBLASLt, shared by the int8 Linear (qlinear.cpp) and the f32 matmul epilogues (matmul.cpp):
// the device's handle, and the descriptors of one matmul, destroyed together.
#include <cublasLt.h>

#include "runtime.hpp"

namespace ember::detail::cuda {

/// The device's cuBLASLt handle (created on first use, kept for the process).
cublasLtHandle_t cublas_lt(int device);

/// A matmul's cuBLASLt descriptors (operation, layouts of A, B and C/D, search preference).
struct LtPlan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    LtPlan() = default;
    LtPlan(const LtPlan&) = delete;
    LtPlan& operator=(const LtPlan&) = delete;
    ~LtPlan() {
        if (pref) blas().cublasLtMatmulPreferenceDestroy(pref);
        if (c) blas().cublasLtMatrixLayoutDestroy(c);
        if (b) blas().cublasLtMatrixLayoutDestroy(b);
        if (a) blas().cublasLtMatrixLayoutDestroy(a);
        if (desc) blas().cublasLtMatmulDescDestroy(desc);
    }
};

}  // namespace ember::detail::cuda
