#pragma once
// The autodiff graph: one Node per recorded op, owned by the tensors that hold its output and by
// its children. A node keeps its parents, a backward step (a closure that holds what the step
// needs) and, under checkpointing, a recompute closure. Backward walks the nodes reachable from
// the root in reverse topological order and drops each step once it has run, so the memory the
// forward pass saved returns as backward goes.
#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../../export.hpp"
#include "../../tensor/dtype.hpp"
#include "../../tensor/error.hpp"
#include "../gradients.hpp"

namespace ember::detail::ad {

/// A fresh, process-unique node id. Exported (EMBER_API): with a hidden copy in each shared
/// library, nodes made by a program and by ember's libraries could get the same id.
EMBER_API inline NodeId next_node_id() {
    static std::atomic<NodeId> counter{1};
    return counter.fetch_add(1, std::memory_order_relaxed);
}

template <typename B>
struct Node;
template <typename B>
using NodeRef = std::shared_ptr<Node<B>>;
template <typename B>
class BackwardCtx;

/// A value a backward step needs: either kept (the primitive) or, under checkpointing, rebuilt
/// on demand from the node that produced it.
template <typename B>
struct Saved {
    using P = typename B::FloatTensorPrimitive;
    std::optional<P> value;   ///< the kept value
    Node<B>* lazy = nullptr;  ///< otherwise: the node whose output to recompute
    NodeRef<B> keep{};        ///< keeps `lazy` alive when it is not the step's own node
};

/// One recorded op (or a leaf that requires a gradient).
template <typename B>
struct Node {
    using P = typename B::FloatTensorPrimitive;
    using Step = std::function<void(BackwardCtx<B>&, P)>;
    using Recompute = std::function<P(BackwardCtx<B>&)>;

    NodeId id = next_node_id();
    std::size_t order = 0;            ///< 1 + the parents' largest order (leaves: 0)
    std::vector<NodeRef<B>> parents;  ///< null where an input needs no gradient
    Step step;                        ///< empty for leaves and once consumed
    Recompute recompute;              ///< set for checkpointed (memory-bound) ops
    DType dtype = DType::F32;         ///< the output's dtype: gradients arrive in it
    bool leaf = false;                ///< a require_grad tensor: its gradient is kept
    bool consumed = false;            ///< backward already ran through this node
    /// Backward keeps the step (and recompute) after running it, so later backward passes
    /// may run it again: autocast's cached parameter casts, shared by the forward passes of a
    /// region, whose step saves nothing but the source dtype.
    bool reusable = false;
};

/// What a backward step sees: the gradients accumulated so far, and access to saved values.
template <typename B>
class BackwardCtx {
  public:
    using P = typename B::FloatTensorPrimitive;

    /// Whether the current node's input `i` needs a gradient.
    bool needs(std::size_t i) const {
        return i < current_->parents.size() && current_->parents[i] != nullptr;
    }
    /// Adds `g` to the gradient of the current node's input `i` (ignored when not needed).
    void add(std::size_t i, P g) {
        if (!needs(i)) return;
        const Node<B>& parent = *current_->parents[i];
        // A gradient takes its input's dtype (f32 + f64 promotes forward, not backward).
        if (B::float_dtype(g) != parent.dtype) g = B::float_cast(std::move(g), parent.dtype);
        const NodeId id = parent.id;
        auto it = grads_.find(id);
        if (it == grads_.end())
            grads_.emplace(id, std::move(g));
        else
            it->second = B::float_binary(BinaryOp::Add, std::move(it->second), std::move(g));
    }
    /// Removes and returns the gradient that the current node's input `i` has collected so far
    /// from its other consumers (nothing when it has none or needs none). A step that takes it
    /// must add it back within its own gradient (a kernel that adds it while writing saves a
    /// pass over the tensor).
    std::optional<P> take_partial(std::size_t i) {
        if (!needs(i)) return std::nullopt;
        return take(current_->parents[i]->id);
    }
    /// The value behind `s`, recomputing it (and what it depends on) when it was not kept.
    /// Recomputed values are not cached: each lives only until its consumer is rebuilt, which
    /// keeps the peak low at the price of rebuilding a chain of k checkpointed ops k times.
    P get(const Saved<B>& s) {
        if (s.value) return *s.value;
        Node<B>* n = s.lazy;
        EMBER_CHECK(n->recompute != nullptr, Argument,
                    "backward: a checkpointed value was released before it was needed");
        Node<B>* saved = current_;
        P v = n->recompute(*this);
        current_ = saved;
        return v;
    }

    // Used by the driver.
    void set_current(Node<B>* n) { current_ = n; }
    std::optional<P> take(NodeId id) {
        auto it = grads_.find(id);
        if (it == grads_.end()) return std::nullopt;
        P g = std::move(it->second);
        grads_.erase(it);
        return g;
    }
    void seed(NodeId id, P g) { grads_.emplace(id, std::move(g)); }

  private:
    std::unordered_map<NodeId, P> grads_;
    Node<B>* current_ = nullptr;
};

/// Runs backward from `root` seeded with `seed` and returns the leaves' gradients. A leaf's
/// gradient is final once every reachable node that consumes it has run: it is handed to the
/// thread's GradientHook at that moment, not at the end, so that work on the first gradients
/// (a data-parallel all-reduce) overlaps the rest of the pass.
template <typename B>
Gradients run_backward(const NodeRef<B>& root, typename B::FloatTensorPrimitive seed) {
    Gradients out;
    if (!root) return out;
    // Collect the reachable nodes (iteratively: graphs can be deep), counting for each leaf the
    // edges from reachable consumers.
    std::vector<Node<B>*> nodes;
    std::unordered_set<Node<B>*> seen;
    std::unordered_map<Node<B>*, std::size_t> waiting;
    std::vector<Node<B>*> stack{root.get()};
    seen.insert(root.get());
    while (!stack.empty()) {
        Node<B>* n = stack.back();
        stack.pop_back();
        nodes.push_back(n);
        for (const auto& p : n->parents) {
            if (!p) continue;
            if (p->leaf) ++waiting[p.get()];
            if (seen.insert(p.get()).second) stack.push_back(p.get());
        }
    }
    // Children before parents: a node's order exceeds every parent's.
    std::stable_sort(nodes.begin(), nodes.end(),
                     [](const Node<B>* a, const Node<B>* b) { return a->order > b->order; });
    GradientHook* hook = ember::detail::current_gradient_hook();
    BackwardCtx<B> ctx;
    ctx.seed(root->id, std::move(seed));
    auto finish_leaf = [&](const Node<B>& leaf) {
        auto g = ctx.take(leaf.id);  // none once finished: a leaf is handed over once
        if (!g) return;
        if (hook) hook->on_gradient(leaf.id, std::any(*g));
        out.insert(leaf.id, std::move(*g));
    };
    for (Node<B>* n : nodes) {
        if (n->leaf) {
            finish_leaf(*n);  // the root itself, or a leaf whose consumers had no gradient
            continue;
        }
        if (auto g = ctx.take(n->id)) {
            EMBER_CHECK(!n->consumed, Argument,
                        "backward: the graph behind this tensor was already consumed by an "
                        "earlier backward() (record the forward pass again)");
            ctx.set_current(n);
            n->step(ctx, std::move(*g));
            // Nothing later reads this node's saved values: free them now.
            if (!n->reusable) {
                n->step = nullptr;
                n->recompute = nullptr;
                n->consumed = true;
            }
        }
        for (const auto& p : n->parents)
            if (p && p->leaf && --waiting[p.get()] == 0) finish_leaf(*p);
    }
    return out;
}

}  // namespace ember::detail::ad
