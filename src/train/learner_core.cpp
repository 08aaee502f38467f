// The model-independent part of the Learner (include/ember/train/detail/learner_core.hpp).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>

#include <ember/collective/collective.hpp>
#include <ember/collective/thread.hpp>
#include <ember/tensor/error.hpp>
#include <ember/train/dashboard.hpp>
#include <ember/train/detail/learner_core.hpp>
#include <ember/train/report.hpp>

namespace ember::train {

LearnerSettings::LearnerSettings() = default;
LearnerSettings::LearnerSettings(const LearnerSettings&) = default;
LearnerSettings::LearnerSettings(LearnerSettings&&) noexcept = default;
LearnerSettings& LearnerSettings::operator=(const LearnerSettings&) = default;
LearnerSettings& LearnerSettings::operator=(LearnerSettings&&) noexcept = default;
LearnerSettings::~LearnerSettings() = default;

namespace detail {

namespace {

// `what` ("early stopping", "keep_best_checkpoint") names the setting in the message.
void check_metric(const std::string& metric, Split split,
                  const std::vector<const MetricSlotBase*>& train,
                  const std::vector<const MetricSlotBase*>& valid, const char* what) {
    bool ok = false;
    for (const auto* s : split == Split::Train ? train : valid)
        ok = ok || (s->numeric && s->name() == metric);
    EMBER_CHECK(ok, Argument, "LearnerBuilder::build: ", what, " on '", metric,
                "', which is not a numeric ", split == Split::Train ? "training" : "validation",
                " metric of this learner");
}

}  // namespace

void check_learner_settings(const LearnerSettings& o,
                            const std::vector<const MetricSlotBase*>& train,
                            const std::vector<const MetricSlotBase*>& valid,
                            const LearnerModelFacts& model) {
    EMBER_CHECK(!o.checkpoint || o.checkpointer, Argument, "LearnerBuilder::build: checkpoint(",
                o.checkpoint.value_or(0), ") needs a checkpointer (with_file_checkpointer)");
    EMBER_CHECK(!o.resume || o.checkpointer, Argument,
                "LearnerBuilder::build: resume() needs a checkpointer (with_file_checkpointer)");
    EMBER_CHECK(!o.checkpoint || *o.checkpoint <= o.num_epochs, Argument,
                "LearnerBuilder::build: checkpoint(", o.checkpoint.value_or(0),
                ") is beyond num_epochs ", o.num_epochs);
    if (o.early_stopping)
        check_metric(o.early_stopping->metric, o.early_stopping->split, train, valid,
                     "early stopping");
    EMBER_CHECK(!o.keep_best || o.checkpointer, Argument,
                "LearnerBuilder::build: keep_best_checkpoint needs a checkpointer "
                "(with_file_checkpointer)");
    if (o.keep_best)
        check_metric(o.keep_best->metric, o.keep_best->split, train, valid, "keep_best_checkpoint");
    if (o.capture_steps) {
        EMBER_CHECK(model.capturable, Argument,
                    "LearnerBuilder::build: capture_steps needs a model on Cuda, Fusion<Cuda>, "
                    "Vulkan or Fusion<Vulkan> under Autodiff (this one is on ",
                    model.backend, ")");
        EMBER_CHECK(o.grads_accumulation == 1, Argument,
                    "LearnerBuilder::build: capture_steps does not combine with "
                    "grads_accumulation(",
                    o.grads_accumulation, ")");
        EMBER_CHECK(o.collectives.empty() && (!model.devices_match || model.num_devices == 1),
                    Argument,
                    "LearnerBuilder::build: capture_steps trains on one device (not "
                    "data-parallel)");
    }
    if (o.devices.has_value()) {
        EMBER_CHECK(model.devices_match, Argument,
                    "LearnerBuilder::build: the devices are not devices of the model's backend");
        EMBER_CHECK(o.collectives.empty() || o.collectives.size() == model.num_devices, Argument,
                    "LearnerBuilder::build: ", o.collectives.size(), " collective endpoints for ",
                    model.num_devices, " devices");
    } else {
        EMBER_CHECK(o.collectives.empty(), Argument,
                    "LearnerBuilder::build: collective endpoints without devices (call devices() "
                    "with one device per endpoint)");
    }
}

void complete_learner_settings(LearnerSettings& o) {
    const auto& dir = o.artifact_dir;
    // Locked before anything is written: a second run in the same directory stops here.
    bool writes = o.collectives.empty();
    for (const auto& c : o.collectives) writes = writes || c->rank() == 0;
    if (writes) o.lock.emplace(dir);
    if (!o.train_logger) o.train_logger = std::make_shared<FileMetricLogger>(dir / "train");
    if (!o.valid_logger) o.valid_logger = std::make_shared<FileMetricLogger>(dir / "valid");
    if (!o.app_logger_set)
        o.app_logger = std::make_shared<FileApplicationLogger>(dir / "experiment.log");
    if (!o.renderer) o.renderer = make_default_renderer(o.interrupter);
}

MetricEntry update_metric(MetricSlotBase& slot, const void* item, const MetricMetadata& md,
                          std::size_t items, MetricLogger& logger, MetricSums& sums) {
    MetricEntry e = slot.update_erased(item, md);
    logger.log(e);
    if (slot.numeric && e.numeric) {
        // An epoch's value is the mean over its items, as PyTorch users compute it (a short last
        // batch weighs what its items do).
        auto& [sum, count] = sums[e.name];
        sum += *e.numeric * double(items);
        count += items;
        // What renderers show as the epoch's mean is what history() will hold.
        if (count) e.epoch_mean = sum / double(count);
    }
    if (!slot.plotted) e.numeric.reset(), e.epoch_mean.reset();
    return e;
}

std::size_t LoaderShape::items_after(std::size_t iteration) const {
    const std::size_t n = num_items, b = num_batches;
    if (iteration >= b) return n;
    if (batch_size) return std::min<std::size_t>(n, iteration * *batch_size);
    // Batches of equal size but the last: exact when that size is ⌈n / b⌉.
    return std::min(n, iteration * ((n + b - 1) / b));
}

LearnerCore::LearnerCore(LearnerSettings settings,
                         std::vector<std::shared_ptr<MetricSlotBase>> train,
                         std::vector<std::shared_ptr<MetricSlotBase>> valid)
    : s_(std::move(settings)), train_metrics_(std::move(train)), valid_metrics_(std::move(valid)) {}
LearnerCore::LearnerCore(const LearnerCore&) = default;
LearnerCore& LearnerCore::operator=(const LearnerCore&) = default;
LearnerCore::LearnerCore(LearnerCore&&) noexcept = default;
LearnerCore& LearnerCore::operator=(LearnerCore&&) noexcept = default;
LearnerCore::~LearnerCore() = default;

void LearnerCore::fit(LearnerTask& task, const LoaderShape& train, const LoaderShape& valid) {
    EMBER_CHECK(train.num_batches > 0, Argument, "Learner::fit: the training loader is empty (",
                train.num_items, " items, 0 batches)");
    EMBER_CHECK(valid.num_batches > 0, Argument, "Learner::fit: the validation loader is empty (",
                valid.num_items, " items, 0 batches)");
    shapes_[0] = train;
    shapes_[1] = valid;
    s_.interrupter.reset();
    history_.clear();
    std::size_t first = 1;
    // What killed runs left: temporaries, checkpoints without their manifest.
    if (s_.lock) clean_artifacts(s_.artifact_dir);
    std::optional<std::size_t> resume_from = s_.checkpoint;
    if (!resume_from && s_.resume) resume_from = latest_checkpoint(s_.artifact_dir);
    EMBER_CHECK(!resume_from || *resume_from <= s_.num_epochs, Argument,
                "Learner::fit: the newest checkpoint in ", s_.artifact_dir.string(), " is ",
                resume_from.value_or(0), ", beyond num_epochs ", s_.num_epochs);
    if (resume_from) {
        const std::size_t n = *resume_from;
        check_checkpoint(checkpoint_dir(), n, checkpoint_files(n));
        task.resume(n);
        first = n + 1;
        restore_history(n);
        log("resumed from checkpoint " + std::to_string(n) + " in " + s_.artifact_dir.string());
    } else {
        log("training for " + std::to_string(s_.num_epochs) + " epochs, artifacts in " +
            s_.artifact_dir.string());
    }
    std::optional<EarlyStopper> stopper;
    if (s_.early_stopping) {
        const auto& es = *s_.early_stopping;
        stopper.emplace(es.direction, es.min_delta, es.patience);
        auto& h = history_[es.split][es.metric];
        for (std::size_t e = 1; e < first; ++e)
            if (e <= h.size() && !std::isnan(h[e - 1])) stopper->update(e, h[e - 1]);
    }

    SigintGuard guard(s_.interrupter);
    struct RunEnd {  // the renderer restores the terminal however fit leaves
        MetricsRenderer& r;
        ~RunEnd() { r.on_run_end(); }
    } run_end{*s_.renderer};

    task.start();
    std::size_t done = first - 1;
    for (std::size_t epoch = first; epoch <= s_.num_epochs; ++epoch) {
        if (!task.train_epoch(epoch)) {
            log("interrupted in epoch " + std::to_string(epoch) +
                " (training); resume from checkpoint " + std::to_string(epoch - 1));
            break;
        }
        if (!task.valid_epoch(epoch)) {
            log("interrupted in epoch " + std::to_string(epoch) +
                " (validation); resume from checkpoint " + std::to_string(epoch - 1));
            break;
        }
        done = epoch;
        if (task.writes()) save_checkpoint(epoch, task);
        if (s_.report && task.writes()) write_report(s_.artifact_dir);
        log("epoch " + std::to_string(epoch) + "/" + std::to_string(s_.num_epochs) +
            " train: " + format_epoch(history_[Split::Train], epoch) +
            " | valid: " + format_epoch(history_[Split::Valid], epoch));
        if (stopper) {
            const auto& es = *s_.early_stopping;
            const auto& h = history_[es.split][es.metric];
            if (stopper->update(epoch, h[epoch - 1]) && epoch < s_.num_epochs) {
                log("early stopping after epoch " + std::to_string(epoch) + ": " + es.metric +
                    " has not improved since epoch " + std::to_string(stopper->best_epoch()));
                break;
            }
        }
    }
    // Once more after the loop: an interrupted epoch's logged iterations join the curves.
    if (s_.report && task.writes() && done < s_.num_epochs) write_report(s_.artifact_dir);
    if (s_.summary) {
        const std::string s = format_summary(history_, done);
        std::cout << s << std::flush;
        log(s);
    }
}

void LearnerCore::begin_epoch(Split split, std::size_t epoch) {
    for (auto& s : slots(split)) s->clear();
    (split == Split::Train ? s_.train_logger : s_.valid_logger)->start_epoch(epoch);
    sums_[split == Split::Train ? 0 : 1].clear();
}

bool LearnerCore::step_done(Split split, std::size_t epoch, std::size_t iteration, const void* item,
                            std::optional<double> lr, std::optional<std::size_t> batch_items) {
    const bool training = split == Split::Train;
    const LoaderShape& shape = shapes_[training ? 0 : 1];
    const TrainingProgress p{
        epoch,
        s_.num_epochs,
        iteration,
        shape.items_after(iteration),
        shape.num_items,
        training ? (epoch - 1) * shape.num_batches + iteration : epoch * shape.num_batches};
    if (item != nullptr) {
        const std::size_t items = batch_items ? *batch_items : shape.batch_items(iteration);
        MetricLogger& logger = training ? *s_.train_logger : *s_.valid_logger;
        auto& sums = sums_[training ? 0 : 1];
        const MetricMetadata md{p, lr};
        for (auto& slot : slots(split)) {
            const MetricEntry e = update_metric(*slot, item, md, items, logger, sums);
            if (training)
                s_.renderer->update_train(e);
            else
                s_.renderer->update_valid(e);
        }
    }
    if (training)
        s_.renderer->render_train(p);
    else
        s_.renderer->render_valid(p);
    return s_.interrupter.should_stop();
}

void LearnerCore::end_epoch(Split split, std::size_t epoch) {
    auto& h = history_[split];
    for (const auto& [name, sc] : sums_[split == Split::Train ? 0 : 1]) {
        auto& v = h[name];
        v.resize(epoch, std::numeric_limits<double>::quiet_NaN());
        v[epoch - 1] = sc.second ? sc.first / double(sc.second) : 0.0;
    }
    (split == Split::Train ? s_.train_logger : s_.valid_logger)->end_epoch(epoch);
    s_.renderer->on_epoch_end(split, epoch);
}

std::filesystem::path LearnerCore::checkpoint_dir() const {
    return s_.artifact_dir / "checkpoint";
}

std::filesystem::path LearnerCore::checkpoint_path(const char* what, std::size_t epoch) const {
    return checkpoint_dir() / (std::string(what) + "-" + std::to_string(epoch));
}

// The record files of checkpoint `epoch`, with the recorder's extension.
std::vector<std::filesystem::path> LearnerCore::checkpoint_files(std::size_t epoch) const {
    std::vector<std::filesystem::path> out;
    for (const char* what : {"model", "optim", "scheduler"})
        out.push_back(s_.checkpointer->file_path(checkpoint_path(what, epoch)));
    return out;
}

record::Value LearnerCore::load_checkpoint(const char* what, std::size_t epoch) const {
    const auto file = s_.checkpointer->file_path(checkpoint_path(what, epoch));
    EMBER_CHECK(std::filesystem::exists(file), Format,
                "Learner::fit: cannot resume from checkpoint ", epoch, ": '", file.string(),
                "' does not exist");
    return s_.checkpointer->load(file);
}

// The three records, then the manifest that makes the checkpoint complete (each file written
// atomically, the directory synced after the renames); a kill anywhere in between leaves the
// previous checkpoint the newest complete one.
void LearnerCore::save_checkpoint(std::size_t epoch, const LearnerTask& task) {
    if (!s_.checkpointer) return;
    std::filesystem::create_directories(checkpoint_dir());
    const auto& c = *s_.checkpointer;
    for (const char* what : {"model", "optim", "scheduler"})
        c.save(task.record_of(what), checkpoint_path(what, epoch));
    commit_checkpoint(checkpoint_dir(), epoch, checkpoint_files(epoch));
    // The best epoch's checkpoint outlives the window of the last `keep`; when a better epoch
    // comes, the former best goes unless the window still holds it.
    const auto before = best_epoch(epoch - 1), best = best_epoch(epoch);
    const std::size_t oldest = epoch > c.keep ? epoch - c.keep + 1 : 1;  // in the window
    if (epoch > c.keep && best != epoch - c.keep)
        remove_checkpoint(checkpoint_dir(), epoch - c.keep, checkpoint_files(epoch - c.keep));
    if (before && before != best && *before + 1 < oldest)
        remove_checkpoint(checkpoint_dir(), *before, checkpoint_files(*before));
    log("saved checkpoint " + std::to_string(epoch) +
        (best ? " (best " + s_.keep_best->metric + ": epoch " + std::to_string(*best) + ")"
              : std::string()));
}

std::optional<std::size_t> LearnerCore::best_checkpoint() const {
    std::size_t n = 0;
    for (const auto& [split, metrics] : history_)
        for (const auto& [name, v] : metrics) n = std::max(n, v.size());
    return best_epoch(n);
}

// The epoch among 1..upto with the best epoch mean of the keep_best metric (the earlier on ties;
// epochs without a value are skipped); nullopt without keep_best or a value.
std::optional<std::size_t> LearnerCore::best_epoch(std::size_t upto) const {
    if (!s_.keep_best) return std::nullopt;
    const auto& kb = *s_.keep_best;
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

// The epoch means of epochs 1..n, from what the loggers wrote (resume); each iteration's value
// weighted by its batch's items, as end_epoch does.
void LearnerCore::restore_history(std::size_t n) {
    for (const Split split : {Split::Train, Split::Valid}) {
        const bool training = split == Split::Train;
        MetricLogger& logger = training ? *s_.train_logger : *s_.valid_logger;
        const LoaderShape& shape = shapes_[training ? 0 : 1];
        for (const auto& s : slots(split)) {
            if (!s->numeric) continue;
            auto& v = history_[split][s->name()];
            v.assign(n, std::numeric_limits<double>::quiet_NaN());
            for (std::size_t e = 1; e <= n; ++e) {
                auto vals = logger.read_numeric(s->name(), e);
                if (!vals || vals->empty()) continue;
                double sum = 0;
                std::size_t count = 0;
                for (std::size_t i = 0; i < vals->size(); ++i) {
                    const std::size_t w = shape.batch_items(i + 1);
                    sum += (*vals)[i] * double(w);
                    count += w;
                }
                v[e - 1] = count ? sum / double(count) : 0.0;
            }
        }
    }
}

void LearnerCore::log(const std::string& message) {
    if (s_.app_logger) s_.app_logger->log(message);
}

std::vector<std::shared_ptr<collective::Collective>> LearnerCore::replica_comms(std::size_t n) {
    std::vector<std::shared_ptr<collective::Collective>> comms = s_.collectives;
    if (comms.empty())
        for (auto& c : collective::ThreadCollective::group(n)) comms.emplace_back(std::move(c));
    log("data-parallel training on " + std::to_string(n) + " local replica(s) of " +
        std::to_string(comms[0]->world_size()) + " (" + comms[0]->name() + ")");
    return comms;
}

}  // namespace detail
}  // namespace ember::train
