#pragma once
// The Learner's training loop (included by learner.hpp).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../../collective/gradients.hpp"
#include "replica_workers.hpp"

namespace ember::train {

namespace detail {
/// The StepGraph that captures steps on backend B over batches of type Batch (void: none).
template <typename B, typename Batch>
struct StepGraphFor {
    using type = void;
};
#if defined(EMBER_CUDA)
template <typename B, typename Batch>
requires(ember::cuda::detail::CudaStack<B>&&
             ember::cuda::detail::StepInputs<Batch>) struct StepGraphFor<B, Batch> {
    using type = ember::cuda::StepGraph<Batch>;
    static std::string what(std::size_t n) {
        return "a CUDA graph of " + std::to_string(n) + " nodes";
    }
};
#endif
#if defined(EMBER_VULKAN)
template <typename B, typename Batch>
requires(ember::vulkan::detail::VulkanStack<B>&&
             ember::vulkan::detail::StepInputs<Batch>) struct StepGraphFor<B, Batch> {
    using type = ember::vulkan::StepGraph<Batch>;
    static std::string what(std::size_t n) {
        return "a Vulkan command buffer of " + std::to_string(n) + " dispatches";
    }
};
#endif
/// One split's captured steps (LearnerBuilder::capture_steps): the graph, the output of the
/// step it replays (whose tensors each replay rewrites), and what the log was told.
template <typename B, typename Batch, typename Item,
          typename G = typename StepGraphFor<B, Batch>::type>
struct CapturedSteps {
    G graph;
    std::optional<Item> pending, current;
    bool captured = false, told_shape = false, told_fallback = false;
    /// What a captured step of `n` nodes is replayed as, for the log.
    static std::string what(std::size_t n) { return StepGraphFor<B, Batch>::what(n); }
};
template <typename B, typename Batch, typename Item>
struct CapturedSteps<B, Batch, Item, void> {};
/// The step outputs of a process's replicas (`outs[r]`, of `sizes[r]` items; none where a replica
/// had an empty shard) merged into one, each weighted by its share of the items; `local` gets
/// their sum. Nullopt when no replica had items.
template <typename Item>
std::optional<Item> merge_outputs(std::vector<std::optional<Item>>& outs,
                                  const std::vector<std::size_t>& sizes, std::size_t& local) {
    std::vector<Item> present;
    std::vector<double> weights;
    local = 0;
    for (std::size_t r = 0; r < outs.size(); ++r) local += sizes[r];
    for (std::size_t r = 0; r < outs.size(); ++r) {
        if (!outs[r]) continue;
        present.push_back(std::move(*outs[r]));
        weights.push_back(double(sizes[r]) / double(local));
    }
    if (present.empty()) return std::nullopt;
    return ItemMerge<Item>::merge(std::move(present), weights);
}
/// Whether the Learner captures steps on B over batches of type Batch.
template <typename B, typename Batch>
constexpr bool captures() {
    return !std::is_void_v<typename StepGraphFor<B, Batch>::type>;
}

/// The training (`Train`) or validation loader fit is given (an object or a (shared) pointer to
/// one), checked to be a LearnerLoader.
template <bool Train, typename L>
auto& checked_loader(L& loader) {
    auto& l = deref(loader);
    if constexpr (Train)
        static_assert(LearnerLoader<std::remove_cvref_t<decltype(l)>>,
                      "fit: the training loader needs iter(), num_items() and num_batches()");
    else
        static_assert(LearnerLoader<std::remove_cvref_t<decltype(l)>>,
                      "fit: the validation loader needs iter(), num_items() and num_batches()");
    return l;
}

/// LearnerBuilder::autocast's policy for a step on the calling thread (off without it).
inline Autocast autocast_of(const LearnerSettings& o) {
    return Autocast(o.autocast.value_or(DType::BF16), o.autocast.has_value());
}

/// What a data-parallel epoch asks of the replicas' models and optimizers, their types erased
/// (the Learner's Replicas implements it), so that the epoch's loop (train_shards) is compiled
/// once per batch and step output type, not once per model type. Replica r's calls run on its
/// worker thread.
template <typename Batch, typename Item, typename IB>
class ReplicaSteps {
  public:
    /// Replica r's model's training step on its shard.
    virtual TrainOutput<Item> step(std::size_t r, const Batch& shard) = 0;
    /// A reducer of replica r's gradients over endpoint `comm` (collective::GradientReducer
    /// over its model), which backward feeds while it is attached.
    virtual std::unique_ptr<collective::detail::GradientReducerCore<IB>> reducer(
        std::size_t r, collective::Collective& comm, collective::GradientSyncOptions options) = 0;
    /// Adds `grads`, weighted by `weight`, to replica r's accumulated gradients.
    virtual void accumulate(std::size_t r, optim::GradientsParams grads, double weight) = 0;
    /// Replica r's accumulated gradients summed over the replicas (sync_gradients), and the
    /// accumulation started again.
    virtual optim::GradientsParams synced(std::size_t r, collective::Collective& comm) = 0;
    /// Replica r's optimizer step with learning rate `lr`.
    virtual void update(std::size_t r, double lr, optim::GradientsParams grads) = 0;

  protected:
    ~ReplicaSteps() = default;
};

/// One data-parallel training epoch (Learner::fit with several replicas) after the loader's
/// epoch is set and the replicas are made; false when interrupted. Each batch is split into
/// world-size shards by rank; replica r steps its shard, weights its gradients by its share of
/// the batch's items, and the replicas' sums are what every optimizer steps with: the gradient
/// of a mean loss over the whole batch, as one device computes it.
template <typename Dev, typename Batch, typename Item, typename IB, typename L, typename S>
bool train_shards(LearnerCore& core, L& loader, std::size_t epoch, const std::vector<Dev>& devices,
                  const std::vector<std::shared_ptr<collective::Collective>>& comms,
                  ReplicaWorkers& workers, ReplicaSteps<Batch, Item, IB>& steps, S& sched) {
    const LearnerSettings& o = core.settings();
    core.begin_epoch(Split::Train, epoch);
    const std::size_t n = devices.size(), world = comms[0]->world_size();
    std::size_t pending = 0, iteration = 0;
    double lr = 0;
    bool stopped = false;
    auto on_error = [&](std::size_t r, const std::string& what) { comms[r]->abort(what); };
    auto&& range = loader.iter();
    for (auto&& batch : range) {
        lr = lr_scheduler::step(sched);
        const std::size_t items = batch.num_items();
        const bool update = o.grads_accumulation == 1 || ++pending == o.grads_accumulation;
        std::vector<std::optional<Item>> outs(n);
        std::vector<std::size_t> sizes(n, 0);
        workers.run(
            [&](std::size_t r) {
                auto& comm = *comms[r];
                const std::size_t g = comm.rank();
                const std::size_t begin = items * g / world, end = items * (g + 1) / world;
                sizes[r] = end - begin;
                optim::GradientsParams grads;
                const double w = items ? double(end - begin) / double(items) : 0.0;
                // Without accumulation, each bucket's all-reduce starts as soon as backward has
                // its gradients.
                std::unique_ptr<collective::detail::GradientReducerCore<IB>> reducer;
                if (o.grads_accumulation == 1)
                    reducer = steps.reducer(r, comm, collective::GradientSyncOptions{.weight = w});
                if (end > begin) {
                    std::optional<ScopedGradientHook> hook;
                    if (reducer && o.overlap_gradient_sync) hook.emplace(*reducer);
                    auto out = [&] {
                        const auto mixed = autocast_of(o);  // this replica's thread
                        return steps.step(r, batch.shard(begin, end, devices[r]));
                    }();
                    grads = std::move(out.grads);
                    outs[r].emplace(std::move(out.item));
                }
                if (reducer) {
                    steps.update(r, lr, reducer->finish(std::move(grads)));
                    return;
                }
                steps.accumulate(r, std::move(grads), w);
                if (update) steps.update(r, lr, steps.synced(r, comm));
            },
            on_error);
        if (update) pending = 0;
        ++iteration;
        // The metrics read one output for the batch: this process's shards merged.
        std::size_t local = 0;
        const auto merged = merge_outputs(outs, sizes, local);
        if (core.step_done(Split::Train, epoch, iteration, merged ? &*merged : nullptr, lr,
                           local)) {
            stopped = true;
            break;
        }
    }
    // The last, partial accumulation is applied rather than dropped: no batch is ignored.
    if (!stopped && pending > 0)
        workers.run([&](std::size_t r) { steps.update(r, lr, steps.synced(r, *comms[r])); },
                    on_error);
    core.end_epoch(Split::Train, epoch);
    return !stopped;
}

/// What a training epoch on one device asks of the model and its optimizer, their types erased
/// (the Learner's EpochSteps implements it), so that the epoch's loop (train_epoch) is compiled
/// once per batch and step output type, not once per model type.
template <typename Batch, typename Item>
class TrainSteps {
  public:
    /// The output of the captured step run for `batch` (LearnerBuilder::capture_steps: replayed,
    /// or captured), or null: the step runs eagerly.
    virtual const Item* captured(const Batch& batch, double lr) = 0;
    /// The model's training step.
    virtual TrainOutput<Item> step(const Batch& batch) = 0;
    /// Adds `grads` to `accumulator` (gradient accumulation).
    virtual void accumulate(optim::GradientsAccumulator& accumulator,
                            optim::GradientsParams grads) = 0;
    /// The optimizer's step with learning rate `lr`.
    virtual void update(double lr, optim::GradientsParams grads) = 0;

  protected:
    ~TrainSteps() = default;
};

/// One training epoch on one device after the loader's epoch is set; false when interrupted.
template <typename Batch, typename Item, typename L, typename S>
bool train_epoch(LearnerCore& core, L& loader, std::size_t epoch, TrainSteps<Batch, Item>& steps,
                 S& sched) {
    const LearnerSettings& o = core.settings();
    core.begin_epoch(Split::Train, epoch);
    optim::GradientsAccumulator accumulator;
    std::size_t pending = 0, iteration = 0;
    double lr = 0;
    bool stopped = false;
    auto&& range = loader.iter();
    for (auto&& batch : range) {
        lr = lr_scheduler::step(sched);
        std::optional<TrainOutput<Item>> eager;
        const Item* item = steps.captured(batch, lr);
        if (item == nullptr) {
            {
                const auto mixed = autocast_of(o);
                eager.emplace(steps.step(batch));
            }
            auto& out = *eager;
            if (o.grads_accumulation > 1) {
                steps.accumulate(accumulator, std::move(out.grads));
                if (++pending == o.grads_accumulation) {
                    steps.update(lr, accumulator.grads());
                    pending = 0;
                }
            } else {
                steps.update(lr, std::move(out.grads));
            }
            item = &out.item;
        }
        ++iteration;
        if (core.step_done(Split::Train, epoch, iteration, item, lr)) {
            stopped = true;
            break;
        }
    }
    // The last, partial accumulation is applied rather than dropped: no batch is ignored.
    if (!stopped && pending > 0) steps.update(lr, accumulator.grads());
    core.end_epoch(Split::Train, epoch);
    return !stopped;
}

/// What a validation epoch asks of the validation model, its type erased (as TrainSteps).
template <typename Batch, typename Item>
class ValidSteps {
  public:
    /// The output of the captured step run for `batch`, or null (as TrainSteps::captured).
    virtual const Item* captured(const Batch& batch) = 0;
    /// The validation model's step (valid_step, else step).
    virtual Item step(const Batch& batch) = 0;

  protected:
    ~ValidSteps() = default;
};

/// One validation epoch after the loader's epoch is set; false when interrupted.
template <typename Batch, typename Item, typename L>
bool valid_epoch(LearnerCore& core, L& loader, std::size_t epoch, ValidSteps<Batch, Item>& steps) {
    const LearnerSettings& o = core.settings();
    core.begin_epoch(Split::Valid, epoch);
    std::size_t iteration = 0;
    bool stopped = false;
    auto&& range = loader.iter();
    for (auto&& batch : range) {
        std::optional<Item> eager;
        const Item* item = steps.captured(batch);
        if (item == nullptr) {
            const auto mixed = autocast_of(o);
            item = &eager.emplace(steps.step(batch));
        }
        ++iteration;
        if (core.step_done(Split::Valid, epoch, iteration, item, std::nullopt)) {
            stopped = true;
            break;
        }
    }
    core.end_epoch(Split::Valid, epoch);
    return !stopped;
}
}  // namespace detail

/// Trains a model (Burn's Learner); made by LearnerBuilder::build. What does not depend on the
/// model (the run's frame, metrics, logs, checkpoints' files) is detail::LearnerCore, compiled
/// in ember_train; this class steps the model.
template <typename M, typename O, typename S, typename TrainItem, typename ValidItem>
class Learner {
  public:
    /// Use LearnerBuilder::build.
    Learner(detail::LearnerCore core, M model, O optimizer, S scheduler)
        : core_(std::move(core)),
          model_(std::move(model)),
          optim_(std::move(optimizer)),
          sched_(std::move(scheduler)) {}

    /// Trains on `train_loader`, validating on `valid_loader` after each epoch, and returns the
    /// trained model (when interrupted: the model as it stands; when resumed: trained from the
    /// checkpoint on). Loaders may be passed as objects or (shared) pointers. ArgumentError for
    /// an empty loader, FormatError for a missing or unreadable checkpoint.
    template <typename TL, typename VL>
    M fit(TL&& train_loader, VL&& valid_loader) {
        auto& train = detail::checked_loader<true>(train_loader);
        auto& valid = detail::checked_loader<false>(valid_loader);
        using Train = std::remove_reference_t<decltype(train)>;
        using Valid = std::remove_reference_t<decltype(valid)>;
        FitTask<Train, Valid> task(*this, train, valid);
        core_.fit(task, shape_of(train), shape_of(valid));
        return task.dp ? task.dp->models[0] : std::move(task.model);
    }

    /// The interrupter of the run (shared with the builder's).
    Interrupter interrupter() const { return o().interrupter; }
    /// The epoch means of every numeric metric after the last fit:
    /// history()[split][name][epoch - 1] (NaN for epochs before a resume whose logs are gone).
    const detail::MetricHistory& history() const { return core_.history(); }
    /// The epoch whose checkpoint keep_best_checkpoint keeps (the best so far); nullopt without
    /// keep_best_checkpoint or before an epoch has a value of its metric.
    std::optional<std::size_t> best_checkpoint() const { return core_.best_checkpoint(); }

  private:
    // The Learner of an erased model (detail/erased_learner.hpp) holds one of these.
    template <typename, typename, typename, typename, typename>
    friend class Learner;

    using Backend_ = module::BackendOf<M>;

    // ---- data parallel -------------------------------------------------------------------

    using InnerBackend_ = InnerBackend<Backend_>;

    // The replicas of a data-parallel run: a model, an optimizer and a collective endpoint per
    // device, and the threads that run them; their steps for the epoch's loop
    // (detail::train_shards, compiled once whatever the model).
    template <typename Batch>
    struct Replicas final : detail::ReplicaSteps<Batch, TrainItem, InnerBackend_> {
        std::vector<Device<Backend_>> devices;
        std::vector<std::shared_ptr<collective::Collective>> comms;
        std::vector<M> models;
        std::vector<O> optims;
        std::vector<optim::GradientsAccumulator> accumulators;
        std::unique_ptr<detail::ReplicaWorkers> workers;
        bool main = true;                           // holds rank 0 (writes the checkpoints)
        bool ready = false;                         // the models are forked (prepare_replicas)
        std::optional<record::Value> optim_record;  // a resumed optimizer's state

        TrainOutput<TrainItem> step(std::size_t r, const Batch& shard) override {
            auto out = models[r].step(shard);
            static_assert(std::same_as<decltype(out), TrainOutput<TrainItem>>,
                          "fit: the model's step(batch) must return TrainOutput<TrainItem>");
            return out;
        }
        std::unique_ptr<collective::detail::GradientReducerCore<InnerBackend_>> reducer(
            std::size_t r, collective::Collective& comm,
            collective::GradientSyncOptions options) override {
            return std::make_unique<collective::GradientReducer<M>>(comm, models[r], options);
        }
        void accumulate(std::size_t r, optim::GradientsParams grads, double weight) override {
            accumulators[r].accumulate(
                models[r], collective::scale_gradients(models[r], std::move(grads), weight));
        }
        optim::GradientsParams synced(std::size_t r, collective::Collective& comm) override {
            return collective::sync_gradients(comm, models[r], accumulators[r].grads(),
                                              {.op = collective::ReduceOp::Sum});
        }
        void update(std::size_t r, double lr, optim::GradientsParams grads) override {
            models[r] = optims[r].step(lr, std::move(models[r]), std::move(grads));
        }
    };

    // Forks `dp.models[0]` (the model given to fit) to every device. Run at the start of the
    // first epoch, after the backend is seeded: lazy parameters are drawn then, in the module's
    // order (one device draws them in its first forward pass, in the order the forward pass
    // reads them: the values differ unless the model is initialised before fit). Every replica
    // then starts from rank 0's values (other processes may have drawn their own) and loads a
    // resumed optimizer state on its own device.
    template <typename Batch>
    void prepare_replicas(Replicas<Batch>& dp) {
        const M model = dp.models[0];
        model.visit([](std::string_view, const auto& p) { (void)p.val(); });
        const O optim = dp.optims[0];
        // The copies are made here, before any worker starts: a copy from rank 0's device waits
        // for that device's queue, and once rank 0 has queued its broadcast there, the queue
        // waits for the other ranks' broadcasts — a worker still copying would wait for ever
        // (NCCL on GPUs; the CPU's copies never wait).
        std::vector<std::optional<M>> forks(dp.devices.size());
        for (std::size_t r = 1; r < forks.size(); ++r) forks[r].emplace(model.fork(dp.devices[r]));
        dp.workers->run(
            [&](std::size_t r) {
                const M& m = r == 0 ? model : *forks[r];
                dp.models[r] = collective::broadcast_module(*dp.comms[r], m, 0);
                if constexpr (requires { optim.load_record(*dp.optim_record, dp.devices[r]); }) {
                    if (dp.optim_record)
                        dp.optims[r] = optim.load_record(*dp.optim_record, dp.devices[r]);
                }
            },
            [&](std::size_t r, const std::string& what) { dp.comms[r]->abort(what); });
        dp.ready = true;
    }

    bool data_parallel() const {
        const auto* devs = std::any_cast<std::vector<Device<Backend_>>>(&o().devices);
        return !o().collectives.empty() || (devs != nullptr && devs->size() > 1);
    }

    template <typename Batch>
    Replicas<Batch> make_replicas(const M& model, const O& optim,
                                  const std::optional<record::Value>& optim_record) {
        if constexpr (!ShardableBatch<Batch, Device<Backend_>>) {
            EMBER_FAIL(Argument,
                       "Learner::fit: training on several devices splits every batch, but the "
                       "batch type has no num_items() and shard(begin, end, device) (see "
                       "ShardableBatch in ember/train/output.hpp)");
        } else if constexpr (!MergeableItem<TrainItem>) {
            EMBER_FAIL(Argument,
                       "Learner::fit: training on several devices merges the replicas' step "
                       "outputs, but ember::train::ItemMerge has no specialisation for this "
                       "output type");
        } else {
            Replicas<Batch> dp;
            const auto* devs = std::any_cast<std::vector<Device<Backend_>>>(&o().devices);
            dp.devices = *devs;
            const std::size_t n = dp.devices.size();
            dp.comms = core_.replica_comms(n);  // and the log's line
            dp.main = false;
            for (const auto& c : dp.comms) dp.main = dp.main || c->rank() == 0;
            // Constructed rather than resized: a vector's fill constructor is a smaller
            // function than its _M_fill_insert, compiled once per model type.
            dp.models = std::vector<M>(n, model);
            dp.optims = std::vector<O>(n, optim);
            dp.accumulators = std::vector<optim::GradientsAccumulator>(n);
            dp.workers = std::make_unique<detail::ReplicaWorkers>(n);
            // The replicas are made from `model` when the first epoch starts (prepare_replicas).
            if (optim_record) dp.optim_record.emplace(*optim_record);
            return dp;
        }
    }

    // One data-parallel training epoch (detail::train_shards); false when interrupted.
    template <typename L, typename Batch>
    bool train_epoch_parallel(L& loader, std::size_t epoch, Replicas<Batch>& dp, S& sched) {
        if constexpr (ShardableBatch<Batch, Device<Backend_>> && MergeableItem<TrainItem>) {
            Backend_::seed(core_.seed_of(epoch, Split::Train));
            set_epoch(loader, epoch);
            if (!dp.ready) prepare_replicas(dp);
            return detail::train_shards(core_, loader, epoch, dp.devices, dp.comms, *dp.workers, dp,
                                        sched);
        } else {  // make_replicas has refused these types already
            EMBER_FAIL(Argument, "Learner::fit: data-parallel training needs shardable batches");
        }
    }

    template <typename L>
    static void set_epoch(L& loader, std::size_t epoch) {
        if constexpr (requires { loader.set_epoch(epoch); }) loader.set_epoch(epoch);
    }

    // A training epoch's steps on one device (detail::TrainSteps): the model, its optimizer and
    // the epoch's captured steps.
    template <typename Batch>
    struct EpochSteps final : detail::TrainSteps<Batch, TrainItem> {
        EpochSteps(Learner& l, M& model, O& optim) : l(l), model(model), optim(optim) {}
        const TrainItem* captured(const Batch& batch, double lr) override {
            if constexpr (detail::captures<Backend_, Batch>()) {
                if (l.o().capture_steps) return &l.captured_train(graph, batch, lr, model, optim);
            }
            (void)batch, (void)lr;
            return nullptr;
        }
        TrainOutput<TrainItem> step(const Batch& batch) override {
            static_assert(std::same_as<std::remove_cvref_t<decltype(model.step(batch))>,
                                       TrainOutput<TrainItem>>,
                          "fit: the model's step(batch) must return TrainOutput<TrainItem>");
            return model.step(batch);
        }
        void accumulate(optim::GradientsAccumulator& accumulator,
                        optim::GradientsParams grads) override {
            accumulator.accumulate(model, std::move(grads));
        }
        void update(double lr, optim::GradientsParams grads) override {
            model = optim.step(lr, std::move(model), std::move(grads));
        }

        Learner& l;
        M& model;
        O& optim;
        [[maybe_unused]] detail::CapturedSteps<Backend_, Batch, TrainItem> graph;
    };

    // One training epoch (detail::train_epoch); false when interrupted.
    template <typename L>
    bool train_epoch(L& loader, std::size_t epoch, M& model, O& optim, S& sched) {
        Backend_::seed(core_.seed_of(epoch, Split::Train));
        set_epoch(loader, epoch);
        using Batch = std::remove_cvref_t<decltype(*loader.iter().begin())>;
        check_capturable<Batch>();
        EpochSteps<Batch> steps(*this, model, optim);
        return detail::train_epoch(core_, loader, epoch, steps, sched);
    }

    // capture_steps over batches the captured steps cannot bind: said at fit, not at build
    // (the batch type is the loader's).
    template <typename Batch>
    void check_capturable() const {
        if (!o().capture_steps) return;
        EMBER_CHECK((detail::captures<Backend_, Batch>()), Argument,
                    "Learner::fit: capture_steps binds each batch's tensors into the captured "
                    "step: declare the batch's fields with EMBER_DETAIL_FIELDS (ember/detail/"
                    "fields.hpp)");
    }

    // One training step through the captured graph (LearnerBuilder::capture_steps). The step's
    // output lands in `pending` and becomes `current` after the step: the previous output goes
    // then, outside the capture (a tensor from before a capture freed inside it would make the
    // graph not replayable).
    template <typename B, typename Batch, typename G>
    const TrainItem& captured_train(detail::CapturedSteps<B, Batch, TrainItem, G>& c,
                                    const Batch& batch, double lr, M& model, O& optim) {
        c.pending.reset();
        const auto ran = c.graph.run(
            batch,
            [&](const Batch& b) {
                auto out = [&] {
                    const auto mixed = autocast_guard();  // its casts are captured too
                    return model.step(b);
                }();
                model = optim.step(lr, std::move(model), std::move(out.grads));
                c.pending.emplace(std::move(out.item));
            },
            lr);
        if (ran != G::Ran::Replayed) {
            c.current = std::move(c.pending);
        } else if constexpr (requires { optim.add_steps(std::int64_t{1}); }) {
            optim.add_steps(1);  // the replay's update, which the host code did not see
        }
        tell(c, ran, "training");
        return *c.current;
    }

    // LearnerBuilder::autocast's policy for a step on the calling thread (off without it).
    Autocast autocast_guard() const { return detail::autocast_of(o()); }

    // One validation step through the captured graph (as captured_train, without an update).
    template <typename B, typename Batch, typename G, typename VM>
    const ValidItem& captured_valid(detail::CapturedSteps<B, Batch, ValidItem, G>& c,
                                    const Batch& batch, const VM& vmodel) {
        c.pending.reset();
        const auto ran = c.graph.run(batch, [&](const Batch& b) {
            const auto mixed = autocast_guard();
            c.pending.emplace(run_valid_step(vmodel, b));
        });
        if (ran != G::Ran::Replayed) c.current = std::move(c.pending);
        tell(c, ran, "validation");
        return *c.current;
    }

    // Says once what capture_steps did: the first capture, a step of another shape run eagerly,
    // and a step that cannot be replayed.
    template <typename C, typename R>
    void tell(C& c, R ran, const char* split) {
        using Ran = decltype(ran);
        if (ran == Ran::Captured && !c.captured && c.graph.graph()) {
            c.captured = true;
            log(std::string("capture_steps: the ") + split + " step is replayed as " +
                C::what(c.graph.graph().num_nodes()));
        } else if (ran == Ran::Eager && c.captured && !c.told_shape && c.graph.fallback().empty()) {
            c.told_shape = true;
            log(std::string("capture_steps: a ") + split +
                " batch of another shape than the captured one (a short last batch) runs eagerly");
        }
        if (!c.graph.fallback().empty() && !c.told_fallback) {
            c.told_fallback = true;
            log(std::string("capture_steps: ") + split +
                " steps run eagerly: " + c.graph.fallback());
        }
    }

    // A validation epoch's steps (detail::ValidSteps): the validation model and the epoch's
    // captured steps.
    template <typename VM, typename Batch>
    struct ValidEpochSteps final : detail::ValidSteps<Batch, ValidItem> {
        using VB = module::BackendOf<VM>;
        ValidEpochSteps(Learner& l, VM vmodel) : l(l), vmodel(std::move(vmodel)) {}
        const ValidItem* captured(const Batch& batch) override {
            if constexpr (detail::captures<VB, Batch>()) {
                if (l.o().capture_steps) return &l.captured_valid(graph, batch, vmodel);
            }
            (void)batch;
            return nullptr;
        }
        ValidItem step(const Batch& batch) override {
            static_assert(std::same_as<decltype(run_valid_step(vmodel, batch)), ValidItem>,
                          "fit: the validation model's valid_step(batch) (or step(batch)) must "
                          "return ValidItem");
            return run_valid_step(vmodel, batch);
        }

        Learner& l;
        const VM vmodel;
        [[maybe_unused]] detail::CapturedSteps<VB, Batch, ValidItem> graph;
    };

    // One validation epoch (detail::valid_epoch); false when interrupted.
    template <typename L>
    bool valid_epoch(L& loader, std::size_t epoch, const M& model) {
        Backend_::seed(core_.seed_of(epoch, Split::Valid));
        set_epoch(loader, epoch);
        using Batch = std::remove_cvref_t<decltype(*loader.iter().begin())>;
        ValidEpochSteps<std::remove_cvref_t<decltype(model.valid())>, Batch> steps(*this,
                                                                                   model.valid());
        return detail::valid_epoch(core_, loader, epoch, steps);
    }

    void log(const std::string& message) { core_.log(message); }
    const LearnerSettings& o() const { return core_.settings(); }

    // A loader's counts, as the core reads them.
    template <typename L>
    static detail::LoaderShape shape_of(L& loader) {
        if constexpr (requires { loader.loader_shape(); }) return loader.loader_shape();
        detail::LoaderShape s{loader.num_items(), loader.num_batches(), std::nullopt};
        if constexpr (requires { loader.batch_size(); })
            s.batch_size = std::size_t(loader.batch_size());
        return s;
    }

    // One fit: its model, optimizer and scheduler, its loaders, and its replicas when it is
    // data-parallel; the core calls it back for what needs the model.
    template <typename TL, typename VL>
    struct FitTask final : detail::LearnerTask {
        using Batch = std::remove_cvref_t<decltype(*std::declval<TL&>().iter().begin())>;
        FitTask(Learner& l, TL& train, VL& valid)
            : l(l), train(train), valid(valid), model(l.model_), optim(l.optim_), sched(l.sched_) {}
        void resume(std::size_t n) override {
            model = model.load_record(l.core_.load_checkpoint("model", n));
            // Emplaced, not assigned: a record's assignment is a large function.
            optim_record.emplace(l.core_.load_checkpoint("optim", n));  // again on each replica
            optim = optim.load_record(*optim_record);
            sched = sched.load_record(l.core_.load_checkpoint("scheduler", n));
        }
        void start() override {
            if (!l.data_parallel()) return;
            dp.emplace(l.template make_replicas<Batch>(model, optim, optim_record));
        }
        bool train_epoch(std::size_t epoch) override {
            return dp ? l.train_epoch_parallel(train, epoch, *dp, sched)
                      : l.train_epoch(train, epoch, model, optim, sched);
        }
        bool valid_epoch(std::size_t epoch) override {
            return l.valid_epoch(valid, epoch, current_model());
        }
        bool writes() const override { return !dp || dp->main; }
        record::Value record_of(const char* what) const override {
            const std::string_view w(what);
            if (w == "model") return current_model().into_record();
            if (w == "optim") return (dp ? dp->optims[0] : optim).to_record();
            return sched.to_record();
        }

        // The trained model: replica 0's in a data-parallel run (every replica holds the same;
        // read in place rather than copied after each epoch).
        const M& current_model() const { return dp ? dp->models[0] : model; }

        Learner& l;
        TL& train;
        VL& valid;
        M model;
        O optim;
        S sched;
        std::optional<record::Value> optim_record;  // loaded again on each replica's device
        std::optional<Replicas<Batch>> dp;
    };

    detail::LearnerCore core_;
    M model_;
    O optim_;
    S sched_;
};

}  // namespace ember::train

#include "erased_learner.hpp"
