#pragma once
// Learning-rate schedulers (Burn's lr_scheduler module). Every scheduler's step() returns the
// learning rate of the current iteration and advances: the first call gives the initial rate,
// as Burn's and as torch's get_last_lr() before the first scheduler.step(). A plain double is a
// constant schedule (lr_scheduler::step(0.01) is 0.01, as Burn's LearningRate implements
// LrScheduler). Schedulers record their position (to_record / load_record) so that a resumed
// run continues the same sequence; the rest of their settings come from their config.
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "../module/config.hpp"
#include "../record/value.hpp"
#include "../tensor/error.hpp"

namespace ember::lr_scheduler {

/// A learning-rate schedule: `double step()`, `record::Value to_record() const` and
/// `S load_record(const record::Value&) const` (a copy at the recorded position).
template <typename S>
concept LrScheduler = requires(S& s, const S& cs, const record::Value& v) {
    { s.step() } -> std::convertible_to<double>;
    { cs.to_record() } -> std::same_as<record::Value>;
    { cs.load_record(v) } -> std::same_as<S>;
};

namespace detail {

inline record::Value make_record(std::string_view kind, std::string_view field, record::Value v) {
    return record::Map{{"scheduler", std::string(kind)}, {std::string(field), std::move(v)}};
}

// FormatError unless `r` was written by the scheduler `kind`.
inline void check_kind(const record::Value& r, std::string_view kind) {
    const auto& name = r.at("scheduler").as<std::string>("scheduler");
    EMBER_CHECK(name == kind, Format, kind, "::load_record: the record holds the state of a ",
                name);
}

// The position stored in a record written by the scheduler `kind`; FormatError otherwise.
inline const record::Value& read_record(const record::Value& r, std::string_view kind,
                                        std::string_view field) {
    check_kind(r, kind);
    return r.at(field);
}

// The step count stored under `field` by the scheduler `kind`; FormatError unless it is at least
// `min` (and at most `max`, when given).
inline std::int64_t read_count(const record::Value& r, std::string_view kind,
                               std::string_view field, std::int64_t min,
                               std::optional<std::int64_t> max = std::nullopt) {
    const auto n = read_record(r, kind, field).as<std::int64_t>(field);
    if (max) {
        EMBER_CHECK(n >= min && n <= *max, Format, kind, "::load_record: ", field, " ", n,
                    " is outside [", min, ", ", *max, "]");
    } else {
        EMBER_CHECK(n >= min, Format, kind, "::load_record: ", field, " is ", n);
    }
    return n;
}

inline void check_lr(bool ok, std::string_view who, std::string_view what, double value) {
    EMBER_CHECK(ok, Argument, who, ": ", what, ", got ", value);
}

// Burn's range of a first rate, (0, 1].
inline void check_initial_lr(std::string_view who, double initial_lr) {
    check_lr(initial_lr > 0 && initial_lr <= 1, who,
             "initial_lr must be greater than 0 and at most 1", initial_lr);
}

}  // namespace detail

/// A constant learning rate.
struct ConstantLr {
    double lr;  ///< the rate every step returns
    /// A constant schedule of `lr` (implicit: a double is a schedule).
    constexpr ConstantLr(double lr) : lr(lr) {}  // NOLINT(google-explicit-constructor)
    /// `lr`.
    double step() { return lr; }
    /// No state: a map naming the scheduler.
    record::Value to_record() const { return record::Map{{"scheduler", "ConstantLr"}}; }
    /// Checks the record's kind.
    ConstantLr load_record(const record::Value& r) const {
        detail::check_kind(r, "ConstantLr");
        return *this;
    }
};

/// The next learning rate of a scheduler.
template <LrScheduler S>
double step(S& scheduler) {
    return scheduler.step();
}
/// A double is a constant schedule.
inline double step(double lr) {
    return lr;
}

/// Linear change from initial_lr to final_lr over num_iters steps, then final_lr
/// (torch's LinearLR with start_factor 1 and end_factor final_lr / initial_lr).
class LinearLrScheduler {
  public:
    /// Use LinearLrSchedulerConfig::init.
    LinearLrScheduler(double final_lr, double step_size, std::int64_t remaining)
        : final_lr_(final_lr), step_size_(step_size), remaining_(remaining) {}
    /// The current rate; advances.
    double step() {
        if (remaining_ > 0) --remaining_;
        return final_lr_ - step_size_ * double(remaining_);
    }
    /// {scheduler: "LinearLrScheduler", remaining_iters}.
    record::Value to_record() const {
        return detail::make_record("LinearLrScheduler", "remaining_iters", remaining_);
    }
    /// A copy at the recorded position.
    LinearLrScheduler load_record(const record::Value& r) const {
        LinearLrScheduler out = *this;
        out.remaining_ = detail::read_count(r, "LinearLrScheduler", "remaining_iters", 0);
        return out;
    }

  private:
    double final_lr_, step_size_;
    std::int64_t remaining_;
};

/// Configuration of LinearLrScheduler (Burn's LinearLrSchedulerConfig).
struct LinearLrSchedulerConfig {
    double initial_lr;      ///< the first step's rate, in (0, 1]
    double final_lr;        ///< the rate from step num_iters on, in [0, 1]
    std::size_t num_iters;  ///< steps from initial_lr to final_lr (> 0)
    EMBER_CONFIG(LinearLrSchedulerConfig, initial_lr, final_lr, num_iters)

    /// The scheduler; ArgumentError for values out of range (Burn's checks).
    LinearLrScheduler init() const {
        const char* who = "LinearLrSchedulerConfig::init";
        detail::check_initial_lr(who, initial_lr);
        detail::check_lr(final_lr >= 0 && final_lr <= 1, who,
                         "final_lr must be at least 0 and at most 1", final_lr);
        detail::check_lr(num_iters > 0, who, "num_iters must be at least 1", double(num_iters));
        return {final_lr, (final_lr - initial_lr) / double(num_iters), std::int64_t(num_iters) + 1};
    }
};

/// Cosine annealing with warm restarts (SGDR): min_lr + (initial_lr − min_lr)·(1 + cos(π·i/n))/2
/// for i = 0..n, then again from i = 0. torch's CosineAnnealingLR is the same over its first
/// period but does not restart.
class CosineAnnealingLrScheduler {
  public:
    /// Use CosineAnnealingLrSchedulerConfig::init.
    CosineAnnealingLrScheduler(double min_lr, double max_lr, std::int64_t num_iters)
        : min_lr_(min_lr), max_lr_(max_lr), num_iters_(num_iters) {}
    /// The current rate; advances.
    double step() {
        current_ = (current_ + 1) % (num_iters_ + 1);
        const double pi = 3.14159265358979323846;
        return min_lr_ + 0.5 * (max_lr_ - min_lr_) *
                             (1 + std::cos(double(current_) / double(num_iters_) * pi));
    }
    /// {scheduler: "CosineAnnealingLrScheduler", current_iter} (−1 before the first step).
    record::Value to_record() const {
        return detail::make_record("CosineAnnealingLrScheduler", "current_iter", current_);
    }
    /// A copy at the recorded position.
    CosineAnnealingLrScheduler load_record(const record::Value& r) const {
        CosineAnnealingLrScheduler out = *this;
        out.current_ =
            detail::read_count(r, "CosineAnnealingLrScheduler", "current_iter", -1, num_iters_);
        return out;
    }

  private:
    double min_lr_, max_lr_;
    std::int64_t num_iters_;
    std::int64_t current_ = -1;
};

/// Configuration of CosineAnnealingLrScheduler (Burn's CosineAnnealingLrSchedulerConfig).
struct CosineAnnealingLrSchedulerConfig {
    double initial_lr;      ///< the rate at the start of each period, in (0, 1]
    std::size_t num_iters;  ///< steps from initial_lr down to min_lr (> 0)
    double min_lr = 0.0;    ///< the rate at the end of each period, in [0, initial_lr]
    EMBER_CONFIG(CosineAnnealingLrSchedulerConfig, initial_lr, num_iters, min_lr)

    /// The scheduler; ArgumentError for values out of range (Burn's checks).
    CosineAnnealingLrScheduler init() const {
        const char* who = "CosineAnnealingLrSchedulerConfig::init";
        detail::check_initial_lr(who, initial_lr);
        detail::check_lr(min_lr >= 0 && min_lr <= initial_lr, who,
                         "min_lr must be at least 0 and at most initial_lr", min_lr);
        detail::check_lr(num_iters > 0, who, "num_iters must be at least 1", double(num_iters));
        return {min_lr, initial_lr, std::int64_t(num_iters)};
    }
};

/// initial_lr · gammaⁱ at iteration i (torch's ExponentialLR).
class ExponentialLrScheduler {
  public:
    /// Use ExponentialLrSchedulerConfig::init.
    ExponentialLrScheduler(double previous_lr, double gamma)
        : previous_(previous_lr), gamma_(gamma) {}
    /// The current rate; advances.
    double step() {
        previous_ *= gamma_;
        return previous_;
    }
    /// {scheduler: "ExponentialLrScheduler", previous_lr} (initial_lr / gamma before the first
    /// step, as Burn records it).
    record::Value to_record() const {
        return detail::make_record("ExponentialLrScheduler", "previous_lr", previous_);
    }
    /// A copy at the recorded position.
    ExponentialLrScheduler load_record(const record::Value& r) const {
        ExponentialLrScheduler out = *this;
        out.previous_ = detail::read_record(r, "ExponentialLrScheduler", "previous_lr")
                            .as<double>("previous_lr");
        return out;
    }

  private:
    double previous_, gamma_;
};

/// Configuration of ExponentialLrScheduler (Burn's ExponentialLrSchedulerConfig).
struct ExponentialLrSchedulerConfig {
    double initial_lr;  ///< the first step's rate, in (0, 1]
    double gamma;       ///< the factor per step, in (0, 1]
    EMBER_CONFIG(ExponentialLrSchedulerConfig, initial_lr, gamma)

    /// The scheduler; ArgumentError for values out of range (Burn's checks).
    ExponentialLrScheduler init() const {
        const char* who = "ExponentialLrSchedulerConfig::init";
        detail::check_initial_lr(who, initial_lr);
        detail::check_lr(gamma > 0 && gamma <= 1, who, "gamma must be greater than 0 and at most 1",
                         gamma);
        return {initial_lr / gamma, gamma};
    }
};

/// initial_lr · gamma^⌊i / step_size⌋ at iteration i (torch's StepLR).
class StepLrScheduler {
  public:
    /// Use StepLrSchedulerConfig::init.
    StepLrScheduler(double initial_lr, std::int64_t step_size, double gamma)
        : initial_(initial_lr), step_size_(step_size), gamma_(gamma) {}
    /// The current rate; advances.
    double step() {
        ++iter_;
        return initial_ * std::pow(gamma_, double(iter_ / step_size_));
    }
    /// {scheduler: "StepLrScheduler", iter_idx} (−1 before the first step).
    record::Value to_record() const {
        return detail::make_record("StepLrScheduler", "iter_idx", iter_);
    }
    /// A copy at the recorded position.
    StepLrScheduler load_record(const record::Value& r) const {
        StepLrScheduler out = *this;
        out.iter_ = detail::read_count(r, "StepLrScheduler", "iter_idx", -1);
        return out;
    }

  private:
    double initial_;
    std::int64_t step_size_;
    double gamma_;
    std::int64_t iter_ = -1;
};

/// Configuration of StepLrScheduler (Burn's StepLrSchedulerConfig). initial_lr and gamma are
/// not range-checked (zero or negative values have debugging uses, as Burn notes).
struct StepLrSchedulerConfig {
    double initial_lr;      ///< the rate of the first step_size steps
    std::size_t step_size;  ///< steps between two decays (> 0)
    double gamma = 0.1;     ///< the factor applied every step_size steps
    EMBER_CONFIG(StepLrSchedulerConfig, initial_lr, step_size, gamma)

    /// The scheduler; ArgumentError when step_size is 0.
    StepLrScheduler init() const {
        detail::check_lr(step_size > 0, "StepLrSchedulerConfig::init",
                         "step_size must be greater than 0", double(step_size));
        return {initial_lr, std::int64_t(step_size), gamma};
    }
};

/// The schedule of "Attention Is All You Need": at step s = 1, 2, ...,
/// init_lr · model_size^−½ · min(s^−½, s · warmup_steps^−³ᐟ²): a linear warm-up, then decay as
/// 1/√s.
class NoamLrScheduler {
  public:
    /// Use NoamLrSchedulerConfig::init.
    NoamLrScheduler(double init_lr, double warmup_steps, double model_size)
        : init_lr_(init_lr), warmup_(warmup_steps), model_size_(model_size) {}
    /// The current rate; advances.
    double step() {
        ++step_;
        const double s = double(step_);
        return init_lr_ * std::pow(model_size_, -0.5) *
               std::min(std::pow(s, -0.5), s * std::pow(warmup_, -1.5));
    }
    /// {scheduler: "NoamLrScheduler", step} (the steps taken).
    record::Value to_record() const {
        return detail::make_record("NoamLrScheduler", "step", step_);
    }
    /// A copy at the recorded position.
    NoamLrScheduler load_record(const record::Value& r) const {
        NoamLrScheduler out = *this;
        out.step_ = detail::read_count(r, "NoamLrScheduler", "step", 0);
        return out;
    }

  private:
    double init_lr_, warmup_, model_size_;
    std::int64_t step_ = 0;
};

/// Configuration of NoamLrScheduler (Burn's NoamLrSchedulerConfig; Burn now calls init_lr
/// `factor`: it scales the whole schedule).
struct NoamLrSchedulerConfig {
    double init_lr;                   ///< the overall scale of the schedule
    std::size_t warmup_steps = 4000;  ///< steps of linear warm-up (> 0)
    std::size_t model_size = 512;     ///< the model width d_model (> 0)
    EMBER_CONFIG(NoamLrSchedulerConfig, init_lr, warmup_steps, model_size)

    /// The scheduler; ArgumentError when warmup_steps or model_size is 0.
    NoamLrScheduler init() const {
        const char* who = "NoamLrSchedulerConfig::init";
        detail::check_lr(warmup_steps > 0, who, "warmup_steps must be greater than 0",
                         double(warmup_steps));
        detail::check_lr(model_size > 0, who, "model_size must be greater than 0",
                         double(model_size));
        return {init_lr, double(warmup_steps), double(model_size)};
    }
};

/// A linear warm-up then one cosine decay, the schedule GPT-style models train with: at
/// iteration i = 0, 1, ..., `peak·(i + 1)/warmup` while i < warmup, then
/// `min + (peak − min)·(1 + cos(π·(i − warmup)/(n − warmup)))/2` up to i = n (`num_iters`), and
/// `min` after. torch: SequentialLR of LinearLR(start_factor=1/warmup, total_iters=warmup − 1)
/// and CosineAnnealingLR(T_max=n − warmup, eta_min=min) with the milestone at warmup (over
/// i = 0..n; torch's cosine rises again after n).
class WarmupCosineLrScheduler {
  public:
    /// Use WarmupCosineLrSchedulerConfig::init.
    WarmupCosineLrScheduler(double peak_lr, double min_lr, std::int64_t warmup,
                            std::int64_t num_iters)
        : peak_(peak_lr), min_(min_lr), warmup_(warmup), num_iters_(num_iters) {}
    /// The current rate; advances.
    double step() {
        const std::int64_t i = current_;
        if (current_ <= num_iters_) ++current_;  // stays at num_iters + 1 (the floor) after
        if (i < warmup_) return peak_ * double(i + 1) / double(warmup_);
        if (i > num_iters_) return min_;
        const double pi = 3.14159265358979323846;
        const double t = double(i - warmup_) / double(num_iters_ - warmup_);
        return min_ + 0.5 * (peak_ - min_) * (1 + std::cos(pi * t));
    }
    /// {scheduler: "WarmupCosineLrScheduler", current_iter} (the steps taken, capped at
    /// num_iters + 1).
    record::Value to_record() const {
        return detail::make_record("WarmupCosineLrScheduler", "current_iter", current_);
    }
    /// A copy at the recorded position.
    WarmupCosineLrScheduler load_record(const record::Value& r) const {
        WarmupCosineLrScheduler out = *this;
        out.current_ =
            detail::read_count(r, "WarmupCosineLrScheduler", "current_iter", 0, num_iters_ + 1);
        return out;
    }

  private:
    double peak_, min_;
    std::int64_t warmup_, num_iters_;
    std::int64_t current_ = 0;
};

/// Configuration of WarmupCosineLrScheduler.
struct WarmupCosineLrSchedulerConfig {
    double peak_lr;            ///< the rate at the end of the warm-up, in (0, 1]
    std::size_t warmup_iters;  ///< steps of linear warm-up from peak_lr / warmup_iters (may be 0)
    std::size_t num_iters;     ///< the step at which the cosine reaches min_lr (> warmup_iters)
    double min_lr = 0.0;       ///< the final rate, in [0, peak_lr]
    EMBER_CONFIG(WarmupCosineLrSchedulerConfig, peak_lr, warmup_iters, num_iters, min_lr)

    /// The scheduler; ArgumentError for values out of range.
    WarmupCosineLrScheduler init() const {
        const char* who = "WarmupCosineLrSchedulerConfig::init";
        detail::check_lr(peak_lr > 0 && peak_lr <= 1, who,
                         "peak_lr must be greater than 0 and at most 1", peak_lr);
        detail::check_lr(min_lr >= 0 && min_lr <= peak_lr, who,
                         "min_lr must be at least 0 and at most peak_lr", min_lr);
        detail::check_lr(
            num_iters > warmup_iters, who,
            "num_iters must be greater than warmup_iters (" + std::to_string(warmup_iters) + ")",
            double(num_iters));
        return {peak_lr, min_lr, std::int64_t(warmup_iters), std::int64_t(num_iters)};
    }
};

static_assert(LrScheduler<ConstantLr> && LrScheduler<LinearLrScheduler> &&
              LrScheduler<CosineAnnealingLrScheduler> && LrScheduler<ExponentialLrScheduler> &&
              LrScheduler<StepLrScheduler> && LrScheduler<NoamLrScheduler> &&
              LrScheduler<WarmupCosineLrScheduler>);

}  // namespace ember::lr_scheduler
