#pragma once
// Gradient synchronisation for data-parallel training: every replica of a model holds the
// gradients of its shard of the batch; GradientReducer (during backward) and sync_gradients
// (after it) make each replica's gradients the (weighted) mean over replicas, so that the same
// optimizer step on every replica keeps them identical. Gradients are packed into flat buckets
// of about `bucket_bytes` (in reverse parameter order, which every fork shares), one all-reduce
// per bucket, as PyTorch's DistributedDataParallel does.
#include <algorithm>
#include <any>
#include <cmath>
#include <cstddef>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "../autodiff/gradients.hpp"
#include "../optim/gradients_params.hpp"
#include "ops.hpp"

namespace ember::collective {

/// How sync_gradients and GradientReducer combine the replicas' gradients.
struct GradientSyncOptions {
    /// Gradients are packed into all-reduces of about this many bytes (a parameter larger than
    /// a bucket gets one of its own). 25 MiB, DistributedDataParallel's default.
    std::size_t bucket_bytes = std::size_t{25} << 20;
    /// The first bucket (the last parameters, whose gradients come first) is capped lower, so
    /// that reducing starts early in the backward pass. 1 MiB, as in DistributedDataParallel.
    std::size_t first_bucket_bytes = std::size_t{1} << 20;
    /// ReduceOp::Mean: the replicas' mean (shards of equal size). ReduceOp::Sum: their sum.
    ReduceOp op = ReduceOp::Mean;
    /// When set, this replica's gradients are multiplied by it and the replicas' products are
    /// summed (`op` is ignored): with weight = this shard's items / the batch's items, the result
    /// is the gradient of the mean loss over a batch split into unequal shards.
    std::optional<double> weight = std::nullopt;
};

namespace detail {
/// The key of GradientReducer's constructor for sync_gradients (no hook into backward).
struct Unhooked {
    explicit Unhooked() = default;
};
}  // namespace detail

namespace detail {

/// What GradientReducer does that does not depend on the module's type: the slots of its
/// parameters, the buckets, the all-reduces (one instance per inner backend, whatever the
/// models; GradientReducer<M> adds the walk over M's parameters). Its members are defined out of
/// the class, so not inline: ember_dispatch compiles the Dispatch instance once
/// (<ember/dispatch/train.hpp> declares it extern).
template <Backend IB>
class GradientReducerCore : public GradientHook {
    using Flat = Tensor<IB, 1>;

  public:
    GradientReducerCore(const GradientReducerCore&) = delete;
    GradientReducerCore& operator=(const GradientReducerCore&) = delete;
    ~GradientReducerCore() override;

    /// Makes this reducer see the gradients of the backward passes the current thread runs
    /// while the returned scope lives.
    [[nodiscard]] ScopedGradientHook attach() { return ScopedGradientHook(*this); }

    /// Takes a parameter's final gradient from backward (GradientHook) and starts the
    /// all-reduces it completes. ArgumentError when the parameter already had one this step.
    void on_gradient(NodeId id, const std::any& grad) override;

    /// The combined gradients. `grads` (this replica's gradients, as its step returned them)
    /// supplies what the reducer did not see during backward; the rest of it is dropped.
    /// Waits for the all-reduces (the host, not a device, where the collective allows it).
    optim::GradientsParams finish(optim::GradientsParams grads);

    /// Number of buckets.
    std::size_t num_buckets() const { return buckets_.size(); }
    /// Number of buckets whose all-reduce started during backward, before finish().
    std::size_t overlapped() const { return overlapped_; }

  protected:
    // `hooked`: whether on_gradient will be used (sync_gradients leaves lazy parameters be).
    GradientReducerCore(Collective& c, GradientSyncOptions options, bool hooked);

    bool hooked() const { return hooked_; }

    /// Adds a trainable float parameter of rank D; `node`: the graph node whose gradient
    /// on_gradient takes for it (none: its gradient comes to finish()).
    template <std::size_t D>
    void add_slot(ParamId id, Shape shape, DType dtype, Device<IB> device,
                  std::optional<NodeId> node);

    /// Packs the slots into buckets, in reverse: the last ones' gradients are final first.
    void make_buckets();

  private:
    struct Slot {
        ParamId id;
        Shape shape;
        DType dtype = DType::F32;
        Device<IB> device;
        std::size_t bucket = 0;
        std::optional<Flat> grad{};
        // The parameter's gradient taken out of a step's gradients (rank-specific), flattened.
        std::function<std::optional<Flat>(optim::GradientsParams&)> take{};
        // Registers the parameter's combined gradient: elements [at, at + n) of a bucket.
        std::function<void(optim::GradientsParams&, const Flat&, std::size_t)> unpack{};
    };
    struct Bucket {
        std::vector<std::size_t> slots;
        std::size_t missing = 0;
        std::optional<PendingAllReduce<IB, 1, Float>> pending;
    };

    // Starts, in bucket order, every bucket whose gradients are all in.
    void start_ready();

    Collective& c_;
    GradientSyncOptions options_;
    std::vector<Slot> slots_;
    std::vector<Bucket> buckets_;
    std::unordered_map<NodeId, std::size_t> by_node_;
    bool hooked_ = true;
    std::size_t next_ = 0, overlapped_ = 0;
    bool finished_ = false;
};

template <Backend IB>
GradientReducerCore<IB>::GradientReducerCore(Collective& c, GradientSyncOptions options,
                                             bool hooked)
    : c_(c), options_(options), hooked_(hooked) {
    EMBER_CHECK(options.bucket_bytes > 0 && options.first_bucket_bytes > 0, Argument,
                "GradientReducer: bucket sizes must be positive, got bucket_bytes ",
                options.bucket_bytes, " and first_bucket_bytes ", options.first_bucket_bytes);
    EMBER_CHECK(!options.weight || std::isfinite(*options.weight), Argument,
                "GradientReducer: the weight must be finite, got ", options.weight.value_or(0));
}

template <Backend IB>
GradientReducerCore<IB>::~GradientReducerCore() = default;

template <Backend IB>
void GradientReducerCore<IB>::on_gradient(NodeId id, const std::any& grad) {
    auto it = by_node_.find(id);
    if (it == by_node_.end()) return;  // not one of the module's parameters
    Slot& s = slots_[it->second];
    EMBER_CHECK(!s.grad && !finished_, Argument, "GradientReducer: parameter ", s.id.to_string(),
                " got a second gradient in one step (backward ran twice?);",
                " use a reducer per backward pass, or sync_gradients afterwards");
    const auto& g = std::any_cast<const typename IB::FloatTensorPrimitive&>(grad);
    s.grad = Flat::from_primitive(IB::float_reshape(g, Shape{s.shape.num_elements()}));
    if (s.grad->dtype() != s.dtype) s.grad = s.grad->cast(s.dtype);
    --buckets_[s.bucket].missing;
    start_ready();
}

template <Backend IB>
optim::GradientsParams GradientReducerCore<IB>::finish(optim::GradientsParams grads) {
    EMBER_CHECK(!finished_, Argument, "GradientReducer: finish() was already called");
    finished_ = true;
    overlapped_ = next_;
    for (Slot& s : slots_) {
        auto given = s.take(grads);
        if (s.grad) continue;
        s.grad = given ? std::move(*given) : Flat::zeros(Shape{s.shape.num_elements()}, s.device);
        if (s.grad->dtype() != s.dtype) s.grad = s.grad->cast(s.dtype);
        --buckets_[s.bucket].missing;
    }
    start_ready();
    optim::GradientsParams out;
    for (Bucket& b : buckets_) {
        const Flat flat = std::move(*b.pending).wait();
        std::size_t offset = 0;
        for (std::size_t k : b.slots) {
            slots_[k].unpack(out, flat, offset);
            offset += slots_[k].shape.num_elements();
        }
    }
    return out;
}

template <Backend IB>
template <std::size_t D>
void GradientReducerCore<IB>::add_slot(ParamId id, Shape shape, DType dtype, Device<IB> device,
                                       std::optional<NodeId> node) {
    if (node) by_node_.emplace(*node, slots_.size());
    Slot s{id, shape, dtype, std::move(device)};
    s.take = [id, shape](optim::GradientsParams& g) -> std::optional<Flat> {
        auto t = g.template remove<IB, D>(id);
        if (!t) return std::nullopt;
        EMBER_CHECK(t->shape() == shape, Shape, "sync_gradients: the gradient of parameter ",
                    id.to_string(), " has shape ", t->shape().to_string(),
                    " but the parameter has shape ", shape.to_string());
        return std::move(*t).template reshape<1>({long(shape.num_elements())});
    };
    s.unpack = [id, shape](optim::GradientsParams& out, const Flat& flat, std::size_t at) {
        const long lo = long(at), hi = long(at + shape.num_elements());
        auto piece = flat.slice(std::array<std::pair<long, long>, 1>{{{lo, hi}}});
        out.register_(id, piece.template reshape<D>(shape));
    };
    slots_.push_back(std::move(s));
}

template <Backend IB>
void GradientReducerCore<IB>::make_buckets() {
    std::size_t bytes = 0;
    for (std::size_t k = slots_.size(); k-- > 0;) {
        const Slot& s = slots_[k];
        const std::size_t b = s.shape.num_elements() * dtype_size(s.dtype);
        const std::size_t cap = buckets_.size() == 1
                                    ? std::min(options_.first_bucket_bytes, options_.bucket_bytes)
                                    : options_.bucket_bytes;
        if (buckets_.empty() || s.dtype != slots_[buckets_.back().slots[0]].dtype ||
            bytes + b > cap) {
            buckets_.emplace_back();
            bytes = 0;
        }
        buckets_.back().slots.push_back(k);
        bytes += b;
    }
    for (std::size_t i = 0; i < buckets_.size(); ++i) {
        buckets_[i].missing = buckets_[i].slots.size();
        for (std::size_t k : buckets_[i].slots) slots_[k].bucket = i;
    }
}

template <Backend IB>
void GradientReducerCore<IB>::start_ready() {
    while (next_ < buckets_.size() && buckets_[next_].missing == 0) {
        Bucket& b = buckets_[next_++];
        std::vector<Flat> parts;
        for (std::size_t k : b.slots) parts.push_back(std::move(*slots_[k].grad));
        Flat flat = parts.size() == 1 ? std::move(parts[0]) : Flat::cat(parts, 0);
        parts.clear();
        if (options_.weight)
            b.pending.emplace(
                all_reduce_async(c_, std::move(flat).mul_scalar(*options_.weight), ReduceOp::Sum));
        else
            b.pending.emplace(all_reduce_async(c_, std::move(flat), options_.op));
    }
}

}  // namespace detail

/// Reduces a replica's gradients over the ranks of a collective while backward still runs, as
/// DistributedDataParallel does. The module's trainable parameters are packed into buckets in
/// reverse order (the order backward produces their gradients); while the reducer is attached
/// to the thread that runs backward(), each bucket's all-reduce starts as soon as its last
/// gradient is final (Collective::all_reduce_async), in bucket order on every rank. finish()
/// starts what is left, waits, and returns the combined gradients.
///
///   collective::GradientReducer reducer(comm, model);
///   optim::GradientsParams grads;
///   {
///       auto scope = reducer.attach();
///       grads = optim::GradientsParams::from_grads(loss.backward(), model);
///   }
///   model = optimizer.step(lr, model, reducer.finish(std::move(grads)));
///
/// What is reduced is what backward() produced: a step that changes gradients after backward
/// (clipping, scaling) must do so after finish(), or use sync_gradients. A parameter with no
/// gradient on this replica counts as zeros, so that every rank packs the same buckets.
/// One reducer serves one step, with a fork of the same module on every rank. Only the walk
/// over the module's parameters depends on M (detail::GradientReducerCore does the rest).
template <module::Module M>
class GradientReducer final
    : public detail::GradientReducerCore<InnerBackend<module::BackendOf<M>>> {
    using Core = detail::GradientReducerCore<InnerBackend<module::BackendOf<M>>>;

  public:
    /// A reducer for `module`'s trainable parameters over `c` (which must outlive it).
    GradientReducer(Collective& c, const M& module, GradientSyncOptions options = {})
        : GradientReducer(c, module, options, true) {}

    /// sync_gradients' reducer: never hooked into backward, so lazy parameters are left be.
    /// (A key type rather than a friend template: Clang before 17 does not match a constrained
    /// friend template with its definition, and refuses the private constructor.)
    GradientReducer(detail::Unhooked, Collective& c, const M& module, GradientSyncOptions options)
        : GradientReducer(c, module, options, false) {}

  private:
    GradientReducer(Collective& c, const M& module, GradientSyncOptions options, bool hooked)
        : Core(c, options, hooked) {
        module.visit([&](std::string_view, const auto& p) { add_param(p); });
        this->make_buckets();
    }

    template <typename Param>
    void add_param(const Param& p) {
        using T = optim::detail::ParamTraits<module::detail::Bare<Param>>;
        if constexpr (T::is_float) {
            // Lazy parameters count too (forks are lazy until used): every rank must pack the
            // same buckets, whatever its replica has touched.
            if (!p.is_require_grad()) return;
            const Shape shape = p.shape();
            // The gradient hook knows a parameter by its graph node, which a lazy parameter
            // gets when its value is made: made here (as its first use would). ember::Dispatch
            // hides its stack's nodes: there every gradient comes to finish() instead.
            std::optional<NodeId> node;
            if constexpr (AutodiffBackend<module::BackendOf<M>> &&
                          requires { p.val().primitive().node; })
                if (this->hooked())
                    // A copy: val() is a temporary, and a reference into it dangles.
                    if (const auto n = p.val().primitive().node) node = n->id;
            this->template add_slot<T::rank>(p.id(), shape, p.dtype(), p.device(), node);
        }
    }
};

/// `grads` (this replica's gradients of `module`'s parameters) combined over the ranks of `c`,
/// after backward: GradientReducer without overlap. Every rank calls it with a fork of the same
/// module. A trainable parameter that has no gradient on this replica (unused in its forward
/// pass, or an empty shard) counts as zeros, so that every rank packs the same buckets; it gets
/// the combined gradient like the others.
template <module::Module M>
optim::GradientsParams sync_gradients(Collective& c, const M& module, optim::GradientsParams grads,
                                      const GradientSyncOptions& options = {}) {
    GradientReducer<M> reducer(detail::Unhooked{}, c, module, options);
    return reducer.finish(std::move(grads));
}

}  // namespace ember::collective

namespace ember::collective {

namespace detail {
/// Moves the gradient of parameter `id` (a float tensor of rank D on B) from `grads` to `out`,
/// multiplied by `factor`: scale_gradients' step for each parameter, whatever the module
/// (ember_dispatch compiles the Dispatch instances once).
template <Backend B, std::size_t D>
void scale_gradient(ParamId id, optim::GradientsParams& grads, optim::GradientsParams& out,
                    double factor) {
    if (auto g = grads.template remove<B, D>(id))
        out.register_(id, std::move(*g).mul_scalar(factor));
}
}  // namespace detail

/// `grads` with every gradient of `module`'s parameters multiplied by `factor` (the others are
/// dropped).
template <module::Module M>
optim::GradientsParams scale_gradients(const M& module, optim::GradientsParams grads,
                                       double factor) {
    using IB = InnerBackend<module::BackendOf<M>>;
    optim::GradientsParams out;
    module.visit([&](std::string_view, const auto& p) {
        using T = optim::detail::ParamTraits<module::detail::Bare<decltype(p)>>;
        if constexpr (T::is_float) detail::scale_gradient<IB, T::rank>(p.id(), grads, out, factor);
    });
    return out;
}

/// `module` with every parameter (lazy ones initialised) replaced by rank `root`'s (every rank
/// passes a module of the same structure): replicas that start from one set of values, as
/// DistributedDataParallel makes them. Parameters keep their ids and trainability.
template <module::Module M>
M broadcast_module(Collective& c, const M& module, std::size_t root) {
    return module::map(module, [&](std::string_view, const auto& p) {
        // Every parameter, lazy ones included (forks are lazy until used): the ranks must
        // make the same calls.
        return p.with_value(broadcast(c, p.val(), root));
    });
}

}  // namespace ember::collective
