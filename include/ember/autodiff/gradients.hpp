#pragma once
// ember::Gradients: what backward() returns — the gradient of each leaf tensor that required
// one, keyed by the leaf's graph node. It owns plain tensors of the inner backend, so it can be
// moved to another thread (a data-parallel worker, an optimizer thread).
#include <any>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>

#include "../export.hpp"

namespace ember {

/// Identifies a node of the autodiff graph (and so a leaf tensor and its parameter).
using NodeId = std::uint64_t;

/// Gradients of the leaves of one backward pass, keyed by node id. Entries are inner-backend
/// float primitives; `Tensor::grad(grads)` gives them back as tensors of the right rank.
class Gradients {
  public:
    /// Number of gradients held.
    std::size_t size() const { return map_.size(); }
    /// Whether no gradient is held.
    bool empty() const { return map_.empty(); }
    /// Whether a gradient for `id` is held.
    bool contains(NodeId id) const { return map_.count(id) != 0; }

    /// The gradient for `id` as primitive `P`, if present.
    template <typename P>
    std::optional<P> get(NodeId id) const {
        auto it = map_.find(id);
        if (it == map_.end()) return std::nullopt;
        return std::any_cast<const P&>(it->second);
    }
    /// Removes and returns the gradient for `id`.
    template <typename P>
    std::optional<P> remove(NodeId id) {
        auto it = map_.find(id);
        if (it == map_.end()) return std::nullopt;
        P p = std::any_cast<P&&>(std::move(it->second));
        map_.erase(it);
        return p;
    }
    /// Sets (or replaces) the gradient for `id`.
    template <typename P>
    void insert(NodeId id, P grad) {
        map_.insert_or_assign(id, std::any(std::move(grad)));
    }

  private:
    std::unordered_map<NodeId, std::any> map_;
};

/// Sees each leaf's gradient during backward(), as soon as it is final: before backward()
/// returns, on the thread that runs it. Data-parallel training starts reducing gradients this
/// way while the rest of backward still runs (collective::GradientReducer), as
/// DistributedDataParallel's autograd hooks do.
class EMBER_API GradientHook {
  public:
    virtual ~GradientHook() = default;
    /// Leaf `id`'s gradient: `grad` holds the inner backend's float primitive (the same value
    /// backward() returns for `id`). An exception thrown here aborts the backward pass.
    virtual void on_gradient(NodeId id, const std::any& grad) = 0;
};

namespace detail {
/// The hook of the current thread's backward passes (null: none). Exported (EMBER_API), so that
/// a program and ember's shared libraries see one hook, not a copy each.
EMBER_API inline GradientHook*& current_gradient_hook() {
    thread_local GradientHook* hook = nullptr;
    return hook;
}
}  // namespace detail

/// Installs `hook` for the backward passes this thread runs while the scope lives; the hook it
/// replaced comes back when the scope ends.
class ScopedGradientHook {
  public:
    /// Makes `hook` the current thread's gradient hook.
    explicit ScopedGradientHook(GradientHook& hook) : previous_(detail::current_gradient_hook()) {
        detail::current_gradient_hook() = &hook;
    }
    ~ScopedGradientHook() { detail::current_gradient_hook() = previous_; }
    ScopedGradientHook(const ScopedGradientHook&) = delete;
    ScopedGradientHook& operator=(const ScopedGradientHook&) = delete;

  private:
    GradientHook* previous_;
};

}  // namespace ember
