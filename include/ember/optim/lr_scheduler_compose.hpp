#pragma once
// Schedulers made of schedulers (Burn's ComposedLrScheduler and SequentialLrScheduler): several
// advancing together with their rates combined, or one after another in phases (warm-up, then
// decay). Both are templates over their parts, so any LrScheduler (a user's too) composes and
// each part keeps its own type; the records nest the parts' records.
#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "lr_scheduler.hpp"

namespace ember::lr_scheduler {

/// How ComposedLrScheduler combines its parts' rates (Burn's SchedulerReduction).
enum class SchedulerReduction : int {
    Avg,  ///< the mean of the rates
    Sum,  ///< their sum
    Prod  ///< their product (Burn's default: a schedule scaled by factor schedules)
};

/// Every part steps at each step; the rates are combined by the reduction (Burn's
/// ComposedLrScheduler). With Prod, a schedule in (0, 1] times another acts as a factor: e.g. a
/// linear warm-up from 0.1 to 1 times a cosine decay.
template <LrScheduler... S>
class ComposedLrScheduler {
    static_assert(sizeof...(S) >= 1, "ComposedLrScheduler: at least one scheduler");

  public:
    /// The parts, combined by `reduction`.
    explicit ComposedLrScheduler(SchedulerReduction reduction, S... parts)
        : reduction_(reduction), parts_(std::move(parts)...) {}
    /// The parts' Prod (Burn's default).
    explicit ComposedLrScheduler(S... parts)
        : ComposedLrScheduler(SchedulerReduction::Prod, std::move(parts)...) {}
    /// Steps every part; their combined rate.
    double step() {
        const std::array<double, sizeof...(S)> rates = std::apply(
            [](auto&... p) { return std::array<double, sizeof...(S)>{p.step()...}; }, parts_);
        double out = reduction_ == SchedulerReduction::Prod ? 1.0 : 0.0;
        for (double r : rates) out = reduction_ == SchedulerReduction::Prod ? out * r : out + r;
        return reduction_ == SchedulerReduction::Avg ? out / double(rates.size()) : out;
    }
    /// {scheduler: "ComposedLrScheduler", schedulers: [each part's record]}.
    record::Value to_record() const {
        record::List parts;
        std::apply([&](const auto&... p) { (parts.push_back(p.to_record()), ...); }, parts_);
        return detail::make_record("ComposedLrScheduler", "schedulers", std::move(parts));
    }
    /// A copy with every part at its recorded position; FormatError when the record is not a
    /// ComposedLrScheduler's of as many parts (or a part's record does not fit it).
    ComposedLrScheduler load_record(const record::Value& r) const {
        const auto& list = detail::read_record(r, "ComposedLrScheduler", "schedulers")
                               .as<record::List>("schedulers");
        EMBER_CHECK(list.size() == sizeof...(S), Format,
                    "ComposedLrScheduler::load_record: the record has ", list.size(),
                    " schedulers, this scheduler ", sizeof...(S));
        ComposedLrScheduler out = *this;
        std::size_t i = 0;
        std::apply([&](auto&... p) { ((p = p.load_record(list[i++])), ...); }, out.parts_);
        return out;
    }

  private:
    SchedulerReduction reduction_;
    std::tuple<S...> parts_;
};

/// Configuration-style maker of ComposedLrScheduler: `compose(SchedulerReduction::Sum, a, b)`.
template <LrScheduler... S>
ComposedLrScheduler<S...> compose(SchedulerReduction reduction, S... parts) {
    return ComposedLrScheduler<S...>(reduction, std::move(parts)...);
}

/// Phases: part k runs from milestone k−1 (0 for the first) to milestone k, each part starting
/// from its own first rate when its phase begins (Burn's SequentialLrScheduler, torch's
/// SequentialLR). Steps are counted from 0: with milestones {5}, steps 0–4 are the first
/// part's first five rates and step 5 the second part's first.
template <LrScheduler... S>
class SequentialLrScheduler {
    static_assert(sizeof...(S) >= 2, "SequentialLrScheduler: at least two schedulers");

  public:
    /// The parts and the steps at which each after the first takes over; ArgumentError unless
    /// there is one milestone per part after the first, increasing and positive.
    SequentialLrScheduler(std::vector<std::size_t> milestones, S... parts)
        : milestones_(std::move(milestones)), parts_(std::move(parts)...) {
        EMBER_CHECK(milestones_.size() + 1 == sizeof...(S), Argument,
                    "SequentialLrScheduler: ", sizeof...(S), " schedulers need ", sizeof...(S) - 1,
                    " milestones, got ", milestones_.size());
        for (std::size_t k = 0; k < milestones_.size(); ++k)
            EMBER_CHECK(milestones_[k] > (k == 0 ? 0 : milestones_[k - 1]), Argument,
                        "SequentialLrScheduler: milestones must be positive and increasing, "
                        "milestone ",
                        k, " is ", milestones_[k]);
    }
    /// The current phase's rate; advances.
    double step() {
        std::size_t phase = 0;
        while (phase < milestones_.size() && std::size_t(current_) >= milestones_[phase]) ++phase;
        ++current_;
        double out = 0;
        std::size_t k = 0;
        std::apply([&](auto&... p) { ((k++ == phase ? (out = p.step(), 0) : 0), ...); }, parts_);
        return out;
    }
    /// {scheduler: "SequentialLrScheduler", current_iter, schedulers: [each part's record]}.
    record::Value to_record() const {
        record::List parts;
        std::apply([&](const auto&... p) { (parts.push_back(p.to_record()), ...); }, parts_);
        return record::Map{{"scheduler", std::string("SequentialLrScheduler")},
                           {"current_iter", current_},
                           {"schedulers", std::move(parts)}};
    }
    /// A copy at the recorded position; FormatError when the record is not a
    /// SequentialLrScheduler's of as many parts.
    SequentialLrScheduler load_record(const record::Value& r) const {
        SequentialLrScheduler out = *this;
        out.current_ = detail::read_count(r, "SequentialLrScheduler", "current_iter", 0);
        const auto& list = r.at("schedulers").as<record::List>("schedulers");
        EMBER_CHECK(list.size() == sizeof...(S), Format,
                    "SequentialLrScheduler::load_record: the record has ", list.size(),
                    " schedulers, this scheduler ", sizeof...(S));
        std::size_t i = 0;
        std::apply([&](auto&... p) { ((p = p.load_record(list[i++])), ...); }, out.parts_);
        return out;
    }

  private:
    std::vector<std::size_t> milestones_;
    std::tuple<S...> parts_;
    std::int64_t current_ = 0;
};

/// Maker of SequentialLrScheduler: `sequential({warmup_iters}, warmup, decay)`.
template <LrScheduler... S>
SequentialLrScheduler<S...> sequential(std::vector<std::size_t> milestones, S... parts) {
    return SequentialLrScheduler<S...>(std::move(milestones), std::move(parts)...);
}

}  // namespace ember::lr_scheduler
