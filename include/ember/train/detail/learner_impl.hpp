#pragma once
// The Learner's training loop (included by learner.hpp).
#include <cstdio>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <vector>

#include "../../collective/gradients.hpp"
#include "../../collective/thread.hpp"
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
/// Whether the Learner captures steps on B over batches of type Batch.
template <typename B, typename Batch>
constexpr bool captures() {
    return !std::is_void_v<typename StepGraphFor<B, Batch>::type>;
}
}  // namespace detail

/// Trains a model (Burn's Learner); made by LearnerBuilder::build.
template <typename M, typename O, typename S, typename TrainItem, typename ValidItem>
class Learner {
  public:
    /// Use LearnerBuilder::build.
    Learner(LearnerOptions<TrainItem, ValidItem> options, M model, O optimizer, S scheduler)
        : o_(std::move(options)),
          model_(std::move(model)),
          optim_(std::move(optimizer)),
          sched_(std::move(scheduler)) {}

    /// Trains on `train_loader`, validating on `valid_loader` after each epoch, and returns the
    /// trained model (when interrupted: the model as it stands; when resumed: trained from the
    /// checkpoint on). Loaders may be passed as objects or (shared) pointers. ArgumentError for
    /// an empty loader, FormatError for a missing or unreadable checkpoint.
    template <typename TL, typename VL>
    M fit(TL&& train_loader, VL&& valid_loader) {
        auto& train = detail::deref(train_loader);
        auto& valid = detail::deref(valid_loader);
        static_assert(LearnerLoader<std::remove_cvref_t<decltype(train)>>,
                      "fit: the training loader needs iter(), num_items() and num_batches()");
        static_assert(LearnerLoader<std::remove_cvref_t<decltype(valid)>>,
                      "fit: the validation loader needs iter(), num_items() and num_batches()");
        EMBER_CHECK(train.num_batches() > 0, Argument,
                    "Learner::fit: the training loader is "
                    "empty (",
                    train.num_items(), " items, 0 batches)");
        EMBER_CHECK(valid.num_batches() > 0, Argument,
                    "Learner::fit: the validation loader is "
                    "empty (",
                    valid.num_items(), " items, 0 batches)");

        o_.interrupter.reset();
        M model = model_;
        O optim = optim_;
        S sched = sched_;
        history_.clear();
        std::size_t first = 1;
        std::optional<record::Value> optim_record;  // loaded again on each replica's device
        // What killed runs left: temporaries, checkpoints without their manifest.
        if (o_.lock) detail::clean_artifacts(o_.artifact_dir);
        std::optional<std::size_t> resume_from = o_.checkpoint;
        if (!resume_from && o_.resume) resume_from = latest_checkpoint(o_.artifact_dir);
        EMBER_CHECK(!resume_from || *resume_from <= o_.num_epochs, Argument,
                    "Learner::fit: the newest checkpoint in ", o_.artifact_dir.string(), " is ",
                    resume_from.value_or(0), ", beyond num_epochs ", o_.num_epochs);
        if (resume_from) {
            const std::size_t n = *resume_from;
            detail::check_checkpoint(checkpoint_dir(), n, checkpoint_files(n));
            model = model.load_record(load_checkpoint("model", n));
            optim_record = load_checkpoint("optim", n);
            optim = optim.load_record(*optim_record);
            sched = sched.load_record(load_checkpoint("scheduler", n));
            first = n + 1;
            restore_history(n, train, valid);
            log("resumed from checkpoint " + std::to_string(n) + " in " + o_.artifact_dir.string());
        } else {
            log("training for " + std::to_string(o_.num_epochs) + " epochs, artifacts in " +
                o_.artifact_dir.string());
        }
        std::optional<detail::EarlyStopper> stopper;
        if (o_.early_stopping) {
            const auto& es = *o_.early_stopping;
            stopper.emplace(es.direction, es.min_delta, es.patience);
            auto& h = history_[es.split][es.metric];
            for (std::size_t e = 1; e < first; ++e)
                if (e <= h.size() && !std::isnan(h[e - 1])) stopper->update(e, h[e - 1]);
        }

        detail::SigintGuard guard(o_.interrupter);
        struct RunEnd {  // the renderer restores the terminal however fit leaves
            MetricsRenderer& r;
            ~RunEnd() { r.on_run_end(); }
        } run_end{*o_.renderer};

        std::optional<Replicas> dp;
        if (data_parallel()) {
            using Batch = std::remove_cvref_t<decltype(*train.iter().begin())>;
            dp.emplace(make_replicas<Batch>(model, optim, optim_record));
        }

        std::size_t done = first - 1;
        for (std::size_t epoch = first; epoch <= o_.num_epochs; ++epoch) {
            const bool trained = dp ? train_epoch_parallel(train, epoch, *dp, sched)
                                    : train_epoch(train, epoch, model, optim, sched);
            if (dp) {  // replica 0 is validated and checkpointed; every replica holds the same
                model = dp->models[0];
                optim = dp->optims[0];
            }
            if (!trained) {
                log("interrupted in epoch " + std::to_string(epoch) +
                    " (training); resume "
                    "from checkpoint " +
                    std::to_string(epoch - 1));
                break;
            }
            if (!valid_epoch(valid, epoch, model)) {
                log("interrupted in epoch " + std::to_string(epoch) +
                    " (validation); resume "
                    "from checkpoint " +
                    std::to_string(epoch - 1));
                break;
            }
            done = epoch;
            if (!dp || dp->main) save_checkpoint(epoch, model, optim, sched);
            if (o_.report && (!dp || dp->main)) write_report(o_.artifact_dir);
            log("epoch " + std::to_string(epoch) + "/" + std::to_string(o_.num_epochs) +
                " train: " + detail::format_epoch(history_[Split::Train], epoch) +
                " | valid: " + detail::format_epoch(history_[Split::Valid], epoch));
            if (stopper) {
                const auto& es = *o_.early_stopping;
                const auto& h = history_[es.split][es.metric];
                if (stopper->update(epoch, h[epoch - 1]) && epoch < o_.num_epochs) {
                    log("early stopping after epoch " + std::to_string(epoch) + ": " + es.metric +
                        " has not improved since epoch " + std::to_string(stopper->best_epoch()));
                    break;
                }
            }
        }
        // Once more after the loop: an interrupted epoch's logged iterations join the curves.
        if (o_.report && (!dp || dp->main) && done < o_.num_epochs) write_report(o_.artifact_dir);
        if (o_.summary) {
            const std::string s = detail::format_summary(history_, done);
            std::cout << s << std::flush;
            log(s);
        }
        return model;
    }

    /// The interrupter of the run (shared with the builder's).
    Interrupter interrupter() const { return o_.interrupter; }
    /// The epoch means of every numeric metric after the last fit:
    /// history()[split][name][epoch - 1] (NaN for epochs before a resume whose logs are gone).
    const detail::MetricHistory& history() const { return history_; }
    /// The epoch whose checkpoint keep_best_checkpoint keeps (the best so far); nullopt without
    /// keep_best_checkpoint or before an epoch has a value of its metric.
    std::optional<std::size_t> best_checkpoint() const {
        std::size_t n = 0;
        for (const auto& [split, metrics] : history_)
            for (const auto& [name, v] : metrics) n = std::max(n, v.size());
        return best_epoch(n);
    }

  private:
    using Backend_ = module::BackendOf<M>;

    // ---- data parallel -------------------------------------------------------------------

    // The replicas of a data-parallel run: a model, an optimizer and a collective endpoint per
    // device, and the threads that run them.
    struct Replicas {
        std::vector<Device<Backend_>> devices;
        std::vector<std::shared_ptr<collective::Collective>> comms;
        std::vector<M> models;
        std::vector<O> optims;
        std::vector<optim::GradientsAccumulator> accumulators;
        std::unique_ptr<detail::ReplicaWorkers> workers;
        bool main = true;                           // holds rank 0 (writes the checkpoints)
        bool ready = false;                         // the models are forked (prepare_replicas)
        std::optional<record::Value> optim_record;  // a resumed optimizer's state
    };

    // Forks `dp.models[0]` (the model given to fit) to every device. Run at the start of the
    // first epoch, after the backend is seeded: lazy parameters are drawn then, in the module's
    // order (one device draws them in its first forward pass, in the order the forward pass
    // reads them: the values differ unless the model is initialised before fit). Every replica
    // then starts from rank 0's values (other processes may have drawn their own) and loads a
    // resumed optimizer state on its own device.
    void prepare_replicas(Replicas& dp) {
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
        const auto* devs = std::any_cast<std::vector<Device<Backend_>>>(&o_.devices);
        return !o_.collectives.empty() || (devs != nullptr && devs->size() > 1);
    }

    template <typename Batch>
    Replicas make_replicas(const M& model, const O& optim,
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
            Replicas dp;
            const auto* devs = std::any_cast<std::vector<Device<Backend_>>>(&o_.devices);
            dp.devices = *devs;
            const std::size_t n = dp.devices.size();
            if (o_.collectives.empty()) {
                for (auto& c : collective::ThreadCollective::group(n))
                    dp.comms.emplace_back(std::move(c));
            } else {
                dp.comms = o_.collectives;
            }
            dp.main = false;
            for (const auto& c : dp.comms) dp.main = dp.main || c->rank() == 0;
            dp.models.resize(n, model);
            dp.optims.resize(n, optim);
            dp.accumulators.resize(n);
            dp.workers = std::make_unique<detail::ReplicaWorkers>(n);
            // The replicas are made from `model` when the first epoch starts (prepare_replicas).
            dp.optim_record = optim_record;
            log("data-parallel training on " + std::to_string(n) + " local replica(s) of " +
                std::to_string(dp.comms[0]->world_size()) + " (" + dp.comms[0]->name() + ")");
            return dp;
        }
    }

    // One data-parallel training epoch; false when interrupted. Each batch is split into
    // world-size shards by rank; replica r steps its shard, weights its gradients by its share
    // of the batch's items, and the replicas' sums are what every optimizer steps with: the
    // gradient of a mean loss over the whole batch, as one device computes it.
    template <typename L>
    bool train_epoch_parallel(L& loader, std::size_t epoch, Replicas& dp, S& sched) {
        using Batch = std::remove_cvref_t<decltype(*loader.iter().begin())>;
        if constexpr (ShardableBatch<Batch, Device<Backend_>> && MergeableItem<TrainItem>)
            return train_shards(loader, epoch, dp, sched);
        else  // make_replicas has refused these types already
            EMBER_FAIL(Argument, "Learner::fit: data-parallel training needs shardable batches");
    }

    template <typename L>
    bool train_shards(L& loader, std::size_t epoch, Replicas& dp, S& sched) {
        Backend_::seed(detail::epoch_seed(o_.seed, epoch, Split::Train));
        set_epoch(loader, epoch);
        if (!dp.ready) prepare_replicas(dp);
        for (auto& s : o_.train_metrics) s->clear();
        o_.train_logger->start_epoch(epoch);
        std::map<std::string, std::pair<double, std::size_t>> sums;
        const std::size_t n = dp.models.size(), world = dp.comms[0]->world_size();
        std::size_t pending = 0, iteration = 0;
        double lr = 0;
        bool stopped = false;
        const std::size_t nb = loader.num_batches();
        auto on_error = [&](std::size_t r, const std::string& what) { dp.comms[r]->abort(what); };
        auto step = [&](std::size_t r, optim::GradientsParams grads) {
            dp.models[r] = dp.optims[r].step(lr, std::move(dp.models[r]), std::move(grads));
        };
        auto&& range = loader.iter();
        for (auto&& batch : range) {
            lr = lr_scheduler::step(sched);
            const std::size_t items = batch.num_items();
            const bool update = o_.grads_accumulation == 1 || ++pending == o_.grads_accumulation;
            std::vector<std::optional<TrainItem>> outs(n);
            std::vector<std::size_t> sizes(n, 0);
            dp.workers->run(
                [&](std::size_t r) {
                    auto& comm = *dp.comms[r];
                    const std::size_t g = comm.rank();
                    const std::size_t begin = items * g / world, end = items * (g + 1) / world;
                    sizes[r] = end - begin;
                    optim::GradientsParams grads;
                    const double w = items ? double(end - begin) / double(items) : 0.0;
                    // Without accumulation, each bucket's all-reduce starts as soon as backward
                    // has its gradients.
                    std::optional<collective::GradientReducer<M>> reducer;
                    if (o_.grads_accumulation == 1)
                        reducer.emplace(comm, dp.models[r],
                                        collective::GradientSyncOptions{.weight = w});
                    if (end > begin) {
                        std::optional<ScopedGradientHook> hook;
                        if (reducer && o_.overlap_gradient_sync) hook.emplace(*reducer);
                        auto out = [&] {
                            const auto mixed = autocast_guard();  // this replica's thread
                            return dp.models[r].step(batch.shard(begin, end, dp.devices[r]));
                        }();
                        static_assert(std::same_as<decltype(out), TrainOutput<TrainItem>>,
                                      "fit: the model's step(batch) must return "
                                      "TrainOutput<TrainItem>");
                        grads = std::move(out.grads);
                        outs[r].emplace(std::move(out.item));
                    }
                    if (reducer) {
                        step(r, reducer->finish(std::move(grads)));
                        return;
                    }
                    dp.accumulators[r].accumulate(
                        dp.models[r],
                        collective::scale_gradients(dp.models[r], std::move(grads), w));
                    if (update)
                        step(r, collective::sync_gradients(comm, dp.models[r],
                                                           dp.accumulators[r].grads(),
                                                           {.op = collective::ReduceOp::Sum}));
                },
                on_error);
            if (update) pending = 0;
            ++iteration;
            TrainingProgress p{epoch,
                               o_.num_epochs,
                               iteration,
                               items_after(loader, iteration),
                               loader.num_items(),
                               (epoch - 1) * nb + iteration};
            // The metrics read one output for the batch: this process's shards merged.
            std::vector<TrainItem> present;
            std::vector<double> weights;
            std::size_t local = 0;
            for (std::size_t r = 0; r < n; ++r) local += sizes[r];
            for (std::size_t r = 0; r < n; ++r) {
                if (!outs[r]) continue;
                present.push_back(std::move(*outs[r]));
                weights.push_back(double(sizes[r]) / double(local));
            }
            if (!present.empty()) {
                const TrainItem merged = ItemMerge<TrainItem>::merge(std::move(present), weights);
                report(o_.train_metrics, merged, MetricMetadata{p, lr}, local, Split::Train,
                       *o_.train_logger, sums);
            }
            o_.renderer->render_train(p);
            if (o_.interrupter.should_stop()) {
                stopped = true;
                break;
            }
        }
        // The last, partial accumulation is applied rather than dropped: no batch is ignored.
        if (!stopped && pending > 0)
            dp.workers->run(
                [&](std::size_t r) {
                    step(r, collective::sync_gradients(*dp.comms[r], dp.models[r],
                                                       dp.accumulators[r].grads(),
                                                       {.op = collective::ReduceOp::Sum}));
                },
                on_error);
        end_epoch(Split::Train, epoch, sums);
        return !stopped;
    }

    template <typename L>
    static std::size_t items_after(L& loader, std::size_t iteration) {
        const std::size_t n = loader.num_items(), b = loader.num_batches();
        if (iteration >= b) return n;
        if constexpr (requires { loader.batch_size(); }) {
            return std::min<std::size_t>(n, iteration * std::size_t(loader.batch_size()));
        } else {
            // Batches of equal size but the last: exact when that size is ⌈n / b⌉.
            return std::min(n, iteration * ((n + b - 1) / b));
        }
    }

    // Items in batch `iteration` (from 1).
    template <typename L>
    static std::size_t batch_items(L& loader, std::size_t iteration) {
        return items_after(loader, iteration) - items_after(loader, iteration - 1);
    }

    template <typename L>
    static void set_epoch(L& loader, std::size_t epoch) {
        if constexpr (requires { loader.set_epoch(epoch); }) loader.set_epoch(epoch);
    }

    template <typename Item>
    void report(std::vector<std::shared_ptr<detail::MetricSlot<Item>>>& slots, const Item& item,
                const MetricMetadata& md, std::size_t batch_items, Split split,
                MetricLogger& logger, std::map<std::string, std::pair<double, std::size_t>>& sums) {
        for (auto& slot : slots) {
            MetricEntry e = slot->update(item, md);
            logger.log(e);
            if (slot->numeric && e.numeric) {
                // An epoch's value is the mean over its items, as PyTorch users compute it (a
                // short last batch weighs what its items do).
                auto& [sum, count] = sums[e.name];
                sum += *e.numeric * double(batch_items);
                count += batch_items;
                // What renderers show as the epoch's mean is what history() will hold.
                if (count) e.epoch_mean = sum / double(count);
            }
            if (!slot->plotted) e.numeric.reset(), e.epoch_mean.reset();
            if (split == Split::Train)
                o_.renderer->update_train(e);
            else
                o_.renderer->update_valid(e);
        }
    }

    void end_epoch(Split split, std::size_t epoch,
                   const std::map<std::string, std::pair<double, std::size_t>>& sums) {
        auto& h = history_[split];
        for (const auto& [name, sc] : sums) {
            auto& v = h[name];
            v.resize(epoch, std::numeric_limits<double>::quiet_NaN());
            v[epoch - 1] = sc.second ? sc.first / double(sc.second) : 0.0;
        }
        (split == Split::Train ? o_.train_logger : o_.valid_logger)->end_epoch(epoch);
        o_.renderer->on_epoch_end(split, epoch);
    }

    // One training epoch; false when interrupted.
    template <typename L>
    bool train_epoch(L& loader, std::size_t epoch, M& model, O& optim, S& sched) {
        Backend_::seed(detail::epoch_seed(o_.seed, epoch, Split::Train));
        set_epoch(loader, epoch);
        for (auto& s : o_.train_metrics) s->clear();
        o_.train_logger->start_epoch(epoch);
        std::map<std::string, std::pair<double, std::size_t>> sums;
        optim::GradientsAccumulator accumulator;
        std::size_t pending = 0, iteration = 0;
        double lr = 0;
        bool stopped = false;
        const std::size_t nb = loader.num_batches();
        auto&& range = loader.iter();
        using Batch = std::remove_cvref_t<decltype(*range.begin())>;
        constexpr bool kCapture = detail::captures<Backend_, Batch>();
        [[maybe_unused]] detail::CapturedSteps<Backend_, Batch, TrainItem> captured;
        check_capturable<Batch>();
        for (auto&& batch : range) {
            lr = lr_scheduler::step(sched);
            std::optional<TrainOutput<TrainItem>> eager;
            const TrainItem* item = nullptr;
            if constexpr (kCapture) {
                if (o_.capture_steps) item = &captured_train(captured, batch, lr, model, optim);
            }
            if (item == nullptr) {
                {
                    const auto mixed = autocast_guard();
                    eager.emplace(model.step(batch));
                }
                auto& out = *eager;
                static_assert(std::same_as<std::remove_cvref_t<decltype(model.step(batch))>,
                                           TrainOutput<TrainItem>>,
                              "fit: the model's step(batch) must return TrainOutput<TrainItem>");
                if (o_.grads_accumulation > 1) {
                    accumulator.accumulate(model, std::move(out.grads));
                    if (++pending == o_.grads_accumulation) {
                        model = optim.step(lr, std::move(model), accumulator.grads());
                        pending = 0;
                    }
                } else {
                    model = optim.step(lr, std::move(model), std::move(out.grads));
                }
                item = &out.item;
            }
            ++iteration;
            TrainingProgress p{epoch,
                               o_.num_epochs,
                               iteration,
                               items_after(loader, iteration),
                               loader.num_items(),
                               (epoch - 1) * nb + iteration};
            report(o_.train_metrics, *item, MetricMetadata{p, lr}, batch_items(loader, iteration),
                   Split::Train, *o_.train_logger, sums);
            o_.renderer->render_train(p);
            if (o_.interrupter.should_stop()) {
                stopped = true;
                break;
            }
        }
        // The last, partial accumulation is applied rather than dropped: no batch is ignored.
        if (!stopped && pending > 0) model = optim.step(lr, std::move(model), accumulator.grads());
        end_epoch(Split::Train, epoch, sums);
        return !stopped;
    }

    // capture_steps over batches the captured steps cannot bind: said at fit, not at build
    // (the batch type is the loader's).
    template <typename Batch>
    void check_capturable() const {
        if (!o_.capture_steps) return;
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
    Autocast autocast_guard() const {
        return Autocast(o_.autocast.value_or(DType::BF16), o_.autocast.has_value());
    }

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

    // One validation epoch; false when interrupted.
    template <typename L>
    bool valid_epoch(L& loader, std::size_t epoch, const M& model) {
        Backend_::seed(detail::epoch_seed(o_.seed, epoch, Split::Valid));
        set_epoch(loader, epoch);
        for (auto& s : o_.valid_metrics) s->clear();
        o_.valid_logger->start_epoch(epoch);
        std::map<std::string, std::pair<double, std::size_t>> sums;
        const auto vmodel = model.valid();
        std::size_t iteration = 0;
        bool stopped = false;
        const std::size_t nb = loader.num_batches();
        auto&& range = loader.iter();
        using Batch = std::remove_cvref_t<decltype(*range.begin())>;
        using VB = module::BackendOf<std::remove_cvref_t<decltype(vmodel)>>;
        constexpr bool kCapture = detail::captures<VB, Batch>();
        [[maybe_unused]] detail::CapturedSteps<VB, Batch, ValidItem> captured;
        for (auto&& batch : range) {
            static_assert(std::same_as<decltype(run_valid_step(vmodel, batch)), ValidItem>,
                          "fit: the validation model's valid_step(batch) (or step(batch)) must "
                          "return ValidItem");
            std::optional<ValidItem> eager;
            const ValidItem* item_ptr = nullptr;
            if constexpr (kCapture) {
                if (o_.capture_steps) item_ptr = &captured_valid(captured, batch, vmodel);
            }
            if (item_ptr == nullptr) {
                const auto mixed = autocast_guard();
                item_ptr = &eager.emplace(run_valid_step(vmodel, batch));
            }
            const ValidItem& item = *item_ptr;
            ++iteration;
            TrainingProgress p{epoch,
                               o_.num_epochs,
                               iteration,
                               items_after(loader, iteration),
                               loader.num_items(),
                               epoch * nb};
            report(o_.valid_metrics, item, MetricMetadata{p, std::nullopt},
                   batch_items(loader, iteration), Split::Valid, *o_.valid_logger, sums);
            o_.renderer->render_valid(p);
            if (o_.interrupter.should_stop()) {
                stopped = true;
                break;
            }
        }
        end_epoch(Split::Valid, epoch, sums);
        return !stopped;
    }

    std::filesystem::path checkpoint_dir() const { return o_.artifact_dir / "checkpoint"; }
    std::filesystem::path checkpoint_path(const char* what, std::size_t epoch) const {
        return checkpoint_dir() / (std::string(what) + "-" + std::to_string(epoch));
    }
    // The record files of checkpoint `epoch`, with the recorder's extension.
    std::vector<std::filesystem::path> checkpoint_files(std::size_t epoch) const {
        std::vector<std::filesystem::path> out;
        for (const char* what : {"model", "optim", "scheduler"})
            out.push_back(o_.checkpointer->file_path(checkpoint_path(what, epoch)));
        return out;
    }

    record::Value load_checkpoint(const char* what, std::size_t epoch) const {
        const auto file = o_.checkpointer->file_path(checkpoint_path(what, epoch));
        EMBER_CHECK(std::filesystem::exists(file), Format,
                    "Learner::fit: cannot resume from "
                    "checkpoint ",
                    epoch, ": '", file.string(), "' does not exist");
        return o_.checkpointer->load(file);
    }

    // The three records, then the manifest that makes the checkpoint complete (each file
    // written atomically, the directory synced after the renames); a kill anywhere in between
    // leaves the previous checkpoint the newest complete one.
    void save_checkpoint(std::size_t epoch, const M& model, const O& optim, const S& sched) {
        if (!o_.checkpointer) return;
        std::filesystem::create_directories(checkpoint_dir());
        const auto& c = *o_.checkpointer;
        c.save(model.into_record(), checkpoint_path("model", epoch));
        c.save(optim.to_record(), checkpoint_path("optim", epoch));
        c.save(sched.to_record(), checkpoint_path("scheduler", epoch));
        detail::commit_checkpoint(checkpoint_dir(), epoch, checkpoint_files(epoch));
        // The best epoch's checkpoint outlives the window of the last `keep`; when a better
        // epoch comes, the former best goes unless the window still holds it.
        const auto before = best_epoch(epoch - 1), best = best_epoch(epoch);
        const std::size_t oldest = epoch > c.keep ? epoch - c.keep + 1 : 1;  // in the window
        if (epoch > c.keep && best != epoch - c.keep)
            detail::remove_checkpoint(checkpoint_dir(), epoch - c.keep,
                                      checkpoint_files(epoch - c.keep));
        if (before && before != best && *before + 1 < oldest)
            detail::remove_checkpoint(checkpoint_dir(), *before, checkpoint_files(*before));
        log("saved checkpoint " + std::to_string(epoch) +
            (best ? " (best " + o_.keep_best->metric + ": epoch " + std::to_string(*best) + ")"
                  : std::string()));
    }

    // The epoch among 1..upto with the best epoch mean of the keep_best metric (the earlier on
    // ties; epochs without a value are skipped); nullopt without keep_best or a value.
    std::optional<std::size_t> best_epoch(std::size_t upto) const {
        if (!o_.keep_best) return std::nullopt;
        const auto& kb = *o_.keep_best;
        const auto split = history_.find(kb.split);
        if (split == history_.end()) return std::nullopt;
        const auto values = split->second.find(kb.metric);
        if (values == split->second.end()) return std::nullopt;
        std::optional<std::size_t> best;
        for (std::size_t e = 1; e <= std::min(upto, values->second.size()); ++e) {
            const double v = values->second[e - 1];
            if (std::isnan(v)) continue;
            const double b = best ? values->second[*best - 1] : 0.0;
            if (!best || (kb.direction == Direction::Lowest ? v < b : v > b)) best = e;
        }
        return best;
    }

    // The epoch means of epochs 1..n, from what the loggers wrote (resume); each iteration's
    // value weighted by its batch's items, as end_epoch does.
    template <typename TL, typename VL>
    void restore_history(std::size_t n, TL& train, VL& valid) {
        auto restore = [&](Split split, auto& slots, MetricLogger& logger, auto& loader) {
            for (const auto& s : slots) {
                if (!s->numeric) continue;
                auto& v = history_[split][s->name()];
                v.assign(n, std::numeric_limits<double>::quiet_NaN());
                for (std::size_t e = 1; e <= n; ++e) {
                    auto vals = logger.read_numeric(s->name(), e);
                    if (!vals || vals->empty()) continue;
                    double sum = 0;
                    std::size_t count = 0;
                    for (std::size_t i = 0; i < vals->size(); ++i) {
                        const std::size_t w = batch_items(loader, i + 1);
                        sum += (*vals)[i] * double(w);
                        count += w;
                    }
                    v[e - 1] = count ? sum / double(count) : 0.0;
                }
            }
        };
        restore(Split::Train, o_.train_metrics, *o_.train_logger, train);
        restore(Split::Valid, o_.valid_metrics, *o_.valid_logger, valid);
    }

    void log(const std::string& message) {
        if (o_.app_logger) o_.app_logger->log(message);
    }

    LearnerOptions<TrainItem, ValidItem> o_;
    M model_;
    O optim_;
    S sched_;
    detail::MetricHistory history_;
};

}  // namespace ember::train
