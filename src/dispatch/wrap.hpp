#pragma once
// Dispatch's internals: the handle a DispatchTensor names (with the stack's primitive), how an op
// finds its stack, and how a stack's entry turns DispatchTensors into the stack's primitives and
// builds its result's handle.
#include <array>
#include <atomic>
#include <concepts>
#include <initializer_list>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/autodiff/autodiff.hpp"
#include "ember/detail/recycling_allocator.hpp"
#include "ember/dispatch/dispatch.hpp"
#include "ember/tensor/attention.hpp"
#include "ember/tensor/error.hpp"
#include "ember/tensor/kind.hpp"

namespace ember {
template <typename B>
struct FusionTensor;  // <ember/fusion/fusion.hpp>
}  // namespace ember

namespace ember::detail::dispatch {

/// A stack is named by the device of its float tensors.
using Stack = DispatchDevice;

/// A tag an address per primitive type, naming a Holder<P> (Handle::type).
template <typename P>
inline constexpr char kHolderTag = 0;

template <typename P>
inline constexpr bool kIsFusionTensor = false;
template <typename B>
inline constexpr bool kIsFusionTensor<FusionTensor<B>> = true;
template <typename P>
inline constexpr bool kIsAutodiffTensor = false;
template <typename B>
inline constexpr bool kIsAutodiffTensor<AutodiffTensor<B>> = true;

/// Whether primitive P is a backend's own tensor with its dims in a `shape` member, which its
/// `float_shape` (`int_shape`, `bool_shape`) returns: the CPU's, CUDA's and Vulkan's tensors.
template <typename P>
inline constexpr bool kHasShapeMember = requires(const P& p) {
    { p.shape } -> std::same_as<const Shape&>;
};

/// Where primitive `p` keeps its shape, for the primitives whose `float_shape` returns a member:
/// a backend's own tensor (kHasShapeMember), Fusion's (its value's) and Autodiff's over either
/// (its inner primitive's); nothing (std::nullptr_t) for the others. A handle whose primitive
/// keeps its shape points there instead of holding a copy, so that making a handle (every op's
/// result, and the optimizer's moves between a stack and its inner one) copies no shape.
template <typename P>
[[gnu::always_inline]] inline auto shape_in(const P& p) {
    if constexpr (kHasShapeMember<P>)
        return &p.shape;
    else if constexpr (kIsFusionTensor<P>)
        return static_cast<const Shape*>(&p.value->shape);
    else if constexpr (kIsAutodiffTensor<P>)
        return shape_in(p.primitive);
    else
        return nullptr;
}
/// Whether primitive P keeps its shape where shape_in finds it.
template <typename P>
inline constexpr bool kShapeInPrimitive =
    std::is_same_v<decltype(shape_in(std::declval<const P&>())), const Shape*>;

/// Nothing: a Holder<P> whose primitive keeps the shape has no copy of it.
struct NoShape {};

/// The handle of a tensor whose primitive is P (the Handle and the primitive in one block, from
/// a per-thread free list). `p` is alive while `live`: an entry moves the primitive out of an
/// operand's last handle and builds its result's primitive in that handle's place (Out).
template <typename P>
struct Holder final : Handle {
    union {
        P p;  ///< the concrete stack's primitive, while `live`
    };
    bool live = false;  ///< whether `p` holds a primitive
    /// The shape, for a primitive that does not keep it where shape_in finds it.
    [[no_unique_address]] std::conditional_t<kShapeInPrimitive<P>, NoShape, Shape> own_shape;
    Holder() noexcept {}
    Holder(const Holder&) = delete;
    Holder& operator=(const Holder&) = delete;
    ~Holder() {
        if (live) p.~P();
    }
};

/// The handles come from a per-thread free list (detail::RecyclingAllocator): a handle costs no
/// malloc and free in a loop of ops.
template <typename P>
using HandleAllocator = ::ember::detail::RecyclingAllocator<Holder<P>>;

/// Frees a Holder<P> (Handle::destroy).
template <typename P>
void destroy_holder(Handle* h) noexcept {
    auto* x = static_cast<Holder<P>*>(h);
    x->~Holder();
    HandleAllocator<P>{}.deallocate(x, 1);
}
/// A new handle (one name) with no primitive yet.
template <typename P>
Holder<P>* new_holder() {
    Holder<P>* x = HandleAllocator<P>{}.allocate(1);
    ::new (static_cast<void*>(x)) Holder<P>();
    x->destroy = &destroy_holder<P>;
    x->type = &kHolderTag<P>;
    return x;
}

/// The stack without autodiff (where int and bool tensors live).
inline Stack base(Stack s) { return s.autodiff(false); }

/// A tensor operand of an op, for finding the op's stack.
struct Operand {
    const DispatchTensor* one = nullptr;
    const std::vector<DispatchTensor>* many = nullptr;
    bool is_float = false;
    /// A tensor.
    static Operand value(const DispatchTensor& t, bool f) { return {&t, nullptr, f}; }
    /// An optional tensor (nothing when absent).
    static Operand optional(const std::optional<DispatchTensor>& t, bool f) {
        return {t ? &*t : nullptr, nullptr, f};
    }
    /// Tensors (cat).
    static Operand vector(const std::vector<DispatchTensor>& t, bool f) { return {nullptr, &t, f}; }
};

/// Throws the ember::DeviceError of an op on tensors of two stacks (`a` and `b`).
[[noreturn]] void mixed_stacks(const char* op, const DispatchDevice& a, const DispatchDevice& b);
/// Throws the ember::ArgumentError of an op given no tensor.
[[noreturn]] void no_operand(const char* op);

/// Finds the stack of an op from its tensor operands, one `see` each: every tensor's stack
/// without autodiff must be the same (else an ember::DeviceError naming both); the op records
/// for backward when a float operand lives on an autodiff device. Inline, with the errors out of
/// line: every op runs it, and for the usual one or two operands it comes down to a few compares.
struct StackFinder {
    const char* op;                         ///< the op, for the errors
    const DispatchDevice* first = nullptr;  ///< the first operand's device
    bool track = false;                     ///< whether a float operand has autodiff
    /// Takes tensor `t` (a float one when `is_float`) into account.
    void see(const DispatchTensor& t, bool is_float) {
        if (t.handle == nullptr) [[unlikely]]
            no_handle();
        const DispatchDevice& d = t.handle->device;
        if (!first)
            first = &d;
        else if (!same_but_autodiff(d, *first)) [[unlikely]]
            mixed_stacks(op, *first, d);
        track = track || (is_float && d.has_autodiff());
    }
    /// The stack, once every operand has been seen.
    Stack result() const {
        if (first == nullptr) [[unlikely]]
            no_operand(op);
        return first->autodiff(track);
    }
};

/// The stack an op on `ops` runs on (StackFinder's rules).
inline Stack stack_of(const char* op, std::initializer_list<Operand> ops) {
    StackFinder f{op};
    for (const Operand& o : ops) {
        if (o.one) f.see(*o.one, o.is_float);
        if (o.many)
            for (const auto& t : *o.many) f.see(t, o.is_float);
    }
    return f.result();
}
/// The stack of a multi-tensor op on groups of N float tensors (the optimizers' steps), read in
/// place: no handle is copied into a list first.
template <std::size_t N>
Stack stack_of_groups(const char* op, const std::vector<std::array<DispatchTensor, N>>& groups) {
    StackFinder f{op};
    for (const auto& g : groups)
        for (const auto& t : g) f.see(t, true);
    return f.result();
}
/// stack_of for an op on one tensor (a float one keeps its device's autodiff).
inline Stack stack_of_one(const DispatchTensor& t, bool is_float) {
    if (t.handle == nullptr) [[unlikely]]
        no_handle();
    const DispatchDevice& d = t.handle->device;
    return is_float ? d : base(d);
}
/// stack_of for an op on two tensors.
inline Stack stack_of_two(const char* op, const DispatchTensor& a, bool a_float,
                          const DispatchTensor& b, bool b_float) {
    if (a.handle == nullptr || b.handle == nullptr) [[unlikely]]
        no_handle();
    const DispatchDevice& da = a.handle->device;
    const DispatchDevice& db = b.handle->device;
    if (da == db) [[likely]]  // the usual case: one compare of the whole device, `da` as it is
        return a_float || b_float ? da : base(da);
    if (!same_but_autodiff(da, db)) [[unlikely]]
        mixed_stacks(op, da, db);
    return da.autodiff((a_float && da.has_autodiff()) || (b_float && db.has_autodiff()));
}
/// The stack of a creation op on device `d` (`track`: a float tensor, which keeps autodiff).
inline Stack stack_of_device(const DispatchDevice& d, bool track) {
    return track ? d : base(d);
}

struct CoreTable;

/// The op table of stack S, set when the registry makes it (stacks_*.cpp): what a handle of S
/// records (Handle::ops), so that an op on it reads its table without the registry.
template <typename S>
inline const OpTable* table_of = nullptr;
/// The stack without autodiff of S (where S's int and bool tensors live).
template <typename S>
struct BaseStack {
    using type = S;
};
template <typename B, typename C>
struct BaseStack<Autodiff<B, C>> {
    using type = B;
};

/// The handle of `t`, checked.
inline const Handle& handle_of(const DispatchTensor& t) {
    return t.get();
}

/// S's primitive P of `t`: moved out when `t` is its tensor's last name (so that S may reuse
/// the buffer in place, as on the concrete stack; the handle is left empty, for Out to build a
/// result in), else a copy (sharing the buffer).
template <typename P>
P take(DispatchTensor&& t) {
    auto& h = static_cast<Holder<P>&>(*t.handle);
    if (t.unique()) {
        struct Empty {
            Holder<P>& h;
            ~Empty() {
                h.p.~P();
                h.live = false;
            }
        } empty{h};
        return std::move(h.p);
    }
    return h.p;
}

/// A float tensor of `s` as S's primitive: a tensor of the same stack is taken as is, one of
/// the same device without autodiff joins S's graph as a constant.
template <typename S>
[[gnu::always_inline]] inline typename S::FloatTensorPrimitive unwrap_float(DispatchTensor&& t,
                                                                            const Stack& s) {
    const Stack& ts = handle_of(t).device;
    if (ts == s) [[likely]]
        return take<typename S::FloatTensorPrimitive>(std::move(t));
    if constexpr (AutodiffBackend<S>) {
        return S::from_inner(take<typename S::InnerBackend::FloatTensorPrimitive>(std::move(t)));
    } else {
        EMBER_FAIL(Device, "ember::Dispatch: a tensor of ", ts.to_string(), " used on ", s.to_string());
    }
}
/// An int tensor as S's primitive (S's int primitive is its inner stack's).
template <typename S>
[[gnu::always_inline]] inline typename S::IntTensorPrimitive unwrap_int(DispatchTensor&& t,
                                                                        const Stack&) {
    return take<typename S::IntTensorPrimitive>(std::move(t));
}
/// A bool tensor as S's primitive.
template <typename S>
[[gnu::always_inline]] inline typename S::BoolTensorPrimitive unwrap_bool(DispatchTensor&& t,
                                                                          const Stack&) {
    return take<typename S::BoolTensorPrimitive>(std::move(t));
}

/// A read-only view of an operand as S's primitive (a lifted copy when it joins the graph).
template <typename P>
struct Ref {
    const P* p = nullptr;
    std::optional<P> own;
    /// The primitive.
    const P& get() const { return own ? *own : *p; }
};
template <typename S>
Ref<typename S::FloatTensorPrimitive> unwrap_float_ref(const DispatchTensor& t, const Stack& s) {
    using P = typename S::FloatTensorPrimitive;
    if (handle_of(t).device == s) return {&static_cast<const Holder<P>&>(*t.handle).p, {}};
    return {nullptr, unwrap_float<S>(DispatchTensor(t), s)};
}
template <typename S>
Ref<typename S::IntTensorPrimitive> unwrap_int_ref(const DispatchTensor& t, const Stack&) {
    using P = typename S::IntTensorPrimitive;
    return {&static_cast<const Holder<P>&>(handle_of(t)).p, {}};
}
template <typename S>
Ref<typename S::BoolTensorPrimitive> unwrap_bool_ref(const DispatchTensor& t, const Stack&) {
    using P = typename S::BoolTensorPrimitive;
    return {&static_cast<const Holder<P>&>(handle_of(t)).p, {}};
}
template <typename S>
std::optional<typename S::FloatTensorPrimitive> unwrap_opt_float(std::optional<DispatchTensor>&& t,
                                                                 const Stack& s) {
    if (!t) return std::nullopt;
    return unwrap_float<S>(std::move(*t), s);
}
template <typename S>
std::vector<typename S::FloatTensorPrimitive> unwrap_vec_float(std::vector<DispatchTensor>&& v,
                                                               const Stack& s) {
    std::vector<typename S::FloatTensorPrimitive> r;
    r.reserve(v.size());
    for (auto& t : v) r.push_back(unwrap_float<S>(std::move(t), s));
    return r;
}
template <typename S>
std::vector<typename S::IntTensorPrimitive> unwrap_vec_int(std::vector<DispatchTensor>&& v,
                                                           const Stack& s) {
    std::vector<typename S::IntTensorPrimitive> r;
    r.reserve(v.size());
    for (auto& t : v) r.push_back(unwrap_int<S>(std::move(t), s));
    return r;
}
template <typename S>
std::vector<typename S::BoolTensorPrimitive> unwrap_vec_bool(std::vector<DispatchTensor>&& v,
                                                             const Stack& s) {
    std::vector<typename S::BoolTensorPrimitive> r;
    r.reserve(v.size());
    for (auto& t : v) r.push_back(unwrap_bool<S>(std::move(t), s));
    return r;
}

/// S's primitive type of kind K.
template <typename S, typename K>
using PrimitiveOf =
    std::conditional_t<std::is_same_v<K, Float>, typename S::FloatTensorPrimitive,
                       std::conditional_t<std::is_same_v<K, Int>, typename S::IntTensorPrimitive,
                                          typename S::BoolTensorPrimitive>>;

/// Where an entry builds its result, a tensor of kind K on S: in the handle of an operand it
/// takes over when there is one (the operand's last name, whose primitive type is the
/// result's), so that a chain of ops on temporaries (`((x + y) * y).exp()`) allocates a handle
/// only for its first op; else in a new handle. The stack's op constructs its result there
/// (emplace), with no move.
template <typename S, typename K>
class Out {
  public:
    using P = PrimitiveOf<S, K>;  ///< the result's primitive
    /// A new handle unless one of `operands` (those the entry takes by value, before it takes
    /// them) is one to reuse.
    template <typename... T>
    explicit Out(T&... operands) {
        (reuse(operands) || ...);
        if (h_ == nullptr) h_ = new_holder<P>();
    }
    Out(const Out&) = delete;
    Out& operator=(const Out&) = delete;
    /// A new handle whose op threw is freed (a reused one stays its operand's, empty).
    ~Out() {
        if (h_ && !from_) destroy_holder<P>(h_);
    }
    /// The tensor `f()` returns (S's primitive of kind K), built in this handle, on stack `s`
    /// (int and bool tensors on s without autodiff).
    template <typename F>
    DispatchTensor emplace(const Stack& s, F&& f) {
        Holder<P>* h = h_;
        ::new (static_cast<void*>(&h->p)) P(std::forward<F>(f)());
        h->live = true;
        // The handle's table, device, dtype and shape (read in the primitive where it keeps
        // one, else a copy in the handle), each as S answers for kind K.
        auto describe = [&](const OpTable* ops, const DispatchDevice& device, DType dtype,
                            auto&& shape_of) {
            h->ops = ops;
            h->device = device;
            h->dtype = dtype;
            if constexpr (kShapeInPrimitive<P>) {
                h->shape = shape_in(h->p);
            } else {
                h->own_shape = shape_of(h->p);
                h->shape = &h->own_shape;
            }
        };
        if constexpr (std::is_same_v<K, Float>) {
            describe(table_of<S>, s, S::float_dtype(h->p),
                     [](const P& p) { return S::float_shape(p); });
        } else if constexpr (std::is_same_v<K, Int>) {
            describe(table_of<typename BaseStack<S>::type>, base(s), S::int_dtype(h->p),
                     [](const P& p) { return S::int_shape(p); });
        } else {
            describe(table_of<typename BaseStack<S>::type>, base(s), S::bool_dtype(h->p),
                     [](const P& p) { return S::bool_shape(p); });
        }
        h_ = nullptr;
        if (from_) from_->handle = nullptr;  // its name is the result's now
        return DispatchTensor(h);
    }

  private:
    bool reuse(DispatchTensor& t) {
        if (t.handle == nullptr || t.handle->type != &kHolderTag<P> || !t.unique()) return false;
        from_ = &t;
        h_ = static_cast<Holder<P>*>(t.handle);
        return true;
    }
    Holder<P>* h_ = nullptr;
    DispatchTensor* from_ = nullptr;
};

template <typename S>
DispatchTensor wrap_float(typename S::FloatTensorPrimitive p, const Stack& s) {
    return Out<S, Float>().emplace(s, [&] { return std::move(p); });
}
/// wrap_float building the tensor in `slot`'s handle where `slot` is its tensor's last name of
/// the same primitive type (an operand the entry has taken the primitive out of: an optimizer
/// step's parameter or state, updated in place), else in a new handle.
template <typename S>
DispatchTensor wrap_float_in(DispatchTensor& slot, typename S::FloatTensorPrimitive p,
                             const Stack& s) {
    using P = typename S::FloatTensorPrimitive;
    const bool emptied = slot.handle != nullptr && slot.handle->type == &kHolderTag<P> &&
                         !static_cast<const Holder<P>*>(slot.handle)->live;
    if (emptied) return Out<S, Float>(slot).emplace(s, [&] { return std::move(p); });
    return Out<S, Float>().emplace(s, [&] { return std::move(p); });
}
template <typename S>
DispatchTensor wrap_int(typename S::IntTensorPrimitive p, const Stack& s) {
    return Out<S, Int>().emplace(s, [&] { return std::move(p); });
}
template <typename S>
DispatchTensor wrap_bool(typename S::BoolTensorPrimitive p, const Stack& s) {
    return Out<S, Bool>().emplace(s, [&] { return std::move(p); });
}
template <typename S>
std::vector<DispatchTensor> wrap_vec_float(std::vector<typename S::FloatTensorPrimitive> v,
                                           const Stack& s) {
    std::vector<DispatchTensor> r;
    r.reserve(v.size());
    for (auto& p : v) r.push_back(wrap_float<S>(std::move(p), s));
    return r;
}
template <typename S>
DeformConv2dGrads<DispatchTensor> wrap_deform_grads(
    DeformConv2dGrads<typename S::FloatTensorPrimitive> g, const Stack& s) {
    auto opt = [&](auto& o) -> std::optional<DispatchTensor> {
        if (!o) return std::nullopt;
        return wrap_float<S>(std::move(*o), s);
    };
    return {wrap_float<S>(std::move(g.x), s), wrap_float<S>(std::move(g.offset), s),
            wrap_float<S>(std::move(g.weight), s), opt(g.mask), opt(g.bias)};
}

/// How a backend's device is made from Dispatch's: specialised by each backend's stacks file.
template <typename Dev>
struct DeviceOf;
/// S's device for Dispatch's device `d`.
template <typename S>
typename S::Device device_of(const DispatchDevice& d) {
    return DeviceOf<typename S::Device>::make(d);
}

/// The entries of a stack written by hand: devices, the move between devices of one backend,
/// and autodiff (null on stacks without it).
struct CoreTable {
    const char* name;                                        ///< the stack's name
    void (*sync)(const Stack&);                              ///< S::sync
    /// S::tr_execute, on tensors of S (floats may be of S's inner stack under autodiff).
    TransactionData (*tr_execute)(
        const Stack&, TransactionPrimitive<DispatchTensor, DispatchTensor, DispatchTensor>);
    DispatchTensor (*float_to_device)(const Stack&, DispatchTensor, const Stack&);
    DispatchTensor (*int_to_device)(const Stack&, DispatchTensor, const Stack&);
    DispatchTensor (*bool_to_device)(const Stack&, DispatchTensor, const Stack&);
    Gradients (*backward)(const Stack&, DispatchTensor);
    std::optional<DispatchTensor> (*grad)(const Stack&, const DispatchTensor&, const Gradients&);
    std::optional<DispatchTensor> (*grad_remove)(const Stack&, const DispatchTensor&, Gradients&);
    void (*grad_replace)(const Stack&, const DispatchTensor&, Gradients&, DispatchTensor);
    DispatchTensor (*inner)(const Stack&, DispatchTensor);
    DispatchTensor (*set_require_grad)(const Stack&, DispatchTensor, bool);
    bool (*is_require_grad)(const Stack&, const DispatchTensor&);
    /// S::float_leaf_id (autocast's cast cache).
    std::uint64_t (*leaf_id)(const Stack&, const DispatchTensor&);
    /// S::float_keep_graph, on the node the tensor shares with its copies.
    void (*keep_graph)(const Stack&, const DispatchTensor&);
    DispatchTensor (*detach)(const Stack&, DispatchTensor);
    /// S::float_adam_step; null where S has none (Dispatch then composes the update).
    std::array<DispatchTensor, 3> (*adam_step)(const Stack&, DispatchTensor, DispatchTensor,
                                               DispatchTensor, DispatchTensor,
                                               const AdamStepScalars&);
    /// S::float_sgd_step; null where S has none (Dispatch then composes the update).
    std::pair<DispatchTensor, DispatchTensor> (*sgd_step)(const Stack&, DispatchTensor,
                                                          DispatchTensor, DispatchTensor,
                                                          const SgdStepScalars&);
    /// S::float_adam_steps; null where S has none (Dispatch then steps tensor by tensor).
    std::vector<std::array<DispatchTensor, 3>> (*adam_steps)(
        const Stack&, std::vector<std::array<DispatchTensor, 4>>,
        const std::vector<AdamStepsScalars>&);
    /// S::float_sgd_steps; null where S has none (Dispatch then steps tensor by tensor).
    std::vector<std::array<DispatchTensor, 2>> (*sgd_steps)(
        const Stack&, std::vector<std::array<DispatchTensor, 3>>,
        const std::vector<SgdStepScalars>&);
    /// S::float_batch_norm; null where S has none (nn::BatchNorm then composes).
    std::optional<std::array<DispatchTensor, 5>> (*batch_norm)(const Stack&, DispatchTensor,
                                                               DispatchTensor, DispatchTensor,
                                                               DispatchTensor, DispatchTensor,
                                                               const BatchNormScalars&);
    /// S::float_batch_norm_relu; null where S has none (nn::BatchNorm then composes).
    std::optional<std::array<DispatchTensor, 5>> (*batch_norm_relu)(const Stack&, DispatchTensor,
                                                                    DispatchTensor, DispatchTensor,
                                                                    DispatchTensor, DispatchTensor,
                                                                    std::optional<DispatchTensor>,
                                                                    const BatchNormScalars&);
    /// S::float_add_layer_norm; null where S has none (module::add_layer_norm then composes).
    std::optional<std::array<DispatchTensor, 4>> (*add_layer_norm)(const Stack&, DispatchTensor,
                                                                   DispatchTensor,
                                                                   std::optional<DispatchTensor>,
                                                                   std::optional<DispatchTensor>,
                                                                   double, std::optional<DType>);
    /// AttentionKernel<S>::supports; null where S has no fused attention (module::attention
    /// then composes).
    bool (*attention_supports)(const Stack&, const DispatchTensor&, const DispatchTensor&,
                               const DispatchTensor&, const std::optional<DispatchTensor>&,
                               const std::optional<DispatchTensor>&);
    /// AttentionKernel<S>::forward: {output, log-sum-exp}.
    std::array<DispatchTensor, 2> (*attention)(const Stack&, const DispatchTensor&,
                                               const DispatchTensor&, const DispatchTensor&,
                                               const std::optional<DispatchTensor>&,
                                               const std::optional<DispatchTensor>&, bool, double);
    /// AttentionKernel<S>::supports_packed; null where S has no packed fused attention
    /// (module::attention_packed then composes).
    bool (*attention_packed_supports)(const Stack&, const DispatchTensor&, std::size_t,
                                      std::size_t);
    /// AttentionKernel<S>::forward_packed: {output [B, L, H·E], log-sum-exp}.
    std::array<DispatchTensor, 2> (*attention_packed)(const Stack&, const DispatchTensor&,
                                                      std::size_t, bool, double);
    /// S::float_batch_norm_eval; null where S has none.
    std::optional<DispatchTensor> (*batch_norm_eval)(const Stack&, DispatchTensor, DispatchTensor,
                                                     DispatchTensor, DispatchTensor, DispatchTensor,
                                                     double);
    /// S::fused_matmul_epilogue; null where S has none.
    std::optional<DispatchTensor> (*matmul_epilogue)(const Stack&, DispatchTensor, DispatchTensor,
                                                     std::optional<DispatchTensor>,
                                                     ::ember::fusion::MatmulEpilogue);
};

/// The hand-written entries of stack S.
template <typename S>
CoreTable make_core_table(const char* name) {
    CoreTable c{};
    c.name = name;
    c.sync = [](const Stack& s) { S::sync(device_of<S>(s)); };
    c.tr_execute = [](const Stack& s,
                      TransactionPrimitive<DispatchTensor, DispatchTensor, DispatchTensor> p) {
        TransactionPrimitive<typename S::FloatTensorPrimitive, typename S::IntTensorPrimitive,
                             typename S::BoolTensorPrimitive>
            q;
        for (auto& t : p.floats) q.floats.push_back(unwrap_float<S>(std::move(t), s));
        for (auto& t : p.ints) q.ints.push_back(unwrap_int<S>(std::move(t), s));
        for (auto& t : p.bools) q.bools.push_back(unwrap_bool<S>(std::move(t), s));
        return S::tr_execute(std::move(q));
    };
    c.float_to_device = [](const Stack& s, DispatchTensor t, const Stack& to) {
        return wrap_float<S>(S::float_to_device(unwrap_float<S>(std::move(t), s), device_of<S>(to)),
                             to);
    };
    c.int_to_device = [](const Stack& s, DispatchTensor t, const Stack& to) {
        return wrap_int<S>(S::int_to_device(unwrap_int<S>(std::move(t), s), device_of<S>(to)), to);
    };
    c.bool_to_device = [](const Stack& s, DispatchTensor t, const Stack& to) {
        return wrap_bool<S>(S::bool_to_device(unwrap_bool<S>(std::move(t), s), device_of<S>(to)),
                            to);
    };
    if constexpr (requires(typename S::FloatTensorPrimitive t, AdamStepScalars a) {
                      S::float_adam_step(t, t, t, t, a);
                  }) {
        c.adam_step = [](const Stack& s, DispatchTensor p, DispatchTensor g, DispatchTensor m,
                         DispatchTensor v, const AdamStepScalars& a) {
            auto [p2, m2, v2] = S::float_adam_step(
                unwrap_float<S>(std::move(p), s), unwrap_float<S>(std::move(g), s),
                unwrap_float<S>(std::move(m), s), unwrap_float<S>(std::move(v), s), a);
            return std::array<DispatchTensor, 3>{wrap_float_in<S>(p, std::move(p2), s),
                                                 wrap_float_in<S>(m, std::move(m2), s),
                                                 wrap_float_in<S>(v, std::move(v2), s)};
        };
    }
    if constexpr (requires(typename S::FloatTensorPrimitive t, SgdStepScalars a) {
                      S::float_sgd_step(t, t, t, a);
                  }) {
        c.sgd_step = [](const Stack& s, DispatchTensor p, DispatchTensor g, DispatchTensor v,
                        const SgdStepScalars& a) {
            auto [p2, v2] = S::float_sgd_step(unwrap_float<S>(std::move(p), s),
                                              unwrap_float<S>(std::move(g), s),
                                              unwrap_float<S>(std::move(v), s), a);
            return std::pair<DispatchTensor, DispatchTensor>{wrap_float_in<S>(p, std::move(p2), s),
                                                             wrap_float_in<S>(v, std::move(v2), s)};
        };
    }
    if constexpr (requires(std::vector<std::array<typename S::FloatTensorPrimitive, 4>> t,
                           const std::vector<AdamStepsScalars>& a) { S::float_adam_steps(t, a); }) {
        c.adam_steps = [](const Stack& s, std::vector<std::array<DispatchTensor, 4>> t,
                          const std::vector<AdamStepsScalars>& a) {
            std::vector<std::array<typename S::FloatTensorPrimitive, 4>> in;
            in.reserve(t.size());
            for (auto& e : t)
                in.push_back(
                    {unwrap_float<S>(std::move(e[0]), s), unwrap_float<S>(std::move(e[1]), s),
                     unwrap_float<S>(std::move(e[2]), s), unwrap_float<S>(std::move(e[3]), s)});
            auto r = S::float_adam_steps(std::move(in), a);
            std::vector<std::array<DispatchTensor, 3>> out;
            out.reserve(r.size());
            // The new parameter and moments in the old ones' handles (emptied by unwrap).
            for (std::size_t i = 0; i < r.size(); ++i)
                out.push_back({wrap_float_in<S>(t[i][0], std::move(r[i][0]), s),
                               wrap_float_in<S>(t[i][2], std::move(r[i][1]), s),
                               wrap_float_in<S>(t[i][3], std::move(r[i][2]), s)});
            return out;
        };
    }
    if constexpr (requires(std::vector<std::array<typename S::FloatTensorPrimitive, 3>> t,
                           const std::vector<SgdStepScalars>& a) { S::float_sgd_steps(t, a); }) {
        c.sgd_steps = [](const Stack& s, std::vector<std::array<DispatchTensor, 3>> t,
                         const std::vector<SgdStepScalars>& a) {
            std::vector<std::array<typename S::FloatTensorPrimitive, 3>> in;
            in.reserve(t.size());
            for (auto& e : t)
                in.push_back({unwrap_float<S>(std::move(e[0]), s),
                              unwrap_float<S>(std::move(e[1]), s),
                              unwrap_float<S>(std::move(e[2]), s)});
            auto r = S::float_sgd_steps(std::move(in), a);
            std::vector<std::array<DispatchTensor, 2>> out;
            out.reserve(r.size());
            for (std::size_t i = 0; i < r.size(); ++i)
                out.push_back({wrap_float_in<S>(t[i][0], std::move(r[i][0]), s),
                               wrap_float_in<S>(t[i][2], std::move(r[i][1]), s)});
            return out;
        };
    }
    if constexpr (BatchNormForwardBackend<S>) {
        c.batch_norm =
            [](const Stack& s, DispatchTensor x, DispatchTensor g, DispatchTensor b,
               DispatchTensor rm, DispatchTensor rv,
               const BatchNormScalars& a) -> std::optional<std::array<DispatchTensor, 5>> {
            auto r = S::float_batch_norm(
                unwrap_float<S>(std::move(x), s), unwrap_float<S>(std::move(g), s),
                unwrap_float<S>(std::move(b), s), unwrap_float<S>(std::move(rm), s),
                unwrap_float<S>(std::move(rv), s), a);
            if (!r) return std::nullopt;
            std::array<DispatchTensor, 5> out;
            for (std::size_t i = 0; i < 5; ++i) out[i] = wrap_float<S>(std::move((*r)[i]), s);
            return out;
        };
        c.batch_norm_eval = [](const Stack& s, DispatchTensor x, DispatchTensor g, DispatchTensor b,
                               DispatchTensor m, DispatchTensor v,
                               double eps) -> std::optional<DispatchTensor> {
            auto r = S::float_batch_norm_eval(
                unwrap_float<S>(std::move(x), s), unwrap_float<S>(std::move(g), s),
                unwrap_float<S>(std::move(b), s), unwrap_float<S>(std::move(m), s),
                unwrap_float<S>(std::move(v), s), eps);
            if (!r) return std::nullopt;
            return wrap_float<S>(std::move(*r), s);
        };
    }
    if constexpr (BatchNormReluForwardBackend<S>) {
        c.batch_norm_relu =
            [](const Stack& s, DispatchTensor x, DispatchTensor g, DispatchTensor b,
               DispatchTensor rm, DispatchTensor rv, std::optional<DispatchTensor> res,
               const BatchNormScalars& a) -> std::optional<std::array<DispatchTensor, 5>> {
            std::optional<typename S::FloatTensorPrimitive> r;
            if (res) r = unwrap_float<S>(std::move(*res), s);
            auto y = S::float_batch_norm_relu(
                unwrap_float<S>(std::move(x), s), unwrap_float<S>(std::move(g), s),
                unwrap_float<S>(std::move(b), s), unwrap_float<S>(std::move(rm), s),
                unwrap_float<S>(std::move(rv), s), std::move(r), a);
            if (!y) return std::nullopt;
            std::array<DispatchTensor, 5> out;
            for (std::size_t i = 0; i < 5; ++i) out[i] = wrap_float<S>(std::move((*y)[i]), s);
            return out;
        };
    }
    if constexpr (AddLayerNormForwardBackend<S>) {
        c.add_layer_norm =
            [](const Stack& s, DispatchTensor x, DispatchTensor r, std::optional<DispatchTensor> g,
               std::optional<DispatchTensor> b, double eps,
               std::optional<DType> out) -> std::optional<std::array<DispatchTensor, 4>> {
            std::optional<typename S::FloatTensorPrimitive> sg, sb;
            if (g) sg = unwrap_float<S>(std::move(*g), s);
            if (b) sb = unwrap_float<S>(std::move(*b), s);
            auto y = S::float_add_layer_norm(unwrap_float<S>(std::move(x), s),
                                             unwrap_float<S>(std::move(r), s), std::move(sg),
                                             std::move(sb), eps, out);
            if (!y) return std::nullopt;
            std::array<DispatchTensor, 4> res;
            for (std::size_t i = 0; i < 4; ++i) res[i] = wrap_float<S>(std::move((*y)[i]), s);
            return res;
        };
    }
    // Only where S's epilogue can ever apply: Autodiff<Fusion<B>> declares one that always
    // declines (fusion::may_fuse_matmul_epilogue), and a null entry tells module::linear so.
    if constexpr (::ember::fusion::may_fuse_matmul_epilogue<S>) {
        c.matmul_epilogue = [](const Stack& s, DispatchTensor a, DispatchTensor b,
                               std::optional<DispatchTensor> bias,
                               ::ember::fusion::MatmulEpilogue e) -> std::optional<DispatchTensor> {
            std::optional<typename S::FloatTensorPrimitive> sb;
            if (bias) sb = unwrap_float<S>(std::move(*bias), s);
            auto r = S::fused_matmul_epilogue(unwrap_float<S>(std::move(a), s),
                                              unwrap_float<S>(std::move(b), s), std::move(sb), e);
            if (!r) return std::nullopt;
            return wrap_float<S>(std::move(*r), s);
        };
    }
    if constexpr (FusedAttention<S>) {
        using FP = typename S::FloatTensorPrimitive;
        using BP = typename S::BoolTensorPrimitive;
        // The masks as S's primitives (copies of handles, not of data).
        struct Masks {
            std::optional<BP> keep;
            std::optional<FP> bias;
            Masks(const Stack& s, const std::optional<DispatchTensor>& k,
                  const std::optional<DispatchTensor>& b) {
                if (k) keep = unwrap_bool_ref<S>(*k, s).get();
                if (b) bias = unwrap_float_ref<S>(*b, s).get();
            }
        };
        c.attention_supports = [](const Stack& s, const DispatchTensor& q, const DispatchTensor& k,
                                  const DispatchTensor& v,
                                  const std::optional<DispatchTensor>& keep,
                                  const std::optional<DispatchTensor>& bias) {
            const Masks m(s, keep, bias);
            return AttentionKernel<S>::supports(unwrap_float_ref<S>(q, s).get(),
                                                unwrap_float_ref<S>(k, s).get(),
                                                unwrap_float_ref<S>(v, s).get(), m.keep, m.bias);
        };
        c.attention = [](const Stack& s, const DispatchTensor& q, const DispatchTensor& k,
                         const DispatchTensor& v, const std::optional<DispatchTensor>& keep,
                         const std::optional<DispatchTensor>& bias, bool causal, double scale) {
            const Masks m(s, keep, bias);
            auto r = AttentionKernel<S>::forward(
                unwrap_float_ref<S>(q, s).get(), unwrap_float_ref<S>(k, s).get(),
                unwrap_float_ref<S>(v, s).get(), m.keep, m.bias, causal, scale);
            return std::array<DispatchTensor, 2>{wrap_float<S>(std::move(r[0]), s),
                                                 wrap_float<S>(std::move(r[1]), s)};
        };
    }
    if constexpr (FusedPackedAttention<S>) {
        c.attention_packed_supports = [](const Stack& s, const DispatchTensor& like,
                                         std::size_t heads, std::size_t head_dim) {
            return AttentionKernel<S>::supports_packed(unwrap_float_ref<S>(like, s).get(), heads,
                                                       head_dim);
        };
        c.attention_packed = [](const Stack& s, const DispatchTensor& qkv, std::size_t heads,
                                bool causal, double scale) {
            auto r = AttentionKernel<S>::forward_packed(unwrap_float_ref<S>(qkv, s).get(), heads,
                                                        causal, scale);
            return std::array<DispatchTensor, 2>{wrap_float<S>(std::move(r[0]), s),
                                                 wrap_float<S>(std::move(r[1]), s)};
        };
    }
    if constexpr (AutodiffBackend<S>) {
        using I = typename S::InnerBackend;
        c.backward = [](const Stack& s, DispatchTensor t) {
            return S::backward(unwrap_float<S>(std::move(t), s));
        };
        c.grad = [](const Stack& s, const DispatchTensor& t,
                    const Gradients& g) -> std::optional<DispatchTensor> {
            auto r = S::grad(unwrap_float_ref<S>(t, s).get(), g);
            if (!r) return std::nullopt;
            return wrap_float<I>(std::move(*r), base(s));
        };
        c.grad_remove = [](const Stack& s, const DispatchTensor& t,
                           Gradients& g) -> std::optional<DispatchTensor> {
            auto r = S::grad_remove(unwrap_float_ref<S>(t, s).get(), g);
            if (!r) return std::nullopt;
            return wrap_float<I>(std::move(*r), base(s));
        };
        c.grad_replace = [](const Stack& s, const DispatchTensor& t, Gradients& g,
                            DispatchTensor v) {
            EMBER_CHECK(handle_of(v).device == base(s), Device,
                        "ember::Dispatch: grad_replace: a gradient of ", handle_of(v).device.to_string(),
                        " for a tensor of ", s.to_string(), " (gradients live on ",
                        base(s).to_string(), ")");
            S::grad_replace(unwrap_float_ref<S>(t, s).get(), g,
                            take<typename I::FloatTensorPrimitive>(std::move(v)));
        };
        c.inner = [](const Stack& s, DispatchTensor t) {
            return wrap_float<I>(S::inner(unwrap_float<S>(std::move(t), s)), base(s));
        };
        c.set_require_grad = [](const Stack& s, DispatchTensor t, bool r) {
            return wrap_float<S>(S::float_set_require_grad(unwrap_float<S>(std::move(t), s), r), s);
        };
        c.is_require_grad = [](const Stack& s, const DispatchTensor& t) {
            return S::float_is_require_grad(unwrap_float_ref<S>(t, s).get());
        };
        c.leaf_id = [](const Stack& s, const DispatchTensor& t) -> std::uint64_t {
            return S::float_leaf_id(unwrap_float_ref<S>(t, s).get());
        };
        c.keep_graph = [](const Stack& s, const DispatchTensor& t) {
            S::float_keep_graph(unwrap_float_ref<S>(t, s).get());  // marks the shared node
        };
        c.detach = [](const Stack& s, DispatchTensor t) {
            return wrap_float<S>(S::float_detach(unwrap_float<S>(std::move(t), s)), s);
        };
    }
    return c;
}

/// The stacks of one backend, indexed by fusion · 2 + autodiff.
struct StackEntry {
    const OpTable* ops;     ///< generated entries
    const CoreTable* core;  ///< hand-written entries
};
/// A backend of this build: its four stacks and its generator's seed.
struct BackendEntry {
    const StackEntry* stacks;         ///< [plain, autodiff, fusion, autodiff over fusion]
    void (*seed)(std::uint64_t);      ///< the backend's seed
};
/// The CPU's stacks (src/dispatch/stacks_cpu.cpp).
BackendEntry cpu_backend();
#if defined(EMBER_DISPATCH_VULKAN)
/// Vulkan's stacks (src/dispatch/stacks_vulkan.cpp).
BackendEntry vulkan_backend();
#endif
#if defined(EMBER_DISPATCH_CUDA)
/// CUDA's stacks (src/dispatch/stacks_cuda.cpp).
BackendEntry cuda_backend();
#endif

/// The stacks of each backend (indexed by DispatchKind), published by the registry once it is
/// built (dispatch.cpp); null before that and for a backend this build lacks. What every op
/// reads to find its stack's table without a call.
extern std::atomic<const StackEntry*> published_stacks[3];
/// The stack entry of `s` through the registry (builds it on first use; an ember::DeviceError
/// when this build lacks the backend).
const StackEntry& registry_entry(const Stack& s);
/// The entries of stack `s`.
inline const StackEntry& stack_entry(const Stack& s) {
    const StackEntry* b =
        published_stacks[static_cast<std::size_t>(s.kind())].load(std::memory_order_acquire);
    if (b == nullptr) [[unlikely]]
        return registry_entry(s);
    return b[(s.has_fusion() ? 2 : 0) + (s.has_autodiff() ? 1 : 0)];
}
/// The op table of stack `s`; an ember::DeviceError when this build lacks its backend.
inline const OpTable& table(const Stack& s) {
    return *stack_entry(s).ops;
}
/// table(s) for an op whose operands include `t`: the table `t`'s handle records when `t` lives
/// on `s` (an op's usual case), with no look-up.
inline const OpTable& table(const Stack& s, const DispatchTensor& t) {
    const Handle* h = t.handle;
    if (h->device == s && h->ops != nullptr) [[likely]]
        return *h->ops;
    return table(s);
}
/// The hand-written entries of stack `s` (devices, autodiff).
inline const CoreTable& core_table(const Stack& s) {
    return *stack_entry(s).core;
}

}  // namespace ember::detail::dispatch
