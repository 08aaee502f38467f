#pragma once
// Automatic mixed precision (PyTorch's torch.autocast): while an `ember::Autocast` guard is alive
// on a thread, the ops below cast their float operands on that thread, so that a model whose
// parameters are f32 runs its products in bf16 (or f16) and its numerically sensitive ops in f32.
//
// Why a thread-local policy the ops consult, and not a module option or a backend decorator:
// - it is PyTorch's semantics, which the users of these models know and the fixtures come from:
//   the same model code runs in f32 or mixed precision by wrapping its forward pass in a guard;
// - the casts are ordinary recorded ops, so Autodiff differentiates through them (a cast's
//   gradient is cast back), and the parameters, their gradients and the optimizer's state stay
//   f32 without any optimizer knowing about it;
// - a backend decorator would see primitives without knowing which module called them (a
//   matmul inside a loss is not a Linear), and a per-module option would have to be threaded
//   through every layer and composed op.
// Backward and the optimizer step run outside the guard (as with torch.autocast): backward
// computes each op's gradient in the dtype that op ran in, whatever the policy.
//
// Which ops cast (the lists follow PyTorch's CUDA autocast lists, restricted to ember's ops):
// - to the autocast dtype (operands that are f32, f16 or bf16; f64 ones are left alone):
//   Tensor::matmul, module::linear (input, weight and bias: the output is bf16),
//   module::conv1d/conv2d/conv3d and conv_transpose1d/2d/3d (input, weight, bias),
//   module::attention (q, k, v and an additive mask) — and so nn::Linear, nn::Conv1d/2d/3d,
//   nn::ConvTranspose*, nn::MultiHeadAttention and the transformer layers;
// - to f32 (operands that are f16 or bf16): activation::softmax, log_softmax (and softmin),
//   Tensor::sum/sum_dim and prod/prod_dim, module::layer_norm (nn::LayerNorm), nn::GroupNorm,
//   nn::InstanceNorm and nn::RmsNorm (input and affine parameters), nn::loss's CrossEntropyLoss,
//   BinaryCrossEntropyLoss, MseLoss and HuberLoss (predictions and targets);
// - nn::BatchNorm computes its statistics and the normalisation in f32 and returns its input's
//   dtype (what cuDNN's batch norm does under PyTorch's autocast);
// - every other op runs in its operands' dtype, mixed dtypes promoting to the wider one (a bf16
//   product added to an f32 residual is f32), as without a guard.
// The weight-cast cache (PyTorch's autocast cache): within one region (from the outermost guard's
// construction to its destruction) the cast of a parameter (a leaf that keeps its gradient) to
// the autocast dtype is made once and reused by every later use: a weight used twice is cast
// once. Its key is the leaf's autodiff node id, which is never reused (an optimizer step makes
// new leaves) and the cache is emptied when the outermost guard goes, so a parameter updated
// between regions is cast anew. Activations (non-leaves) and tensors of a backend without
// autodiff are cast at each use. The shared cast is one graph node: backward sums its uses'
// gradients (in the cast's dtype, as PyTorch's engine does) and casts the sum back once, and
// several backward passes may run through it within the region (micro-steps in one region).
// Differences from PyTorch: its f32 list also has pointwise functions (exp, log, pow, ...) that
// ember leaves in their operands' dtype, and f32 losses outside the four above promote only
// through f32 targets.
#include <any>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "../export.hpp"
#include "dtype.hpp"
#include "error.hpp"

namespace ember {

namespace detail::autocast {
/// A thread's autocast state: the policy, how many guards are alive, and how many casts were
/// made. The cast cache is the thread's too, kept in the ember library (cache_find below), so
/// that every file including the tensor API does not parse <unordered_map> for it.
struct State {
    std::optional<DType> dtype;  ///< the active autocast dtype (empty: no autocast)
    std::size_t depth = 0;       ///< guards alive on the thread (enabled or not)
    bool cache_enabled = true;   ///< whether lower() may reuse a parameter's cast
    std::uint64_t casts = 0;     ///< casts autocast made on the thread (what the tests count)
};
/// The calling thread's cached parameter cast under `key` (leaf id and target dtype), a std::any
/// holding the Tensor (the cache is per thread, not per backend); null when there is none.
EMBER_API const std::any* cache_find(std::uint64_t key);
/// Caches `cast` under `key` for the calling thread (replacing what was there).
EMBER_API void cache_store(std::uint64_t key, std::any cast);
/// Empties the calling thread's cache.
EMBER_API void cache_clear() noexcept;
/// How many parameter casts the thread's cache holds now.
EMBER_API std::size_t cached_casts() noexcept;
/// The calling thread's state.
inline State& state() noexcept {
#if defined(EMBER_FREESTANDING) && EMBER_FREESTANDING
    static State s;  // firmware has no threads (and maybe no TLS)
#else
    thread_local State s;
#endif
    return s;
}
/// The calling thread's autocast dtype (empty: no autocast).
inline std::optional<DType>& current() noexcept {
    return state().dtype;
}
/// How many casts autocast's ops have made on this thread (cache hits and tensors already in
/// the target dtype make none). A diagnostic for tests.
inline std::uint64_t cast_count() noexcept {
    return state().casts;
}

/// `t` cast to `to`, counted.
template <typename T>
T counted_cast(const T& t, DType to) {
    ++state().casts;
    return t.cast(to);
}

/// True for the dtypes autocast converts (f32, f16, bf16): f64 and integers are left alone.
constexpr bool castable(DType d) {
    return d == DType::F32 || d == DType::F16 || d == DType::BF16;
}

/// `t` in the autocast dtype `to` if it is castable and not already in it. Inside a region
/// with the cache on, a parameter's cast (a leaf that keeps its gradient, on a backend that
/// names its leaves with float_leaf_id) comes from the thread's cache, made there at its first
/// use; the cached cast's node is kept reusable (float_keep_graph) for later backward passes.
template <typename T>
T lower(const T& t, DType to) {
    const DType d = t.dtype();
    if (d == to || !castable(d)) return t;
    using B = typename T::BackendType;
    if constexpr (requires(const typename B::FloatTensorPrimitive& p) {
                      { B::float_leaf_id(p) } -> std::convertible_to<std::uint64_t>;
                      { B::float_keep_graph(p) } -> std::same_as<typename B::FloatTensorPrimitive>;
                  }) {
        State& s = state();
        if (s.cache_enabled && s.depth > 0) {
            if (const std::uint64_t id = B::float_leaf_id(t.primitive())) {
                // Node ids are process-unique and small (a counter): room for the dtype bit.
                const std::uint64_t key = id * 2 + (to == DType::F16 ? 1 : 0);
                if (const std::any* cached = cache_find(key))
                    if (const T* hit = std::any_cast<T>(cached)) return *hit;
                T c(B::float_keep_graph(counted_cast(t, to).primitive()));
                cache_store(key, std::any(c));
                return c;
            }
        }
    }
    return counted_cast(t, to);
}
/// `t` when no guard is active or it is not f16/bf16; else `t` cast to f32.
template <typename T>
T widen(const T& t) {
    if (!current()) return t;
    const DType d = t.dtype();
    return d == DType::F16 || d == DType::BF16 ? counted_cast(t, DType::F32) : t;
}
/// True under a guard for an f16/bf16 `t` (widen would cast it).
template <typename T>
bool widens(const T& t) {
    if (!current()) return false;
    const DType d = t.dtype();
    return d == DType::F16 || d == DType::BF16;
}
/// `t` (an optional tensor) widened as above.
template <typename T>
std::optional<T> widen(const std::optional<T>& t) {
    return t ? std::optional<T>(widen(*t)) : std::nullopt;
}
/// `t` lowered to the active autocast dtype; unchanged without a guard.
template <typename T>
T lower(const T& t) {
    const auto& a = current();
    return a ? lower(t, *a) : t;
}
/// `t` (an optional tensor) lowered as above.
template <typename T>
std::optional<T> lower(const std::optional<T>& t) {
    return t ? std::optional<T>(lower(*t)) : std::nullopt;
}
}  // namespace detail::autocast

/// Mixed precision for the calling thread while the guard lives (torch.autocast): the ops listed
/// in <ember/tensor/autocast.hpp> run in `dtype` (bf16 or f16) or in f32. Guards nest; each
/// restores the policy it found. Wrap the forward pass and the loss, not backward or the
/// optimizer step:
///
///     { ember::Autocast bf16(ember::DType::BF16); loss = model.loss(batch); }
///     auto grads = loss.backward();  // gradients of f32 parameters are f32
///
/// Within the outermost guard's lifetime each parameter is cast once per dtype (the cast
/// cache); the cache is emptied when the outermost guard goes. The Learner's steps:
/// LearnerBuilder::autocast. With f16, scale the loss with optim::GradScaler (its small
/// gradients underflow to zero otherwise); bf16 needs no scaling.
class Autocast {
  public:
    /// Turns autocast to `dtype` on (or, with `enabled` false, off) for this thread;
    /// `cache_enabled` false makes every cast anew inside this guard (torch.autocast's
    /// cache_enabled). Throws ArgumentError for a dtype other than BF16 or F16.
    explicit Autocast(DType dtype = DType::BF16, bool enabled = true, bool cache_enabled = true)
        : previous_(detail::autocast::current()),
          previous_cache_(detail::autocast::state().cache_enabled) {
        EMBER_CHECK(dtype == DType::BF16 || dtype == DType::F16, Argument,
                    "Autocast: the dtype must be bf16 or f16, got ", dtype_name(dtype));
        auto& s = detail::autocast::state();
        s.dtype = enabled ? std::optional<DType>(dtype) : std::nullopt;
        s.cache_enabled = cache_enabled;
        ++s.depth;
    }
    /// Restores the policy that was active when the guard was made; the outermost guard also
    /// empties the thread's cast cache (the parameters may change before the next region).
    ~Autocast() {
        auto& s = detail::autocast::state();
        s.dtype = previous_;
        s.cache_enabled = previous_cache_;
        if (--s.depth == 0) detail::autocast::cache_clear();
    }
    Autocast(const Autocast&) = delete;
    Autocast& operator=(const Autocast&) = delete;

  private:
    std::optional<DType> previous_;
    bool previous_cache_;
};

/// The calling thread's autocast dtype, empty when no guard is active.
inline std::optional<DType> autocast_dtype() noexcept {
    return detail::autocast::current();
}

}  // namespace ember
