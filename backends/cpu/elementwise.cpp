// Elementwise kernels with PyTorch's broadcasting. Each op is a small functor; the drivers
// handle strides (0 for broadcast dims), pick a contiguous fast path the compiler vectorises,
// split work over the pool, and write into a moved-in input when its buffer is unique.
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include <ember/detail/bit.hpp>
#include "../common/promotion.hpp"
#include "elementwise_fns.hpp"
#include "isa.hpp"  // EMBER_CPU_ISA_BEGIN/END: one copy per instruction set (EMBER_CPU_ARCH)
#include "iter.hpp"
#include "kernels.hpp"
#include "neon.hpp"
#include "parallel.hpp"

namespace ember::detail::cpu {
EMBER_CPU_ISA_BEGIN
namespace {

constexpr std::size_t kGrain = 1 << 15;  // elements per parallel chunk

// ---- dtype rules ----------------------------------------------------------------------------
using ember::detail::promote;
bool is_half(DType d) { return d == DType::F16 || d == DType::BF16; }
// f16/bf16 compute in f32 and round once at the end.
DType compute_dtype(DType d) { return is_half(d) ? DType::F32 : d; }

// visit_dtype over the compute dtypes only, so that no kernel is instantiated for f16/bf16.
template <typename F>
decltype(auto) visit_compute(DType d, F&& f) {
    switch (d) {
        case DType::F32: return f(TypeTag<float>{});
        case DType::F64: return f(TypeTag<double>{});
        case DType::I64: return f(TypeTag<std::int64_t>{});
        case DType::I32: return f(TypeTag<std::int32_t>{});
        case DType::I16: return f(TypeTag<std::int16_t>{});
        case DType::I8: return f(TypeTag<std::int8_t>{});
        case DType::U8: return f(TypeTag<std::uint8_t>{});
        default: return f(TypeTag<bool>{});
    }
}

// ---- drivers --------------------------------------------------------------------------------
// Calls f(offsets, n, strides) over the whole iteration, in parallel; a single run (the fully
// contiguous case) is split into element ranges.
template <std::size_t K, typename F>
void run_parallel(const Iter<K>& it, F&& f) {
    const std::size_t rows = it.rows(), inner = it.inner();
    if (rows == 1) {
        parallel_for(inner, kGrain, [&](std::size_t b, std::size_t e) {
            std::array<std::int64_t, K> off{}, st{};
            for (std::size_t k = 0; k < K; ++k) {
                st[k] = it.strides[k][it.rank - 1];
                off[k] = static_cast<std::int64_t>(b) * st[k];
            }
            f(off, e - b, st);
        });
        return;
    }
    parallel_for(rows, std::max<std::size_t>(1, kGrain / std::max<std::size_t>(1, inner)),
                 [&](std::size_t b, std::size_t e) { for_each_run(it, b, e, f); });
}

// out = f(in), out contiguous with in's shape.
template <typename TI, typename TO, typename F>
void map_unary(const CpuTensor& in, const CpuTensor& out, F f) {
    const TI* x = in.data<TI>();
    TO* y = out.data<TO>();
    if (in.is_contiguous()) {  // the common case, without building an iteration plan
        // f copied into the task: a uint8 (bool) output may alias anything the task reaches by
        // reference, which would force a reload of f's captures per element and no vectors.
        parallel_for(out.num_elements(), kGrain, [&, fn = f](std::size_t b, std::size_t e) {
            // In place through one pointer, so that the loop vectorizes (see map_binary).
            if constexpr (std::is_same_v<TI, TO>) {
                if (static_cast<const void*>(x) == static_cast<const void*>(y)) {
                    TO* __restrict o = y;
                    for (std::size_t k = b; k < e; ++k) o[k] = fn(o[k]);
                    return;
                }
            }
            TO* __restrict o = y;
            const TI* __restrict i = x;
            for (std::size_t k = b; k < e; ++k) o[k] = fn(i[k]);
        });
        return;
    }
    auto it = make_iter<2>(out.shape, {&out.strides, &in.strides});
    run_parallel(it, [&](const auto& off, std::size_t n, const auto& st) {
        TO* o = y + off[0];
        const TI* i = x + off[1];
        if (st[0] == 1 && st[1] == 1) {
            for (std::size_t k = 0; k < n; ++k) o[k] = f(i[k]);
        } else {
            for (std::size_t k = 0; k < n; ++k)
                o[k * st[0]] = f(i[static_cast<std::int64_t>(k) * st[1]]);
        }
    });
}

// out = f(a, b) with broadcasting; out contiguous with the broadcast shape.
template <typename TA, typename TB, typename TO, typename F>
void map_binary(const CpuTensor& a, const CpuTensor& b, const CpuTensor& out, F f) {
    const TA* pa = a.data<TA>();
    const TB* pb = b.data<TB>();
    TO* po = out.data<TO>();
    if (a.shape == out.shape && b.shape == out.shape && a.is_contiguous() && b.is_contiguous()) {
        parallel_for(out.num_elements(), kGrain, [&](std::size_t s, std::size_t e) {
            // In place, the output lines are the input's: prefetching both inputs a few KiB
            // ahead keeps more loads in flight than the hardware prefetcher alone (as in the f32
            // sum). Into a fresh buffer the extra prefetches compete with its write-allocates
            // and measured slower, so that case keeps the plain loop.
            constexpr std::size_t kStep = 4096 / sizeof(TA), kAhead = 4 * kStep;
            const bool in_place = static_cast<const void*>(po) == static_cast<const void*>(pa) ||
                                  static_cast<const void*>(po) == static_cast<const void*>(pb);
            // The loops name the output and the input it overwrites by one restrict pointer:
            // with two, the compiler's overlap check fails in place and it runs its scalar,
            // branchy fallback (5 ns per element for a random mask_fill).
            // A by-value copy of f keeps its captures (a fill value) in registers.
            auto run = [&, fn = f](std::size_t j0, std::size_t j1) {
                if constexpr (std::is_same_v<TA, TO>) {
                    if (static_cast<const void*>(po) == static_cast<const void*>(pa)) {
                        TO* __restrict o = po;
                        const TB* __restrict y = pb;
                        for (std::size_t j = j0; j < j1; ++j) o[j] = fn(o[j], y[j]);
                        return;
                    }
                }
                if constexpr (std::is_same_v<TB, TO>) {
                    if (static_cast<const void*>(po) == static_cast<const void*>(pb)) {
                        TO* __restrict o = po;
                        const TA* __restrict x = pa;
                        for (std::size_t j = j0; j < j1; ++j) o[j] = fn(x[j], o[j]);
                        return;
                    }
                }
                TO* __restrict o = po;
                const TA* __restrict x = pa;
                const TB* __restrict y = pb;
                for (std::size_t j = j0; j < j1; ++j) o[j] = fn(x[j], y[j]);
            };
            std::size_t k = s;
            for (; in_place && k + kStep <= e; k += kStep) {
                for (std::size_t q = 0; q < kStep; q += 64 / sizeof(TA)) {
                    __builtin_prefetch(pa + k + kAhead + q);
                    __builtin_prefetch(pb + k + kAhead + q);
                }
                run(k, k + kStep);
            }
            run(k, e);
        });
        return;
    }
    const Strides sa = broadcast_strides(a, out.shape), sb = broadcast_strides(b, out.shape);
    auto it = make_iter<3>(out.shape, {&out.strides, &sa, &sb});
    run_parallel(it, [&](const auto& off, std::size_t n, const auto& st) {
        TO* o = po + off[0];
        const TA* x = pa + off[1];
        const TB* y = pb + off[2];
        if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
            for (std::size_t k = 0; k < n; ++k) o[k] = f(x[k], y[k]);
        } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
            const TB v = *y;
            for (std::size_t k = 0; k < n; ++k) o[k] = f(x[k], v);
        } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
            const TA v = *x;
            for (std::size_t k = 0; k < n; ++k) o[k] = f(v, y[k]);
        } else {
            for (std::size_t k = 0; k < n; ++k) {
                const auto i = static_cast<std::int64_t>(k);
                o[i * st[0]] = f(x[i * st[1]], y[i * st[2]]);
            }
        }
    });
}

// A destination for a result of `shape` and `dtype`: `a`'s own buffer when it may be reused.
CpuTensor output_like(const CpuTensor& a, const Shape& shape, DType dtype) {
    if (a.is_unique() && a.shape == shape && a.dtype == dtype) return a;
    return empty(shape, dtype);
}

// Converts f16/bf16 (and, for binary ops, mismatched dtypes) to the compute dtype.
CpuTensor to_compute(CpuTensor t, DType d) { return t.dtype == d ? t : cast(std::move(t), d); }
CpuTensor from_compute(CpuTensor t, DType d) { return t.dtype == d ? t : cast(std::move(t), d); }

// Integer division and remainder by zero are errors (PyTorch raises too).
template <typename T>
void check_int_divisor(BinaryOp op, const CpuTensor& divisor) {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        if (op != BinaryOp::Div && op != BinaryOp::Rem && op != BinaryOp::RDiv &&
            op != BinaryOp::RRem)
            return;
        bool zero = false;
        const T* p = divisor.data<T>();
        for_each_offset(divisor, [&](std::int64_t o) { zero |= p[o] == 0; });
        EMBER_CHECK(!zero, Argument, binary_name(op), ": integer division by zero");
    }
}
template <typename T>
void check_int_pow(BinaryOp op, const CpuTensor& exponent) {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        if (op != BinaryOp::Pow && op != BinaryOp::RPow) return;
        bool neg = false;
        const T* p = exponent.data<T>();
        for_each_offset(exponent, [&](std::int64_t o) { neg |= p[o] < 0; });
        EMBER_CHECK(!neg, Argument, "pow: integers to negative integer powers are not allowed");
    }
}

}  // namespace

CpuTensor binary(BinaryOp op, CpuTensor a, CpuTensor b) {
    // Fast path for same-shape contiguous operands of one compute dtype: no broadcasting,
    // promotion or casts to work out (this is what per-op overhead measures).
    if (a.dtype == b.dtype && !is_half(a.dtype) && a.shape == b.shape && a.is_contiguous() &&
        b.is_contiguous()) {
        check::binary_dtype(op, a.dtype);
        CpuTensor out = a.is_unique() ? a : (b.is_unique() ? b : empty(a.shape, a.dtype));
        const CpuTensor& x = a;
        if (out.num_elements() > 0) {
            visit_compute(out.dtype, [&]<typename T>(TypeTag<T>) {
                const bool rev = op == BinaryOp::RSub || op == BinaryOp::RDiv ||
                                 op == BinaryOp::RRem || op == BinaryOp::RPow;
                check_int_divisor<T>(op, rev ? x : b);
                check_int_pow<T>(op, rev ? x : b);
                with_binary_fn<T>(op, [&](auto f) { map_binary<T, T, T>(x, b, out, f); });
            });
        }
        return out;
    }
    const Shape shape = broadcast_shapes(a.shape, b.shape, check::binary_op_name(op, a.dtype));
    const DType result = promote(a.dtype, b.dtype);
    check::binary_dtype(op, result);
    const DType cd = compute_dtype(result);
    a = to_compute(std::move(a), cd);
    b = to_compute(std::move(b), cd);
    CpuTensor out = output_like(a, shape, cd);
    if (out.storage != a.storage) {
        CpuTensor alt = output_like(b, shape, cd);
        if (alt.storage == b.storage) out = std::move(alt);
    }
    if (shape.num_elements() > 0) {
        visit_compute(cd, [&]<typename T>(TypeTag<T>) {
            const bool rev = op == BinaryOp::RSub || op == BinaryOp::RDiv || op == BinaryOp::RRem ||
                             op == BinaryOp::RPow;
            check_int_divisor<T>(op, rev ? a : b);
            check_int_pow<T>(op, rev ? a : b);
            with_binary_fn<T>(op, [&](auto f) { map_binary<T, T, T>(a, b, out, f); });
        });
    }
    return from_compute(std::move(out), result);
}

CpuTensor binary_scalar(BinaryOp op, CpuTensor a, Scalar s) {
    const DType result = a.dtype;
    check::binary_dtype(op, result);
    const DType cd = compute_dtype(result);
    a = to_compute(std::move(a), cd);
    CpuTensor out = output_like(a, a.shape, cd);
    if (a.num_elements() > 0) {
        visit_compute(cd, [&]<typename T>(TypeTag<T>) {
            const T v = is_float(cd) ? elem_cast<T>(s.f) : elem_cast<T>(s.i);
            if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
                const bool div = op == BinaryOp::Div || op == BinaryOp::Rem;
                EMBER_CHECK(!(div && v == 0), Argument, binary_name(op),
                            ": integer division by zero");
                EMBER_CHECK(!(op == BinaryOp::Pow && v < 0), Argument,
                            "pow: integers to negative integer powers are not allowed");
                if (op == BinaryOp::RDiv || op == BinaryOp::RRem) check_int_divisor<T>(op, a);
            }
            if constexpr (std::is_floating_point_v<T>) {
                if (op == BinaryOp::Div && exact_reciprocal(v)) {
                    const T r = T(1) / v;
                    return map_unary<T, T>(a, out, [r](T x) { return x * r; });
                }
            }
            with_binary_fn<T>(op, [&](auto f) {
                map_unary<T, T>(a, out, [f, v](T x) { return f(x, v); });
            });
        });
    }
    return from_compute(std::move(out), result);
}

CpuTensor powf_scalar(CpuTensor t, double p) {
    EMBER_CHECK(is_float(t.dtype), DType, "powf_scalar: needs a float tensor, got ",
                dtype_name(t.dtype));
    if (p == 2.0) return EMBER_CPU_ISA_NS::binary(BinaryOp::Mul, t, t);
    return EMBER_CPU_ISA_NS::binary_scalar(BinaryOp::Pow, std::move(t), Scalar(p));
}

#if EMBER_CPU_NEON
namespace {
/// exp or erf of n contiguous floats with the NEON kernels (the same bits as fast_exp and
/// fast_erf), in parallel.
void unary_neon(UnaryOp op, const float* x, float* y, std::size_t n) {
    parallel_for(n, kGrain, [&](std::size_t b, std::size_t e) {
        if (op == UnaryOp::Exp)
            neon::exp_f32(x + b, y + b, e - b, [](float v) { return fast_exp(v); });
        else
            neon::erf_f32(x + b, y + b, e - b, kErfP, kErfQ, [](float v) { return fast_erf(v); });
    });
}
}  // namespace
#endif

CpuTensor unary(UnaryOp op, CpuTensor t) {
    const DType result = op == UnaryOp::IsNan ? DType::Bool : t.dtype;
    if (op == UnaryOp::IsNan && !is_float(t.dtype)) return full(t.shape, Scalar(false), DType::Bool);
    check::unary_dtype(op, t.dtype);
    const DType cd = compute_dtype(t.dtype);
    t = to_compute(std::move(t), cd);
    CpuTensor out = output_like(t, t.shape, op == UnaryOp::IsNan ? DType::Bool : cd);
    if (t.num_elements() == 0) return from_compute(std::move(out), result);
    visit_compute(cd, [&]<typename T>(TypeTag<T>) {
        if constexpr (std::is_floating_point_v<T>) {
            if (op == UnaryOp::IsNan) return map_unary<T, bool>(t, out, [](T x) { return x != x; });
        }
#if EMBER_CPU_NEON
        if constexpr (std::is_same_v<T, float>)
            if ((op == UnaryOp::Exp || op == UnaryOp::Erf) && t.is_contiguous() && neon_enabled())
                return unary_neon(op, t.data<float>(), out.data<float>(), t.num_elements());
#endif
        with_unary_fn<T>(op, [&](auto f) { map_unary<T, T>(t, out, f); });
    });
    return op == UnaryOp::IsNan ? out : from_compute(std::move(out), result);
}

CpuTensor compare(CompareOp op, CpuTensor a, CpuTensor b) {
    const Shape shape = broadcast_shapes(a.shape, b.shape, compare_name(op));
    const DType cd = compute_dtype(promote(a.dtype, b.dtype));
    a = to_compute(std::move(a), cd);
    b = to_compute(std::move(b), cd);
    CpuTensor out = empty(shape, DType::Bool);
    if (shape.num_elements() == 0) return out;
    visit_compute(cd, [&]<typename T>(TypeTag<T>) {
        // Results stored as uint8 0/1 (bool's representation), which vectorizes.
        with_compare_fn<T>(op, [&](auto f) {
            map_binary<T, T, std::uint8_t>(
                a, b, out, [f](T x, T y) { return static_cast<std::uint8_t>(f(x, y)); });
        });
    });
    return out;
}

CpuTensor compare_scalar(CompareOp op, CpuTensor a, Scalar s) {
    const DType cd = compute_dtype(a.dtype);
    a = to_compute(std::move(a), cd);
    CpuTensor out = empty(a.shape, DType::Bool);
    if (a.num_elements() == 0) return out;
    visit_compute(cd, [&]<typename T>(TypeTag<T>) {
        // Compare in double for float tensors so that `x > 0.1` means what it says; when the
        // scalar is exactly a T (0, 1, 0.5...), comparing in T is the same and vectorizes
        // twice as wide.
        using C = std::conditional_t<std::is_floating_point_v<T>, double, T>;
        const C v = std::is_floating_point_v<T> ? static_cast<C>(s.f) : elem_cast<C>(s.i);
        if constexpr (std::is_same_v<T, float>) {
            if (static_cast<double>(static_cast<float>(v)) == v) {
                const float vf = static_cast<float>(v);
                with_compare_fn<float>(op, [&](auto f) {
                    map_unary<T, std::uint8_t>(
                        a, out, [f, vf](T x) { return static_cast<std::uint8_t>(f(x, vf)); });
                });
                return;
            }
        }
        with_compare_fn<C>(op, [&](auto f) {
            map_unary<T, std::uint8_t>(a, out, [f, v](T x) {
                return static_cast<std::uint8_t>(f(static_cast<C>(x), v));
            });
        });
    });
    return out;
}

CpuTensor where(CpuTensor mask, CpuTensor a, CpuTensor b) {
    const Shape shape = check::mask_where(b, mask, a);  // mask_where(t = b, mask, value = a)
    const DType result = promote(a.dtype, b.dtype), cd = compute_dtype(result);
    a = to_compute(std::move(a), cd);
    b = to_compute(std::move(b), cd);
    CpuTensor out = empty(shape, cd);
    if (shape.num_elements() == 0) return from_compute(std::move(out), result);
    const Strides sm = broadcast_strides(mask, shape), sa = broadcast_strides(a, shape),
                  sb = broadcast_strides(b, shape);
    visit_compute(cd, [&]<typename T>(TypeTag<T>) {
        const std::uint8_t* pm = mask.data<std::uint8_t>();
        const T* pa = a.data<T>();
        const T* pb = b.data<T>();
        T* po = out.data<T>();
        auto it = make_iter<4>(shape, {&out.strides, &sm, &sa, &sb});
        run_parallel(it, [&](const auto& off, std::size_t n, const auto& st) {
            for (std::size_t k = 0; k < n; ++k) {
                const auto i = static_cast<std::int64_t>(k);
                po[off[0] + i * st[0]] =
                    select(pm[off[1] + i * st[1]] != 0, pa[off[2] + i * st[2]], pb[off[3] + i * st[3]]);
            }
        });
    });
    return from_compute(std::move(out), result);
}

CpuTensor mask_fill(CpuTensor t, CpuTensor mask, Scalar value) {
    check::mask_fill(t, mask);
    const Shape& shape = t.shape;
    const DType cd = compute_dtype(t.dtype), result = t.dtype;
    t = to_compute(std::move(t), cd);
    CpuTensor out = output_like(t, shape, cd);
    visit_compute(cd, [&]<typename T>(TypeTag<T>) {
        const T v = is_float(cd) ? elem_cast<T>(value.f) : elem_cast<T>(value.i);
        // The mask's bytes read as uint8: GCC has no vector type for bool and would not
        // vectorize the loop.
        map_binary<T, std::uint8_t, T>(t, mask, out,
                                       [v](T x, std::uint8_t m) { return select(m != 0, v, x); });
    });
    return from_compute(std::move(out), result);
}

CpuTensor clamp(CpuTensor t, Scalar lo, Scalar hi) {
    EMBER_CHECK(is_float(t.dtype) ? lo.f <= hi.f : lo.i <= hi.i, Argument, "clamp: min ",
                lo.f, " is greater than max ", hi.f);
    const DType cd = compute_dtype(t.dtype), result = t.dtype;
    t = to_compute(std::move(t), cd);
    CpuTensor out = output_like(t, t.shape, cd);
    visit_compute(cd, [&]<typename T>(TypeTag<T>) {
        const T l = is_float(cd) ? elem_cast<T>(lo.f) : elem_cast<T>(lo.i);
        const T h = is_float(cd) ? elem_cast<T>(hi.f) : elem_cast<T>(hi.i);
        map_unary<T, T>(t, out, [l, h](T x) { return nan_min(nan_max(x, l), h); });
    });
    return from_compute(std::move(out), result);
}

EMBER_CPU_ISA_END
}  // namespace ember::detail::cpu
