#pragma once
// The optimizer adaptor (Burn's OptimizerAdaptor over a SimpleOptimizer). A simple optimizer
// knows how to update one tensor from its gradient and its own per-parameter state; the adaptor
// walks a module, feeds it every parameter that has a gradient, clips gradients, keeps the
// states keyed by ParamId, and rewraps the updated tensors as the same parameters. The math runs
// on the inner backend: an update is never part of a graph.
//
// A simple optimizer O provides:
//   static constexpr std::string_view name;            // "Adam": recorded, checked on load
//   template <Backend B, std::size_t D> struct State;   // EMBER_DETAIL_FIELDS aggregate
//   template <Backend B, std::size_t D>
//   std::pair<Tensor<B, D>, std::optional<State<B, D>>>
//   step(double lr, Tensor<B, D> param, Tensor<B, D> grad, std::optional<State<B, D>> state) const;
#include <any>
#include <array>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../module/module.hpp"
#include "../tensor/sgd_step.hpp"
#include "detail/state_record.hpp"
#include "grad_clipping.hpp"
#include "gradients_params.hpp"

namespace ember::optim {

namespace detail {
/// An optimizer whose update is Adam's (State is AdaptiveMomentumState: moment_1, moment_2,
/// time) and can say it as a multi-tensor step's scalars, on a backend B with that step
/// (`B::float_adam_steps`: CUDA, Fusion<Cuda>, Dispatch).
template <typename O, typename B>
concept MultiTensorAdam = requires(const O& o,
                                   std::vector<std::array<typename B::FloatTensorPrimitive, 4>> t,
                                   const std::vector<AdamStepsScalars>& s) {
    { o.adam_steps_scalars(1.0, std::int64_t{1}) } -> std::same_as<AdamStepsScalars>;
    B::float_adam_steps(t, s);
};
/// An optimizer whose update is SGD's (State is {velocity}) and can say it as a multi-tensor
/// step's scalars (nothing without momentum: no state, nothing to fuse), on a backend B with
/// that step (`B::float_sgd_steps`: CUDA, Fusion<Cuda>, Dispatch).
template <typename O, typename B>
concept MultiTensorSgd = requires(const O& o,
                                  std::vector<std::array<typename B::FloatTensorPrimitive, 3>> t,
                                  const std::vector<SgdStepScalars>& s) {
    { o.sgd_steps_scalars(1.0) } -> std::same_as<std::optional<SgdStepScalars>>;
    B::float_sgd_steps(t, s);
};

/// The device of t.inner() without making it: an autodiff backend's device is its inner
/// backend's, except Dispatch's, which names the stack with its autodiff flag (and t.inner()
/// would make a new handle on Dispatch just to be asked its device).
template <typename B, std::size_t D>
Device<InnerBackend<B>> inner_device(const Tensor<B, D>& t) {
    if constexpr (requires(const Device<B>& d) {
                      { d.autodiff(false) } -> std::same_as<Device<InnerBackend<B>>>;
                  })
        return t.device().autodiff(false);
    else
        return t.device();
}
}  // namespace detail

namespace detail {
/// What OptimizerAdaptor keeps and does that does not depend on the module type: the simple
/// optimizer, the clipping, the per-parameter states and the update of one parameter. Its
/// members are defined out of the class (not inline), so that the instances a library compiles
/// once (ember_dispatch's for ember::Dispatch, include/ember/dispatch/nn.hpp) are not compiled
/// again in each file that steps a model: only the walk over the model's fields is.
template <typename O, typename SB>
class OptimizerCore {
  public:
    /// The per-parameter state of a rank-D parameter.
    template <std::size_t D>
    using State = typename O::template State<SB, D>;

    /// The per-parameter states as a record: {optimizer: name, states: {<param id>: state}},
    /// each state a map of its fields (tensors as TensorData).
    record::Value to_record() const;
    /// Replaces the states with those of `record` (to_record's form), converted when each
    /// parameter is next stepped, on `device`. FormatError when the record is not an optimizer
    /// record of this kind, or a state misses a field (OptimizerAdaptor::load_record).
    void load_states(const record::Value& record, const std::optional<Device<SB>>& device);

    /// Adds `n` to the step count of every state that keeps one (Adam's and AdamW's `time`).
    /// A step captured in a CUDA graph (ember::cuda::capture) updates its parameters on each
    /// replay, but the host code that counts steps ran only when it was captured: after `n`
    /// replays, add_steps(n) brings the count (and so the bias corrections of a later eager
    /// step, and what to_record saves) up to date.
    void add_steps(std::int64_t n) {
        for (auto& [id, e] : states_)
            if (e.advance) e.advance(e.state, n);
    }

    /// Number of parameters with a state.
    std::size_t num_states() const { return states_.size(); }
    /// Whether parameter `id` has a state.
    bool has_state(ParamId id) const { return states_.count(id.value) != 0; }
    /// The simple optimizer (its settings).
    const O& optimizer() const { return optim_; }
    /// The gradient clipping, if any.
    const std::optional<GradientClipping>& grad_clipping() const { return clipping_; }

  protected:
    using Prim = typename SB::FloatTensorPrimitive;

    struct Entry {
        std::any state;                                    // State<D> once the parameter is stepped
        record::Value (*save)(const std::any&) = nullptr;  // its to_record (knows D)
        record::Value pending;                             // a loaded state not yet converted
        void (*advance)(std::any&, std::int64_t) = nullptr;  // add_steps (states with a time)
    };

    /// Whether the multi-tensor step is SGD's (one state tensor) rather than Adam's (two).
    static constexpr bool kSgdMulti = MultiTensorSgd<O, SB>;
    /// State tensors a parameter keeps in a multi-tensor step: Adam's moments, SGD's velocity.
    static constexpr std::size_t kMultiStates = kSgdMulti ? 1 : 2;

    /// The parameters a multi-tensor step updates together, gathered by gather_param: each
    /// one's {param, grad, states...} and its scalars.
    struct MultiBatch {
        struct Item {
            std::uint64_t id;
            std::int64_t time;  // after this step (Adam's count; SGD keeps none)
            void (*put)(OptimizerCore&, std::uint64_t, std::array<Prim, kMultiStates>,
                        std::int64_t);
        };
        std::vector<Item> items;
        std::vector<std::array<Prim, kMultiStates + 2>> tensors;
        std::vector<std::conditional_t<kSgdMulti, SgdStepScalars, AdamStepsScalars>> scalars;
    };

    OptimizerCore(O optimizer, std::optional<GradientClipping> clipping)
        : optim_(std::move(optimizer)), clipping_(clipping) {
        if (clipping_) clipping_->check(std::string(O::name) + " optimizer");
    }

    /// The float parameter `p` (at `path`) updated from its gradient in `grads` (removed from
    /// it), or nothing when it is frozen or has no gradient there.
    template <typename P>
    std::optional<P> step_param(double lr, std::string_view path, const P& p,
                                GradientsParams& grads);

    /// Adds `p`, its gradient (removed from `grads`) and its state to `batch`, unless it is
    /// frozen or has no gradient there.
    template <typename P>
    void gather_param(double lr, std::string_view path, const P& p, GradientsParams& grads,
                      MultiBatch& batch);

    /// Runs `batch`'s update in one SB::float_adam_steps (SB::float_sgd_steps), keeps the new
    /// states and returns the updated parameters by id.
    std::map<std::uint64_t, Prim> run_multi(MultiBatch batch);

    /// `p`'s gradient removed from `grads`, checked against `p`'s shape and clipped; nothing
    /// when `p` is frozen or has no gradient there (step_param's and gather_param's start).
    template <typename P>
    std::optional<Tensor<SB, ParamTraits<P>::rank>> take_grad(std::string_view path, const P& p,
                                                              GradientsParams& grads);

    template <std::size_t D>
    std::optional<State<D>> take_state(ParamId id, std::string_view path, const Shape& shape,
                                       DType dtype);

    template <std::size_t D>
    void put_state(ParamId id, State<D> state);

    // The parameter functions of OptimizerAdaptor's step for a module whose walks are compiled
    // (module::detail::CompiledWalk, its backend SB: Dispatch): one class each instead of one
    // lambda per module type, their members defined out of the class, so that a library
    // compiles them once (include/ember/dispatch/nn.hpp) and a model file only calls them.
    class StepMapper;        ///< step_param on each parameter
    class OneDeviceVisitor;  ///< whether every trainable parameter is on one device
    class GatherVisitor;     ///< gather_param on each parameter (the multi-tensor step)
    class ScatterMapper;     ///< run_multi's results put back
    class MultiStep;         ///< a multi-tensor step's gathered parameters and results

    O optim_;
    std::optional<GradientClipping> clipping_;
    bool multi_tensor_ = true;
    std::map<std::uint64_t, Entry> states_;  // ordered: records list states by id
    std::optional<Device<SB>> device_;
};
}  // namespace detail

/// Updates the parameters of modules of type `M` with the simple optimizer `O`.
template <typename O, module::Module M>
class OptimizerAdaptor : public detail::OptimizerCore<O, InnerBackend<module::BackendOf<M>>> {
    using Core = detail::OptimizerCore<O, InnerBackend<module::BackendOf<M>>>;

  public:
    /// The module type this optimizer steps.
    using Module = M;
    /// The simple optimizer.
    using Optimizer = O;
    /// The backend the updates (and the states) live on: the module's, without autodiff.
    using StateBackend = InnerBackend<module::BackendOf<M>>;
    /// The per-parameter state of a rank-D parameter.
    template <std::size_t D>
    using State = typename O::template State<StateBackend, D>;

    /// An adaptor with no state yet.
    explicit OptimizerAdaptor(O optimizer, std::optional<GradientClipping> clipping = std::nullopt)
        : Core(std::move(optimizer), clipping) {}
    /// The same optimizer, options and states, for modules of type `M` instead of `N` (both on
    /// one backend): the Learner of an erased model steps it (train::detail::ErasedModel).
    template <module::Module N>
    requires std::same_as<InnerBackend<module::BackendOf<N>>, StateBackend>
    explicit OptimizerAdaptor(const OptimizerAdaptor<O, N>& other)
        : Core(static_cast<const Core&>(other)) {}
    template <module::Module N>
    requires std::same_as<InnerBackend<module::BackendOf<N>>, StateBackend>
    explicit OptimizerAdaptor(OptimizerAdaptor<O, N>&& other) : Core(static_cast<Core&&>(other)) {}

    /// A copy that clips every gradient before its update.
    OptimizerAdaptor with_grad_clipping(GradientClipping clipping) const {
        clipping.check(std::string(O::name) + " optimizer");
        OptimizerAdaptor out = *this;
        out.clipping_ = clipping;
        return out;
    }

    /// One optimization step: every trainable parameter of `module` that has a gradient in
    /// `grads` is updated with learning rate `lr`; the others (frozen, unused, or owned by
    /// another optimizer) are returned unchanged. Parameters keep their ids and stay trainable.
    M step(double lr, M module, GradientsParams grads) {
        EMBER_CHECK(lr >= 0 && std::isfinite(lr), Argument, O::name,
                    " step: the learning rate must be non-negative and finite, got ", lr);
        if constexpr (detail::MultiTensorAdam<O, StateBackend>) {
            if (this->multi_tensor_ && on_one_device(module)) return step_multi(lr, module, grads);
        } else if constexpr (detail::MultiTensorSgd<O, StateBackend>) {
            if (this->multi_tensor_ && this->optim_.sgd_steps_scalars(lr) && on_one_device(module))
                return step_multi(lr, module, grads);
        }
        if constexpr (kCompiledWalk) {
            typename Core::StepMapper mapper(*this, lr, grads);
            return module::detail::map_params<M, StateBackend>(module, "", mapper);
        }
        return module::map(module, [&](std::string_view path, const auto& p) {
            using P = module::detail::Bare<decltype(p)>;
            using T = detail::ParamTraits<P>;
            if constexpr (!T::is_float ||
                          !std::is_same_v<InnerBackend<typename T::Backend>, StateBackend>) {
                return p;
            } else {
                auto updated = this->step_param(lr, path, p, grads);
                return updated ? std::move(*updated) : p;
            }
        });
    }

    /// A copy holding the states of `record` (written by to_record of the same kind of
    /// optimizer), created on `device` when each parameter is next stepped. Throws FormatError
    /// when the record is not an optimizer record of this kind, or a state misses a field; a
    /// state whose tensors do not have its parameter's shape throws ShapeError at that step.
    OptimizerAdaptor load_record(const record::Value& record,
                                 const Device<StateBackend>& device = {}) const {
        OptimizerAdaptor out = *this;
        out.load_states(record, device);  // the core's: compiled once whatever the module
        return out;
    }

    /// Whether a step on a backend with a multi-tensor Adam or SGD update (CUDA) updates every
    /// parameter in one or a few launches (the default) rather than one update a parameter.
    /// Both give the same values; the switch is there to compare them.
    OptimizerAdaptor& multi_tensor(bool on) {
        this->multi_tensor_ = on;
        return *this;
    }

  private:
    using Prim = typename StateBackend::FloatTensorPrimitive;
    // Whether the module's walks are compiled (Dispatch): step then uses the core's classes.
    static constexpr bool kCompiledWalk =
        module::detail::CompiledWalk<M> && std::is_same_v<module::BackendOf<M>, StateBackend>;

    // Whether every trainable float parameter of `module` lives on one device (the multi-tensor
    // step's condition; other modules step tensor by tensor). Lazy parameters not made yet are
    // left alone (asking their device would make them).
    bool on_one_device(const M& module) const {
        if constexpr (kCompiledWalk) {
            typename Core::OneDeviceVisitor v;
            module::detail::visit_params<M, StateBackend>(module, "", v);
            return v.one();
        }
        std::optional<Device<StateBackend>> first;
        bool one = true;
        module::visit(module, [&](std::string_view, const auto& p) {
            using T = detail::ParamTraits<module::detail::Bare<decltype(p)>>;
            if constexpr (T::is_float &&
                          std::is_same_v<InnerBackend<typename T::Backend>, StateBackend>) {
                if (!p.is_require_grad() || !p.is_initialized()) return;
                const auto d = detail::inner_device(p.val());
                if (!first)
                    first = d;
                else if (!(*first == d))
                    one = false;
            }
        });
        return one;
    }

    // The step as one multi-tensor update: the parameters with gradients are gathered (clipped,
    // with their states), updated together by StateBackend::float_adam_steps (float_sgd_steps),
    // and put back.
    M step_multi(double lr, const M& module, GradientsParams& grads) {
        if constexpr (kCompiledWalk) {
            typename Core::MultiStep step(*this, lr, grads);
            module::detail::visit_params<M, StateBackend>(module, "", step.gather());
            step.run();
            return module::detail::map_params<M, StateBackend>(module, "", step.scatter());
        } else {
            typename Core::MultiBatch batch;
            module::visit(module, [&](std::string_view path, const auto& p) {
                using T = detail::ParamTraits<module::detail::Bare<decltype(p)>>;
                if constexpr (T::is_float &&
                              std::is_same_v<InnerBackend<typename T::Backend>, StateBackend>)
                    this->gather_param(lr, path, p, grads, batch);
            });
            std::map<std::uint64_t, Prim> params = this->run_multi(std::move(batch));
            return module::map(module, [&](std::string_view, const auto& p) {
                using P = module::detail::Bare<decltype(p)>;
                using T = detail::ParamTraits<P>;
                if constexpr (T::is_float &&
                              std::is_same_v<InnerBackend<typename T::Backend>, StateBackend>) {
                    auto it = params.find(p.id().value);
                    if (it == params.end()) return p;
                    return p.with_value(P::Value::from_inner(
                        Tensor<StateBackend, T::rank>::from_primitive(std::move(it->second))));
                } else {
                    return p;
                }
            });
        }
    }
};

// ---- OptimizerCore's parameter functions for compiled walks -----------------------------------

/// step's update of each parameter (OptimizerCore::step_param).
template <typename O, typename SB>
class detail::OptimizerCore<O, SB>::StepMapper final : public module::detail::ParamMapper<SB> {
  public:
    StepMapper(OptimizerCore& core, double lr, GradientsParams& grads)
        : core_(core), lr_(lr), grads_(grads) {}
    Param<Tensor<SB, 1>> operator()(std::string_view path, const Param<Tensor<SB, 1>>& p) override;
    Param<Tensor<SB, 2>> operator()(std::string_view path, const Param<Tensor<SB, 2>>& p) override;
    Param<Tensor<SB, 3>> operator()(std::string_view path, const Param<Tensor<SB, 3>>& p) override;
    Param<Tensor<SB, 4>> operator()(std::string_view path, const Param<Tensor<SB, 4>>& p) override;

  private:
    template <std::size_t D>
    Param<Tensor<SB, D>> step(std::string_view path, const Param<Tensor<SB, D>>& p);
    OptimizerCore& core_;
    double lr_;
    GradientsParams& grads_;
};

/// Whether every trainable, initialised parameter is on one device (the multi-tensor step's
/// condition).
template <typename O, typename SB>
class detail::OptimizerCore<O, SB>::OneDeviceVisitor final
    : public module::detail::ParamVisitor<SB> {
  public:
    void operator()(std::string_view path, const Param<Tensor<SB, 1>>& p) override;
    void operator()(std::string_view path, const Param<Tensor<SB, 2>>& p) override;
    void operator()(std::string_view path, const Param<Tensor<SB, 3>>& p) override;
    void operator()(std::string_view path, const Param<Tensor<SB, 4>>& p) override;
    /// Whether the parameters visited are on one device.
    bool one() const { return one_; }

  private:
    template <std::size_t D>
    void add(const Param<Tensor<SB, D>>& p);
    std::optional<Device<SB>> first_;
    bool one_ = true;
};

/// The multi-tensor step's gathering of each parameter (OptimizerCore::gather_param).
template <typename O, typename SB>
class detail::OptimizerCore<O, SB>::GatherVisitor final : public module::detail::ParamVisitor<SB> {
  public:
    GatherVisitor(OptimizerCore& core, double lr, GradientsParams& grads, MultiBatch& batch)
        : core_(core), lr_(lr), grads_(grads), batch_(batch) {}
    void operator()(std::string_view path, const Param<Tensor<SB, 1>>& p) override;
    void operator()(std::string_view path, const Param<Tensor<SB, 2>>& p) override;
    void operator()(std::string_view path, const Param<Tensor<SB, 3>>& p) override;
    void operator()(std::string_view path, const Param<Tensor<SB, 4>>& p) override;

  private:
    OptimizerCore& core_;
    double lr_;
    GradientsParams& grads_;
    MultiBatch& batch_;
};

/// The multi-tensor step's updated tensors (run_multi's, by parameter id) put back.
template <typename O, typename SB>
class detail::OptimizerCore<O, SB>::ScatterMapper final : public module::detail::ParamMapper<SB> {
  public:
    explicit ScatterMapper(std::map<std::uint64_t, Prim>& params) : params_(params) {}
    Param<Tensor<SB, 1>> operator()(std::string_view path, const Param<Tensor<SB, 1>>& p) override;
    Param<Tensor<SB, 2>> operator()(std::string_view path, const Param<Tensor<SB, 2>>& p) override;
    Param<Tensor<SB, 3>> operator()(std::string_view path, const Param<Tensor<SB, 3>>& p) override;
    Param<Tensor<SB, 4>> operator()(std::string_view path, const Param<Tensor<SB, 4>>& p) override;

  private:
    template <std::size_t D>
    Param<Tensor<SB, D>> put(const Param<Tensor<SB, D>>& p);
    std::map<std::uint64_t, Prim>& params_;
};

/// A multi-tensor step of a module whose walks are compiled: the parameters gathered
/// (GatherVisitor), run_multi's updated tensors and their scatter (ScatterMapper), owned here
/// with the members out of the class, so that a model file calls them and compiles none of the
/// containers' code (a library compiles it once: include/ember/dispatch/nn.hpp).
template <typename O, typename SB>
class detail::OptimizerCore<O, SB>::MultiStep {
  public:
    MultiStep(OptimizerCore& core, double lr, GradientsParams& grads);
    ~MultiStep();
    MultiStep(const MultiStep&) = delete;
    MultiStep& operator=(const MultiStep&) = delete;
    /// What gathers each parameter (visit_params over the module).
    module::detail::ParamVisitor<SB>& gather() { return gather_; }
    /// Runs the update of the gathered parameters (run_multi).
    void run();
    /// What puts the updated tensors back (map_params over the module).
    module::detail::ParamMapper<SB>& scatter() { return scatter_; }

  private:
    OptimizerCore& core_;
    MultiBatch batch_;
    std::map<std::uint64_t, Prim> params_;
    GatherVisitor gather_;
    ScatterMapper scatter_;
};

template <typename O, typename SB>
detail::OptimizerCore<O, SB>::MultiStep::MultiStep(OptimizerCore& core, double lr,
                                                   GradientsParams& grads)
    : core_(core), gather_(core, lr, grads, batch_), scatter_(params_) {}

template <typename O, typename SB>
detail::OptimizerCore<O, SB>::MultiStep::~MultiStep() = default;

template <typename O, typename SB>
void detail::OptimizerCore<O, SB>::MultiStep::run() {
    params_ = core_.run_multi(std::move(batch_));
}

// The classes' members, for each rank: one macro so the four ranks cannot drift apart.
#define EMBER_OPTIM_DETAIL_RANK_MEMBERS(D)                                                        \
    template <typename O, typename SB>                                                            \
    Param<Tensor<SB, D>> detail::OptimizerCore<O, SB>::StepMapper::operator()(                    \
        std::string_view path, const Param<Tensor<SB, D>>& p) {                                   \
        return step<D>(path, p);                                                                  \
    }                                                                                             \
    template <typename O, typename SB>                                                            \
    void detail::OptimizerCore<O, SB>::OneDeviceVisitor::operator()(                              \
        std::string_view, const Param<Tensor<SB, D>>& p) {                                        \
        add<D>(p);                                                                                \
    }                                                                                             \
    template <typename O, typename SB>                                                            \
    void detail::OptimizerCore<O, SB>::GatherVisitor::operator()(std::string_view path,           \
                                                                 const Param<Tensor<SB, D>>& p) { \
        core_.gather_param(lr_, path, p, grads_, batch_);                                         \
    }                                                                                             \
    template <typename O, typename SB>                                                            \
    Param<Tensor<SB, D>> detail::OptimizerCore<O, SB>::ScatterMapper::operator()(                 \
        std::string_view, const Param<Tensor<SB, D>>& p) {                                        \
        return put<D>(p);                                                                         \
    }
EMBER_OPTIM_DETAIL_RANK_MEMBERS(1)
EMBER_OPTIM_DETAIL_RANK_MEMBERS(2)
EMBER_OPTIM_DETAIL_RANK_MEMBERS(3)
EMBER_OPTIM_DETAIL_RANK_MEMBERS(4)
#undef EMBER_OPTIM_DETAIL_RANK_MEMBERS

template <typename O, typename SB>
template <std::size_t D>
Param<Tensor<SB, D>> detail::OptimizerCore<O, SB>::StepMapper::step(std::string_view path,
                                                                    const Param<Tensor<SB, D>>& p) {
    auto updated = core_.step_param(lr_, path, p, grads_);
    return updated ? std::move(*updated) : p;
}

template <typename O, typename SB>
template <std::size_t D>
void detail::OptimizerCore<O, SB>::OneDeviceVisitor::add(const Param<Tensor<SB, D>>& p) {
    if (!p.is_require_grad() || !p.is_initialized()) return;
    const auto d = inner_device(p.val());
    if (!first_)
        first_ = d;
    else if (!(*first_ == d))
        one_ = false;
}

template <typename O, typename SB>
template <std::size_t D>
Param<Tensor<SB, D>> detail::OptimizerCore<O, SB>::ScatterMapper::put(
    const Param<Tensor<SB, D>>& p) {
    auto it = params_.find(p.id().value);
    if (it == params_.end()) return p;
    return p.with_value(
        Tensor<SB, D>::from_inner(Tensor<SB, D>::from_primitive(std::move(it->second))));
}

// ---- OptimizerCore's members (not inline: see the class) ------------------------------------

template <typename O, typename SB>
record::Value detail::OptimizerCore<O, SB>::to_record() const {
    record::Map states;
    for (const auto& [id, e] : states_)
        states.emplace_back(ParamId{id}.to_string(), e.save ? e.save(e.state) : e.pending);
    return record::Map{{"optimizer", std::string(O::name)}, {"states", std::move(states)}};
}

template <typename O, typename SB>
void detail::OptimizerCore<O, SB>::load_states(const record::Value& record,
                                               const std::optional<Device<SB>>& device) {
    const auto& name = record.at("optimizer").as<std::string>("optimizer");
    EMBER_CHECK(name == O::name, Format, O::name, " load_record: the record holds the state of a ",
                name, " optimizer");
    states_.clear();
    device_ = device;
    for (const auto& [key, v] : record.at("states").as<record::Map>("states")) {
        const std::string path = record::Value::join_path("states", key);
        auto id = ParamId::parse(key);
        EMBER_CHECK(id, Format, O::name, " load_record: '", path, "' is not a parameter id");
        check_state_record<State<1>>(v, path);
        states_[id->value] = Entry{std::any{}, nullptr, v};
    }
}

template <typename O, typename SB>
template <typename P>
auto detail::OptimizerCore<O, SB>::take_grad(std::string_view path, const P& p,
                                             GradientsParams& grads)
    -> std::optional<Tensor<SB, ParamTraits<P>::rank>> {
    constexpr std::size_t D = ParamTraits<P>::rank;
    if (!p.is_require_grad()) return std::nullopt;
    auto grad = grads.template remove<SB, D>(p.id());
    if (!grad) return std::nullopt;
    EMBER_CHECK(grad->shape() == p.shape(), Shape, O::name, " step: the gradient of '", path,
                "' has shape ", grad->shape().to_string(), " but the parameter has shape ",
                p.shape().to_string());
    Tensor<SB, D> g = std::move(*grad);
    if (clipping_) g = clipping_->clip(std::move(g));
    return g;
}

template <typename O, typename SB>
template <typename P>
std::optional<P> detail::OptimizerCore<O, SB>::step_param(double lr, std::string_view path,
                                                          const P& p, GradientsParams& grads) {
    constexpr std::size_t D = ParamTraits<P>::rank;
    auto g = take_grad(path, p, grads);
    if (!g) return std::nullopt;
    auto value = p.val();
    auto state = take_state<D>(p.id(), path, p.shape(), value.dtype());
    auto [updated, next] = optim_.step(lr, value.inner(), std::move(*g), std::move(state));
    if (next)
        put_state<D>(p.id(), std::move(*next));
    else
        states_.erase(p.id().value);
    return p.with_value(P::Value::from_inner(updated));
}

template <typename O, typename SB>
template <typename P>
void detail::OptimizerCore<O, SB>::gather_param(double lr, std::string_view path, const P& p,
                                                GradientsParams& grads, MultiBatch& batch) {
    constexpr std::size_t D = ParamTraits<P>::rank;
    auto grad = take_grad(path, p, grads);
    if (!grad) return;
    Tensor<SB, D> g = std::move(*grad);
    auto value = p.val().inner();
    auto state = take_state<D>(p.id(), path, p.shape(), value.dtype());
    if constexpr (kSgdMulti) {
        // A first step keeps v = g: momentum·0 + (1 − 0)·g, so dampening is left out of it.
        SgdStepScalars s = *optim_.sgd_steps_scalars(lr);
        if (!state) s.dampening = 0;
        Tensor<SB, D> v = state ? std::move(state->velocity) : g.zeros_like();
        batch.items.push_back(
            {p.id().value, 0,
             [](OptimizerCore& self, std::uint64_t id, std::array<Prim, 1> st, std::int64_t) {
                 self.put_state<D>(ParamId{id},
                                   State<D>{Tensor<SB, D>::from_primitive(std::move(st[0]))});
             }});
        batch.tensors.push_back({std::move(value).into_primitive(), std::move(g).into_primitive(),
                                 std::move(v).into_primitive()});
        batch.scalars.push_back(s);
    } else {
        const std::int64_t time = state ? state->time + 1 : 1;
        Tensor<SB, D> m = state ? std::move(state->moment_1) : g.zeros_like();
        Tensor<SB, D> v = state ? std::move(state->moment_2) : g.zeros_like();
        batch.items.push_back(
            {p.id().value, time,
             [](OptimizerCore& self, std::uint64_t id, std::array<Prim, 2> st, std::int64_t t) {
                 self.put_state<D>(ParamId{id},
                                   State<D>{Tensor<SB, D>::from_primitive(std::move(st[0])),
                                            Tensor<SB, D>::from_primitive(std::move(st[1])), t});
             }});
        batch.tensors.push_back({std::move(value).into_primitive(), std::move(g).into_primitive(),
                                 std::move(m).into_primitive(), std::move(v).into_primitive()});
        batch.scalars.push_back(optim_.adam_steps_scalars(lr, time));
    }
}

template <typename O, typename SB>
auto detail::OptimizerCore<O, SB>::run_multi(MultiBatch batch) -> std::map<std::uint64_t, Prim> {
    auto updated = [&] {
        if constexpr (kSgdMulti)
            return SB::float_sgd_steps(std::move(batch.tensors), batch.scalars);
        else
            return SB::float_adam_steps(std::move(batch.tensors), batch.scalars);
    }();
    std::map<std::uint64_t, Prim> params;
    for (std::size_t i = 0; i < batch.items.size(); ++i) {
        auto& u = updated[i];
        std::array<Prim, kMultiStates> states = [&] {
            if constexpr (kMultiStates == 1)
                return std::array<Prim, 1>{std::move(u[1])};
            else
                return std::array<Prim, 2>{std::move(u[1]), std::move(u[2])};
        }();
        batch.items[i].put(*this, batch.items[i].id, std::move(states), batch.items[i].time);
        params.emplace(batch.items[i].id, std::move(u[0]));
    }
    return params;
}

template <typename O, typename SB>
template <std::size_t D>
auto detail::OptimizerCore<O, SB>::take_state(ParamId id, std::string_view path, const Shape& shape,
                                              DType dtype) -> std::optional<State<D>> {
    auto it = states_.find(id.value);
    if (it == states_.end()) return std::nullopt;
    // Converted before it is erased: a state that does not fit stays for a later step.
    if (!it->second.save) {
        const std::string where = record::Value::join_path("states", id.to_string());
        auto state = state_from_record<State<D>>(it->second.pending, where, path, shape, dtype,
                                                 device_ ? *device_ : Device<SB>{});
        states_.erase(it);
        return state;
    }
    auto* s = std::any_cast<State<D>>(&it->second.state);
    EMBER_CHECK(s != nullptr, Argument, O::name, " step: the state of parameter '", path,
                "' was made for a parameter of another rank");
    State<D> state = std::move(*s);
    states_.erase(it);
    return state;
}

template <typename O, typename SB>
template <std::size_t D>
void detail::OptimizerCore<O, SB>::put_state(ParamId id, State<D> state) {
    states_[id.value] =
        Entry{std::any(std::move(state)),
              [](const std::any& a) { return state_to_record(std::any_cast<const State<D>&>(a)); },
              {},
              [](std::any& a, std::int64_t n) {
                  if constexpr (requires(State<D> & st) { st.time += n; })
                      std::any_cast<State<D>&>(a).time += n;
              }};
}

}  // namespace ember::optim
