#pragma once
// Gradient synchronisation for data-parallel training: every replica of a model holds the
// gradients of its shard of the batch; sync_gradients makes each replica's gradients the
// (weighted) mean over replicas, so that the same optimizer step on every replica keeps them
// identical. Gradients are packed into flat buckets of about `bucket_bytes` (in the module's
// parameter order, which every fork shares), one all-reduce per bucket, as PyTorch's
// DistributedDataParallel does.
#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

#include "../optim/gradients_params.hpp"
#include "ops.hpp"

namespace ember::collective {

/// How sync_gradients combines the replicas' gradients.
struct GradientSyncOptions {
    /// Gradients are packed into all-reduces of about this many bytes (a parameter larger than
    /// a bucket gets one of its own). 25 MiB, DistributedDataParallel's default.
    std::size_t bucket_bytes = std::size_t{25} << 20;
    /// ReduceOp::Mean: the replicas' mean (shards of equal size). ReduceOp::Sum: their sum.
    ReduceOp op = ReduceOp::Mean;
    /// When set, this replica's gradients are multiplied by it and the replicas' products are
    /// summed (`op` is ignored): with weight = this shard's items / the batch's items, the result
    /// is the gradient of the mean loss over a batch split into unequal shards.
    std::optional<double> weight;
};

/// `grads` (this replica's gradients of `module`'s parameters) combined over the ranks of `c`.
/// Every rank calls it with a fork of the same module. A trainable parameter that has no
/// gradient on this replica (unused in its forward pass, or an empty shard) counts as zeros,
/// so that every rank packs the same buckets; it gets the combined gradient like the others.
template <module::Module M>
optim::GradientsParams sync_gradients(Collective& c, const M& module, optim::GradientsParams grads,
                                      const GradientSyncOptions& options = {}) {
    using IB = InnerBackend<module::BackendOf<M>>;
    EMBER_CHECK(options.bucket_bytes > 0, Argument,
                "sync_gradients: bucket_bytes must be positive");
    EMBER_CHECK(!options.weight || std::isfinite(*options.weight), Argument,
                "sync_gradients: the weight must be finite, got ", options.weight.value_or(0));
    optim::GradientsParams out;
    std::vector<Tensor<IB, 1>> parts;
    std::vector<std::function<void(const Tensor<IB, 1>&, std::size_t)>> unpack;
    std::vector<std::size_t> sizes;
    std::size_t bytes = 0;
    std::optional<DType> dtype;
    auto flush = [&] {
        if (parts.empty()) return;
        auto flat = parts.size() == 1 ? parts[0] : Tensor<IB, 1>::cat(parts, 0);
        parts.clear();
        if (options.weight)
            flat = all_reduce(c, std::move(flat).mul_scalar(*options.weight), ReduceOp::Sum);
        else
            flat = all_reduce(c, std::move(flat), options.op);
        std::size_t offset = 0;
        for (std::size_t i = 0; i < unpack.size(); ++i) {
            unpack[i](flat, offset);
            offset += sizes[i];
        }
        unpack.clear();
        sizes.clear();
        bytes = 0;
    };
    module.visit([&](std::string_view, const auto& p) {
        using T = optim::detail::ParamTraits<module::detail::Bare<decltype(p)>>;
        if constexpr (T::is_float) {
            constexpr std::size_t D = T::rank;
            // Lazy parameters count too (forks are lazy until used): every rank must pack the
            // same buckets, whatever its replica has touched.
            if (!p.is_require_grad()) return;
            const Shape shape = p.shape();
            auto g = grads.template remove<IB, D>(p.id());
            Tensor<IB, D> grad = g ? std::move(*g) : Tensor<IB, D>::zeros(shape, p.device());
            if (!g && p.dtype() != grad.dtype()) grad = grad.cast(p.dtype());
            EMBER_CHECK(grad.shape() == shape, Shape, "sync_gradients: the gradient of parameter ",
                        p.id().to_string(), " has shape ", grad.shape().to_string(),
                        " but the parameter has shape ", shape.to_string());
            const std::size_t n = shape.num_elements();
            const std::size_t b = n * dtype_size(grad.dtype());
            if (!parts.empty() && (grad.dtype() != *dtype || bytes + b > options.bucket_bytes))
                flush();
            dtype = grad.dtype();
            parts.push_back(grad.template reshape<1>({long(n)}));
            sizes.push_back(n);
            bytes += b;
            unpack.push_back([&out, id = p.id(), shape](const Tensor<IB, 1>& flat, std::size_t at) {
                const long lo = long(at), hi = long(at + shape.num_elements());
                auto piece = flat.slice(std::array<std::pair<long, long>, 1>{{{lo, hi}}});
                out.register_(id, piece.template reshape<D>(shape));
            });
        }
    });
    flush();
    return out;
}

}  // namespace ember::collective

namespace ember::collective {

/// `grads` with every gradient of `module`'s parameters multiplied by `factor` (the others are
/// dropped).
template <module::Module M>
optim::GradientsParams scale_gradients(const M& module, optim::GradientsParams grads,
                                       double factor) {
    using IB = InnerBackend<module::BackendOf<M>>;
    optim::GradientsParams out;
    module.visit([&](std::string_view, const auto& p) {
        using T = optim::detail::ParamTraits<module::detail::Bare<decltype(p)>>;
        if constexpr (T::is_float) {
            if (auto g = grads.template remove<IB, T::rank>(p.id()))
                out.register_(p.id(), std::move(*g).mul_scalar(factor));
        }
    });
    return out;
}

/// `module` with every parameter (lazy ones initialised) replaced by rank `root`'s (every rank passes a module of the
/// same structure): replicas that start from one set of values, as DistributedDataParallel
/// makes them. Parameters keep their ids and trainability.
template <module::Module M>
M broadcast_module(Collective& c, const M& module, std::size_t root) {
    return module::map(module, [&](std::string_view, const auto& p) {
        // Every parameter, lazy ones included (forks are lazy until used): the ranks must
        // make the same calls.
        return p.with_value(broadcast(c, p.val(), root));
    });
}

}  // namespace ember::collective
