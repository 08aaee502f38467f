#pragma once
// The lazy op stream behind Fusion<B> (its mutex is detail/sync.hpp's, a no-op stand-in in
// freestanding builds, which have one thread): values are either materialised (they hold B's
// primitive) or pending (an elementwise op over other values). Pending values of one iteration
// shape collect in the stream; a flush turns the live ones into one fused program, launches it,
// and materialises exactly the values someone outside the stream still holds — an intermediate
// whose last use lies inside the chain is never written to memory.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../../detail/sync.hpp"
#include "../../export.hpp"
#include "../../tensor/fusion_program.hpp"
#include "../../tensor/ops.hpp"
#include "../../tensor/shape.hpp"

namespace ember::detail::fusion {

using ember::fusion::Instr;
using ember::fusion::OpKind;
using ember::fusion::Program;
using LockGuard = ember::detail::LockGuard<ember::detail::Mutex>;

/// A tensor of Fusion<B>: materialised (`prim` set) or pending (an op over `args`).
template <typename B>
struct Value {
    using P = typename B::FloatTensorPrimitive;
    Shape shape;                                   ///< dims (known before it is computed)
    DType dtype = DType::F32;                      ///< element type
    typename B::Device device{};                   ///< where it lives
    std::optional<P> prim;                         ///< B's tensor, once materialised
    OpKind kind = OpKind::Unary;                   ///< pending: the op
    std::uint8_t code = 0;                         ///< pending: its op code
    std::array<std::shared_ptr<Value>, 3> args{};  ///< pending: operands (null when unused)
    std::array<Scalar, 2> scalars{};               ///< pending: scalar operands
    /// A matmul of args[0] and args[1] (both materialised) put off until it is needed, so that
    /// a bias add and relu recorded after it can run inside it (a backend's epilogue). It is not
    /// part of any chain: reading it, or flushing a chain it cannot end, computes it on its own.
    bool deferred_matmul = false;
};

/// A backend that applies a bias row and relu inside its matmul (tensor/fusion_program.hpp).
template <typename B>
concept MatmulEpilogueBackend = ember::fusion::MatmulEpilogueBackend<B>;

/// PyTorch's broadcasting of two shapes, or nothing when they do not fit (the caller then runs
/// the op unfused, so that B reports the error as it always does).
inline std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
    const std::size_t r = a.rank() > b.rank() ? a.rank() : b.rank();
    Shape out;
    for (std::size_t i = 0; i < r; ++i) {
        const std::size_t da = i + a.rank() >= r ? a[i + a.rank() - r] : 1;
        const std::size_t db = i + b.rank() >= r ? b[i + b.rank() - r] : 1;
        if (da != db && da != 1 && db != 1) return std::nullopt;
        out.push_back(da == 1 ? db : da);
    }
    return out;
}

/// The stream of pending ops of backend B (one per process; recording and flushing are
/// serialised by its mutex, so values may cross threads).
template <typename B>
class EMBER_API Stream {
  public:
    using V = Value<B>;
    using P = typename B::FloatTensorPrimitive;
    /// Pending ops a program may hold: bounds the registers a kernel needs.
    static constexpr std::size_t kMaxOps = 48;

    /// The stream (EMBER_API: one per process, not one in each shared library that uses it).
    EMBER_API static Stream& get() {
        static Stream s;
        return s;
    }

    /// Appends a pending op; flushes first when it does not belong to the current chain.
    std::shared_ptr<V> record(OpKind kind, std::uint8_t code, DType dtype, const Shape& shape,
                              std::array<std::shared_ptr<V>, 3> args,
                              std::array<Scalar, 2> scalars) {
        auto v = std::make_shared<V>();
        v->shape = shape;
        v->dtype = dtype;
        v->device = args[0]->device;
        v->kind = kind;
        v->code = code;
        v->args = std::move(args);
        v->scalars = scalars;
        LockGuard lock(mutex_);
        if (!pending_.empty() &&
            (!(shape == shape_) || !(v->device == device_) || pending_.size() >= kMaxOps))
            flush_locked();
        if (pending_.empty()) {
            shape_ = shape;
            device_ = v->device;
        }
        pending_.push_back(v);
        return v;
    }

    /// B's tensor of `v`, computing whatever is pending first.
    const P& materialize(const std::shared_ptr<V>& v) {
        if (!v->prim) {
            LockGuard lock(mutex_);
            if (v->deferred_matmul)
                run_matmul(*v);
            else if (!v->prim)
                flush_locked();
        }
        return *v->prim;
    }

    /// Runs everything pending.
    void flush() {
        LockGuard lock(mutex_);
        flush_locked();
    }

    /// B's tensor of the reduction of pending `v` along its last dim (keeping the dim), computed
    /// by the kernel that runs the chain, so that `v` is written out only when someone else
    /// holds it; nothing when `v` was computed meanwhile (the caller reduces it unfused).
    std::optional<P> reduce_last_dim(const std::shared_ptr<V>& v, ReduceOp op) {
        LockGuard lock(mutex_);
        if (v->prim || v->deferred_matmul) return std::nullopt;
        return flush_locked(RowTarget{v.get(), op});  // `v` is the caller's handle
    }

  private:
    struct RowTarget {
        const V* value;
        ReduceOp op;
    };
    std::optional<P> flush_locked(std::optional<RowTarget> reduce = std::nullopt);
    bool run_epilogue(const std::vector<std::shared_ptr<V>>& live);

    /// Computes a deferred matmul on its own (a no-op once it has been computed).
    static void run_matmul(V& v) {
        if (v.prim) return;
        v.prim = B::float_matmul(*v.args[0]->prim, *v.args[1]->prim);
        ember::fusion::detail::count_launch(false, 1);
        v.args = {};
        v.deferred_matmul = false;
    }

    ember::detail::Mutex mutex_;
    std::vector<std::weak_ptr<V>> pending_;
    Shape shape_;
    typename B::Device device_{};
    std::unordered_map<std::string, typename B::FusedKernel> cache_;
};

/// The input view B's kernel reads: `p` expanded (zero-copy) to the iteration shape.
template <typename B>
typename B::FloatTensorPrimitive expand_to(const typename B::FloatTensorPrimitive& p, DType d,
                                           const Shape& shape) {
    if (B::float_shape(p) == shape) return p;
    if (is_float(d)) return B::float_expand(p, shape);
    if (d == DType::Bool) return B::bool_expand(p, shape);
    return B::int_expand(p, shape);
}

/// Runs a lone pending op through B's own op (no kernel to compile for a chain of one).
template <typename B>
typename B::FloatTensorPrimitive run_single(const Value<B>& v,
                                            const typename B::FloatTensorPrimitive* a,
                                            const typename B::FloatTensorPrimitive* b,
                                            const typename B::FloatTensorPrimitive* c);

template <typename B>
auto Stream<B>::flush_locked(std::optional<RowTarget> reduce) -> std::optional<P> {
    std::vector<std::shared_ptr<V>> live;
    live.reserve(pending_.size());
    for (auto& w : pending_)
        if (auto s = w.lock()) live.push_back(std::move(s));
    pending_.clear();
    if (live.empty()) return std::nullopt;
    if constexpr (MatmulEpilogueBackend<B>) {
        if (!reduce && ember::fusion::matmul_epilogues() && run_epilogue(live)) return std::nullopt;
    }
    // Deferred matmuls the chain reads are computed first: they are its inputs.
    for (auto& v : live)
        for (auto& a : v->args)
            if (a && a->deferred_matmul) run_matmul(*a);

    // Registers: materialised operands become inputs (once each), pending ones the register of
    // the instruction that computes them. Operands always precede their users in the stream.
    std::unordered_map<const V*, std::uint16_t> reg;
    std::unordered_map<const V*, int> internal_uses;
    std::vector<std::shared_ptr<V>> inputs;
    for (auto& v : live)
        for (auto& a : v->args) {
            if (!a) continue;
            if (a->prim) {
                if (reg.emplace(a.get(), static_cast<std::uint16_t>(inputs.size())).second)
                    inputs.push_back(a);
            } else {
                ++internal_uses[a.get()];
            }
        }
    // A value held outside the stream (a user's tensor, a later op) must be written out.
    std::vector<std::size_t> out_index;
    for (std::size_t i = 0; i < live.size(); ++i) {
        // The reduced value's caller hands its handle over: not a reason to write it out.
        const long caller = reduce && reduce->value == live[i].get() ? 1 : 0;
        const long held = live[i].use_count() - 1 - internal_uses[live[i].get()] - caller;
        if (held > 0) out_index.push_back(i);
    }

    if (live.size() == 1 && !reduce) {
        V& v = *live[0];
        const P* ops[3] = {nullptr, nullptr, nullptr};
        for (std::size_t k = 0; k < 3; ++k)
            if (v.args[k]) ops[k] = &*v.args[k]->prim;
        v.prim = run_single<B>(v, ops[0], ops[1], ops[2]);
        ember::fusion::detail::count_launch(false, 1);
        v.args = {};
        return std::nullopt;
    }

    Program prog;
    prog.rank = shape_.rank();
    std::vector<P> in_prims;
    for (auto& in : inputs) {
        P p = expand_to<B>(*in->prim, in->dtype, shape_);
        prog.inputs.push_back({in->dtype, B::fused_input_dense(p)});
        in_prims.push_back(std::move(p));
    }
    std::vector<Scalar> scalars;
    const std::size_t n_in = inputs.size();
    for (std::size_t i = 0; i < live.size(); ++i) {
        const V& v = *live[i];
        Instr ins;
        ins.kind = v.kind;
        ins.code = v.code;
        ins.dtype = v.dtype;
        std::uint16_t* slots[3] = {&ins.a, &ins.b, &ins.c};
        for (std::size_t k = 0; k < 3; ++k)
            if (v.args[k]) *slots[k] = reg.at(v.args[k].get());
        switch (v.kind) {
            case OpKind::BinaryScalar:
            case OpKind::CompareScalar:
            case OpKind::MaskFill:
                ins.s0 = static_cast<std::uint16_t>(scalars.size());
                scalars.push_back(v.scalars[0]);
                break;
            case OpKind::Clamp:
                ins.s0 = static_cast<std::uint16_t>(scalars.size());
                scalars.push_back(v.scalars[0]);
                ins.s1 = static_cast<std::uint16_t>(scalars.size());
                scalars.push_back(v.scalars[1]);
                break;
            default:
                break;
        }
        reg[live[i].get()] = static_cast<std::uint16_t>(n_in + i);
        prog.instrs.push_back(ins);
    }
    for (std::size_t i : out_index) prog.outputs.push_back(static_cast<std::uint16_t>(n_in + i));
    if (reduce) {
        // The target was in the chain (it is pending, and its shape is the chain's).
        prog.reduce = ember::fusion::RowReduce{reduce->op, reg.at(reduce->value)};
    }

    const std::string key = prog.key();
    auto it = cache_.find(key);
    if (it == cache_.end()) {
        it = cache_.emplace(key, B::fused_compile(prog)).first;
        ember::fusion::detail::count_compile();
    } else {
        ember::fusion::detail::count_cache_hit();
    }
    std::vector<P> outs = B::fused_launch(it->second, prog, std::move(in_prims), scalars, shape_);
    ember::fusion::detail::count_launch(true, prog.instrs.size());
    for (std::size_t k = 0; k < out_index.size(); ++k)
        live[out_index[k]]->prim = std::move(outs[k]);
    for (auto& v : live) v->args = {};
    if (reduce) return std::move(outs.back());
    return std::nullopt;
}

// The chain as a matmul's epilogue, when it is exactly that: `mm + bias`, `relu(mm)` or
// `relu(mm + bias)` where `mm` is a deferred f32 matmul that nothing else holds, the bias a
// materialised row ([n], [1, n], ...) and the sum, before relu, held by nothing else. Then B runs
// it as one call, and `mm` and the sum never exist. False (nothing done) otherwise.
template <typename B>
bool Stream<B>::run_epilogue(const std::vector<std::shared_ptr<V>>& live) {
    if (live.size() > 2) return false;
    const V& first = *live[0];
    auto deferred = [](const std::shared_ptr<V>& a) {
        return a && a->deferred_matmul && a->dtype == DType::F32;
    };
    const std::shared_ptr<V>* mm = nullptr;
    const std::shared_ptr<V>* bias = nullptr;
    bool relu = false;
    if (first.kind == OpKind::Binary && static_cast<BinaryOp>(first.code) == BinaryOp::Add &&
        first.dtype == DType::F32) {
        for (int k = 0; k < 2 && !mm; ++k)
            if (deferred(first.args[k]) && first.args[1 - k]->prim) {
                mm = &first.args[k];
                bias = &first.args[1 - k];
            }
        if (!mm) return false;
        // A row: the matmul's last dim, every other dim 1, of no more dims than the matmul.
        const Shape& bs = (*bias)->shape;
        const Shape& ms = (*mm)->shape;
        if ((*bias)->dtype != DType::F32 || bs.rank() == 0 || bs.rank() > ms.rank() ||
            bs[bs.rank() - 1] != ms[ms.rank() - 1] || bs.num_elements() != bs[bs.rank() - 1])
            return false;
    } else if (first.kind == OpKind::Unary && static_cast<UnaryOp>(first.code) == UnaryOp::Relu &&
               deferred(first.args[0])) {
        mm = &first.args[0];
        relu = true;
    } else {
        return false;
    }
    if (!((*mm)->shape == shape_) || mm->use_count() != 1) return false;
    if (live.size() == 2) {
        const V& second = *live[1];
        if (relu || second.kind != OpKind::Unary ||
            static_cast<UnaryOp>(second.code) != UnaryOp::Relu || second.args[0] != live[0] ||
            live[0].use_count() != 2)  // `live` and `second` hold the sum: nobody else
            return false;
        relu = true;
    }
    std::optional<P> b;
    if (bias) b = *(*bias)->prim;
    std::optional<P> r = B::fused_matmul_epilogue(*(*mm)->args[0]->prim, *(*mm)->args[1]->prim,
                                                  std::move(b), ember::fusion::MatmulEpilogue{relu});
    if (!r) return false;
    live.back()->prim = std::move(*r);
    for (auto& v : live) v->args = {};
    ember::fusion::detail::count_launch(false, 1);
    ember::fusion::detail::count_epilogue();
    return true;
}

}  // namespace ember::detail::fusion

namespace ember::detail::fusion {

template <typename B>
typename B::FloatTensorPrimitive run_single(const Value<B>& v,
                                            const typename B::FloatTensorPrimitive* a,
                                            const typename B::FloatTensorPrimitive* b,
                                            const typename B::FloatTensorPrimitive* c) {
    const DType src = v.args[0]->dtype;
    const bool fl = is_float(src), bo = src == DType::Bool;
    switch (v.kind) {
        case OpKind::Unary: {
            const auto op = static_cast<UnaryOp>(v.code);
            if (bo) return B::bool_not(*a);
            return fl ? B::float_unary(op, *a) : B::int_unary(op, *a);
        }
        case OpKind::Binary: {
            const auto op = static_cast<BinaryOp>(v.code);
            if (bo) return B::bool_binary(op, *a, *b);
            return fl ? B::float_binary(op, *a, *b) : B::int_binary(op, *a, *b);
        }
        case OpKind::BinaryScalar: {
            const auto op = static_cast<BinaryOp>(v.code);
            return fl ? B::float_binary_scalar(op, *a, v.scalars[0])
                      : B::int_binary_scalar(op, *a, v.scalars[0]);
        }
        case OpKind::Compare: {
            const auto op = static_cast<CompareOp>(v.code);
            if (bo) return B::bool_compare(op, *a, *b);
            return fl ? B::float_compare(op, *a, *b) : B::int_compare(op, *a, *b);
        }
        case OpKind::CompareScalar: {
            const auto op = static_cast<CompareOp>(v.code);
            return fl ? B::float_compare_scalar(op, *a, v.scalars[0])
                      : B::int_compare_scalar(op, *a, v.scalars[0]);
        }
        case OpKind::Where: {  // a: mask, b: where true, c: where false
            const DType t = v.args[1]->dtype;
            if (t == DType::Bool) return B::bool_mask_where(*c, *a, *b);
            return is_float(t) ? B::float_mask_where(*c, *a, *b) : B::int_mask_where(*c, *a, *b);
        }
        case OpKind::MaskFill:
            return fl ? B::float_mask_fill(*a, *b, v.scalars[0])
                      : B::int_mask_fill(*a, *b, v.scalars[0]);
        case OpKind::Clamp:
            return fl ? B::float_clamp(*a, v.scalars[0], v.scalars[1])
                      : B::int_clamp(*a, v.scalars[0], v.scalars[1]);
        case OpKind::Cast: {
            if (fl) return is_float(v.dtype) ? B::float_cast(*a, v.dtype) : B::float_into_int(*a);
            if (bo) return is_float(v.dtype) ? B::bool_into_float(*a) : B::bool_into_int(*a);
            return B::int_into_float(*a);
        }
    }
    return *a;  // unreachable: every kind is handled above
}

}  // namespace ember::detail::fusion
