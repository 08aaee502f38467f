#pragma once
// The lists of what ember_dispatch compiles once for Dispatch, as X-macros: the headers of
// <ember/dispatch/> expand them into explicit instantiation declarations (`extern template`),
// the library's sources (src/dispatch/instances_*.cpp) into the matching definitions, so the two
// cannot drift apart. The list is cut into parts, one a module header: a file includes the
// Dispatch header of each module header it uses (<ember/dispatch/nn/linear.hpp> for
// <ember/nn/linear.hpp>), which declares that part, and parses no other module. Only macros
// here: expanding a part needs the headers it names.
//
// The functions listed are defined out of their classes in ember's headers, so not inline: for
// those an `extern template` declaration keeps a file that calls them from instantiating their
// bodies at all (an inline function would still be instantiated and optimised, to consider
// inlining it). What is not in the lists (a module's forward at a rank not listed, a user's own
// model, the optimizer's walk over the model's fields) is instantiated in the user's file as
// before; the generic `Tensor<B>` path of the other backends is unchanged.

// The lists keep their hand layout (one entry or group a line).
// clang-format off
/// The tensor classes: every member of Tensor<Dispatch, D> for the ranks models use
/// (<ember/dispatch/tensor.hpp>). Not rank 1, nor int or bool tensors: an explicit instantiation
/// of the class instantiates every member whose constraints hold, and a few members there (pad,
/// tril, var, matmul under autocast) are rank- or kind-checked in their bodies instead; those
/// tensors are instantiated where they are used.
#define EMBER_DISPATCH_TENSOR_CLASSES(X)                                                      \
    X(Tensor<Dispatch, 2, Float>) X(Tensor<Dispatch, 3, Float>) X(Tensor<Dispatch, 4, Float>) \
    X(Tensor<Dispatch, 5, Float>)
/// The modules' parameters (<ember/dispatch/module.hpp>).
#define EMBER_DISPATCH_PARAM_CLASSES(X)                                                       \
    X(Param<Tensor<Dispatch, 1>>) X(Param<Tensor<Dispatch, 2>>) X(Param<Tensor<Dispatch, 3>>) \
    X(Param<Tensor<Dispatch, 4>>)
/// Both (src/dispatch/instances_tensor.cpp).
#define EMBER_DISPATCH_TENSOR_TYPES(X) \
    EMBER_DISPATCH_TENSOR_CLASSES(X) EMBER_DISPATCH_PARAM_CLASSES(X)

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

/// X applied to the walks of module `M` on Dispatch (module::CompiledWalks): the visits of the
/// optimizer, the gradients and the Learner, map, the records, to_device and valid() go through
/// these per-module functions, so a model file compiles none of them for ember's modules.
/// (to_device_fields and valid_fields were left out while one header declared every module's
/// walks extern, which cost each Dispatch file 21 MB of compiler memory; a file now declares
/// only the parts it includes, and declaring them saves memory: the GPT probe 342 -> 338 MB.)
#define EMBER_DISPATCH_MODULE_WALKS(X, M)                                                  \
    X(void module::detail::visit_params<M, Dispatch>(                                      \
        const M&, std::string_view, module::detail::ParamVisitor<Dispatch>&))              \
    X(M module::detail::map_params<M, Dispatch>(const M&, std::string_view,                \
                                                module::detail::ParamMapper<Dispatch>&))   \
    X(record::Value module::detail::to_record<M>(const M&))                                \
    X(M module::detail::load<M, std::monostate>(const M&, const record::Value&,            \
                                                std::string_view, const std::monostate&))  \
    X(M module::detail::load<M, DispatchDevice>(const M&, const record::Value&,            \
                                                std::string_view, const DispatchDevice&))  \
    X(M module::detail::to_device_fields<M, DispatchDevice>(const M&, const DispatchDevice&)) \
    X(M module::detail::valid_fields<M>(const M&))
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
/// The core of an optimizer: to_record, load_states and the updates of parameters of ranks
/// 1-4.
#define EMBER_DISPATCH_OPTIM_CORE_FUNCTIONS(X, Optim)                                      \
    X(record::Value EMBER_DISPATCH_OPTIM_CORE(Optim)::to_record() const)                   \
    X(void EMBER_DISPATCH_OPTIM_CORE(Optim)::load_states(                                  \
        const record::Value&, const std::optional<Device<Dispatch>>&))                     \
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
/// scatter, and the multi-tensor step that owns them.
#define EMBER_DISPATCH_OPTIM_WALK_CLASSES(X, Optim)                                        \
    X(EMBER_DISPATCH_OPTIM_CORE(Optim)::StepMapper)                                        \
    X(EMBER_DISPATCH_OPTIM_CORE(Optim)::OneDeviceVisitor)                                  \
    X(EMBER_DISPATCH_OPTIM_CORE(Optim)::GatherVisitor)                                     \
    X(EMBER_DISPATCH_OPTIM_CORE(Optim)::ScatterMapper)                                     \
    X(EMBER_DISPATCH_OPTIM_CORE(Optim)::MultiStep)
/// The pieces every model file reaches: Initializer::init, the functional linear and the
/// int8 paths of Linear and Conv2d (<ember/dispatch/module.hpp>).
#define EMBER_DISPATCH_PART_MODULE(C, S, F)                                               \
    EMBER_DISPATCH_INITIALIZER(F, 1) EMBER_DISPATCH_INITIALIZER(F, 2)                     \
    EMBER_DISPATCH_INITIALIZER(F, 3) EMBER_DISPATCH_INITIALIZER(F, 4)                     \
    EMBER_DISPATCH_FUNCTIONAL_LINEAR(F, 2) EMBER_DISPATCH_FUNCTIONAL_LINEAR(F, 3)         \
    EMBER_DISPATCH_FUNCTIONAL_LINEAR(F, 4)                                                \
    EMBER_DISPATCH_QUANT_LINEAR(F, 2) EMBER_DISPATCH_QUANT_LINEAR(F, 3)                   \
    F(Tensor<Dispatch, 4> quant::detail::conv2d<Dispatch>(                                \
        const Tensor<Dispatch, 4>&, const quant::QuantizedParam<Dispatch, 4>&,            \
        const std::optional<Tensor<Dispatch, 1>>&, const ConvOptions<2>&))
/// Linear (<ember/dispatch/nn/linear.hpp>).
#define EMBER_DISPATCH_PART_LINEAR(C, S, F)                                                 \
    S(nn::Linear<Dispatch>)                                                                 \
    EMBER_DISPATCH_CONFIG_INIT(F, Linear)                                                   \
    EMBER_DISPATCH_MEMBER_FORWARD(F, Linear, 1) EMBER_DISPATCH_MEMBER_FORWARD(F, Linear, 2) \
    EMBER_DISPATCH_MEMBER_FORWARD(F, Linear, 3) EMBER_DISPATCH_MEMBER_FORWARD(F, Linear, 4) \
    EMBER_DISPATCH_MODULE_WALKS(F, nn::Linear<Dispatch>)
/// Conv1d, Conv2d and ConvTranspose2d (<ember/dispatch/nn/conv.hpp>).
#define EMBER_DISPATCH_PART_CONV(C, S, F)                                                 \
    S(nn::Conv1d<Dispatch>) S(nn::Conv2d<Dispatch>) S(nn::ConvTranspose2d<Dispatch>)      \
    EMBER_DISPATCH_CONFIG_INIT(F, Conv1d) EMBER_DISPATCH_CONFIG_INIT(F, Conv2d)           \
    EMBER_DISPATCH_CONFIG_INIT(F, ConvTranspose2d)                                        \
    EMBER_DISPATCH_MODULE_WALKS(F, nn::Conv1d<Dispatch>)                                  \
    EMBER_DISPATCH_MODULE_WALKS(F, nn::Conv2d<Dispatch>)                                  \
    EMBER_DISPATCH_MODULE_WALKS(F, nn::ConvTranspose2d<Dispatch>)
/// Embedding (<ember/dispatch/nn/embedding.hpp>).
#define EMBER_DISPATCH_PART_EMBEDDING(C, S, F)                                            \
    S(nn::Embedding<Dispatch>)                                                            \
    EMBER_DISPATCH_CONFIG_INIT(F, Embedding)                                              \
    EMBER_DISPATCH_MODULE_WALKS(F, nn::Embedding<Dispatch>)
/// BatchNorm, LayerNorm, GroupNorm and RmsNorm (<ember/dispatch/nn/norm.hpp>).
#define EMBER_DISPATCH_PART_NORM(C, S, F)                                                         \
    S(nn::BatchNorm<Dispatch>) S(nn::LayerNorm<Dispatch>) S(nn::GroupNorm<Dispatch>)              \
    S(nn::RmsNorm<Dispatch>)                                                                      \
    EMBER_DISPATCH_CONFIG_INIT(F, BatchNorm) EMBER_DISPATCH_CONFIG_INIT(F, LayerNorm)             \
    EMBER_DISPATCH_CONFIG_INIT(F, GroupNorm) EMBER_DISPATCH_CONFIG_INIT(F, RmsNorm)               \
    EMBER_DISPATCH_MEMBER_FORWARD(F, BatchNorm, 3) EMBER_DISPATCH_MEMBER_FORWARD(F, BatchNorm, 4) \
    F(Tensor<Dispatch, 4> nn::BatchNorm<Dispatch>::forward_relu<4>(const Tensor<Dispatch, 4>&)    \
          const)                                                                                  \
    F(Tensor<Dispatch, 4> nn::BatchNorm<Dispatch>::forward_add_relu<4>(                           \
        const Tensor<Dispatch, 4>&, const Tensor<Dispatch, 4>&) const)                            \
    EMBER_DISPATCH_MEMBER_FORWARD(F, GroupNorm, 3) EMBER_DISPATCH_MEMBER_FORWARD(F, GroupNorm, 4) \
    EMBER_DISPATCH_MEMBER_FORWARD(F, LayerNorm, 2) EMBER_DISPATCH_MEMBER_FORWARD(F, LayerNorm, 3) \
    EMBER_DISPATCH_MEMBER_FORWARD(F, LayerNorm, 4)                                                \
    EMBER_DISPATCH_MEMBER_FORWARD(F, RmsNorm, 2) EMBER_DISPATCH_MEMBER_FORWARD(F, RmsNorm, 3)     \
    EMBER_DISPATCH_MODULE_WALKS(F, nn::BatchNorm<Dispatch>)                                       \
    EMBER_DISPATCH_MODULE_WALKS(F, nn::LayerNorm<Dispatch>)                                       \
    EMBER_DISPATCH_MODULE_WALKS(F, nn::GroupNorm<Dispatch>)                                       \
    EMBER_DISPATCH_MODULE_WALKS(F, nn::RmsNorm<Dispatch>)
/// MultiHeadAttention (<ember/dispatch/nn/attention.hpp>).
#define EMBER_DISPATCH_PART_ATTENTION(C, S, F)                                            \
    S(nn::MultiHeadAttention<Dispatch>)                                                   \
    EMBER_DISPATCH_CONFIG_INIT(F, MultiHeadAttention)                                     \
    EMBER_DISPATCH_MODULE_WALKS(F, nn::MultiHeadAttention<Dispatch>)
/// PositionWiseFeedForward and the transformer encoder and its layer
/// (<ember/dispatch/nn/transformer.hpp>).
#define EMBER_DISPATCH_PART_TRANSFORMER(C, S, F)                                          \
    S(nn::PositionWiseFeedForward<Dispatch>) S(nn::TransformerEncoderLayer<Dispatch>)     \
    S(nn::TransformerEncoder<Dispatch>)                                                   \
    EMBER_DISPATCH_CONFIG_INIT(F, PositionWiseFeedForward)                                \
    EMBER_DISPATCH_CONFIG_INIT(F, TransformerEncoder)                                     \
    EMBER_DISPATCH_MEMBER_FORWARD(F, PositionWiseFeedForward, 2)                          \
    EMBER_DISPATCH_MEMBER_FORWARD(F, PositionWiseFeedForward, 3)                          \
    EMBER_DISPATCH_MODULE_WALKS(F, nn::PositionWiseFeedForward<Dispatch>)                 \
    EMBER_DISPATCH_MODULE_WALKS(F, nn::TransformerEncoderLayer<Dispatch>)                 \
    EMBER_DISPATCH_MODULE_WALKS(F, nn::TransformerEncoder<Dispatch>)
/// Lstm and Gru (<ember/dispatch/nn/rnn.hpp>).
#define EMBER_DISPATCH_PART_RNN(C, S, F)                                                  \
    S(nn::Lstm<Dispatch>) S(nn::Gru<Dispatch>)                                            \
    EMBER_DISPATCH_CONFIG_INIT(F, Lstm) EMBER_DISPATCH_CONFIG_INIT(F, Gru)                \
    EMBER_DISPATCH_MODULE_WALKS(F, nn::Lstm<Dispatch>)                                    \
    EMBER_DISPATCH_MODULE_WALKS(F, nn::Gru<Dispatch>)
/// The cross-entropy losses (<ember/dispatch/nn/loss.hpp>).
#define EMBER_DISPATCH_PART_LOSS(C, S, F)                                                 \
    S(nn::loss::CrossEntropyLoss<Dispatch>) S(nn::loss::BinaryCrossEntropyLoss<Dispatch>) \
    EMBER_DISPATCH_CONFIG_INIT(F, loss::CrossEntropyLoss)                                 \
    EMBER_DISPATCH_CONFIG_INIT(F, loss::BinaryCrossEntropyLoss)
/// Dropout, Relu and Gelu (<ember/dispatch/nn/dropout.hpp>).
#define EMBER_DISPATCH_PART_DROPOUT(C, S, F)                                              \
    EMBER_DISPATCH_STATELESS_FORWARDS(F, Relu)                                            \
    EMBER_DISPATCH_STATELESS_FORWARDS(F, Gelu)                                            \
    EMBER_DISPATCH_STATELESS_FORWARDS(F, Dropout)
/// Sigmoid, Tanh and SiLU (<ember/dispatch/nn/activation_modules.hpp>).
#define EMBER_DISPATCH_PART_ACTIVATION_MODULES(C, S, F)                                   \
    EMBER_DISPATCH_STATELESS_FORWARDS(F, Sigmoid)                                         \
    EMBER_DISPATCH_STATELESS_FORWARDS(F, Tanh)                                            \
    EMBER_DISPATCH_STATELESS_FORWARDS(F, SiLU)
/// LeakyRelu (<ember/dispatch/nn/activations.hpp>).
#define EMBER_DISPATCH_PART_ACTIVATIONS(C, S, F)                                          \
    EMBER_DISPATCH_STATELESS_FORWARDS(F, LeakyRelu)
/// The 2-d pools (<ember/dispatch/nn/pool.hpp>).
#define EMBER_DISPATCH_PART_POOL(C, S, F)                                                 \
    EMBER_DISPATCH_POOL_FORWARD(F, MaxPool2d, 4)                                          \
    EMBER_DISPATCH_POOL_FORWARD(F, AvgPool2d, 4)                                          \
    EMBER_DISPATCH_POOL_FORWARD(F, AdaptiveAvgPool2d, 4)
/// GradientsParams' take of a model's gradients through its compiled walks
/// (<ember/dispatch/optim/gradients_params.hpp>).
#define EMBER_DISPATCH_PART_GRADIENTS(C, S, F)                                            \
    C(optim::GradientsParams::TakeVisitor<Dispatch>)
/// Adam and AdamW: the per-tensor steps, OptimizerAdaptor's model-independent core and the
/// classes its step hands a model's compiled walks (<ember/dispatch/optim/adam.hpp>).
#define EMBER_DISPATCH_PART_ADAM(C, S, F)                                                 \
    EMBER_DISPATCH_OPTIM_STEPS(F, Adam) EMBER_DISPATCH_OPTIM_STEPS(F, AdamW)                     \
    EMBER_DISPATCH_OPTIM_CORE_FUNCTIONS(F, Adam) EMBER_DISPATCH_OPTIM_CORE_FUNCTIONS(F, AdamW)   \
    EMBER_DISPATCH_OPTIM_MULTI_FUNCTIONS(F, Adam) EMBER_DISPATCH_OPTIM_MULTI_FUNCTIONS(F, AdamW) \
    EMBER_DISPATCH_OPTIM_WALK_CLASSES(C, Adam) EMBER_DISPATCH_OPTIM_WALK_CLASSES(C, AdamW)
/// SGD, as Adam's part (<ember/dispatch/optim/sgd.hpp>).
#define EMBER_DISPATCH_PART_SGD(C, S, F)                                                  \
    EMBER_DISPATCH_OPTIM_STEPS(F, Sgd)                                                    \
    EMBER_DISPATCH_OPTIM_CORE_FUNCTIONS(F, Sgd)                                           \
    EMBER_DISPATCH_OPTIM_MULTI_FUNCTIONS(F, Sgd)                                          \
    EMBER_DISPATCH_OPTIM_WALK_CLASSES(C, Sgd)

/// X applied to the reducer core's `add_slot<D>` on Dispatch.
#define EMBER_DISPATCH_REDUCER_SLOT(F, D)                                                  \
    F(void collective::detail::GradientReducerCore<Dispatch>::add_slot<D>(                 \
        ParamId, Shape, DType, Device<Dispatch>, std::optional<NodeId>))
/// X applied to `train::shard_rows<Dispatch, D, K>`.
#define EMBER_DISPATCH_SHARD_ROWS(F, D, K)                                                 \
    F(Tensor<Dispatch, D, K> train::shard_rows<Dispatch, D, K>(                            \
        const Tensor<Dispatch, D, K>&, std::size_t, std::size_t, const Device<Dispatch>&))
/// X applied to `collective::broadcast<Dispatch, D, Float>` (broadcast_module's).
#define EMBER_DISPATCH_BROADCAST(F, D)                                                     \
    F(Tensor<Dispatch, D> collective::broadcast<Dispatch, D, Float>(                       \
        collective::Collective&, Tensor<Dispatch, D>, std::size_t))
/// X applied to the per-parameter steps of GradientsAccumulator::accumulate and
/// collective::scale_gradients at rank D.
#define EMBER_DISPATCH_GRADIENT_STEPS(F, D)                                                \
    F(void optim::GradientsAccumulator::add<Dispatch, D>(                                  \
        ParamId, std::string_view, optim::GradientsParams&))                              \
    F(void collective::detail::scale_gradient<Dispatch, D>(                                \
        ParamId, optim::GradientsParams&, optim::GradientsParams&, double))
/// The Learner's pieces that do not depend on the model: the gradient reducer's core, the merge
/// of the replicas' step outputs, the shards of a batch's tensors, the broadcast of the
/// replicas' parameters and the per-parameter steps of gradient accumulation and scaling
/// (<ember/dispatch/train.hpp>, src/dispatch/instances_train.cpp).
#define EMBER_DISPATCH_PART_TRAIN(C, S, F)                                                \
    C(collective::detail::GradientReducerCore<Dispatch>)                                  \
    EMBER_DISPATCH_REDUCER_SLOT(F, 1) EMBER_DISPATCH_REDUCER_SLOT(F, 2)                   \
    EMBER_DISPATCH_REDUCER_SLOT(F, 3) EMBER_DISPATCH_REDUCER_SLOT(F, 4)                   \
    S(train::ItemMerge<train::ClassificationOutput<Dispatch>>)                            \
    S(train::ItemMerge<train::RegressionOutput<Dispatch>>)                                \
    EMBER_DISPATCH_SHARD_ROWS(F, 1, Float) EMBER_DISPATCH_SHARD_ROWS(F, 2, Float)         \
    EMBER_DISPATCH_SHARD_ROWS(F, 3, Float) EMBER_DISPATCH_SHARD_ROWS(F, 4, Float)         \
    EMBER_DISPATCH_SHARD_ROWS(F, 1, Int) EMBER_DISPATCH_SHARD_ROWS(F, 2, Int)             \
    EMBER_DISPATCH_BROADCAST(F, 1) EMBER_DISPATCH_BROADCAST(F, 2)                         \
    EMBER_DISPATCH_BROADCAST(F, 3) EMBER_DISPATCH_BROADCAST(F, 4)                         \
    EMBER_DISPATCH_GRADIENT_STEPS(F, 1) EMBER_DISPATCH_GRADIENT_STEPS(F, 2)               \
    EMBER_DISPATCH_GRADIENT_STEPS(F, 3) EMBER_DISPATCH_GRADIENT_STEPS(F, 4)

/// X applied to `train::detail::make_erased` and `fit_erased` for step outputs `Item` (training
/// and validation), the optimizer `X` and a constant learning rate: the Learner of a Dispatch
/// model behind train::detail::ErasedModel (include/ember/train/detail/erased_learner.hpp).
#define EMBER_DISPATCH_ERASED_FIT(F, Item, X)                                                   \
    F(train::detail::ErasedModel<Dispatch, Item, Item> train::detail::fit_erased<               \
        Dispatch, Item, Item,                                                                   \
        optim::OptimizerAdaptor<optim::X, train::detail::ErasedModel<Dispatch, Item, Item>>,    \
        lr_scheduler::ConstantLr>(                                                              \
        train::Learner<train::detail::ErasedModel<Dispatch, Item, Item>,                        \
                       optim::OptimizerAdaptor<optim::X,                                        \
                                               train::detail::ErasedModel<Dispatch, Item, Item>>, \
                       lr_scheduler::ConstantLr, Item, Item>&,                                  \
        train::ErasedLoader<Dispatch>&, train::ErasedLoader<Dispatch>&))                                \
    F(std::shared_ptr<train::Learner<                                                           \
          train::detail::ErasedModel<Dispatch, Item, Item>,                                     \
          optim::OptimizerAdaptor<optim::X, train::detail::ErasedModel<Dispatch, Item, Item>>,  \
          lr_scheduler::ConstantLr, Item, Item>>                                                \
      train::detail::make_erased<                                                               \
          Dispatch, Item, Item,                                                                 \
          optim::OptimizerAdaptor<optim::X, train::detail::ErasedModel<Dispatch, Item, Item>>,  \
          lr_scheduler::ConstantLr>(                                                            \
          train::detail::LearnerCore, train::detail::ErasedModel<Dispatch, Item, Item>,         \
          optim::OptimizerAdaptor<optim::X, train::detail::ErasedModel<Dispatch, Item, Item>>,  \
          lr_scheduler::ConstantLr))
/// The Learner's builder for classification and regression outputs (its make_core), and the
/// Learner of any Dispatch model trained by Adam, AdamW or SGD at a constant learning rate on
/// classification outputs, or by Adam on regression outputs (<ember/dispatch/train.hpp>;
/// compiled in src/dispatch/instances_learner.cpp, the one part that links ember_train).
#define EMBER_DISPATCH_PART_LEARNER(C, S, F)                                              \
    C(train::LearnerBuilder<train::ClassificationOutput<Dispatch>,                        \
                            train::ClassificationOutput<Dispatch>>)                       \
    C(train::LearnerBuilder<train::RegressionOutput<Dispatch>,                            \
                            train::RegressionOutput<Dispatch>>)                           \
    EMBER_DISPATCH_ERASED_FIT(F, train::ClassificationOutput<Dispatch>, Adam)             \
    EMBER_DISPATCH_ERASED_FIT(F, train::ClassificationOutput<Dispatch>, AdamW)            \
    EMBER_DISPATCH_ERASED_FIT(F, train::ClassificationOutput<Dispatch>, Sgd)              \
    EMBER_DISPATCH_ERASED_FIT(F, train::RegressionOutput<Dispatch>, Adam)

/// Every part of the module layer (src/dispatch/instances_nn.cpp).
#define EMBER_DISPATCH_NN_PARTS(C, S, F)                                                        \
    EMBER_DISPATCH_PART_MODULE(C, S, F) EMBER_DISPATCH_PART_LINEAR(C, S, F)                     \
    EMBER_DISPATCH_PART_CONV(C, S, F) EMBER_DISPATCH_PART_EMBEDDING(C, S, F)                    \
    EMBER_DISPATCH_PART_NORM(C, S, F) EMBER_DISPATCH_PART_ATTENTION(C, S, F)                    \
    EMBER_DISPATCH_PART_TRANSFORMER(C, S, F) EMBER_DISPATCH_PART_RNN(C, S, F)                   \
    EMBER_DISPATCH_PART_LOSS(C, S, F) EMBER_DISPATCH_PART_DROPOUT(C, S, F)                      \
    EMBER_DISPATCH_PART_ACTIVATION_MODULES(C, S, F) EMBER_DISPATCH_PART_ACTIVATIONS(C, S, F)    \
    EMBER_DISPATCH_PART_POOL(C, S, F)
/// Every part of the optimizers (src/dispatch/instances_optim.cpp).
#define EMBER_DISPATCH_OPTIM_PARTS(C, S, F)                                                     \
    EMBER_DISPATCH_PART_GRADIENTS(C, S, F) EMBER_DISPATCH_PART_ADAM(C, S, F)                    \
    EMBER_DISPATCH_PART_SGD(C, S, F)

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
/// Declares a part's instances extern (in namespace ember).
#define EMBER_DISPATCH_DECLARE_PART(Part) \
    Part(EMBER_DISPATCH_EXTERN_CLASS, EMBER_DISPATCH_EXTERN_STRUCT, EMBER_DISPATCH_EXTERN_FUNCTION)
#else
/// The library's sources declare nothing: they define the instances.
#define EMBER_DISPATCH_DECLARE_PART(Part)
#endif
