#pragma once
// The Learner of a model whose module walks are compiled (ember::Dispatch's: CompiledWalk), with
// the model, its batches and its loaders behind interfaces (included by learner_impl.hpp).
// Learner<M, OptimizerAdaptor<X, M>, S, TrainItem, ValidItem> for such a model is a thin shell
// over Learner<ErasedModel<B, TrainItem, ValidItem>, OptimizerAdaptor<X, ErasedModel<...>>, S,
// TrainItem, ValidItem>: the same Learner, whose model is an ErasedModel (a module that walks
// itself through the model's compiled walks, one virtual call a walk) and whose loaders are
// ErasedLoaders (batches behind a pointer). That Learner does not depend on the model, the
// batch or the loader types, so a file that trains several models compiles one of it, and
// ember_dispatch compiles the usual ones once for all (fit_erased, declared extern by
// <ember/dispatch/train.hpp>): what a model's file compiles is ErasedModelOf<M>, its steps and
// walks behind the interface, and an ErasedLoader over each loader type.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace ember::optim {
template <typename O, module::Module M>
class OptimizerAdaptor;
}  // namespace ember::optim

namespace ember::train {
namespace detail {
template <typename B, typename Batch>
class BatchOpsOf;
template <typename B, typename L, typename Batch>
class LoaderSourceOf;
}  // namespace detail

/// A loader's batch behind ErasedLoader: the batch of the model's batch type, and what a
/// data-parallel epoch asks of it (its items, its shards).
template <typename B>
class ErasedBatch {
  public:
    /// What a batch type provides (BatchOpsOf).
    class Ops {
      public:
        /// The batch's number of items.
        virtual std::size_t num_items(const void* batch) const = 0;
        /// Items [begin, end) of the batch on `device`.
        virtual ErasedBatch shard(const void* batch, std::size_t begin, std::size_t end,
                                  const Device<B>& device) const = 0;

      protected:
        ~Ops() = default;
    };

    ErasedBatch(std::shared_ptr<const void> batch, const Ops& ops)
        : batch_(std::move(batch)), ops_(&ops) {}
    /// ShardableBatch's members.
    std::size_t num_items() const { return ops_->num_items(batch_.get()); }
    ErasedBatch shard(std::size_t begin, std::size_t end, const Device<B>& device) const {
        return ops_->shard(batch_.get(), begin, end, device);
    }
    /// The batch, of the type it was made with (ArgumentError for another type).
    template <typename Batch>
    const Batch& get() const;

  private:
    std::shared_ptr<const void> batch_;
    const Ops* ops_;
};

/// A data loader with its type erased (a LearnerLoader): its counts, set_epoch, and one pass
/// over its batches as ErasedBatches of the model's batch type. The Learner of a Dispatch model
/// wraps the loaders fit is given in one; a program that makes its loaders in another file than
/// its model can pass one (`ErasedLoader<B>::of<Batch>(loader)`), so that the model's file
/// compiles none of the loader's code.
template <typename B>
class ErasedLoader {
  public:
    /// One pass over the batches.
    class Cursor {
      public:
        virtual ~Cursor() = default;
        /// The next batch; nullopt at the end.
        virtual std::optional<ErasedBatch<B>> next() = 0;
    };
    /// What a loader type provides (detail::LoaderSourceOf).
    class Source {
      public:
        virtual ~Source() = default;
        virtual void set_epoch(std::size_t epoch) = 0;
        virtual detail::LoaderShape shape() const = 0;
        virtual std::unique_ptr<Cursor> open() = 0;
    };

    /// The iterator of iter()'s range.
    class Iterator {
      public:
        explicit Iterator(Cursor& c) : c_(&c), batch_(c.next()) {}
        const ErasedBatch<B>& operator*() const { return *batch_; }
        Iterator& operator++() {
            batch_ = c_->next();
            return *this;
        }
        bool operator==(std::default_sentinel_t) const { return !batch_; }

      private:
        Cursor* c_;
        std::optional<ErasedBatch<B>> batch_;
    };
    /// iter()'s range: one pass.
    class Range {
      public:
        explicit Range(std::unique_ptr<Cursor> c) : c_(std::move(c)) {}
        Iterator begin() { return Iterator(*c_); }
        std::default_sentinel_t end() const { return {}; }

      private:
        std::unique_ptr<Cursor> c_;
    };

    explicit ErasedLoader(std::unique_ptr<Source> source) : source_(std::move(source)) {}
    /// `loader` (kept by reference), whose batches the steps take as Batch, made from the
    /// loader's.
    template <typename Batch, typename L>
    static ErasedLoader of(L& loader) {
        return ErasedLoader(std::make_unique<detail::LoaderSourceOf<B, L, Batch>>(loader));
    }

    Range iter() { return Range(source_->open()); }
    std::size_t num_items() const { return source_->shape().num_items; }
    std::size_t num_batches() const { return source_->shape().num_batches; }
    /// The counts as the Learner's core reads them (batch_size where the loader has one).
    detail::LoaderShape loader_shape() const { return source_->shape(); }
    void set_epoch(std::size_t epoch) { source_->set_epoch(epoch); }

  private:
    std::unique_ptr<Source> source_;
};

namespace detail {

/// ErasedBatch's operations on batches of type Batch.
template <typename B, typename Batch>
class BatchOpsOf final : public ErasedBatch<B>::Ops {
  public:
    static const BatchOpsOf& instance() {
        static const BatchOpsOf ops;
        return ops;
    }
    std::size_t num_items(const void* batch) const override {
        if constexpr (ShardableBatch<Batch, Device<B>>)
            return std::size_t(static_cast<const Batch*>(batch)->num_items());
        else
            unshardable();
    }
    ErasedBatch<B> shard(const void* batch, std::size_t begin, std::size_t end,
                         const Device<B>& device) const override {
        if constexpr (ShardableBatch<Batch, Device<B>>)
            return ErasedBatch<B>(std::make_shared<const Batch>(
                                      static_cast<const Batch*>(batch)->shard(begin, end, device)),
                                  *this);
        else
            unshardable();
    }

    /// The error of a data-parallel fit over batches of this type (the Learner of an erased
    /// model raises it before the fit starts, as the generic Learner does).
    [[noreturn]] static void unshardable() {
        EMBER_FAIL(Argument,
                   "Learner::fit: training on several devices splits every batch, but the batch "
                   "type has no num_items() and shard(begin, end, device) (see ShardableBatch in "
                   "ember/train/output.hpp)");
    }
};

/// ErasedLoader's source over a loader of type L, whose batches become Batch.
template <typename B, typename L, typename Batch>
class LoaderSourceOf final : public ErasedLoader<B>::Source {
    using Cursor = typename ErasedLoader<B>::Cursor;

  public:
    explicit LoaderSourceOf(L& loader) : loader_(loader) {}
    void set_epoch(std::size_t epoch) override {
        if constexpr (requires { loader_.set_epoch(epoch); }) loader_.set_epoch(epoch);
    }
    LoaderShape shape() const override {
        LoaderShape s{std::size_t(loader_.num_items()), std::size_t(loader_.num_batches()),
                      std::nullopt};
        if constexpr (requires { loader_.batch_size(); })
            s.batch_size = std::size_t(loader_.batch_size());
        return s;
    }
    std::unique_ptr<Cursor> open() override { return std::make_unique<Pass>(loader_); }

  private:
    // A range-for over loader.iter(): the batch of a step is made before the iterator moves on.
    class Pass final : public Cursor {
      public:
        explicit Pass(L& loader) : range_(loader.iter()), it_(range_.begin()), end_(range_.end()) {}
        std::optional<ErasedBatch<B>> next() override {
            if (started_) ++it_;
            started_ = true;
            if (it_ == end_) return std::nullopt;
            return ErasedBatch<B>(std::make_shared<const Batch>(*it_),
                                  BatchOpsOf<B, Batch>::instance());
        }

      private:
        using R = decltype(std::declval<L&>().iter());
        R range_;
        decltype(std::declval<std::remove_reference_t<R>&>().begin()) it_;
        decltype(std::declval<std::remove_reference_t<R>&>().end()) end_;
        bool started_ = false;
    };
    L& loader_;
};

}  // namespace detail

template <typename B>
template <typename Batch>
const Batch& ErasedBatch<B>::get() const {
    EMBER_CHECK((ops_ == &detail::BatchOpsOf<B, Batch>::instance()), Argument,
                "Learner::fit: a batch of another type than the model's step takes (an "
                "ErasedLoader made for another batch type)");
    return *static_cast<const Batch*>(batch_.get());
}

namespace detail {

/// A model behind an interface: a module on B that walks itself (module::detail::SelfWalking)
/// through the model's own compiled walks, and steps ErasedBatches of the model's batch types.
/// Immutable, as modules are: its walks return new models.
template <typename B, typename TrainItem, typename ValidItem>
class ErasedModel {
  public:
    /// What a model type provides (ErasedModelOf).
    class Concept {
      public:
        virtual ~Concept() = default;
        virtual TrainOutput<TrainItem> step(const ErasedBatch<B>& batch) const = 0;
        virtual ValidItem valid_step(const ErasedBatch<B>& batch) const = 0;
        virtual void visit_params(std::string_view path,
                                  module::detail::ParamVisitor<B>& v) const = 0;
        virtual std::shared_ptr<const Concept> map_params(
            std::string_view path, module::detail::ParamMapper<B>& f) const = 0;
        virtual std::shared_ptr<const Concept> to_device(const Device<B>& device) const = 0;
        virtual std::shared_ptr<const Concept> valid() const = 0;
        virtual record::Value to_record() const = 0;
        virtual std::shared_ptr<const Concept> load(const record::Value& v,
                                                    std::string_view path) const = 0;
    };

    explicit ErasedModel(std::shared_ptr<const Concept> model) : model_(std::move(model)) {}

    EMBER_MODULE(ErasedModel)
    using ember_self_walking = B;

    /// The model's training step (`step`).
    TrainOutput<TrainItem> step(const ErasedBatch<B>& batch) const { return model_->step(batch); }
    /// The model's validation step (`valid_step`, else `step`).
    ValidItem valid_step(const ErasedBatch<B>& batch) const { return model_->valid_step(batch); }

    // The walks (module::detail::SelfWalking).
    void walk_visit(std::string_view path, module::detail::ParamVisitor<B>& v) const {
        model_->visit_params(path, v);
    }
    ErasedModel walk_map(std::string_view path, module::detail::ParamMapper<B>& f) const {
        return ErasedModel(model_->map_params(path, f));
    }
    ErasedModel walk_to_device(const Device<B>& device) const {
        return ErasedModel(model_->to_device(device));
    }
    ErasedModel walk_valid() const { return ErasedModel(model_->valid()); }
    record::Value walk_record() const { return model_->to_record(); }
    ErasedModel walk_load(const record::Value& v, std::string_view path) const {
        return ErasedModel(model_->load(v, path));
    }

    /// The model behind the interface.
    const Concept& model() const { return *model_; }

  private:
    std::shared_ptr<const Concept> model_;
};

/// ErasedModel's interface over a model of type M, stepping batches of types TB (training) and
/// VB (validation).
template <typename M, typename TrainItem, typename ValidItem, typename TB, typename VB>
class ErasedModelOf final
    : public ErasedModel<module::BackendOf<M>, TrainItem, ValidItem>::Concept {
    using B = module::BackendOf<M>;
    using Base = typename ErasedModel<B, TrainItem, ValidItem>::Concept;

  public:
    explicit ErasedModelOf(M&& m) : model(std::move(m)) {}
    TrainOutput<TrainItem> step(const ErasedBatch<B>& batch) const override {
        return model.step(batch.template get<TB>());
    }
    ValidItem valid_step(const ErasedBatch<B>& batch) const override {
        return run_valid_step(model, batch.template get<VB>());
    }
    void visit_params(std::string_view path, module::detail::ParamVisitor<B>& v) const override {
        module::detail::visit_params<M, B>(model, path, v);
    }
    std::shared_ptr<const Base> map_params(std::string_view path,
                                           module::detail::ParamMapper<B>& f) const override {
        return std::make_shared<const ErasedModelOf>(
            module::detail::map_params<M, B>(model, path, f));
    }
    std::shared_ptr<const Base> to_device(const Device<B>& device) const override {
        return std::make_shared<const ErasedModelOf>(
            module::detail::to_device_fields(model, device));
    }
    std::shared_ptr<const Base> valid() const override {
        return std::make_shared<const ErasedModelOf>(module::detail::valid_fields(model));
    }
    record::Value to_record() const override { return module::detail::to_record(model); }
    std::shared_ptr<const Base> load(const record::Value& v, std::string_view path) const override {
        return std::make_shared<const ErasedModelOf>(
            module::detail::load(model, v, path, std::monostate{}));
    }

    M model;
};

/// The batch type a step member function takes.
template <typename F>
struct StepBatch {};
template <typename R, typename C, typename A>
struct StepBatch<R (C::*)(A) const> {
    using type = std::remove_cvref_t<A>;
};
template <typename R, typename C, typename A>
struct StepBatch<R (C::*)(A) const noexcept> {
    using type = std::remove_cvref_t<A>;
};
/// The batch type of M's `step` (one non-template overload).
template <typename M>
using TrainBatchOf = typename StepBatch<decltype(&M::step)>::type;
template <typename M>
struct ValidBatch {
    using type = TrainBatchOf<M>;
};
template <typename M>
requires requires {
    &M::valid_step;
}
struct ValidBatch<M> {
    using type = typename StepBatch<decltype(&M::valid_step)>::type;
};
/// The batch type of M's `valid_step` (else `step`).
template <typename M>
using ValidBatchOf = typename ValidBatch<M>::type;

template <typename O, typename M>
struct AdaptorFor : std::false_type {};
template <typename X, typename M>
struct AdaptorFor<optim::OptimizerAdaptor<X, M>, M> : std::true_type {
    template <typename N>
    using Rebind = optim::OptimizerAdaptor<X, N>;
};

/// Whether Learner<M, O, S, TrainItem, ValidItem> trains an ErasedModel: M's walks are
/// compiled, its validation model is itself (Dispatch's), its steps take one batch type each and
/// return the Learner's items, O is an OptimizerAdaptor of M, and its steps are not captured.
template <typename M, typename O, typename TrainItem, typename ValidItem>
concept ErasedLearning = module::detail::CompiledWalk<M> && !module::detail::SelfWalking<M> &&
                         std::same_as<module::ValidType<M>, M> && AdaptorFor<O, M>::value &&
                         (!capturable_backend<module::BackendOf<M>>()) && requires {
    typename TrainBatchOf<M>;
    typename ValidBatchOf<M>;
}
&&requires(const M& m, const TrainBatchOf<M>& batch, const ValidBatchOf<M>& vbatch) {
    { m.step(batch) } -> std::same_as<TrainOutput<TrainItem>>;
    { run_valid_step(m, vbatch) } -> std::same_as<ValidItem>;
};

/// The Learner of an ErasedModel, made and trained by these two functions, defined here and not
/// inline: where ember_dispatch compiles them (<ember/dispatch/train.hpp> declares which), a file
/// that calls them compiles two calls, not the Learner.
template <typename B, typename TrainItem, typename ValidItem, typename O, typename S>
std::shared_ptr<Learner<ErasedModel<B, TrainItem, ValidItem>, O, S, TrainItem, ValidItem>>
make_erased(LearnerCore core, ErasedModel<B, TrainItem, ValidItem> model, O optimizer, S scheduler);
/// `learner.fit(train, valid)` on ErasedLoaders.
template <typename B, typename TrainItem, typename ValidItem, typename O, typename S>
ErasedModel<B, TrainItem, ValidItem> fit_erased(
    Learner<ErasedModel<B, TrainItem, ValidItem>, O, S, TrainItem, ValidItem>& learner,
    ErasedLoader<B>& train, ErasedLoader<B>& valid);

template <typename B, typename TrainItem, typename ValidItem, typename O, typename S>
ErasedModel<B, TrainItem, ValidItem> fit_erased(
    Learner<ErasedModel<B, TrainItem, ValidItem>, O, S, TrainItem, ValidItem>& learner,
    ErasedLoader<B>& train, ErasedLoader<B>& valid) {
    return learner.fit(train, valid);
}

template <typename B, typename TrainItem, typename ValidItem, typename O, typename S>
std::shared_ptr<Learner<ErasedModel<B, TrainItem, ValidItem>, O, S, TrainItem, ValidItem>>
make_erased(LearnerCore core, ErasedModel<B, TrainItem, ValidItem> model, O optimizer,
            S scheduler) {
    return std::make_shared<
        Learner<ErasedModel<B, TrainItem, ValidItem>, O, S, TrainItem, ValidItem>>(
        std::move(core), std::move(model), std::move(optimizer), std::move(scheduler));
}

}  // namespace detail

/// The Learner of a model whose walks are compiled (Dispatch's; detail::ErasedLearning): the
/// Learner of its ErasedModel, on ErasedLoaders over the loaders fit is given.
template <typename M, typename O, typename S, typename TrainItem, typename ValidItem>
requires detail::ErasedLearning<M, O, TrainItem, ValidItem>
class Learner<M, O, S, TrainItem, ValidItem> {
    using B = module::BackendOf<M>;
    using TB = detail::TrainBatchOf<M>;
    using VB = detail::ValidBatchOf<M>;
    using Model = detail::ErasedModel<B, TrainItem, ValidItem>;
    using Of = detail::ErasedModelOf<M, TrainItem, ValidItem, TB, VB>;
    using Optim = typename detail::AdaptorFor<O, M>::template Rebind<Model>;

  public:
    /// Use LearnerBuilder::build.
    Learner(detail::LearnerCore core, M model, O optimizer, S scheduler)
        : impl_(detail::make_erased(std::move(core),
                                    Model(std::make_shared<const Of>(std::move(model))),
                                    Optim(std::move(optimizer)), std::move(scheduler))) {}

    /// As the generic Learner's fit.
    template <typename TL, typename VL>
    M fit(TL&& train_loader, VL&& valid_loader) {
        auto& train = detail::checked_loader<true>(train_loader);
        auto& valid = detail::checked_loader<false>(valid_loader);
        if constexpr (!ShardableBatch<TB, Device<B>>) {
            if (impl_->data_parallel()) detail::BatchOpsOf<B, TB>::unshardable();
        }
        auto&& tl = erase<TB>(train);
        auto&& vl = erase<VB>(valid);
        const Model trained = detail::fit_erased(*impl_, tl, vl);
        return static_cast<const Of&>(trained.model()).model;
    }

    /// As the generic Learner's.
    Interrupter interrupter() const { return impl_->interrupter(); }
    const detail::MetricHistory& history() const { return impl_->history(); }
    std::optional<std::size_t> best_checkpoint() const { return impl_->best_checkpoint(); }

  private:
    // `loader` as an ErasedLoader of batches of type Batch (itself, where it is one).
    template <typename Batch, typename L>
    static decltype(auto) erase(L& loader) {
        if constexpr (std::is_same_v<std::remove_cv_t<L>, ErasedLoader<B>>) {
            return (loader);
        } else {
            static_assert(std::constructible_from<Batch, decltype(*loader.iter().begin())>,
                          "fit: the model's step(batch) (or valid_step) takes another batch type "
                          "than the loader's");
            return ErasedLoader<B>::template of<Batch>(loader);
        }
    }

    std::shared_ptr<Learner<Model, Optim, S, TrainItem, ValidItem>> impl_;
};

}  // namespace ember::train
