#pragma once
// Learning rates per part of a module (Burn's ModuleLrScheduler, torch's parameter groups with a
// scheduler each): an optimizer wrapper whose groups — the parameters under a path prefix such as
// "encoder" or "head.linear" — follow schedules of their own, while the rest takes the rate the
// caller (the Learner's scheduler) passes to step. It is an optimizer to the Learner: the
// group schedules advance with its steps and are saved in its record.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gradients_params.hpp"
#include "lr_scheduler.hpp"
#include "optimizer.hpp"

namespace ember::optim {

namespace detail {

/// Any LrScheduler behind one type, copied deeply (a copied optimizer continues on its own).
class DynLrScheduler {
  public:
    template <lr_scheduler::LrScheduler S>
    explicit DynLrScheduler(S scheduler) : impl_(std::make_unique<Impl<S>>(std::move(scheduler))) {}
    DynLrScheduler(const DynLrScheduler& o) : impl_(o.impl_->clone()) {}
    DynLrScheduler& operator=(const DynLrScheduler& o) {
        impl_ = o.impl_->clone();
        return *this;
    }
    DynLrScheduler(DynLrScheduler&&) noexcept = default;
    DynLrScheduler& operator=(DynLrScheduler&&) noexcept = default;
    double step() { return impl_->step(); }
    record::Value to_record() const { return impl_->to_record(); }
    void load_record(const record::Value& r) { impl_->load_record(r); }

  private:
    struct Base {
        virtual ~Base() = default;
        virtual std::unique_ptr<Base> clone() const = 0;
        virtual double step() = 0;
        virtual record::Value to_record() const = 0;
        virtual void load_record(const record::Value& r) = 0;
    };
    template <typename S>
    struct Impl final : Base {
        explicit Impl(S s) : s(std::move(s)) {}
        std::unique_ptr<Base> clone() const override { return std::make_unique<Impl>(s); }
        double step() override { return lr_scheduler::step(s); }
        record::Value to_record() const override { return s.to_record(); }
        void load_record(const record::Value& r) override { s = s.load_record(r); }
        S s;
    };
    std::unique_ptr<Base> impl_;
};

/// Whether `path` is `prefix` or lies under it ("head" covers "head.weight", not "header.w";
/// "" covers every path).
inline bool under_prefix(std::string_view path, std::string_view prefix) {
    if (prefix.empty()) return true;  // the whole module
    return path.size() >= prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
           (path.size() == prefix.size() || path[prefix.size()] == '.');
}

}  // namespace detail

/// An optimizer (an OptimizerAdaptor or any with its step, to_record and load_record) whose
/// parameter groups have learning-rate schedules of their own. `step(lr, module, grads)` steps
/// every group's schedule once, updates the parameters under each group's prefix with that
/// group's rate (the last group whose prefix matches wins) and the others with `lr`.
template <typename O>
class ModuleLrOptimizer {
  public:
    /// The module type stepped.
    using Module = typename O::Module;

    /// Wraps `optimizer`; groups come with with_group.
    explicit ModuleLrOptimizer(O optimizer) : inner_(std::move(optimizer)) {}

    /// A copy where the parameters under `prefix` ("encoder", "head.linear"; "" is every
    /// parameter) follow `scheduler` (any LrScheduler, or a double for a constant rate).
    template <typename S>
    ModuleLrOptimizer with_group(std::string prefix, S scheduler) const {
        using Sched = std::conditional_t<std::is_arithmetic_v<S>, lr_scheduler::ConstantLr, S>;
        static_assert(lr_scheduler::LrScheduler<Sched>,
                      "ModuleLrOptimizer::with_group: a learning rate or an lr_scheduler");
        ModuleLrOptimizer out = *this;
        out.groups_.push_back({std::move(prefix), detail::DynLrScheduler(Sched(scheduler))});
        return out;
    }

    /// One step: each group's schedule advances and its parameters move with its rate, the
    /// others with `lr`. ArgumentError (from the inner optimizer) for a negative rate.
    Module step(double lr, Module module, GradientsParams grads) {
        std::vector<double> rates;
        rates.reserve(groups_.size());
        for (auto& g : groups_) rates.push_back(g.schedule.step());
        // Each group's gradients are taken out of `grads`, so the inner optimizer only moves
        // (and only advances the state of) that group's parameters at that rate.
        std::vector<GradientsParams> parts(groups_.size());
        module.visit([&](std::string_view path, const auto& p) {
            using T = ParamTraits<module::detail::Bare<decltype(p)>>;
            if constexpr (T::is_float) {
                std::size_t owner = groups_.size();
                for (std::size_t k = 0; k < groups_.size(); ++k)
                    if (detail::under_prefix(path, groups_[k].prefix)) owner = k;
                if (owner == groups_.size()) return;
                using IB = InnerBackend<typename T::Backend>;
                if (auto t = grads.template remove<IB, T::rank>(p.id()))
                    parts[owner].register_(p.id(), std::move(*t));
            }
        });
        for (std::size_t k = 0; k < groups_.size(); ++k)
            if (!parts[k].is_empty())
                module = inner_.step(rates[k], std::move(module), std::move(parts[k]));
        if (!grads.is_empty()) module = inner_.step(lr, std::move(module), std::move(grads));
        return module;
    }

    /// {optimizer: the inner record, schedulers: [each group's schedule record]}.
    record::Value to_record() const {
        record::List schedules;
        for (const auto& g : groups_) schedules.push_back(g.schedule.to_record());
        return record::Map{{"optimizer", inner_.to_record()}, {"schedulers", std::move(schedules)}};
    }
    /// A copy with the inner optimizer's state and the groups' positions of `record`;
    /// FormatError when it has another number of groups (or a part does not fit).
    ModuleLrOptimizer load_record(const record::Value& record) const {
        const auto& list = record.at("schedulers").as<record::List>("schedulers");
        EMBER_CHECK(list.size() == groups_.size(), Format,
                    "ModuleLrOptimizer::load_record: the record has ", list.size(),
                    " group schedules, this optimizer ", groups_.size());
        ModuleLrOptimizer out = *this;
        out.inner_ = inner_.load_record(record.at("optimizer"));
        for (std::size_t k = 0; k < groups_.size(); ++k)
            out.groups_[k].schedule.load_record(list[k]);
        return out;
    }

    /// The wrapped optimizer.
    const O& inner() const { return inner_; }

  private:
    template <typename P>
    using ParamTraits = ::ember::optim::detail::ParamTraits<P>;
    struct Group {
        std::string prefix;
        detail::DynLrScheduler schedule;
    };
    O inner_;
    std::vector<Group> groups_;
};

/// Wraps `optimizer` for per-group learning rates: `with_module_lr(adam).with_group("head",
/// ExponentialLrSchedulerConfig{1e-3, 0.99}.init())`.
template <typename O>
ModuleLrOptimizer<O> with_module_lr(O optimizer) {
    return ModuleLrOptimizer<O>(std::move(optimizer));
}

}  // namespace ember::optim
