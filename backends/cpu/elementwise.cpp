// Elementwise kernels with PyTorch's broadcasting. Each op is a small functor, compiled into
// one span function of dense loops the compiler vectorises; the drivers, compiled once, handle
// strides (0 for broadcast dims), split work over the pool, and write into a moved-in input when
// its buffer is unique.
#include <algorithm>
#include <array>
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
// What depends on the op is compiled into one span function per op and dtype (binary_span,
// unary_span): its loops over dense operands, which the compiler vectorises with the op inlined.
// Everything else (strides, broadcasting, threads, copies through buffers) is in the drivers
// below, compiled once per operand count and reaching the span through a function pointer once
// per tile of runs. A template instance of the whole driver per op, dtype and layout was 1 585
// parallel loops here, most of the CPU backend's compile time in every configuration.

// Span modes: an input of stride 0 along the runs (a broadcast scalar) is read once per run.
enum SpanMode : unsigned { kSpanDense = 0, kSpanXScalar = 1, kSpanYScalar = 2 };

// `rows` runs of n elements each: run r of the output o and of the inputs x and y (y unused by
// unary spans) starts r * row[0], row[1] and row[2] elements after the first.
struct Tile {
    void* o;
    const void* x;
    const void* y;
    std::size_t n, rows;
    std::array<std::int64_t, 3> row;
    unsigned mode;
};
// fn: the op's functor (null for a captureless one).
using SpanFn = void (*)(const void* fn, const Tile& tile);

// The functor behind `fp`, copied: a uint8 (bool) output may alias anything reached through a
// pointer, which would force a reload of its captures (a fill value) per element and no vectors.
// A captureless lambda is made anew, so that a span can be looked up once per op (binary_op_span)
// with no functor object to point at.
template <typename F>
F functor(const void* fp) {
    if constexpr (std::is_empty_v<F> && std::is_default_constructible_v<F>)
        return F{};
    else
        return *static_cast<const F*>(fp);
}

// o[k] = f(x[k], y[k]) over each run of the tile. The loops name the output and an input it
// overwrites (in place) by one restrict pointer: with two, the compiler's overlap check fails in
// place and it runs its scalar, branchy fallback (5 ns per element for a random mask_fill). The
// tile's fields are read into locals first, for the same aliasing reason as the functor.
template <typename TA, typename TB, typename TO, typename F>
void binary_span(const void* fp, const Tile& t) {
    const F fn = functor<F>(fp);
    const std::size_t n = t.n, rows = t.rows;
    const unsigned mode = t.mode;
    const std::array<std::int64_t, 3> row = t.row;
    TO* po = static_cast<TO*>(t.o);
    const TA* pa = static_cast<const TA*>(t.x);
    const TB* pb = static_cast<const TB*>(t.y);
    for (std::size_t r = 0; r < rows; ++r, po += row[0], pa += row[1], pb += row[2]) {
        const bool in_a = static_cast<const void*>(po) == static_cast<const void*>(pa);
        const bool in_b = static_cast<const void*>(po) == static_cast<const void*>(pb);
        if (mode == kSpanYScalar) {
            const TB v = *pb;
            if constexpr (std::is_same_v<TA, TO>) {
                if (in_a) {
                    TO* __restrict o = po;
                    for (std::size_t k = 0; k < n; ++k) o[k] = fn(o[k], v);
                    continue;
                }
            }
            TO* __restrict o = po;
            const TA* __restrict x = pa;
            for (std::size_t k = 0; k < n; ++k) o[k] = fn(x[k], v);
        } else if (mode == kSpanXScalar) {
            const TA v = *pa;
            if constexpr (std::is_same_v<TB, TO>) {
                if (in_b) {
                    TO* __restrict o = po;
                    for (std::size_t k = 0; k < n; ++k) o[k] = fn(v, o[k]);
                    continue;
                }
            }
            TO* __restrict o = po;
            const TB* __restrict y = pb;
            for (std::size_t k = 0; k < n; ++k) o[k] = fn(v, y[k]);
        } else {
            if constexpr (std::is_same_v<TA, TO>) {
                if (in_a) {
                    TO* __restrict o = po;
                    const TB* __restrict y = pb;
                    for (std::size_t k = 0; k < n; ++k) o[k] = fn(o[k], y[k]);
                    continue;
                }
            }
            if constexpr (std::is_same_v<TB, TO>) {
                if (in_b) {
                    TO* __restrict o = po;
                    const TA* __restrict x = pa;
                    for (std::size_t k = 0; k < n; ++k) o[k] = fn(x[k], o[k]);
                    continue;
                }
            }
            TO* __restrict o = po;
            const TA* __restrict x = pa;
            const TB* __restrict y = pb;
            for (std::size_t k = 0; k < n; ++k) o[k] = fn(x[k], y[k]);
        }
    }
}

// o[k] = f(x[k]) over each run of the tile (dense runs only: the driver copies the others
// through a buffer).
template <typename TI, typename TO, typename F>
void unary_span(const void* fp, const Tile& t) {
    const F fn = functor<F>(fp);
    const std::size_t n = t.n, rows = t.rows;
    const std::int64_t ro = t.row[0], rx = t.row[1];
    TO* po = static_cast<TO*>(t.o);
    const TI* px = static_cast<const TI*>(t.x);
    for (std::size_t r = 0; r < rows; ++r, po += ro, px += rx) {
        TO* __restrict o = po;
        if constexpr (std::is_same_v<TI, TO>) {
            if (px == po) {  // in place through one pointer, so that the loop vectorises
                for (std::size_t k = 0; k < n; ++k) o[k] = fn(o[k]);
                continue;
            }
        }
        const TI* __restrict x = px;
        for (std::size_t k = 0; k < n; ++k) o[k] = fn(x[k]);
    }
}

// n elements from src at element stride src_st (0: one value repeated) to dst at dst_st; one
// of the two strides is 1 (a gather into a buffer or a scatter out of one).
template <typename U>
void copy_strided(U* dst, std::int64_t dst_st, const U* src, std::int64_t src_st, std::size_t n) {
    if (dst_st == 1) {
        for (std::size_t k = 0; k < n; ++k) dst[k] = src[static_cast<std::int64_t>(k) * src_st];
    } else {
        for (std::size_t k = 0; k < n; ++k) dst[static_cast<std::int64_t>(k) * dst_st] = src[k];
    }
}
void copy_elements(void* dst, std::int64_t dst_st, const void* src, std::int64_t src_st,
                   std::size_t n, std::size_t size) {
    visit_bits(size, [&]<typename U>(TypeTag<U>) {
        copy_strided(static_cast<U*>(dst), dst_st, static_cast<const U*>(src), src_st, n);
    });
}

// One op over K operands (K = 2: out, x; K = 3: out, x, y): base pointers, element sizes and
// the span.
template <std::size_t K>
struct Loop {
    std::array<char*, K> base{};
    std::array<std::size_t, K> size{};
    SpanFn span = nullptr;
    const void* fn = nullptr;
};

// The address `elements` elements of `size` bytes after p.
char* at(char* p, std::int64_t elements, std::size_t size) {
    return p + elements * static_cast<std::int64_t>(size);
}

// One run of n elements at element strides st (starting at p) that is not dense: the strided
// operands are copied to and from stack buffers, kBlock elements at a time, around dense spans.
template <std::size_t K>
[[gnu::noinline]] void run_buffered(const Loop<K>& L, const std::array<char*, K>& p, std::size_t n,
                                    const std::array<std::int64_t, K>& st) {
    constexpr std::size_t kBlock = 64;
    alignas(64) char buf[K][kBlock * 8];
    for (std::size_t j = 0; j < n; j += kBlock) {
        const std::size_t m = std::min(kBlock, n - j);
        std::array<void*, 3> q{};
        for (std::size_t k = 0; k < K; ++k) {
            char* first = at(p[k], static_cast<std::int64_t>(j) * st[k], L.size[k]);
            if (st[k] == 1) {
                q[k] = first;
            } else {
                q[k] = buf[k];
                if (k > 0) copy_elements(buf[k], 1, first, st[k], m, L.size[k]);
            }
        }
        L.span(L.fn, Tile{q[0], q[1], q[2], m, 1, {}, kSpanDense});
        if (st[0] != 1)
            copy_elements(at(p[0], static_cast<std::int64_t>(j) * st[0], L.size[0]), st[0], buf[0],
                          1, m, L.size[0]);
    }
}

// `rows` runs of n elements: run r of operand k starts at element off[k] + r * rst[k], its
// elements st[k] apart. Dense runs (inputs dense or, one of them, broadcast) go to the span as
// one tile; others one run at a time through run_buffered.
template <std::size_t K>
void run_tile(const Loop<K>& L, const std::array<std::int64_t, K>& off, std::size_t n,
              const std::array<std::int64_t, K>& st, std::size_t rows,
              const std::array<std::int64_t, K>& rst) {
    std::array<char*, K> p{};
    for (std::size_t k = 0; k < K; ++k) p[k] = at(L.base[k], off[k], L.size[k]);
    unsigned mode = kSpanDense;
    bool direct = st[0] == 1;
    for (std::size_t k = 1; k < K; ++k) {
        if (st[k] == 0 && K == 3)
            mode |= k == 1 ? kSpanXScalar : kSpanYScalar;
        else if (st[k] != 1)
            direct = false;
    }
    if (direct && mode != (kSpanXScalar | kSpanYScalar)) {
        Tile t{p[0], p[1], nullptr, n, rows, {rst[0], rst[1], 0}, mode};
        if constexpr (K == 3) {
            t.y = p[2];
            t.row[2] = rst[2];
        }
        L.span(L.fn, t);
        return;
    }
    for (std::size_t r = 0; r < rows; ++r) {
        std::array<char*, K> q{};
        for (std::size_t k = 0; k < K; ++k)
            q[k] = at(p[k], static_cast<std::int64_t>(r) * rst[k], L.size[k]);
        run_buffered(L, q, n, st);
    }
}

// Calls f(offsets, n, strides) over the whole iteration, in parallel (where's loop); a single
// run (the fully contiguous case) is split into element ranges.
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

// Runs L over `shape` in parallel. Without strides (every operand contiguous with the shape, or
// in `flat` mode one value broadcast everywhere) as one flat range of dense spans; otherwise
// through the merged iteration (iter.hpp): its runs are handed to run_tile as tiles of
// consecutive runs along the second innermost merged dim, so that short runs ([N, 4] + [N, 1])
// cost one call per tile, not one per run; a single run (a broadcast that merges away) is split
// into element ranges.
template <std::size_t K>
void run_loop(const Shape& shape, const Loop<K>& L, const std::array<const Strides*, K>* strides,
              unsigned flat = kSpanDense) {
    std::array<std::int64_t, K> zeros{};
    if (!strides) {
        parallel_for(shape.num_elements(), kGrain, [&](std::size_t s, std::size_t e) {
            // In place, the output lines are an input's: prefetching the inputs a few KiB ahead
            // keeps more loads in flight than the hardware prefetcher alone (as in the f32 sum).
            // Into a fresh buffer the extra prefetches compete with its write-allocates and
            // measured slower, so that case runs the span in one call. (Neither unary ops nor
            // ops with a scalar operand ever prefetched.)
            const bool in_place = K == 3 && flat == kSpanDense &&
                                  (L.base[1] == L.base[0] || L.base[K - 1] == L.base[0]);
            const std::size_t step = in_place ? 4096 / L.size[1] : e - s;
            Tile t{nullptr, nullptr, nullptr, 0, 1, {}, flat};
            for (std::size_t j = s; j < e; j += step) {
                const std::size_t m = std::min(step, e - j);
                if (in_place && m == step) {
                    for (std::size_t k = 1; k < K; ++k)
                        for (std::size_t q = 0; q < step * L.size[k]; q += 64)
                            __builtin_prefetch(L.base[k] + (j + 4 * step) * L.size[k] + q);
                }
                const auto first = [&](std::size_t k) {
                    const unsigned bit = k == 0 ? 0u : k == 1 ? kSpanXScalar : kSpanYScalar;
                    return L.base[k] + ((flat & bit) != 0 ? 0 : j * L.size[k]);
                };
                t.o = first(0);
                t.x = first(1);
                if constexpr (K == 3) t.y = first(2);
                t.n = m;
                L.span(L.fn, t);
            }
        });
        return;
    }
    const Iter<K> it = make_iter<K>(shape, *strides);
    const std::size_t rows = it.rows(), inner = it.inner(), last = it.rank - 1;
    std::array<std::int64_t, K> st{}, rst{};
    for (std::size_t k = 0; k < K; ++k) {
        st[k] = it.strides[k][last];
        rst[k] = last > 0 ? it.strides[k][last - 1] : 0;
    }
    if (rows == 1) {
        parallel_for(inner, kGrain, [&](std::size_t b, std::size_t e) {
            std::array<std::int64_t, K> off{};
            for (std::size_t k = 0; k < K; ++k) off[k] = static_cast<std::int64_t>(b) * st[k];
            run_tile(L, off, e - b, st, 1, zeros);
        });
        return;
    }
    const std::size_t grain = std::max<std::size_t>(1, kGrain / std::max<std::size_t>(1, inner));
    parallel_for(rows, grain, [&](std::size_t b, std::size_t e) {
        for (std::size_t r = b; r < e;) {
            // Row r's offsets from its index along each outer dim; the tile runs to the end of
            // the second innermost dim or of the chunk.
            std::array<std::int64_t, K> off{};
            std::size_t rem = r, i2 = 0;
            for (std::size_t d = last; d-- > 0;) {
                const std::size_t i = rem % it.dims[d];
                rem /= it.dims[d];
                if (d == last - 1) i2 = i;
                for (std::size_t k = 0; k < K; ++k)
                    off[k] += static_cast<std::int64_t>(i) * it.strides[k][d];
            }
            const std::size_t count = std::min(e - r, it.dims[last - 1] - i2);
            run_tile(L, off, inner, st, count, rst);
            r += count;
        }
    });
}

// out = f(in), out with in's shape.
template <typename TI, typename TO, typename F>
void map_unary(const CpuTensor& in, const CpuTensor& out, const F& f) {
    const Loop<2> L{
        {static_cast<char*>(static_cast<void*>(out.data<TO>())),
         static_cast<char*>(const_cast<void*>(static_cast<const void*>(in.data<TI>())))},
        {sizeof(TO), sizeof(TI)},
        &unary_span<TI, TO, F>,
        &f};
    if (in.is_contiguous() && out.is_contiguous()) return run_loop<2>(out.shape, L, nullptr);
    const std::array<const Strides*, 2> strides{&out.strides, &in.strides};
    run_loop<2>(out.shape, L, &strides);
}

// out = f(a, b) with broadcasting, through `span` (of f, at fn): b's values are at pb with
// strides sb aligned to out's shape (all 0 for one scalar value). `flat`: a and out are
// contiguous with out's shape and b is too (kSpanDense) or is one scalar (kSpanYScalar); any
// other value: work the layout out from the strides.
constexpr unsigned kSpanStrided = ~0u;
template <typename TA, typename TB, typename TO>
void map_binary_at(const CpuTensor& a, const TB* pb, const Strides& sb, unsigned flat,
                   const CpuTensor& out, SpanFn span, const void* fn) {
    const Loop<3> L{{static_cast<char*>(static_cast<void*>(out.data<TO>())),
                     static_cast<char*>(const_cast<void*>(static_cast<const void*>(a.data<TA>()))),
                     static_cast<char*>(const_cast<void*>(static_cast<const void*>(pb)))},
                    {sizeof(TO), sizeof(TA), sizeof(TB)},
                    span,
                    fn};
    if (flat != kSpanStrided) return run_loop<3>(out.shape, L, nullptr, flat);
    const Strides sa = broadcast_strides(a, out.shape);
    const std::array<const Strides*, 3> strides{&out.strides, &sa, &sb};
    run_loop<3>(out.shape, L, &strides);
}
// The flat mode of a binary op whose output is `out` (kSpanStrided when there is none).
unsigned flat_mode(const CpuTensor& a, const CpuTensor& b, const CpuTensor& out) {
    return a.shape == out.shape && b.shape == out.shape && a.is_contiguous() && b.is_contiguous() &&
                   out.is_contiguous()
               ? kSpanDense
               : kSpanStrided;
}
unsigned flat_mode_scalar(const CpuTensor& a, const CpuTensor& out) {
    return a.shape == out.shape && a.is_contiguous() && out.is_contiguous() ? kSpanYScalar
                                                                            : kSpanStrided;
}
template <typename TA, typename TB, typename TO, typename F>
void map_binary(const CpuTensor& a, const CpuTensor& b, const CpuTensor& out, const F& f) {
    map_binary_at<TA, TB, TO>(a, b.data<TB>(), broadcast_strides(b, out.shape),
                              flat_mode(a, b, out), out, &binary_span<TA, TB, TO, F>, &f);
}

// The span of binary `op` on T: one instance per op and T, which binary and binary_scalar share.
template <typename T>
SpanFn binary_op_span(BinaryOp op) {
    SpanFn span = nullptr;
    with_binary_fn<T>(op, [&](auto f) { span = &binary_span<T, T, T, decltype(f)>; });
    return span;
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

// out = a op b on T (a, b and out of dtype T), for both of binary's paths; `flat` as
// map_binary_at's.
template <typename T>
void binary_as(BinaryOp op, const CpuTensor& a, const CpuTensor& b, const CpuTensor& out,
               unsigned flat) {
    const bool rev = op == BinaryOp::RSub || op == BinaryOp::RDiv || op == BinaryOp::RRem ||
                     op == BinaryOp::RPow;
    check_int_divisor<T>(op, rev ? a : b);
    check_int_pow<T>(op, rev ? a : b);
    map_binary_at<T, T, T>(a, b.data<T>(),
                           flat == kSpanStrided ? broadcast_strides(b, out.shape) : b.strides, flat,
                           out, binary_op_span<T>(op), nullptr);
}

}  // namespace

CpuTensor binary(BinaryOp op, CpuTensor a, CpuTensor b) {
    // Fast path for same-shape contiguous operands of one compute dtype: no broadcasting,
    // promotion or casts to work out (this is what per-op overhead measures).
    if (a.dtype == b.dtype && !is_half(a.dtype) && a.shape == b.shape && a.is_contiguous() &&
        b.is_contiguous()) {
        check::binary_dtype(op, a.dtype);
        CpuTensor out = a.is_unique() ? a : (b.is_unique() ? b : empty(a.shape, a.dtype));
        if (out.num_elements() > 0)
            visit_compute(out.dtype,
                          [&]<typename T>(TypeTag<T>) { binary_as<T>(op, a, b, out, kSpanDense); });
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
    if (shape.num_elements() > 0)
        visit_compute(
            cd, [&]<typename T>(TypeTag<T>) { binary_as<T>(op, a, b, out, flat_mode(a, b, out)); });
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
            // The binary op's own span with v broadcast: no instance of its own per op.
            if constexpr (std::is_floating_point_v<T>) {
                if (op == BinaryOp::Div && exact_reciprocal(v)) {
                    const T r = T(1) / v;
                    return map_binary_at<T, T, T>(a, &r, Strides{}, flat_mode_scalar(a, out), out,
                                                  binary_op_span<T>(BinaryOp::Mul), nullptr);
                }
            }
            map_binary_at<T, T, T>(a, &v, Strides{}, flat_mode_scalar(a, out), out,
                                   binary_op_span<T>(op), nullptr);
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
