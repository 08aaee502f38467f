#pragma once
// Dispatch's internals: the handle a DispatchTensor points to, how an op finds its stack, and
// how a stack's entry turns DispatchTensors into the stack's primitives and back.
#include <array>
#include <atomic>
#include <initializer_list>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "ember/autodiff/autodiff.hpp"
#include "ember/detail/recycling_allocator.hpp"
#include "ember/dispatch/dispatch.hpp"
#include "ember/tensor/attention.hpp"
#include "ember/tensor/error.hpp"

namespace ember::detail::dispatch {

/// A stack is named by the device of its float tensors.
using Stack = DispatchDevice;

/// A tensor of one concrete stack; `device` is its stack (without autodiff for int and bool).
struct Handle {
    virtual ~Handle() = default;
    DispatchDevice device;  ///< the stack (and device) it lives on
    // Kept here because the tensor layer's checks ask for them before most ops: reading them
    // needs no call through the stack's table.
    Shape shape;               ///< the tensor's shape
    DType dtype = DType::F32;  ///< the tensor's dtype
};
/// The handle of a tensor whose primitive is P.
template <typename P>
struct Holder final : Handle {
    P p;  ///< the concrete stack's primitive
};

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
/// Throws the ember::ArgumentError of a default-made tensor used in an op.
[[noreturn]] void no_handle();

/// The stack an op on `ops` runs on: every tensor's stack without autodiff must be the same
/// (else an ember::DeviceError naming both); the op records for backward when a float operand
/// lives on an autodiff device. Inline, with the errors out of line: every op calls it, and
/// for the usual one or two operands it comes down to a few compares.
inline Stack stack_of(const char* op, std::initializer_list<Operand> ops) {
    const DispatchDevice* first = nullptr;
    bool track = false;
    auto see = [&](const DispatchTensor& t, bool is_float) {
        if (t.handle == nullptr) [[unlikely]]
            no_handle();
        const DispatchDevice& d = t.handle->device;
        if (!first)
            first = &d;
        else if (base(d) != base(*first)) [[unlikely]]
            mixed_stacks(op, *first, d);
        track = track || (is_float && d.has_autodiff());
    };
    for (const Operand& o : ops) {
        if (o.one) see(*o.one, o.is_float);
        if (o.many)
            for (const auto& t : *o.many) see(t, o.is_float);
    }
    if (first == nullptr) [[unlikely]]
        no_operand(op);
    return first->autodiff(track);
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
    if (base(da) != base(db)) [[unlikely]]
        mixed_stacks(op, da, db);
    return da.autodiff((a_float && da.has_autodiff()) || (b_float && db.has_autodiff()));
}
/// The stack of a creation op on device `d` (`track`: a float tensor, which keeps autodiff).
inline Stack stack_of_device(const DispatchDevice& d, bool track) {
    return track ? d : base(d);
}

struct OpTable;
struct CoreTable;

/// The handle of `t`, checked.
inline const Handle& handle_of(const DispatchTensor& t) {
    if (t.handle == nullptr) [[unlikely]]
        no_handle();
    return *t.handle;
}

/// Where an op keeps the handle of an operand it took over (the last handle of that tensor),
/// so that its result reuses that allocation instead of freeing one and allocating another: in
/// a chain of ops on temporaries (`((x + y) * y).exp()`) every op after the first allocates no
/// handle. Local to one op's entry (nothing outlives the call).
struct Spare {
    std::shared_ptr<Handle> handle;  ///< the taken-over handle, its primitive moved out
    const void* type = nullptr;      ///< which Holder<P> it is (kHolderTag<P>)
};
/// A tag an address per primitive type, naming a Spare's Holder<P>.
template <typename P>
inline constexpr char kHolderTag = 0;

/// S's primitive of `t` (taken over when this is the last handle, so that S may reuse it); the
/// emptied handle goes to `spare` when it has none yet.
template <typename P>
P take(DispatchTensor&& t, Spare* spare = nullptr) {
    auto& h = static_cast<Holder<P>&>(*t.handle);
    if (t.handle.use_count() == 1) {
        P p = std::move(h.p);
        if (spare && !spare->handle) {
            spare->handle = std::move(t.handle);
            spare->type = &kHolderTag<P>;
        } else {
            t.handle.reset();
        }
        return p;
    }
    return h.p;
}

/// A float tensor of `s` as S's primitive: a tensor of the same stack is taken as is, one of
/// the same device without autodiff joins S's graph as a constant.
template <typename S>
typename S::FloatTensorPrimitive unwrap_float(DispatchTensor&& t, const Stack& s,
                                              Spare* spare = nullptr) {
    const Stack& ts = handle_of(t).device;
    if (ts == s) return take<typename S::FloatTensorPrimitive>(std::move(t), spare);
    if constexpr (AutodiffBackend<S>) {
        return S::from_inner(
            take<typename S::InnerBackend::FloatTensorPrimitive>(std::move(t), spare));
    } else {
        EMBER_FAIL(Device, "ember::Dispatch: a tensor of ", ts.to_string(), " used on ", s.to_string());
    }
}
/// An int tensor as S's primitive (S's int primitive is its inner stack's).
template <typename S>
typename S::IntTensorPrimitive unwrap_int(DispatchTensor&& t, const Stack&,
                                          Spare* spare = nullptr) {
    handle_of(t);
    return take<typename S::IntTensorPrimitive>(std::move(t), spare);
}
/// A bool tensor as S's primitive.
template <typename S>
typename S::BoolTensorPrimitive unwrap_bool(DispatchTensor&& t, const Stack&,
                                            Spare* spare = nullptr) {
    handle_of(t);
    return take<typename S::BoolTensorPrimitive>(std::move(t), spare);
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

/// The handles (each a Holder<P> with its shared_ptr control block in one block) come from a
/// per-thread free list (detail::RecyclingAllocator): a handle costs no malloc and free in a
/// loop of ops.
template <typename T>
using HandleAllocator = ::ember::detail::RecyclingAllocator<T>;

/// A handle around primitive `p` on stack `s`: the spare handle an operand left where it is a
/// Holder<P> (nobody else holds it: it was the operand's last handle), else a new one.
template <typename P>
DispatchTensor hold(P&& p, const Stack& s, const Shape& shape, DType dtype,
                    Spare* spare = nullptr) {
    using H = Holder<std::remove_cvref_t<P>>;
    if (spare && spare->type == &kHolderTag<std::remove_cvref_t<P>>) {
        auto& h = static_cast<H&>(*spare->handle);
        h.device = s;
        h.shape = shape;
        h.dtype = dtype;
        h.p = std::forward<P>(p);
        spare->type = nullptr;
        return {std::move(spare->handle)};
    }
    auto h = std::allocate_shared<H>(HandleAllocator<H>{});
    h->device = s;
    h->shape = shape;
    h->dtype = dtype;
    h->p = std::forward<P>(p);
    return {std::move(h)};
}
template <typename S>
DispatchTensor wrap_float(typename S::FloatTensorPrimitive p, const Stack& s,
                          Spare* spare = nullptr) {
    const DType dtype = S::float_dtype(p);
    return hold(std::move(p), s, S::float_shape(p), dtype, spare);
}
template <typename S>
DispatchTensor wrap_int(typename S::IntTensorPrimitive p, const Stack& s, Spare* spare = nullptr) {
    const DType dtype = S::int_dtype(p);
    return hold(std::move(p), base(s), S::int_shape(p), dtype, spare);
}
template <typename S>
DispatchTensor wrap_bool(typename S::BoolTensorPrimitive p, const Stack& s,
                         Spare* spare = nullptr) {
    const DType dtype = S::bool_dtype(p);
    return hold(std::move(p), base(s), S::bool_shape(p), dtype, spare);
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
            return std::array<DispatchTensor, 3>{wrap_float<S>(std::move(p2), s),
                                                 wrap_float<S>(std::move(m2), s),
                                                 wrap_float<S>(std::move(v2), s)};
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
            return std::pair<DispatchTensor, DispatchTensor>{wrap_float<S>(std::move(p2), s),
                                                             wrap_float<S>(std::move(v2), s)};
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
            for (auto& u : r)
                out.push_back({wrap_float<S>(std::move(u[0]), s), wrap_float<S>(std::move(u[1]), s),
                               wrap_float<S>(std::move(u[2]), s)});
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
            for (auto& u : r)
                out.push_back(
                    {wrap_float<S>(std::move(u[0]), s), wrap_float<S>(std::move(u[1]), s)});
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
    if constexpr (::ember::fusion::MatmulEpilogueBackend<S>) {
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
/// The hand-written entries of stack `s` (devices, autodiff).
inline const CoreTable& core_table(const Stack& s) {
    return *stack_entry(s).core;
}

}  // namespace ember::detail::dispatch
