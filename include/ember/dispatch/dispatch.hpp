#pragma once
// ember::Dispatch: a backend whose device picks the concrete stack at run time (Burn's
// burn-dispatch). One program runs on the CPU, Vulkan or CUDA, with or without Fusion and
// Autodiff, chosen by a device value or a string:
//
//     using B = ember::Dispatch;
//     auto dev = ember::Device<B>::parse(argv[1]);          // "cpu", "cuda:0+fusion+autodiff"
//     auto x = ember::Tensor<B, 2>::random({2, 3}, ember::Distribution::Default, dev);
//
// Every op's work is compiled once in ember_dispatch: each stack's op table, whose entry
// unwraps the operands and calls that stack's op, so a program written against Dispatch
// instantiates no backend code; of an op it compiles a few compares that find the table in
// its first operand's handle, and the call of the entry (ops.hpp). Tensors of two stacks in
// one op are an ember::DeviceError naming both; `to_device` moves a tensor between stacks. A
// tensor on an autodiff device and one on the same device without autodiff may meet: the
// latter joins the graph as a constant.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../autodiff/gradients.hpp"
#include "../export.hpp"
#include "../tensor/backend.hpp"
#include "../tensor/fusion_program.hpp"
#include "../tensor/sgd_step.hpp"
#include "device.hpp"
#include "ops.hpp"

namespace ember {

/// The run-time dispatched backend: every op goes to the stack its tensors' device names.
struct EMBER_API Dispatch : detail::dispatch::Ops {
    using Device = DispatchDevice;                  ///< names the stack
    using FloatTensorPrimitive = DispatchTensor;    ///< a handle to the stack's float tensor
    using IntTensorPrimitive = DispatchTensor;      ///< a handle to the stack's int tensor
    using BoolTensorPrimitive = DispatchTensor;     ///< a handle to the stack's bool tensor
    using FloatElem = float;                        ///< every stack's float element
    using IntElem = std::int64_t;                   ///< every stack's int element
    using InnerBackend = Dispatch;                  ///< inner() keeps Dispatch, without autodiff
    using Gradients = ember::Gradients;             ///< what backward() returns
    using FT = DispatchTensor;                      ///< shorthand for the primitives
    /// Module walks (visit, map, to_device, valid, records) go through one function per module
    /// type, which ember_dispatch compiles once for ember's modules (module::CompiledWalks).
    static constexpr bool compiled_module_walks = true;

    /// "dispatch".
    static std::string name();
    /// The stacks' backends this build has: "cpu", "vulkan", "cuda".
    static std::vector<std::string> backends();
    /// Seeds the generator of every backend this build has.
    static void seed(std::uint64_t seed);
    /// Waits for the device's backend (runs what Fusion holds first).
    static void sync(const Device& d);
    /// Whether ops on `d` are recorded for backward() (the device has autodiff); what
    /// training-only layers (dropout, batch statistics) ask on Dispatch.
    static bool ad_enabled(const Device& d) { return d.has_autodiff(); }

    // ---- devices: a float tensor's device names its stack; int and bool tensors never carry
    // autodiff (they are the inner stack's, as on Autodiff<B>) ----
    // Read from the handle, inline: the tensor layer asks for them before most ops.
    /// The device (stack) of a float tensor.
    static Device float_device(const FT& t) { return t.get().device; }
    /// The device of an int tensor (without autodiff).
    static Device int_device(const FT& t) { return t.get().device; }
    /// The device of a bool tensor (without autodiff).
    static Device bool_device(const FT& t) { return t.get().device; }
    /// The shape of a float tensor (kept in its handle: no call to the stack).
    static Shape float_shape(const FT& t) { return *t.get().shape; }
    /// The shape of an int tensor.
    static Shape int_shape(const FT& t) { return *t.get().shape; }
    /// The shape of a bool tensor.
    static Shape bool_shape(const FT& t) { return *t.get().shape; }
    /// The dtype of a float tensor (kept in its handle).
    static DType float_dtype(const FT& t) { return t.get().dtype; }
    /// The dtype of an int tensor.
    static DType int_dtype(const FT& t) { return t.get().dtype; }
    /// The dtype of a bool tensor.
    static DType bool_dtype(const FT& t) { return t.get().dtype; }
    /// The tensor on stack `d`: the same backend keeps the graph (a tensor leaving autodiff
    /// leaves it); another backend or decorator moves the values through TensorData.
    static FT float_to_device(FT t, const Device& d);
    /// The int tensor on stack `d` (its autodiff flag is ignored).
    static FT int_to_device(FT t, const Device& d);
    /// The bool tensor on stack `d` (its autodiff flag is ignored).
    static FT bool_to_device(FT t, const Device& d);

    // ---- autodiff (AutodiffBackend): tensors on a device with autodiff ----
    /// Backpropagates from `root`; an ember::DeviceError when its device has no autodiff.
    static Gradients backward(FT root);
    /// The gradient of `t` in `grads`, on t's device without autodiff.
    static std::optional<FT> grad(const FT& t, const Gradients& grads);
    /// Removes and returns the gradient of `t`.
    static std::optional<FT> grad_remove(const FT& t, Gradients& grads);
    /// Sets the gradient of `t`.
    static void grad_replace(const FT& t, Gradients& grads, FT grad);
    /// The tensor without autodiff (outside any graph); itself when its device has none.
    static FT inner(FT t);
    /// The tensor on its device with autodiff, untracked.
    static FT from_inner(FT t);
    /// Marks a leaf whose gradient backward() keeps; a no-op without autodiff.
    static FT float_set_require_grad(FT t, bool require);
    /// Whether the tensor is a leaf that keeps its gradient.
    static bool float_is_require_grad(const FT& t);
    /// The stack's leaf id of a leaf that keeps its gradient, else 0 (autocast's cast cache).
    static std::uint64_t float_leaf_id(const FT& t);
    /// `t`, its graph node made reusable by several backward passes (autocast's cached casts).
    static FT float_keep_graph(FT t);
    /// The same values cut from the graph.
    static FT float_detach(FT t);

    // ---- reads ----
    /// Reads a Transaction's tensors through their stack's tr_execute (one wait on a GPU);
    /// tensors of several stacks are read one by one.
    static TransactionData tr_execute(TransactionPrimitive<FT, FT, FT> p);

    // ---- optimizers ----
    /// Adam's fused update (param, moment_1, moment_2 after one step), as the stack's
    /// `float_adam_step` where it has one (the CPU backend), else composed from Dispatch's ops in
    /// the same arrangement as the optimizer's composed step.
    static std::array<FT, 3> float_adam_step(FT param, FT grad, FT moment_1, FT moment_2,
                                             const AdamStepScalars& s);
    /// Adam's multi-tensor update (tensors[i] = {param, grad, moment_1, moment_2}): the stack's
    /// `float_adam_steps` where it has one (CUDA), else float_adam_step tensor by tensor, the
    /// decay applied first as the optimizer's composed step does.
    static std::vector<std::array<FT, 3>> float_adam_steps(
        std::vector<std::array<FT, 4>> tensors, const std::vector<AdamStepsScalars>& scalars);

    /// SGD's update with momentum ({param, velocity} after one step), as the stack's
    /// `float_sgd_step` where it has one (CUDA: one pass, in place inside a captured step), else
    /// composed from Dispatch's ops in the same arrangement as Sgd's composed step.
    static std::pair<FT, FT> float_sgd_step(FT param, FT grad, FT velocity,
                                            const SgdStepScalars& s);
    /// SGD's multi-tensor update (tensors[i] = {param, grad, velocity} → {param, velocity}): the
    /// stack's `float_sgd_steps` where it has one (CUDA), else float_sgd_step tensor by tensor.
    static std::vector<std::array<FT, 2>> float_sgd_steps(
        std::vector<std::array<FT, 3>> tensors, const std::vector<SgdStepScalars>& scalars);

    // ---- batch norm ----
    /// Training-mode batch norm on the stack's kernels where it has them (the CPU, CUDA);
    /// nothing otherwise, and nn::BatchNorm then composes tensor ops.
    static std::optional<std::array<FT, 5>> float_batch_norm(FT x, FT gamma, FT beta,
                                                             FT running_mean, FT running_var,
                                                             const BatchNormScalars& s);
    /// Eval-mode batch norm on the stack's kernel where it has one; nothing otherwise.
    /// Training-mode batch norm with the ReLU (and an optional residual) fused, on the stack's
    /// kernels where it has them (CUDA); nothing otherwise (nn::BatchNorm then composes).
    static std::optional<std::array<FT, 5>> float_batch_norm_relu(FT x, FT gamma, FT beta,
                                                                  FT running_mean, FT running_var,
                                                                  std::optional<FT> residual,
                                                                  const BatchNormScalars& s);
    static std::optional<FT> float_batch_norm_eval(FT x, FT gamma, FT beta, FT mean, FT var,
                                                   double eps);

    // ---- residual addition and layer norm ----
    /// x + residual and the layer norm of the sum in one kernel, on the stack's kernel where it
    /// has one (CUDA and Autodiff over it); nothing otherwise, and module::add_layer_norm then
    /// composes.
    static std::optional<std::array<FT, 4>> float_add_layer_norm(FT x, FT residual,
                                                                 std::optional<FT> gamma,
                                                                 std::optional<FT> beta, double eps,
                                                                 std::optional<DType> out);

    // ---- matmul epilogue ----
    /// a · b (2-D) with the bias row added (and/or relu) inside the stack's GEMM where it has a
    /// matmul epilogue (the CPU, CUDA and Autodiff over them: fusion::MatmulEpilogueBackend);
    /// nothing otherwise, and module::linear then runs the matmul and the add.
    static std::optional<FT> fused_matmul_epilogue(const FT& a, const FT& b,
                                                   std::optional<FT> bias,
                                                   fusion::MatmulEpilogue epilogue);
    /// Whether the stack of `t` has a matmul epilogue at all (Fusion's stacks have none), so
    /// that module::linear prepares no operands for a fused_matmul_epilogue that must decline.
    static bool has_matmul_epilogue(const FT& t);
};

static_assert(Backend<Dispatch>);
static_assert(AutodiffBackend<Dispatch>);

template <typename B>
struct AttentionKernel;  // <ember/tensor/attention.hpp>

/// Dispatch's fused attention: the fused kernel of the operands' stack where it has one (CUDA,
/// with or without Fusion and autodiff, whose node then carries the fused backward), so that
/// module::attention on Dispatch runs what it runs on that stack. Elsewhere `supports` is false
/// and module::attention composes Dispatch's ops.
template <>
struct EMBER_API AttentionKernel<Dispatch> {
    using FT = DispatchTensor;  ///< every kind's primitive
    /// Whether the operands' stack has a fused kernel that takes them.
    static bool supports(const FT& q, const FT& k, const FT& v, const std::optional<FT>& keep,
                         const std::optional<FT>& bias);
    /// {output, log-sum-exp of each row's scaled logits}, from the stack's kernel.
    static std::array<FT, 2> forward(const FT& q, const FT& k, const FT& v,
                                     const std::optional<FT>& keep, const std::optional<FT>& bias,
                                     bool causal, double scale);
    /// Whether the stack of `like` has a packed fused kernel that takes a qkv like it with
    /// these heads (module::attention_packed).
    static bool supports_packed(const FT& like, std::size_t heads, std::size_t head_dim);
    /// {output [B, L, H·E], log-sum-exp} from qkv [B, L, 3·H·E], the stack's packed kernel.
    static std::array<FT, 2> forward_packed(const FT& qkv, std::size_t heads, bool causal,
                                            double scale);
};

}  // namespace ember
