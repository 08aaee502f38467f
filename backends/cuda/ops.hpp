#pragma once
// The CUDA backend's ops on CudaTensor that more than one source file calls: dtype-generic, with
// the same names and meaning as the CPU backend's (backends/cpu/kernels.hpp), so that both
// backends answer every op alike. CudaBackend's members are defined next to the ops they run,
// in the files that define them; an op only its own file calls is not declared here.
#include <optional>
#include <span>
#include <utility>

#include "../common/pool_geometry.hpp"
#include "../common/view.hpp"
#include "ember/backend/cuda.hpp"
#include "ember/tensor/check.hpp"
#include "ember/tensor/data.hpp"
#include "ember/tensor/distribution.hpp"
#include "ember/tensor/ops.hpp"
#include "runtime.hpp"

namespace ember::detail::cuda {

/// The runtime's device ordinal of `d`.
inline int ordinal(const CudaDevice& d) {
    return static_cast<int>(d.index);
}

// ---- creation and transfer (tensor_ops.cpp) ------------------------------------------------
CudaTensor full(const Shape& shape, Scalar value, DType dtype, int device);
TensorData to_data(const CudaTensor& t);
/// The host data of each tensor, with one wait per device (Transaction::execute).
std::vector<TensorData> to_data_many(std::vector<CudaTensor> tensors);

// ---- views and data movement (tensor_ops.cpp) ----------------------------------------------
using view::expand;  // the views: backends/common/view.hpp
using view::permute;
using view::reshape;
using view::slice;

// ---- elementwise (tensor_ops.cpp) ----------------------------------------------------------
CudaTensor binary(BinaryOp op, CudaTensor a, CudaTensor b);

// ---- reductions and indexing (reduce_ops.cpp) ----------------------------------------------
CudaTensor reduce_dim(ReduceOp op, CudaTensor t, std::size_t dim);

// ---- conv.cpp, pool.cpp: their parameters -----------------------------------------------
/// Dynamic-rank conv parameters (include/ember/tensor/check.hpp).
using check::ConvParams;
/// Dynamic-rank pooling parameters.
using PoolParams = pool::PoolParams;  // backends/common/pool_geometry.hpp
using check::conv_params;  // ConvOptions<N> or ConvTransposeOptions<N> → ConvParams
using pool::pool_params;

}  // namespace ember::detail::cuda
