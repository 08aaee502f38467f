#pragma once
// Data parallelism for the GPT example: each replica (a GPU) holds the whole model, trains on its
// shard of the step's batch, and the replicas' gradients are averaged during backward by
// ember::collective::GradientReducer (one NCCL all-reduce per bucket, started as soon as
// backward has the bucket's gradients), so that the same AdamW step on every replica keeps the
// replicas identical. The collective layer works on a stack's own tensors (ember::Dispatch
// hides them), so the parallel code is compiled for the concrete CUDA stacks only
// (train_cuda.cpp); on Dispatch, `Replica` is always the single one and nothing here runs.
#include <ember/collective/gradients.hpp>
#include <ember/ember.hpp>
#include <ember/optim.hpp>

#include <concepts>
#include <cstddef>
#include <utility>

#include "model.hpp"

namespace gpt {

/// One replica's place in data-parallel training: its endpoint of the group, or none when it is
/// the only one.
struct Replica {
    ember::collective::Collective* comm = nullptr;  ///< null: one device, nothing to reduce
    std::size_t rank = 0;                           ///< this replica's rank
    std::size_t world = 1;                          ///< number of replicas

    /// Whether this replica prints, evaluates and writes checkpoints (rank 0).
    bool lead() const { return rank == 0; }
};

/// Whether `B` is an autodiff stack over another backend (Autodiff<Cuda>, Autodiff<Cpu>), whose
/// tensors the collective layer reduces in place, rather than ember::Dispatch (its own inner
/// backend, whose tensors would go through host memory, which NCCL refuses).
template <typename B>
inline constexpr bool kCollectiveStack = !std::same_as<typename B::InnerBackend, B>;

/// The gradients of `loss` (computed by `model` on this replica's shard) for the optimizer:
/// the mean over the replicas when there are several (the gradient of the mean loss over the
/// whole batch, the shards being of equal size), reduced while backward runs.
template <ember::AutodiffBackend B>
ember::optim::GradientsParams replica_gradients(const Gpt<B>& model, const Tensor<B, 1>& loss,
                                                const Replica& rep) {
    if constexpr (kCollectiveStack<B>) {
        if (rep.comm) {
            // Made before backward: it learns the parameters' graph nodes from the model.
            ember::collective::GradientReducer<Gpt<B>> reducer(*rep.comm, model);
            ember::optim::GradientsParams grads;
            {
                auto scope = reducer.attach();
                grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
            }
            return reducer.finish(std::move(grads));
        }
    }
    return ember::optim::GradientsParams::from_grads(loss.backward(), model);
}

/// The mean over the replicas of each one's `loss` (its own where it is alone), read on the
/// host. Every replica calls it at the same point of its step.
template <ember::AutodiffBackend B>
double mean_loss(Tensor<B, 1> loss, const Replica& rep) {
    if constexpr (kCollectiveStack<B>) {
        if (rep.comm)
            loss = ember::collective::all_reduce(*rep.comm, std::move(loss),
                                                 ember::collective::ReduceOp::Mean);
    }
    return double(loss.into_scalar());
}

/// One optimizer step of replica `rep` on its shard (`inputs` [n, S], `targets` [n · S]):
/// forward, backward with the gradients averaged over the replicas, then `optim`'s step at
/// rate `lr`. Returns the stepped model and this replica's loss (not yet read). With `bf16` the
/// forward pass and the loss run under ember::Autocast (on the replica's own thread: the policy
/// is per thread).
template <ember::AutodiffBackend B, typename Optim>
std::pair<Gpt<B>, Tensor<B, 1>> replica_step(Gpt<B> model, Optim& optim, double lr,
                                             const Tensor<B, 2, ember::Int>& inputs,
                                             const Tensor<B, 1, ember::Int>& targets,
                                             const Replica& rep, bool bf16 = false) {
    auto loss = [&] {
        const ember::Autocast autocast(ember::DType::BF16, bf16);
        return model.loss(inputs, targets);
    }();
    // The gradients first: `model` moves into step() below.
    auto grads = replica_gradients(model, loss, rep);
    model = optim.step(lr, std::move(model), std::move(grads));
    return {std::move(model), std::move(loss)};
}

}  // namespace gpt
