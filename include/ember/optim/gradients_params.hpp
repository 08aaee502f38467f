#pragma once
// GradientsParams: the gradients of one backward pass re-keyed by ParamId, which is what
// optimizers consume (Burn's GradientsParams). ember::Gradients is keyed by graph node; a
// parameter's node changes every time it is re-marked as a leaf, its ParamId never does.
// Gradients are tensors of the inner backend, held type-erased so one container serves
// parameters of every rank.
#include <any>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../autodiff/gradients.hpp"
#include "../export.hpp"
#include "../module/module.hpp"

namespace ember::optim {

namespace detail {

/// Backend, rank and kind of a `Param<Tensor<B, D, K>>`.
template <typename P>
struct ParamTraits;
template <typename B, std::size_t D, typename K>
struct ParamTraits<Param<Tensor<B, D, K>>> {
    using Backend = B;                                        ///< the parameter's backend
    using Kind = K;                                           ///< Float, Int or Bool
    static constexpr std::size_t rank = D;                    ///< the tensor's rank
    static constexpr bool is_float = std::same_as<K, Float>;  ///< only float params train
    using Grad = Tensor<InnerBackend<B>, D>;                  ///< the type of its gradient
};

}  // namespace detail

/// Gradients keyed by parameter id. Each entry is a float tensor of some backend and rank
/// (the inner backend of the model: gradients live outside the graph). The map itself is
/// handled in libember (src/optim/gradients_params.cpp), so that a file that trains a model
/// does not compile the hash table's code again.
class EMBER_API GradientsParams {
  public:
    /// An empty container.
    GradientsParams();
    ~GradientsParams();
    /// A copy of the entries (the gradients' handles, not their data).
    GradientsParams(const GradientsParams&);
    /// Takes the entries of `other`.
    GradientsParams(GradientsParams&& other) noexcept;
    /// Replaces the entries by a copy of `other`'s.
    GradientsParams& operator=(const GradientsParams& other);
    /// Replaces the entries by the ones taken from `other`.
    GradientsParams& operator=(GradientsParams&& other) noexcept;

    /// The gradient of parameter `id` as a `Tensor<B, D>`; nullopt when absent. Throws
    /// ArgumentError when the stored gradient has another backend or rank.
    template <Backend B, std::size_t D>
    std::optional<Tensor<B, D>> get(ParamId id) const {
        const Entry* e = find(id.value);
        if (!e) return std::nullopt;
        return typed<B, D>(*e, id, "get");
    }
    /// Removes and returns the gradient of parameter `id`; nullopt when absent. Throws
    /// ArgumentError (and keeps the entry) when it has another backend or rank.
    template <Backend B, std::size_t D>
    std::optional<Tensor<B, D>> remove(ParamId id) {
        const Entry* e = find(id.value);
        if (!e) return std::nullopt;
        Tensor<B, D> t = typed<B, D>(*e, id, "remove");
        erase(id.value);
        return t;
    }
    /// Sets (or replaces) the gradient of parameter `id` (Burn's `register`, a C++ keyword).
    template <Backend B, std::size_t D>
    void register_(ParamId id, Tensor<B, D> tensor) {
        put(id.value, Entry{std::any(std::move(tensor)), D});
    }
    /// Whether parameter `id` has a gradient.
    bool contains(ParamId id) const;
    /// Number of gradients held.
    std::size_t len() const;
    /// Whether no gradient is held.
    bool is_empty() const;
    /// The ids that have a gradient (in no particular order).
    std::vector<ParamId> ids() const;

    /// These gradients with those of `module`'s parameters moved to `device` (a replica's
    /// gradients sent to another device; entries of other parameters stay as they are).
    template <module::Module M, typename Dev>
    GradientsParams to_device(const M& module, const Dev& device) && {
        module.visit([&](std::string_view, const auto& p) {
            using T = detail::ParamTraits<module::detail::Bare<decltype(p)>>;
            if constexpr (T::is_float) {
                using IB = InnerBackend<typename T::Backend>;
                if (auto g = remove<IB, T::rank>(p.id())) register_(p.id(), g->to_device(device));
            }
        });
        return std::move(*this);
    }

    /// Takes the gradient of every trainable parameter of `module` out of `grads` (the result
    /// of `loss.backward()`); frozen parameters get none.
    template <module::Module M>
    static GradientsParams from_grads(Gradients&& grads, const M& module) {
        GradientsParams out;
        out.take(grads, module, [](ParamId) { return true; });
        return out;
    }
    /// Removes only `module`'s gradients from `grads`, leaving the others there for another
    /// optimizer (several optimizers on parts of one model: call it once per part).
    template <module::Module M>
    static GradientsParams from_module(Gradients& grads, const M& module) {
        GradientsParams out;
        out.take(grads, module, [](ParamId) { return true; });
        return out;
    }
    /// Removes the gradients of the parameters of `module` whose id is in `ids`.
    template <module::Module M>
    static GradientsParams from_params(Gradients& grads, const M& module,
                                       std::span<const ParamId> ids) {
        GradientsParams out;
        out.take(grads, module, [&](ParamId id) {
            for (const auto& x : ids)
                if (x == id) return true;
            return false;
        });
        return out;
    }

  private:
    struct Entry {
        std::any tensor;
        std::size_t rank = 0;
    };
    // The map's operations, compiled in libember.
    const Entry* find(std::uint64_t id) const;  // null where absent
    void erase(std::uint64_t id);
    void put(std::uint64_t id, Entry entry);  // sets or replaces

    template <Backend B, std::size_t D>
    static Tensor<B, D> typed(const Entry& e, ParamId id, const char* op) {
        const auto* t = std::any_cast<Tensor<B, D>>(&e.tensor);
        EMBER_CHECK(t != nullptr, Argument, "GradientsParams::", op, ": the gradient of parameter ",
                    id.to_string(), " is a rank-", e.rank,
                    " tensor of another backend or rank than the requested rank-", D, " tensor");
        return *t;
    }

    template <module::Module M, typename Pick>
    void take(Gradients& grads, const M& module, Pick&& pick) {
        if constexpr (module::detail::CompiledWalk<M>) {
            // One visitor class whatever the module (see TakeVisitor).
            using B = module::BackendOf<M>;
            using P = std::remove_reference_t<Pick>;
            TakeVisitor<B> v(
                *this, grads,
                [](const void* c, ParamId id) { return bool((*static_cast<const P*>(c))(id)); },
                static_cast<const void*>(&pick));
            module::detail::visit_params<M, B>(module, "", v);
        } else {
            module.visit([&](std::string_view, const auto& p) {
                using T = detail::ParamTraits<module::detail::Bare<decltype(p)>>;
                if constexpr (T::is_float) {
                    // A lazy parameter never used in the forward pass cannot have a gradient.
                    if (!p.is_require_grad() || !p.is_initialized() || !pick(p.id())) return;
                    if (auto g = p.val().grad_remove(grads)) register_(p.id(), std::move(*g));
                }
            });
        }
    }

    /// take's visitor for a module whose walks are compiled (module::detail::CompiledWalk:
    /// Dispatch), with the pick erased: one class instead of one lambda per module type, its
    /// members defined out of the class, so that a library compiles it once
    /// (include/ember/dispatch/nn.hpp) and a model file only calls it.
    template <typename B>
    class TakeVisitor;

    std::unordered_map<std::uint64_t, Entry> map_;
};

/// GradientsParams' take through a module's compiled walk (see the declaration).
template <typename B>
class GradientsParams::TakeVisitor final : public module::detail::ParamVisitor<B> {
  public:
    /// Takes into `out` the gradients in `grads` of the parameters `pick(ctx, id)` accepts.
    TakeVisitor(GradientsParams& out, Gradients& grads, bool (*pick)(const void*, ParamId),
                const void* ctx)
        : out_(out), grads_(grads), pick_(pick), ctx_(ctx) {}
    void operator()(std::string_view, const Param<Tensor<B, 1>>& p) override;
    void operator()(std::string_view, const Param<Tensor<B, 2>>& p) override;
    void operator()(std::string_view, const Param<Tensor<B, 3>>& p) override;
    void operator()(std::string_view, const Param<Tensor<B, 4>>& p) override;

  private:
    template <std::size_t D>
    void take(const Param<Tensor<B, D>>& p) {
        // A lazy parameter never used in the forward pass cannot have a gradient.
        if (!p.is_require_grad() || !p.is_initialized() || !pick_(ctx_, p.id())) return;
        if (auto g = p.val().grad_remove(grads_)) out_.register_(p.id(), std::move(*g));
    }
    GradientsParams& out_;
    Gradients& grads_;
    bool (*pick_)(const void*, ParamId);
    const void* ctx_;
};

template <typename B>
void GradientsParams::TakeVisitor<B>::operator()(std::string_view, const Param<Tensor<B, 1>>& p) {
    take<1>(p);
}
template <typename B>
void GradientsParams::TakeVisitor<B>::operator()(std::string_view, const Param<Tensor<B, 2>>& p) {
    take<2>(p);
}
template <typename B>
void GradientsParams::TakeVisitor<B>::operator()(std::string_view, const Param<Tensor<B, 3>>& p) {
    take<3>(p);
}
template <typename B>
void GradientsParams::TakeVisitor<B>::operator()(std::string_view, const Param<Tensor<B, 4>>& p) {
    take<4>(p);
}

}  // namespace ember::optim
