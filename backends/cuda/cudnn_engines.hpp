#pragma once
// cuDNN's graph (backend) API for single convolutions: the engine configurations cuDNN's
// heuristics rank for a problem, each built into an execution plan, timed, and the fastest kept
// (cudnn_engines.cpp). The legacy API (cudnnFind*AlgorithmEx) chooses among a few algorithm
// numbers and lets cuDNN pick the kernel inside each; here every ranked kernel configuration
// (tile sizes, split-k) competes, as PyTorch's cudnn.benchmark does. Only compiled with cudnn.h.
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace ember::detail::cuda::cudnn::engines {

/// The backend API's entry points (resolved by cudnn.cpp's loader, from libcudnn.so.9).
struct Functions {
    decltype(&cudnnBackendCreateDescriptor) create = nullptr;
    decltype(&cudnnBackendDestroyDescriptor) destroy = nullptr;
    decltype(&cudnnBackendSetAttribute) set = nullptr;
    decltype(&cudnnBackendGetAttribute) get = nullptr;
    decltype(&cudnnBackendFinalize) finalize = nullptr;
    decltype(&cudnnBackendExecute) execute = nullptr;
    /// Whether every entry point resolved.
    bool complete() const { return create && destroy && set && get && finalize && execute; }
};

/// One convolution: the direction (0 forward x, w → y; 1 backward data dy, w → dx; 2 backward
/// filter x, dy → dw), the operands' dims and strides (the forward's x, w and y, 4-d or 5-d,
/// 1-d convolutions already given a unit height) and the convolution's geometry.
struct Problem {
    int direction = 0;
    cudnnDataType_t data = CUDNN_DATA_FLOAT, compute = CUDNN_DATA_FLOAT;
    std::vector<std::int64_t> x_dims, x_strides, w_dims, w_strides, y_dims, y_strides;
    std::vector<std::int64_t> padding, stride, dilation;
    /// Whether engines may use tensor cores (f16/bf16; f32 only where TF32 is allowed).
    bool tensor_cores = true;
};

/// A built execution plan and the workspace it wants.
class Engine {
  public:
    /// Takes `plan` (destroyed with the Engine) and whatever must outlive it (`keep`).
    Engine(const Functions& f, cudnnBackendDescriptor_t plan, std::int64_t workspace,
           std::shared_ptr<void> keep)
        : f_(f), plan_(plan), workspace_(workspace), keep_(std::move(keep)) {}
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;
    /// Workspace bytes a run needs.
    std::int64_t workspace() const { return workspace_; }
    /// Runs on `handle`'s stream: `ptrs` are the forward's x, w and y (whichever is the
    /// output for the direction), `ws` the workspace. Returns cuDNN's status.
    cudnnStatus_t run(cudnnHandle_t handle, void* const ptrs[3], void* ws) const;

  private:
    const Functions& f_;
    cudnnBackendDescriptor_t plan_;
    std::int64_t workspace_;
    std::shared_ptr<void> keep_;  // the operation graph and engine configuration
};

/// The execution plans of the engine configurations cuDNN's heuristics (mode A) rank for `p`,
/// in rank order, left out: those that fail to build, those that want more than `max_workspace`
/// bytes, nondeterministic ones (a replayed CUDA graph must give the eager step's bits), those
/// that convert the inputs down or reduce in reduced precision, and tensor-core ones where
/// `p.tensor_cores` is false (f32 without TF32).
/// Each comes with its rank among the heuristics' results (what a plan file records).
std::vector<std::pair<int, std::unique_ptr<Engine>>> candidates(const Functions& f,
                                                                cudnnHandle_t handle,
                                                                const Problem& p,
                                                                std::int64_t max_workspace,
                                                                int most);
/// The plan of the configuration ranked `rank` (from candidates), or null if it no longer builds.
std::unique_ptr<Engine> at_rank(const Functions& f, cudnnHandle_t handle, const Problem& p,
                                int rank);

}  // namespace ember::detail::cuda::cudnn::engines
