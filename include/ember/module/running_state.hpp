#pragma once
// RunningState: module state that forward() updates (BatchNorm's running mean and variance).
// Forward passes are const, so the state lives behind a shared pointer: copies of a module share
// it, as Burn's RunningState shares its Arc. It is recorded like a parameter but never optimised.
#include <memory>

#include "param.hpp"

namespace ember {

template <typename T>
class RunningState;

/// A tensor that forward passes update in place (no gradient, saved in records).
template <Backend B, std::size_t D>
class RunningState<Tensor<B, D>> {
public:
    /// The tensor type.
    using Value = Tensor<B, D>;

    /// A state holding `value`, with a fresh id.
    explicit RunningState(Value value) : RunningState(ParamId::make(), std::move(value)) {}
    /// A state with the given id.
    RunningState(ParamId id, Value value)
        : id_(id), state_(std::make_shared<State>(value.detach())) {}

    /// The current value.
    Value value() const {
        detail::LockGuard lock(state_->mutex);
        return state_->value;
    }
    /// Replaces the value (detached: running statistics carry no graph).
    void update(const Value& value) const {
        auto v = value.detach();
        detail::LockGuard lock(state_->mutex);
        state_->value = std::move(v);
    }
    /// The id.
    ParamId id() const { return id_; }
    /// The shape.
    Shape shape() const { return value().shape(); }
    /// A new, unshared state with the same id holding `f(value())`.
    template <typename F>
    RunningState map(F&& f) const {
        return RunningState(id_, f(value()));
    }

private:
    struct State {
        explicit State(Value v) : value(std::move(v)) {}
        detail::Mutex mutex;
        Value value;
    };
    ParamId id_;
    std::shared_ptr<State> state_;
};

}  // namespace ember
