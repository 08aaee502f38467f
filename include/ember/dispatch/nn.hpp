#pragma once
// A model on ember::Dispatch: ember's tensor layer, modules, losses and optimizers, with their
// Dispatch instances compiled once in ember_dispatch (src/dispatch/instances_*.cpp) and declared
// extern here, so a file that writes a model against Dispatch does not compile them again.
//
//     #include <ember/dispatch/nn.hpp>   // instead of ember.hpp + nn.hpp + optim.hpp
//
// The lists below are X-macros: this header expands them into explicit instantiation
// declarations (`extern template`), the library's sources into the matching definitions, so the
// two cannot drift apart. The functions listed are defined out of their classes in ember's
// headers, so not inline: for those an `extern template` declaration keeps a file that calls
// them from instantiating their bodies at all (an inline function would still be instantiated
// and optimised, to consider inlining it). What is not in the lists (a module's forward at a rank
// not listed, a user's own model, the optimizer's walk over the model's fields) is instantiated
// in the user's file as before; the generic `Tensor<B>` path of the other backends is unchanged.
#include "../ember.hpp"
#include "../nn.hpp"
#include "../optim.hpp"
#include "dispatch.hpp"

// The lists keep their hand layout (one entry or group a line).
// clang-format off
/// The tensor classes: every member of Tensor<Dispatch, D> for the ranks models use, and the
/// modules' parameters. Not rank 1, nor int or bool tensors: an explicit instantiation of the
/// class instantiates every member whose constraints hold, and a few members there (pad, tril,
/// var, matmul under autocast) are rank- or kind-checked in their bodies instead; those tensors
/// are instantiated where they are used.
#define EMBER_DISPATCH_TENSOR_TYPES(X)                                                        \
    X(Tensor<Dispatch, 2, Float>) X(Tensor<Dispatch, 3, Float>) X(Tensor<Dispatch, 4, Float>) \
    X(Tensor<Dispatch, 5, Float>) X(Param<Tensor<Dispatch, 1>>) X(Param<Tensor<Dispatch, 2>>) \
    X(Param<Tensor<Dispatch, 3>>) X(Param<Tensor<Dispatch, 4>>)

/// The modules with parameters (every member) and the losses with state.
#define EMBER_DISPATCH_MODULE_TYPES(X)                                                          \
    X(nn::Linear<Dispatch>) X(nn::Conv1d<Dispatch>) X(nn::Conv2d<Dispatch>)                     \
    X(nn::ConvTranspose2d<Dispatch>) X(nn::Embedding<Dispatch>) X(nn::BatchNorm<Dispatch>)      \
    X(nn::LayerNorm<Dispatch>) X(nn::GroupNorm<Dispatch>) X(nn::RmsNorm<Dispatch>)              \
    X(nn::MultiHeadAttention<Dispatch>) X(nn::PositionWiseFeedForward<Dispatch>)                \
    X(nn::TransformerEncoderLayer<Dispatch>) X(nn::TransformerEncoder<Dispatch>)                \
    X(nn::Lstm<Dispatch>) X(nn::Gru<Dispatch>) X(nn::loss::CrossEntropyLoss<Dispatch>)          \
    X(nn::loss::BinaryCrossEntropyLoss<Dispatch>)

// Function templates: the configs' init, the modules' forward at the ranks models use, the
// stateless modules, the initializer and the optimizers' per-tensor steps.
/// X applied to `Module##Config::init<Dispatch>`.
#define EMBER_DISPATCH_CONFIG_INIT(X, Module)                                           \
    X(nn::Module<Dispatch> nn::Module##Config::init<Dispatch>(const Device<Dispatch>&) const)
/// X applied to a module's `forward<D>` on Dispatch.
#define EMBER_DISPATCH_MEMBER_FORWARD(X, Module, D)                                      \
    X(Tensor<Dispatch, D> nn::Module<Dispatch>::forward<D>(const Tensor<Dispatch, D>&) const)
/// X applied to a stateless module's `forward<Dispatch, D>`.
#define EMBER_DISPATCH_STATELESS_FORWARD(X, Module, D)                                   \
    X(Tensor<Dispatch, D> nn::Module::forward<Dispatch, D>(Tensor<Dispatch, D>) const)
/// The stateless module's forwards at ranks 2-4.
#define EMBER_DISPATCH_STATELESS_FORWARDS(X, Module)                                     \
    EMBER_DISPATCH_STATELESS_FORWARD(X, Module, 2)                                       \
    EMBER_DISPATCH_STATELESS_FORWARD(X, Module, 3)                                       \
    EMBER_DISPATCH_STATELESS_FORWARD(X, Module, 4)
/// X applied to a pooling module's `forward<Dispatch>`.
#define EMBER_DISPATCH_POOL_FORWARD(X, Module, D)                                        \
    X(Tensor<Dispatch, D> nn::Module::forward<Dispatch>(const Tensor<Dispatch, D>&) const)
/// The functional Linear the module calls.
#define EMBER_DISPATCH_FUNCTIONAL_LINEAR(X, D)                                             \
    X(Tensor<Dispatch, D> module::linear<Dispatch, D>(                                     \
        const Tensor<Dispatch, D>&, const Tensor<Dispatch, 2>&, const OptionalTensor<Dispatch, 1>&))
/// The int8 paths of Linear and Conv2d, which their forwards reach.
#define EMBER_DISPATCH_QUANT_LINEAR(X, D)                                                  \
    X(Tensor<Dispatch, D> quant::detail::linear<Dispatch, D>(                              \
        const Tensor<Dispatch, D>&, const quant::QuantizedParam<Dispatch, 2>&,             \
        const std::optional<Tensor<Dispatch, 1>>&))
/// X applied to `Initializer::init<Dispatch, D>`.
#define EMBER_DISPATCH_INITIALIZER(X, D)                                                   \
    X(Param<Tensor<Dispatch, D>> nn::Initializer::init<Dispatch, D>(                       \
        const Shape&, const Device<Dispatch>&, std::optional<std::size_t>,                 \
        std::optional<std::size_t>) const)
/// X applied to an optimizer's per-tensor `step<Dispatch, D>`.
#define EMBER_DISPATCH_OPTIM_STEP(X, Optim, D)                                             \
    X(std::pair<Tensor<Dispatch, D>, std::optional<optim::Optim::State<Dispatch, D>>>      \
          optim::Optim::step<Dispatch, D>(double, Tensor<Dispatch, D>, Tensor<Dispatch, D>, \
                                         std::optional<optim::Optim::State<Dispatch, D>>) const)
/// The optimizer's steps at ranks 1-4.
#define EMBER_DISPATCH_OPTIM_STEPS(X, Optim)                                             \
    EMBER_DISPATCH_OPTIM_STEP(X, Optim, 1)                                               \
    EMBER_DISPATCH_OPTIM_STEP(X, Optim, 2)                                               \
    EMBER_DISPATCH_OPTIM_STEP(X, Optim, 3) EMBER_DISPATCH_OPTIM_STEP(X, Optim, 4)

/// The function templates of the modules, losses and initializer.
#define EMBER_DISPATCH_NN_FUNCTIONS(X)                                                     \
    EMBER_DISPATCH_CONFIG_INIT(X, Linear)                                                  \
    EMBER_DISPATCH_CONFIG_INIT(X, Conv1d)                                                  \
    EMBER_DISPATCH_CONFIG_INIT(X, Conv2d)                                                  \
    EMBER_DISPATCH_CONFIG_INIT(X, ConvTranspose2d)                                         \
    EMBER_DISPATCH_CONFIG_INIT(X, Embedding)                                               \
    EMBER_DISPATCH_CONFIG_INIT(X, BatchNorm)                                               \
    EMBER_DISPATCH_CONFIG_INIT(X, LayerNorm)                                               \
    EMBER_DISPATCH_CONFIG_INIT(X, GroupNorm)                                               \
    EMBER_DISPATCH_CONFIG_INIT(X, RmsNorm)                                                 \
    EMBER_DISPATCH_CONFIG_INIT(X, MultiHeadAttention)                                      \
    EMBER_DISPATCH_CONFIG_INIT(X, PositionWiseFeedForward)                                 \
    EMBER_DISPATCH_CONFIG_INIT(X, TransformerEncoder)                                      \
    EMBER_DISPATCH_CONFIG_INIT(X, Lstm)                                                    \
    EMBER_DISPATCH_CONFIG_INIT(X, Gru)                                                     \
    EMBER_DISPATCH_CONFIG_INIT(X, loss::CrossEntropyLoss)                                  \
    EMBER_DISPATCH_CONFIG_INIT(X, loss::BinaryCrossEntropyLoss)                            \
    EMBER_DISPATCH_MEMBER_FORWARD(X, Linear, 1)                                           \
    EMBER_DISPATCH_MEMBER_FORWARD(X, Linear, 2)                                           \
    EMBER_DISPATCH_MEMBER_FORWARD(X, Linear, 3)                                           \
    EMBER_DISPATCH_MEMBER_FORWARD(X, Linear, 4)                                           \
    EMBER_DISPATCH_MEMBER_FORWARD(X, BatchNorm, 3)                                        \
    EMBER_DISPATCH_MEMBER_FORWARD(X, BatchNorm, 4)                                        \
    X(Tensor<Dispatch, 4> nn::BatchNorm<Dispatch>::forward_relu<4>(const Tensor<Dispatch, 4>&)  \
          const)                                                                           \
    X(Tensor<Dispatch, 4> nn::BatchNorm<Dispatch>::forward_add_relu<4>(                    \
        const Tensor<Dispatch, 4>&, const Tensor<Dispatch, 4>&) const)                     \
    EMBER_DISPATCH_MEMBER_FORWARD(X, GroupNorm, 3)                                        \
    EMBER_DISPATCH_MEMBER_FORWARD(X, GroupNorm, 4)                                        \
    EMBER_DISPATCH_MEMBER_FORWARD(X, LayerNorm, 2)                                        \
    EMBER_DISPATCH_MEMBER_FORWARD(X, LayerNorm, 3)                                        \
    EMBER_DISPATCH_MEMBER_FORWARD(X, LayerNorm, 4)                                        \
    EMBER_DISPATCH_MEMBER_FORWARD(X, RmsNorm, 2)                                          \
    EMBER_DISPATCH_MEMBER_FORWARD(X, RmsNorm, 3)                                          \
    EMBER_DISPATCH_MEMBER_FORWARD(X, PositionWiseFeedForward, 2)                          \
    EMBER_DISPATCH_MEMBER_FORWARD(X, PositionWiseFeedForward, 3)                          \
    EMBER_DISPATCH_STATELESS_FORWARDS(X, Relu)                                             \
    EMBER_DISPATCH_STATELESS_FORWARDS(X, Gelu)                                             \
    EMBER_DISPATCH_STATELESS_FORWARDS(X, Dropout)                                          \
    EMBER_DISPATCH_STATELESS_FORWARDS(X, Sigmoid)                                          \
    EMBER_DISPATCH_STATELESS_FORWARDS(X, Tanh)                                             \
    EMBER_DISPATCH_STATELESS_FORWARDS(X, SiLU)                                             \
    EMBER_DISPATCH_STATELESS_FORWARDS(X, LeakyRelu)                                        \
    EMBER_DISPATCH_POOL_FORWARD(X, MaxPool2d, 4)                                           \
    EMBER_DISPATCH_POOL_FORWARD(X, AvgPool2d, 4)                                           \
    EMBER_DISPATCH_POOL_FORWARD(X, AdaptiveAvgPool2d, 4)                                   \
    EMBER_DISPATCH_FUNCTIONAL_LINEAR(X, 2)                                                 \
    EMBER_DISPATCH_FUNCTIONAL_LINEAR(X, 3)                                                 \
    EMBER_DISPATCH_FUNCTIONAL_LINEAR(X, 4)                                                 \
    EMBER_DISPATCH_QUANT_LINEAR(X, 2)                                                      \
    EMBER_DISPATCH_QUANT_LINEAR(X, 3)                                                      \
    X(Tensor<Dispatch, 4> quant::detail::conv2d<Dispatch>(                                 \
        const Tensor<Dispatch, 4>&, const quant::QuantizedParam<Dispatch, 4>&,             \
        const std::optional<Tensor<Dispatch, 1>>&, const ConvOptions<2>&))                 \
    EMBER_DISPATCH_INITIALIZER(X, 1)                                                       \
    EMBER_DISPATCH_INITIALIZER(X, 2)                                                       \
    EMBER_DISPATCH_INITIALIZER(X, 3)                                                       \
    EMBER_DISPATCH_INITIALIZER(X, 4)

/// X applied to the walks of module `M` on Dispatch (module::CompiledWalks): the visits of the
/// optimizer, the gradients and the Learner, map and the records go through these per-module
/// functions, so a model file compiles none of them for ember's modules. (to_device's and
/// valid()'s, to_device_fields and valid_fields, are not listed: declaring them extern cost
/// every Dispatch file more compiler memory, 21 MB, than compiling the few it uses.)
#define EMBER_DISPATCH_MODULE_WALKS(X, M)                                                  \
    X(void module::detail::visit_params<M, Dispatch>(                                      \
        const M&, std::string_view, module::detail::ParamVisitor<Dispatch>&))              \
    X(M module::detail::map_params<M, Dispatch>(const M&, std::string_view,                \
                                                module::detail::ParamMapper<Dispatch>&))   \
    X(record::Value module::detail::to_record<M>(const M&))                                \
    X(M module::detail::load<M, std::monostate>(const M&, const record::Value&,            \
                                                std::string_view, const std::monostate&))  \
    X(M module::detail::load<M, DispatchDevice>(const M&, const record::Value&,            \
                                                std::string_view, const DispatchDevice&))
/// The walks of ember's modules with parameters on Dispatch.
#define EMBER_DISPATCH_WALK_FUNCTIONS(X)                                                   \
    EMBER_DISPATCH_MODULE_WALKS(X, nn::Linear<Dispatch>)                                   \
    EMBER_DISPATCH_MODULE_WALKS(X, nn::Conv1d<Dispatch>)                                   \
    EMBER_DISPATCH_MODULE_WALKS(X, nn::Conv2d<Dispatch>)                                   \
    EMBER_DISPATCH_MODULE_WALKS(X, nn::ConvTranspose2d<Dispatch>)                          \
    EMBER_DISPATCH_MODULE_WALKS(X, nn::Embedding<Dispatch>)                                \
    EMBER_DISPATCH_MODULE_WALKS(X, nn::BatchNorm<Dispatch>)                                \
    EMBER_DISPATCH_MODULE_WALKS(X, nn::LayerNorm<Dispatch>)                                \
    EMBER_DISPATCH_MODULE_WALKS(X, nn::GroupNorm<Dispatch>)                                \
    EMBER_DISPATCH_MODULE_WALKS(X, nn::RmsNorm<Dispatch>)                                  \
    EMBER_DISPATCH_MODULE_WALKS(X, nn::MultiHeadAttention<Dispatch>)                       \
    EMBER_DISPATCH_MODULE_WALKS(X, nn::PositionWiseFeedForward<Dispatch>)                  \
    EMBER_DISPATCH_MODULE_WALKS(X, nn::TransformerEncoderLayer<Dispatch>)                  \
    EMBER_DISPATCH_MODULE_WALKS(X, nn::TransformerEncoder<Dispatch>)                       \
    EMBER_DISPATCH_MODULE_WALKS(X, nn::Lstm<Dispatch>)                                     \
    EMBER_DISPATCH_MODULE_WALKS(X, nn::Gru<Dispatch>)

/// OptimizerAdaptor's model-independent core on Dispatch (optim::detail::OptimizerCore).
#define EMBER_DISPATCH_OPTIM_CORE(Optim) optim::detail::OptimizerCore<optim::Optim, Dispatch>
/// X applied to the core's update of one rank-D parameter (the step tensor by tensor).
#define EMBER_DISPATCH_OPTIM_PARAM(X, Optim, D)                                            \
    X(std::optional<Param<Tensor<Dispatch, D>>>                                            \
          EMBER_DISPATCH_OPTIM_CORE(Optim)::step_param<Param<Tensor<Dispatch, D>>>(        \
              double, std::string_view, const Param<Tensor<Dispatch, D>>&,                 \
              optim::GradientsParams&))
/// X applied to the core's gathering of one rank-D parameter (the multi-tensor step).
#define EMBER_DISPATCH_OPTIM_GATHER(X, Optim, D)                                           \
    X(void EMBER_DISPATCH_OPTIM_CORE(Optim)::gather_param<Param<Tensor<Dispatch, D>>>(     \
        double, std::string_view, const Param<Tensor<Dispatch, D>>&, optim::GradientsParams&, \
        EMBER_DISPATCH_OPTIM_CORE(Optim)::MultiBatch&))
/// The core of an optimizer: to_record and the updates of parameters of ranks 1-4.
#define EMBER_DISPATCH_OPTIM_CORE_FUNCTIONS(X, Optim)                                      \
    X(record::Value EMBER_DISPATCH_OPTIM_CORE(Optim)::to_record() const)                   \
    EMBER_DISPATCH_OPTIM_PARAM(X, Optim, 1) EMBER_DISPATCH_OPTIM_PARAM(X, Optim, 2)        \
    EMBER_DISPATCH_OPTIM_PARAM(X, Optim, 3) EMBER_DISPATCH_OPTIM_PARAM(X, Optim, 4)
/// The multi-tensor step of an Adam-like or SGD optimizer (Dispatch has float_adam_steps and
/// float_sgd_steps).
#define EMBER_DISPATCH_OPTIM_MULTI_FUNCTIONS(X, Optim)                                     \
    X(std::map<std::uint64_t, Dispatch::FloatTensorPrimitive>                              \
          EMBER_DISPATCH_OPTIM_CORE(Optim)::run_multi(EMBER_DISPATCH_OPTIM_CORE(Optim)::MultiBatch)) \
    EMBER_DISPATCH_OPTIM_GATHER(X, Optim, 1) EMBER_DISPATCH_OPTIM_GATHER(X, Optim, 2)      \
    EMBER_DISPATCH_OPTIM_GATHER(X, Optim, 3) EMBER_DISPATCH_OPTIM_GATHER(X, Optim, 4)

/// X applied to the classes of an optimizer's core that its step hands a model's compiled walks
/// (module::CompiledWalks): the update, the one-device check, the multi-tensor gather and
/// scatter.
#define EMBER_DISPATCH_OPTIM_WALK_CLASSES(X, Optim)                                        \
    X(EMBER_DISPATCH_OPTIM_CORE(Optim)::StepMapper)                                        \
    X(EMBER_DISPATCH_OPTIM_CORE(Optim)::OneDeviceVisitor)                                  \
    X(EMBER_DISPATCH_OPTIM_CORE(Optim)::GatherVisitor)                                     \
    X(EMBER_DISPATCH_OPTIM_CORE(Optim)::ScatterMapper)
/// The classes that take a model's gradients and step its parameters through its compiled
/// walks, so that a model file compiles no visitor of its own for them.
#define EMBER_DISPATCH_OPTIM_CLASSES(X)                                                    \
    EMBER_DISPATCH_OPTIM_WALK_CLASSES(X, Adam)                                             \
    EMBER_DISPATCH_OPTIM_WALK_CLASSES(X, AdamW)                                            \
    EMBER_DISPATCH_OPTIM_WALK_CLASSES(X, Sgd)                                              \
    X(optim::GradientsParams::TakeVisitor<Dispatch>)

/// The optimizers' per-tensor steps and OptimizerAdaptor's model-independent core, so that a
/// model's optimizer compiles only its walk over the model's fields.
#define EMBER_DISPATCH_OPTIM_FUNCTIONS(X)                                                  \
    EMBER_DISPATCH_OPTIM_STEPS(X, Adam)                                                    \
    EMBER_DISPATCH_OPTIM_STEPS(X, AdamW)                                                   \
    EMBER_DISPATCH_OPTIM_STEPS(X, Sgd)                                                     \
    EMBER_DISPATCH_OPTIM_CORE_FUNCTIONS(X, Adam)                                           \
    EMBER_DISPATCH_OPTIM_CORE_FUNCTIONS(X, AdamW)                                          \
    EMBER_DISPATCH_OPTIM_CORE_FUNCTIONS(X, Sgd)                                            \
    EMBER_DISPATCH_OPTIM_MULTI_FUNCTIONS(X, Adam)                                          \
    EMBER_DISPATCH_OPTIM_MULTI_FUNCTIONS(X, AdamW)                                         \
    EMBER_DISPATCH_OPTIM_MULTI_FUNCTIONS(X, Sgd)

// clang-format on

/// 1 where the tensor classes are compiled once (declared extern here, defined in the library).
/// Clang 14 compiles every member of a class in an explicit instantiation, whatever its
/// constraints (fixed in Clang 15), and Tensor's kind- and rank-constrained members do not
/// compile for the listed tensors: an ember_dispatch that Clang 14 builds leaves the class list
/// out and tells its users so (EMBER_DISPATCH_NO_CLASS_INSTANCES, a usage requirement that
/// CMakeLists.txt sets), and a file that Clang 14 compiles declares none of them extern
/// whichever compiler built the library: there the tensor classes are instantiated where used.
#if (defined(__clang__) && __clang_major__ < 15) || defined(EMBER_DISPATCH_NO_CLASS_INSTANCES)
#define EMBER_DISPATCH_CLASS_INSTANCES 0
#else
#define EMBER_DISPATCH_CLASS_INSTANCES 1
#endif

// The declarations; src/dispatch/instances_*.cpp define EMBER_DISPATCH_INSTANTIATING to expand
// the same lists into the definitions instead.
#if !defined(EMBER_DISPATCH_INSTANTIATING)
/// An explicit instantiation declaration of a class.
#define EMBER_DISPATCH_EXTERN_CLASS(...) extern template class __VA_ARGS__;
/// An explicit instantiation declaration of a struct.
#define EMBER_DISPATCH_EXTERN_STRUCT(...) extern template struct __VA_ARGS__;
/// An explicit instantiation declaration of a function.
#define EMBER_DISPATCH_EXTERN_FUNCTION(...) extern template __VA_ARGS__;
namespace ember {
#if EMBER_DISPATCH_CLASS_INSTANCES
EMBER_DISPATCH_TENSOR_TYPES(EMBER_DISPATCH_EXTERN_CLASS)
#endif
EMBER_DISPATCH_MODULE_TYPES(EMBER_DISPATCH_EXTERN_STRUCT)
EMBER_DISPATCH_NN_FUNCTIONS(EMBER_DISPATCH_EXTERN_FUNCTION)
EMBER_DISPATCH_WALK_FUNCTIONS(EMBER_DISPATCH_EXTERN_FUNCTION)
EMBER_DISPATCH_OPTIM_FUNCTIONS(EMBER_DISPATCH_EXTERN_FUNCTION)
EMBER_DISPATCH_OPTIM_CLASSES(EMBER_DISPATCH_EXTERN_CLASS)
}  // namespace ember
#endif
