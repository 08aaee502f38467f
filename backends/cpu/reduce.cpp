// Reductions, arg-reductions and softmax. Every kernel has two shapes of inner loop:
//  - along a stride-1 run: several independent accumulators ("lanes") so the compiler can
//    vectorise without -ffast-math (no reassociation is needed across lanes);
//  - across rows (the reduced dim is strided, the kept dims are not): one accumulator per
//    output column, updated row by row, which vectorises over the columns.
// Results do not depend on the thread count: parallel chunks never split a reduction except in
// reduce_all, whose blocks have a fixed size and are merged in order.
#include <algorithm>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include <ember/detail/bit.hpp>
#include "isa.hpp"  // EMBER_CPU_ISA_BEGIN/END: one copy per instruction set (EMBER_CPU_ARCH)
#include "iter.hpp"
#include "kernels.hpp"
#include "neon.hpp"
#include "parallel.hpp"
#include "vec8.hpp"

namespace ember::detail::cpu {
EMBER_CPU_ISA_BEGIN

namespace {

template <typename T>
constexpr bool kIsFloat = kIsHalf<T> || std::floating_point<T>;

/// The type elements are compared or accumulated in: halves widen to float, bool to a byte.
template <typename T>
using Wide = std::conditional_t<kIsHalf<T>, float,
                                std::conditional_t<std::same_as<T, bool>, std::uint8_t, T>>;

template <typename T>
inline Wide<T> widen(T x) {
    if constexpr (kIsHalf<T>) {
        return static_cast<float>(x);
    } else {
        return static_cast<Wide<T>>(x);
    }
}

inline f32x8 max8(const f32x8& a, const f32x8& b) {
    return a > b ? a : b;
}
inline float hmax8(const f32x8& v) {
    float m = v[0];
    for (std::size_t l = 1; l < kW; ++l) m = v[l] > m ? v[l] : m;
    return m;
}
inline float hsum8(const f32x8& v) {
    return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}

inline f32x8 min8(const f32x8& a, const f32x8& b) {
    return a < b ? a : b;
}

/// Max (or min) of n contiguous floats, NaN if any is NaN: a plain vector max plus a NaN flag
/// costs less than a NaN-propagating compare-and-blend per element.
template <bool IsMax>
float extreme_f32(const float* p, std::size_t n) {
#if EMBER_CPU_NEON
    if (neon_enabled()) return neon::extreme_f32<IsMax>(p, n);
#endif
    const float id =
        IsMax ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    const auto pick = [](const f32x8& x, const f32x8& m) {
        return IsMax ? max8(x, m) : min8(x, m);
    };
    f32x8 m0 = splat8(id), m1 = m0, m2 = m0, m3 = m0;
    i32x8 nan{};
    std::size_t i = 0;
    for (; i + 4 * kW <= n; i += 4 * kW) {
        const f32x8 a = load8(p + i), b = load8(p + i + kW), c = load8(p + i + 2 * kW),
                    d = load8(p + i + 3 * kW);
        m0 = pick(a, m0);
        m1 = pick(b, m1);
        m2 = pick(c, m2);
        m3 = pick(d, m3);
        nan |= (a != a) | (b != b) | (c != c) | (d != d);
    }
    for (; i + kW <= n; i += kW) {
        const f32x8 a = load8(p + i);
        m0 = pick(a, m0);
        nan |= a != a;
    }
    const f32x8 m = pick(pick(m0, m1), pick(m2, m3));
    float r = id;
    bool any_nan = false;
    for (std::size_t l = 0; l < kW; ++l) {
        r = IsMax ? (m[l] > r ? m[l] : r) : (m[l] < r ? m[l] : r);
        any_nan |= nan[l] != 0;
    }
    for (; i < n; ++i) {
        r = IsMax ? (p[i] > r ? p[i] : r) : (p[i] < r ? p[i] : r);
        any_nan |= p[i] != p[i];
    }
    return any_nan ? std::numeric_limits<float>::quiet_NaN() : r;
}

// Lane and block sizes: four 256-bit registers of accumulators; float sums are folded into a
// double every kBlockPerLane steps per lane, so their error grows with the block, not with n.
template <typename L>
constexpr std::size_t kLanes = 128 / sizeof(L) < 8 ? 8 : 128 / sizeof(L);
constexpr std::size_t kBlockPerLane = 128;
// Columns handled at once by the row-wise kernels. Wide blocks matter: each row is then read
// as one long stretch, where narrow blocks read short pieces at a large (often power-of-two)
// stride that the caches and prefetchers handle badly. The accumulators live on the stack up
// to kStackCols (small stacks in firmware), on the heap beyond.
constexpr std::size_t kCols = std::size_t{1} << 14;
constexpr std::size_t kStackCols = 256;
// Elements of input per parallel task.
constexpr std::size_t kWorkGrain = std::size_t{1} << 15;

/// One reduction over elements of type T: `Lane` accumulates elements, `Acc` merges lanes and
/// blocks, `finish` turns the total into the output element.
template <ReduceOp Op, typename T>
struct Red {
    static constexpr bool kFloat = kIsFloat<T>;
    static constexpr bool kLogical = Op == ReduceOp::Any || Op == ReduceOp::All;
    static constexpr bool kSumLike = Op == ReduceOp::Sum || Op == ReduceOp::Mean;
    static constexpr bool kArith = kSumLike || Op == ReduceOp::Prod;
    // Integer sums and products wrap (two's complement) instead of overflowing into UB.
    using Lane = std::conditional_t<
        kLogical, std::uint8_t,
        std::conditional_t<kFloat, Wide<T>, std::conditional_t<kArith, std::uint64_t, Wide<T>>>>;
    static constexpr bool kBlocked = kSumLike && kFloat;
    using Acc = std::conditional_t<kBlocked, double, Lane>;
    using Out =
        std::conditional_t<kLogical, bool,
                           std::conditional_t<std::same_as<T, bool> && kArith, std::int64_t, T>>;

    static Lane load(T x) {
        if constexpr (kLogical) {
            return static_cast<std::uint8_t>(widen(x) != 0);
        } else if constexpr (kArith && !kFloat) {
            return static_cast<std::uint64_t>(static_cast<std::int64_t>(x));
        } else {
            return widen(x);
        }
    }
    static Lane init() {
        if constexpr (kSumLike || Op == ReduceOp::Any) {
            return Lane{0};
        } else if constexpr (Op == ReduceOp::Prod || Op == ReduceOp::All) {
            return Lane{1};
        } else if constexpr (Op == ReduceOp::Max) {
            if constexpr (kFloat)
                return -std::numeric_limits<Lane>::infinity();
            else
                return std::numeric_limits<Lane>::lowest();
        } else {
            if constexpr (kFloat)
                return std::numeric_limits<Lane>::infinity();
            else
                return std::numeric_limits<Lane>::max();
        }
    }
    template <typename U>
    static U op(U a, U x) {
        if constexpr (kSumLike) {
            return a + x;
        } else if constexpr (Op == ReduceOp::Prod) {
            return a * x;
        } else if constexpr (Op == ReduceOp::Max) {
            // NaN is sticky: once the accumulator holds it, nothing is greater.
            if constexpr (kFloat)
                return (x > a || x != x) ? x : a;
            else
                return x > a ? x : a;
        } else if constexpr (Op == ReduceOp::Min) {
            if constexpr (kFloat)
                return (x < a || x != x) ? x : a;
            else
                return x < a ? x : a;
        } else if constexpr (Op == ReduceOp::Any) {
            return static_cast<U>(a | x);
        } else {
            return static_cast<U>(a & x);
        }
    }
    static Out finish(Acc a, std::size_t n) {
        if constexpr (kLogical) {
            return a != 0;
        } else if constexpr (Op == ReduceOp::Mean) {
            return elem_cast<Out>(a / static_cast<double>(n));
        } else if constexpr (kArith && !kFloat) {
            return static_cast<Out>(static_cast<std::int64_t>(a));
        } else if constexpr (std::same_as<T, bool>) {
            return a != 0;
        } else {
            return elem_cast<Out>(a);
        }
    }
};

/// Per-column scratch: on the stack when small, else on the heap.
template <typename T>
class Scratch {
  public:
    explicit Scratch(std::size_t n) {
        if (n > kStackCols) {
            heap_.resize(n);
            data_ = heap_.data();
        }
    }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    T& operator[](std::size_t i) { return data_[i]; }
    T* data() { return data_; }

  private:
    T stack_[kStackCols];
    std::vector<T> heap_;
    T* data_ = stack_;
};

/// Folds lanes pairwise (better rounding than a running sum for float sums).
template <typename R, std::size_t L>
typename R::Lane fold(typename R::Lane (&lane)[L]) {
    for (std::size_t w = L / 2; w > 0; w /= 2)
        for (std::size_t l = 0; l < w; ++l) lane[l] = R::op(lane[l], lane[l + w]);
    return lane[0];
}

/// Reduces n elements at p, p + s, p + 2s, ...
// Contiguous f32 sum, the memory-bound case: eight 512-bit accumulators and a software
// prefetch keep enough loads in flight to reach ~1.3x what a 256-bit loop gets from one core.
// Partial sums fold into a double every 2048 elements so the error grows with the block only.
#if defined(__x86_64__) && defined(__GNUC__)
typedef float V16f __attribute__((vector_size(64)));
__attribute__((target("avx512f"))) double sum_f32_avx512(const float* p, std::size_t n) {
    double total = 0.0;
    std::size_t i = 0;
    for (; i + 2048 <= n; i += 2048) {
        V16f a[8] = {};
        for (std::size_t j = i; j < i + 2048; j += 128) {
            __builtin_prefetch(p + j + 1024);
            for (int k = 0; k < 8; ++k) {
                V16f x;
                __builtin_memcpy(&x, p + j + 16 * k, 64);
                a[k] += x;
            }
        }
        V16f v = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
        float b = 0.f;
        for (int k = 0; k < 16; ++k) b += v[k];
        total += b;
    }
    float rest = 0.f;
    for (; i < n; ++i) rest += p[i];
    return total + rest;
}
bool sum_f32_use_avx512() {
    static const bool yes = __builtin_cpu_supports("avx512f");
    return yes;
}
#else
double sum_f32_avx512(const float*, std::size_t) { return 0.0; }
bool sum_f32_use_avx512() { return false; }
#endif

template <typename R, typename T>
typename R::Acc reduce_run(const T* p, std::size_t n, std::int64_t s) {
    using Lane = typename R::Lane;
    using Acc = typename R::Acc;
    if constexpr (std::same_as<T, float> && (std::same_as<R, Red<ReduceOp::Max, float>> ||
                                             std::same_as<R, Red<ReduceOp::Min, float>>)) {
        if (s == 1) return extreme_f32<std::same_as<R, Red<ReduceOp::Max, float>>>(p, n);
    }
    if constexpr (std::same_as<T, float> && R::kBlocked && std::same_as<typename R::Acc, double>) {
        if (s == 1 && n >= 2048 && sum_f32_use_avx512()) return sum_f32_avx512(p, n);
#if EMBER_CPU_NEON
        if (s == 1 && n >= 2048 && neon_enabled()) return neon::sum_f32(p, n);
#endif
    }
    constexpr std::size_t L = kLanes<Lane>;
    constexpr std::size_t kBlock = R::kBlocked ? L * kBlockPerLane : ~std::size_t{0};
    Acc total = static_cast<Acc>(R::init());
    std::size_t i = 0;
    do {
        const std::size_t len = std::min(n - i, kBlock);
        const T* q = p + idx(i, s);
        Lane lane[L];
        for (std::size_t l = 0; l < L; ++l) lane[l] = R::init();
        std::size_t j = 0;
        if (s == 1) {
            for (; j + L <= len; j += L)
                for (std::size_t l = 0; l < L; ++l) lane[l] = R::op(lane[l], R::load(q[j + l]));
            for (; j < len; ++j) lane[j % L] = R::op(lane[j % L], R::load(q[j]));
        } else {
            for (; j + L <= len; j += L)
                for (std::size_t l = 0; l < L; ++l)
                    lane[l] = R::op(lane[l], R::load(q[idx(j + l, s)]));
            for (; j < len; ++j) lane[j % L] = R::op(lane[j % L], R::load(q[idx(j, s)]));
        }
        total = R::op(total, static_cast<Acc>(fold<R>(lane)));
        i += len;
    } while (i < n);
    return total;
}

/// out[j * so] = reduction over r < n of in[r * sd + j * si], for j < m (the row-wise kernel).
template <typename R, typename T>
void reduce_cols(const T* in, std::int64_t si, std::int64_t sd, std::size_t n, typename R::Out* out,
                 std::int64_t so, std::size_t m) {
    using Lane = typename R::Lane;
    using Acc = typename R::Acc;
    Scratch<Lane> lane(std::min(m, kCols));
    Scratch<Acc> acc(std::min(m, kCols));
    for (std::size_t jb = 0; jb < m; jb += kCols) {
        const std::size_t c = std::min(kCols, m - jb);
        const T* base = in + idx(jb, si);
        for (std::size_t j = 0; j < c; ++j) lane[j] = R::init();
        for (std::size_t j = 0; j < c; ++j) acc[j] = static_cast<Acc>(R::init());
        for (std::size_t r = 0; r < n; ++r) {
            const T* row = base + idx(r, sd);
            if (si == 1) {
                for (std::size_t j = 0; j < c; ++j) lane[j] = R::op(lane[j], R::load(row[j]));
            } else {
                for (std::size_t j = 0; j < c; ++j)
                    lane[j] = R::op(lane[j], R::load(row[idx(j, si)]));
            }
            if constexpr (R::kBlocked) {
                if ((r + 1) % kBlockPerLane == 0 || r + 1 == n) {
                    for (std::size_t j = 0; j < c; ++j) {
                        acc[j] += static_cast<Acc>(lane[j]);
                        lane[j] = R::init();
                    }
                }
            }
        }
        if constexpr (!R::kBlocked)
            for (std::size_t j = 0; j < c; ++j) acc[j] = lane[j];
        for (std::size_t j = 0; j < c; ++j) out[idx(jb + j, so)] = R::finish(acc[j], n);
    }
}

template <ReduceOp Op, typename T>
CpuTensor reduce_all_t(const CpuTensor& t) {
    using R = Red<Op, T>;
    using Acc = typename R::Acc;
    const std::size_t n = t.num_elements();
    CpuTensor out = empty(Shape{1}, dtype_of<typename R::Out>());
    auto* o = out.data<typename R::Out>();
    if (n == 0) {
        *o = R::finish(static_cast<Acc>(R::init()), 0);
        return out;
    }
    const T* p = t.data<T>();
    const auto it = make_iter<1>(t.shape, {&t.strides});
    // Fixed-size blocks merged in order keep the result independent of the thread count.
    constexpr std::size_t kBlock = std::size_t{1} << 16;
    const std::size_t nb = (n + kBlock - 1) / kBlock;
    std::vector<Acc> part(nb);
    parallel_for(nb, 1, [&](std::size_t bb, std::size_t be) {
        for (std::size_t blk = bb; blk < be; ++blk) {
            Acc a = static_cast<Acc>(R::init());
            for_each_span(it, blk * kBlock, std::min(n, (blk + 1) * kBlock),
                          [&](const auto& off, std::size_t len, const auto& st) {
                              a = R::op(a, reduce_run<R>(p + off[0], len, st[0]));
                          });
            part[blk] = a;
        }
    });
    Acc total = static_cast<Acc>(R::init());
    for (const Acc& a : part) total = R::op(total, a);
    *o = R::finish(total, n);
    return out;
}

template <ReduceOp Op, typename T>
CpuTensor reduce_dim_t(const CpuTensor& t, std::size_t dim) {
    using R = Red<Op, T>;
    using Out = typename R::Out;
    Shape out_shape = t.shape;
    out_shape[dim] = 1;
    CpuTensor out = empty(out_shape, dtype_of<Out>());
    const std::size_t m = out.num_elements();
    if (m == 0) return out;
    const std::size_t n = t.shape[dim];
    const std::int64_t sd = t.strides[dim];
    const T* p = t.data<T>();
    Out* o = out.data<Out>();
    const auto it = make_iter<2>(out_shape, {&out.strides, &t.strides});
    const std::size_t grain = std::max<std::size_t>(1, kWorkGrain / std::max<std::size_t>(n, 1));
    parallel_for(m, grain, [&](std::size_t b, std::size_t e) {
        for_each_span(it, b, e, [&](const auto& off, std::size_t len, const auto& st) {
            if (sd == 1 || len < 8) {
                for (std::size_t j = 0; j < len; ++j)
                    o[off[0] + idx(j, st[0])] =
                        R::finish(n == 0 ? static_cast<typename R::Acc>(R::init())
                                         : reduce_run<R>(p + off[1] + idx(j, st[1]), n, sd),
                                  n);
            } else {
                reduce_cols<R>(p + off[1], st[1], sd, n, o + off[0], st[0], len);
            }
        });
    });
    return out;
}

constexpr const char* reduce_name(ReduceOp op) {
    constexpr const char* names[] = {"sum", "mean", "prod", "max", "min", "any", "all"};
    return names[static_cast<int>(op)];
}

/// Checks the dtype (the caller checks emptiness), then calls `f.template operator()<Op, T>()`.
template <typename F>
CpuTensor dispatch_reduce(ReduceOp op, DType dtype, F&& f) {
    const char* name = reduce_name(op);
    EMBER_CHECK(op != ReduceOp::Mean || is_float(dtype), DType, name,
                ": needs a float tensor, got ", dtype_name(dtype));
    return visit_dtype(dtype, [&]<typename T>(TypeTag<T>) -> CpuTensor {
        switch (op) {
            case ReduceOp::Sum:
                return f.template operator()<ReduceOp::Sum, T>();
            case ReduceOp::Mean:
                if constexpr (kIsFloat<T>)
                    return f.template operator()<ReduceOp::Mean, T>();
                else
                    EMBER_FAIL(DType, name, ": mean needs a float tensor");
            case ReduceOp::Prod:
                return f.template operator()<ReduceOp::Prod, T>();
            case ReduceOp::Max:
                return f.template operator()<ReduceOp::Max, T>();
            case ReduceOp::Min:
                return f.template operator()<ReduceOp::Min, T>();
            case ReduceOp::Any:
                return f.template operator()<ReduceOp::Any, T>();
            default:
                return f.template operator()<ReduceOp::All, T>();
        }
    });
}

// ---- arg_reduce -----------------------------------------------------------------------------
// Two passes: the extreme value through the vectorised reduction kernels, then the first
// position holding it. The scan is cheap (it stops at the first match, and a row is usually
// still in cache), and it gives PyTorch's tie-breaking for free: the first element equal to the
// extreme, where NaN is the extreme as soon as one is present.

template <ArgReduceOp Op, typename T>
using ExtremeOf = Red<Op == ArgReduceOp::ArgMax ? ReduceOp::Max : ReduceOp::Min, T>;

template <typename W>
inline bool matches(W x, W extreme) {
    if constexpr (std::floating_point<W>)
        return extreme != extreme ? x != x : x == extreme;
    else
        return x == extreme;
}

template <ArgReduceOp Op, typename T>
std::int64_t arg_run(const T* p, std::size_t n, std::int64_t s) {
    using R = ExtremeOf<Op, T>;
    const auto ext = reduce_run<R>(p, n, s);
    for (std::size_t r = 0; r < n; ++r)
        if (matches(R::load(p[idx(r, s)]), ext)) return static_cast<std::int64_t>(r);
    return 0;
}

template <ArgReduceOp Op, typename T>
void arg_cols(const T* in, std::int64_t si, std::int64_t sd, std::size_t n, std::int64_t* out,
              std::int64_t so, std::size_t m) {
    using R = ExtremeOf<Op, T>;
    using Lane = typename R::Lane;
    Scratch<Lane> ext(std::min(m, kCols));
    Scratch<std::int64_t> bi(std::min(m, kCols));
    for (std::size_t jb = 0; jb < m; jb += kCols) {
        const std::size_t c = std::min(kCols, m - jb);
        const T* base = in + idx(jb, si);
        for (std::size_t j = 0; j < c; ++j) ext[j] = R::init();
        for (std::size_t r = 0; r < n; ++r) {
            const T* row = base + idx(r, sd);
            if (si == 1) {
                for (std::size_t j = 0; j < c; ++j) ext[j] = R::op(ext[j], R::load(row[j]));
            } else {
                for (std::size_t j = 0; j < c; ++j)
                    ext[j] = R::op(ext[j], R::load(row[idx(j, si)]));
            }
        }
        for (std::size_t j = 0; j < c; ++j) bi[j] = -1;
        std::size_t left = c;
        for (std::size_t r = 0; r < n && left > 0; ++r) {
            const T* row = base + idx(r, sd);
            for (std::size_t j = 0; j < c; ++j) {
                if (bi[j] < 0 && matches(R::load(row[idx(j, si)]), ext[j])) {
                    bi[j] = static_cast<std::int64_t>(r);
                    --left;
                }
            }
        }
        for (std::size_t j = 0; j < c; ++j) out[idx(jb + j, so)] = bi[j];
    }
}

template <ArgReduceOp Op, typename T>
CpuTensor arg_reduce_t(const CpuTensor& t, std::size_t dim) {
    Shape out_shape = t.shape;
    out_shape[dim] = 1;
    CpuTensor out = empty(out_shape, DType::I64);
    const std::size_t m = out.num_elements();
    if (m == 0) return out;
    const std::size_t n = t.shape[dim];
    const std::int64_t sd = t.strides[dim];
    const T* p = t.data<T>();
    auto* o = out.data<std::int64_t>();
    const auto it = make_iter<2>(out_shape, {&out.strides, &t.strides});
    const std::size_t grain = std::max<std::size_t>(1, kWorkGrain / n);
    parallel_for(m, grain, [&](std::size_t b, std::size_t e) {
        for_each_span(it, b, e, [&](const auto& off, std::size_t len, const auto& st) {
            if (sd == 1 || len < 8) {
                for (std::size_t j = 0; j < len; ++j)
                    o[off[0] + idx(j, st[0])] = arg_run<Op>(p + off[1] + idx(j, st[1]), n, sd);
            } else {
                arg_cols<Op>(p + off[1], st[1], sd, n, o + off[0], st[0], len);
            }
        });
    });
    return out;
}

// ---- softmax --------------------------------------------------------------------------------
// float rows and contiguous column blocks use the vector types above; double and strided
// layouts take the scalar loops.

template <typename V, typename I>
inline V exp_nonpos(const V& x) {
    V y;
    exp_nonpos_to<V, I>(x, y);
    return y;
}

template <typename C>
inline C exp_c(C x) {
    if constexpr (std::same_as<C, float>)
        return exp_nonpos<float, std::int32_t>(x);
    else
        return std::exp(x);
}

#if defined(__x86_64__) && defined(__GNUC__)
typedef std::int32_t I16x __attribute__((vector_size(64)));
/// 16 floats from q (a function of its own with the caller's target: Clang rejects a 512-bit
/// vector returned from a lambda, which is compiled without AVX-512).
__attribute__((target("avx512f"))) inline V16f load16(const float* q) {
    V16f v;
    __builtin_memcpy(&v, q, 64);
    return v;
}
/// The softmax row with 512-bit vectors: the exp polynomial is the bottleneck once a row sits
/// in L1, so twice the lanes is nearly twice the speed. Same math and NaN rules as below.
template <bool Log>
__attribute__((target("avx512f"))) void softmax_row_f32_avx512(const float* p, float* o,
                                                                std::size_t n) {
    constexpr std::size_t W = 16;
    const auto store = [](float* q, const V16f& v) { __builtin_memcpy(q, &v, 64); };
    V16f m0 = V16f{} - std::numeric_limits<float>::infinity(), m1 = m0;
    std::size_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
        const V16f a = load16(p + i), b = load16(p + i + W);
        m0 = a > m0 ? a : m0;
        m1 = b > m1 ? b : m1;
    }
    m0 = m1 > m0 ? m1 : m0;
    float mx = -std::numeric_limits<float>::infinity();
    for (int k = 0; k < 16; ++k) mx = m0[k] > mx ? m0[k] : mx;
    for (; i < n; ++i) mx = p[i] > mx ? p[i] : mx;
    const V16f vmx = V16f{} + mx;
    V16f s0{}, s1{};
    i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
        V16f e0, e1;
        exp_nonpos_to<V16f, I16x>(load16(p + i) - vmx, e0);
        exp_nonpos_to<V16f, I16x>(load16(p + i + W) - vmx, e1);
        if constexpr (!Log) {
            store(o + i, e0);
            store(o + i + W, e1);
        }
        s0 += e0;
        s1 += e1;
    }
    s0 += s1;
    float sum = 0.f;
    for (int k = 0; k < 16; ++k) sum += s0[k];
    for (; i < n; ++i) {
        const float e = exp_c(p[i] - mx);
        if constexpr (!Log) o[i] = e;
        sum += e;
    }
    i = 0;
    if constexpr (Log) {
        const float ls = std::log(sum);
        for (; i + W <= n; i += W) store(o + i, (load16(p + i) - vmx) - ls);
        for (; i < n; ++i) o[i] = (p[i] - mx) - ls;
    } else {
        const V16f vinv = V16f{} + 1.0f / sum;
        for (; i + W <= n; i += W) store(o + i, load16(o + i) * vinv);
        for (; i < n; ++i) o[i] *= 1.0f / sum;
    }
}
#endif

/// Softmax (or log-softmax) of one stride-1 row of n > 0 floats: max, exp + sum, scale.
template <bool Log>
void softmax_row_f32(const float* p, float* o, std::size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (n >= 64 && sum_f32_use_avx512()) return softmax_row_f32_avx512<Log>(p, o, n);
#endif
#if EMBER_CPU_NEON
    if (neon_enabled())
        return neon::softmax_row_f32<Log>(
            p, o, n, [](float x) { return exp_c(x); }, [](float x) { return std::log(x); });
#endif
    // A NaN never wins the max; it still reaches the sum below and makes the row NaN.
    f32x8 m0 = splat8(-std::numeric_limits<float>::infinity()), m1 = m0, m2 = m0, m3 = m0;
    std::size_t i = 0;
    for (; i + 4 * kW <= n; i += 4 * kW) {
        m0 = max8(load8(p + i), m0);
        m1 = max8(load8(p + i + kW), m1);
        m2 = max8(load8(p + i + 2 * kW), m2);
        m3 = max8(load8(p + i + 3 * kW), m3);
    }
    for (; i + kW <= n; i += kW) m0 = max8(load8(p + i), m0);
    float mx = hmax8(max8(max8(m0, m1), max8(m2, m3)));
    for (; i < n; ++i) mx = p[i] > mx ? p[i] : mx;

    const f32x8 vmx = splat8(mx);
    f32x8 s0{}, s1{};
    i = 0;
    for (; i + 2 * kW <= n; i += 2 * kW) {
        const f32x8 e0 = exp_nonpos<f32x8, i32x8>(load8(p + i) - vmx);
        const f32x8 e1 = exp_nonpos<f32x8, i32x8>(load8(p + i + kW) - vmx);
        if constexpr (!Log) {
            store8(o + i, e0);
            store8(o + i + kW, e1);
        }
        s0 += e0;
        s1 += e1;
    }
    for (; i + kW <= n; i += kW) {
        const f32x8 e = exp_nonpos<f32x8, i32x8>(load8(p + i) - vmx);
        if constexpr (!Log) store8(o + i, e);
        s0 += e;
    }
    float sum = hsum8(s0 + s1);
    for (; i < n; ++i) {
        const float e = exp_c(p[i] - mx);
        if constexpr (!Log) o[i] = e;
        sum += e;
    }

    i = 0;
    if constexpr (Log) {
        const float ls = std::log(sum);
        const f32x8 vls = splat8(ls);
        for (; i + kW <= n; i += kW) store8(o + i, (load8(p + i) - vmx) - vls);
        for (; i < n; ++i) o[i] = (p[i] - mx) - ls;
    } else {
        const float inv = 1.0f / sum;
        const f32x8 vinv = splat8(inv);
        for (; i + kW <= n; i += kW) store8(o + i, load8(o + i) * vinv);
        for (; i < n; ++i) o[i] *= inv;
    }
}

/// Softmax (or log-softmax) of one stride-1 row of n > 0 elements (double).
template <typename C, bool Log>
void softmax_row(const C* p, C* o, std::size_t n) {
    if constexpr (std::same_as<C, float>) {
        softmax_row_f32<Log>(p, o, n);
    } else {
        C mx = -std::numeric_limits<C>::infinity();
        for (std::size_t i = 0; i < n; ++i) mx = p[i] > mx ? p[i] : mx;
        C sum = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const C e = std::exp(p[i] - mx);
            if constexpr (!Log) o[i] = e;
            sum += e;
        }
        if constexpr (Log) {
            const C ls = std::log(sum);
            for (std::size_t i = 0; i < n; ++i) o[i] = (p[i] - mx) - ls;
        } else {
            const C inv = C{1} / sum;
            for (std::size_t i = 0; i < n; ++i) o[i] *= inv;
        }
    }
}

/// Softmax along a strided dim for m columns at once (in[r * sd + j * si]), scalar.
template <typename C, bool Log>
void softmax_cols(const C* in, std::int64_t si, std::int64_t sd, C* out, std::int64_t so,
                  std::int64_t sdo, std::size_t n, std::size_t m) {
    Scratch<C> mx(std::min(m, kCols)), sum(std::min(m, kCols));
    for (std::size_t jb = 0; jb < m; jb += kCols) {
        const std::size_t c = std::min(kCols, m - jb);
        const C* ib = in + idx(jb, si);
        C* ob = out + idx(jb, so);
        for (std::size_t j = 0; j < c; ++j) {
            mx[j] = -std::numeric_limits<C>::infinity();
            sum[j] = 0;
        }
        for (std::size_t r = 0; r < n; ++r) {
            const C* row = ib + idx(r, sd);
            for (std::size_t j = 0; j < c; ++j) {
                const C x = row[idx(j, si)];
                mx[j] = x > mx[j] ? x : mx[j];
            }
        }
        for (std::size_t r = 0; r < n; ++r) {
            const C* row = ib + idx(r, sd);
            C* orow = ob + idx(r, sdo);
            for (std::size_t j = 0; j < c; ++j) {
                const C e = exp_c(row[idx(j, si)] - mx[j]);
                if constexpr (!Log) orow[idx(j, so)] = e;
                sum[j] += e;
            }
        }
        for (std::size_t j = 0; j < c; ++j)
            sum[j] = Log ? static_cast<C>(std::log(sum[j])) : C{1} / sum[j];
        for (std::size_t r = 0; r < n; ++r) {
            const C* row = ib + idx(r, sd);
            C* orow = ob + idx(r, sdo);
            for (std::size_t j = 0; j < c; ++j) {
                if constexpr (Log)
                    orow[idx(j, so)] = (row[idx(j, si)] - mx[j]) - sum[j];
                else
                    orow[idx(j, so)] *= sum[j];
            }
        }
    }
}

/// The float column kernel when columns are contiguous in both tensors, 8 columns per vector.
/// Each pass streams whole rows (up to kCols columns at a time, accumulators in L1/L2): narrow
/// blocks of columns would read short pieces at a large, often power-of-two stride, which the
/// caches cannot hold across the three passes.
template <bool Log>
void softmax_cols_f32(const float* in, std::int64_t sd, float* out, std::int64_t sdo, std::size_t n,
                      std::size_t m) {
    const std::size_t mv = m / kW * kW;
    Scratch<float> mx(std::min(mv, kCols)), acc(std::min(mv, kCols));
    float* const pm = mx.data();
    float* const pa = acc.data();
    for (std::size_t jb = 0; jb < mv; jb += kCols) {
        const std::size_t c = std::min(kCols, mv - jb);
        const float* ib = in + jb;
        float* ob = out + jb;
        for (std::size_t j = 0; j < c; ++j) {
            pm[j] = -std::numeric_limits<float>::infinity();
            pa[j] = 0.0f;
        }
        for (std::size_t r = 0; r < n; ++r) {
            const float* row = ib + idx(r, sd);
            for (std::size_t j = 0; j < c; j += kW)
                store8(pm + j, max8(load8(row + j), load8(pm + j)));
        }
        for (std::size_t r = 0; r < n; ++r) {
            const float* row = ib + idx(r, sd);
            float* orow = ob + idx(r, sdo);
            for (std::size_t j = 0; j < c; j += kW) {
                const f32x8 e = exp_nonpos<f32x8, i32x8>(load8(row + j) - load8(pm + j));
                if constexpr (!Log) store8(orow + j, e);
                store8(pa + j, load8(pa + j) + e);
            }
        }
        for (std::size_t j = 0; j < c; ++j) pa[j] = Log ? std::log(pa[j]) : 1.0f / pa[j];
        for (std::size_t r = 0; r < n; ++r) {
            const float* row = ib + idx(r, sd);
            float* orow = ob + idx(r, sdo);
            for (std::size_t j = 0; j < c; j += kW) {
                if constexpr (Log)
                    store8(orow + j, (load8(row + j) - load8(pm + j)) - load8(pa + j));
                else
                    store8(orow + j, load8(orow + j) * load8(pa + j));
            }
        }
    }
    if (mv < m) softmax_cols<float, Log>(in + mv, 1, sd, out + mv, 1, sdo, n, m - mv);
}

template <typename C, bool Log>
CpuTensor softmax_t(const CpuTensor& t, std::size_t dim) {
    CpuTensor out = empty(t.shape, t.dtype);
    if (out.num_elements() == 0) return out;
    const std::size_t n = t.shape[dim];
    Shape rows_shape = t.shape;
    rows_shape[dim] = 1;
    const std::int64_t sd = t.strides[dim];
    const std::int64_t sdo = out.strides[dim];
    const C* p = t.data<C>();
    C* o = out.data<C>();
    const auto it = make_iter<2>(rows_shape, {&out.strides, &t.strides});
    const std::size_t grain = std::max<std::size_t>(1, (kWorkGrain / 2) / n);
    parallel_for(rows_shape.num_elements(), grain, [&](std::size_t b, std::size_t e) {
        for_each_span(it, b, e, [&](const auto& off, std::size_t len, const auto& st) {
            if (sd == 1 && sdo == 1) {
                for (std::size_t j = 0; j < len; ++j)
                    softmax_row<C, Log>(p + off[1] + idx(j, st[1]), o + off[0] + idx(j, st[0]), n);
            } else if (std::same_as<C, float> && st[0] == 1 && st[1] == 1) {
                softmax_cols_f32<Log>(reinterpret_cast<const float*>(p + off[1]), sd,
                                      reinterpret_cast<float*>(o + off[0]), sdo, n, len);
            } else {
                softmax_cols<C, Log>(p + off[1], st[1], sd, o + off[0], st[0], sdo, n, len);
            }
        });
    });
    return out;
}

CpuTensor softmax_any(CpuTensor t, std::size_t dim, bool log) {
    const char* name = log ? "log_softmax" : "softmax";
    EMBER_CHECK(is_float(t.dtype), DType, name, ": needs a float tensor, got ",
                dtype_name(t.dtype));
    check::dim(name, dim, t.shape);
    switch (t.dtype) {
        case DType::F32:
            return log ? softmax_t<float, true>(t, dim) : softmax_t<float, false>(t, dim);
        case DType::F64:
            return log ? softmax_t<double, true>(t, dim) : softmax_t<double, false>(t, dim);
        default: {
            // Halves: compute in float and round once at the end.
            const DType dt = t.dtype;
            return cast(softmax_any(cast(std::move(t), DType::F32), dim, log), dt);
        }
    }
}

}  // namespace

CpuTensor reduce_all(ReduceOp op, CpuTensor t) {
    check::reduce_all(reduce_name(op), op != ReduceOp::Max && op != ReduceOp::Min, t.shape);
    return dispatch_reduce(op, t.dtype,
                           [&]<ReduceOp Op, typename T>() { return reduce_all_t<Op, T>(t); });
}

CpuTensor reduce_dim(ReduceOp op, CpuTensor t, std::size_t dim) {
    check::reduce_dim(reduce_name(op), op != ReduceOp::Max && op != ReduceOp::Min, dim, t.shape);
    return dispatch_reduce(op, t.dtype,
                           [&]<ReduceOp Op, typename T>() { return reduce_dim_t<Op, T>(t, dim); });
}

CpuTensor arg_reduce(ArgReduceOp op, CpuTensor t, std::size_t dim) {
    const char* name = op == ArgReduceOp::ArgMax ? "argmax" : "argmin";
    check::nonempty_dim(name, dim, t.shape);
    return visit_dtype(t.dtype, [&]<typename T>(TypeTag<T>) {
        return op == ArgReduceOp::ArgMax ? arg_reduce_t<ArgReduceOp::ArgMax, T>(t, dim)
                                         : arg_reduce_t<ArgReduceOp::ArgMin, T>(t, dim);
    });
}

CpuTensor softmax(CpuTensor t, std::size_t dim) {
    return softmax_any(std::move(t), dim, false);
}

CpuTensor log_softmax(CpuTensor t, std::size_t dim) {
    return softmax_any(std::move(t), dim, true);
}

EMBER_CPU_ISA_END
}  // namespace ember::detail::cpu
