#pragma once
// The scalars of the optional backend op `float_sgd_step` (CUDA, Fusion<Cuda>, Dispatch), which
// ember::optim::Sgd uses when the backend has it.
namespace ember {

/// The scalars of one SGD update with momentum, for backends that fuse it into one pass
/// (`float_sgd_step`, an optional backend capability that ember::optim's Sgd uses when present),
/// rounded as Sgd's composed ops round each step:
///   g ← g + weight_decay·p (when weight_decay ≠ 0),  v ← momentum·v + (1 − dampening)·g,
///   p ← p − lr·(nesterov ? g + momentum·v : v)
struct SgdStepScalars {
    double lr;                ///< learning rate
    double momentum;          ///< μ, the velocity's decay
    double dampening;         ///< how much of the gradient is left out of the velocity
    double weight_decay = 0;  ///< L2 penalty added to the gradient (0: none)
    bool nesterov = false;    ///< Nesterov's look-ahead form
};

}  // namespace ember
