// Fused elementwise programs on the CPU (the FusionBackend side of Fusion<Cpu>). A program runs
// in one pass over tiles of the iteration space: for each tile, strided inputs are gathered,
// every instruction runs as a tight (vectorised) loop over the tile, and outputs are written
// straight to their tensors. A tile is small enough that all the program's registers stay in
// the core's caches, so a chain of k ops reads and writes main memory once instead of k times.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "elementwise_fns.hpp"
#include "ember/backend/cpu.hpp"
#include "ember/fusion/check.hpp"
#include "iter.hpp"
#include "kernels.hpp"
#include "parallel.hpp"

namespace ember::detail::cpu {

/// A checked program, ready to launch.
struct FusedPlan {
    fusion::Program prog;
};

namespace {

using fusion::Instr;
using fusion::OpKind;
using fusion::Program;

constexpr std::size_t kTile = 512;          // elements per tile: 2-4 KiB a register
constexpr std::size_t kChunk = 64 * kTile;  // elements per parallel task

// Registers hold f32 (float), f64 (double), i64 (int64) or bool (uint8 0/1).
template <typename F>
decltype(auto) visit_reg(DType d, F&& f) {
    switch (d) {
        case DType::F32:
            return f(TypeTag<float>{});
        case DType::F64:
            return f(TypeTag<double>{});
        case DType::I64:
            return f(TypeTag<std::int64_t>{});
        default:
            return f(TypeTag<std::uint8_t>{});
    }
}

template <typename T>
T scalar_as(const Scalar& s) {
    if constexpr (std::is_floating_point_v<T>)
        return static_cast<T>(s.f);
    else
        return static_cast<T>(s.i);
}

template <typename A, typename R, typename Fn>
void loop1(std::size_t n, const void* a, void* d, Fn f) {
    const A* __restrict x = static_cast<const A*>(a);
    R* __restrict y = static_cast<R*>(d);
    for (std::size_t i = 0; i < n; ++i) y[i] = f(x[i]);
}
template <typename A, typename B, typename R, typename Fn>
void loop2(std::size_t n, const void* a, const void* b, void* d, Fn f) {
    const A* __restrict x = static_cast<const A*>(a);
    const B* __restrict z = static_cast<const B*>(b);
    R* __restrict y = static_cast<R*>(d);
    for (std::size_t i = 0; i < n; ++i) y[i] = f(x[i], z[i]);
}

// One instruction over one tile of n elements; `r` holds every register's tile pointer.
void exec(const Program& p, const Instr& in, std::size_t n, void* const* r, void* dst,
          std::span<const Scalar> sc) {
    const void* a = r[in.a];
    const void* b = r[in.b];
    const void* c = r[in.c];
    const DType da = p.reg_dtype(in.a);
    switch (in.kind) {
        case OpKind::Unary: {
            const auto op = static_cast<UnaryOp>(in.code);
            if (op == UnaryOp::Not)
                return loop1<std::uint8_t, std::uint8_t>(
                    n, a, dst, [](std::uint8_t x) { return static_cast<std::uint8_t>(x == 0); });
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                if constexpr (std::is_floating_point_v<T>) {
                    if (op == UnaryOp::IsNan)
                        return loop1<T, std::uint8_t>(
                            n, a, dst, [](T x) { return static_cast<std::uint8_t>(x != x); });
                }
                if constexpr (!std::is_same_v<T, std::uint8_t>)
                    with_unary_fn<T>(op, [&](auto f) { loop1<T, T>(n, a, dst, f); });
            });
        }
        case OpKind::Binary: {
            const auto op = static_cast<BinaryOp>(in.code);
            if (da == DType::Bool) {
                using U = std::uint8_t;
                if (op == BinaryOp::And)
                    return loop2<U, U, U>(n, a, b, dst, [](U x, U y) { return U(x & y); });
                if (op == BinaryOp::Or)
                    return loop2<U, U, U>(n, a, b, dst, [](U x, U y) { return U(x | y); });
                return loop2<U, U, U>(n, a, b, dst, [](U x, U y) { return U(x ^ y); });
            }
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                if constexpr (!std::is_same_v<T, std::uint8_t>)
                    with_binary_fn<T>(op, [&](auto f) { loop2<T, T, T>(n, a, b, dst, f); });
            });
        }
        case OpKind::BinaryScalar: {
            const auto op = static_cast<BinaryOp>(in.code);
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                if constexpr (!std::is_same_v<T, std::uint8_t>) {
                    const T v = scalar_as<T>(sc[in.s0]);
                    if constexpr (std::is_floating_point_v<T>) {
                        if (op == BinaryOp::Div && exact_reciprocal(v)) {  // as the unfused kernel
                            const T r = T(1) / v;
                            return loop1<T, T>(n, a, dst, [r](T x) { return x * r; });
                        }
                    }
                    with_binary_fn<T>(op, [&](auto f) {
                        loop1<T, T>(n, a, dst, [f, v](T x) { return f(x, v); });
                    });
                }
            });
        }
        case OpKind::Compare: {
            const auto op = static_cast<CompareOp>(in.code);
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                with_compare_fn<T>(op, [&](auto f) {
                    loop2<T, T, std::uint8_t>(
                        n, a, b, dst, [f](T x, T y) { return static_cast<std::uint8_t>(f(x, y)); });
                });
            });
        }
        case OpKind::CompareScalar: {
            const auto op = static_cast<CompareOp>(in.code);
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                // As the unfused kernel: floats compare in double unless the scalar is exactly
                // a float, so that `x > 0.1` means what it says.
                if constexpr (std::is_same_v<T, float>) {
                    const double v = sc[in.s0].f;
                    if (static_cast<double>(static_cast<float>(v)) == v) {
                        const float vf = static_cast<float>(v);
                        return with_compare_fn<float>(op, [&](auto f) {
                            loop1<float, std::uint8_t>(n, a, dst, [f, vf](float x) {
                                return static_cast<std::uint8_t>(f(x, vf));
                            });
                        });
                    }
                    return with_compare_fn<double>(op, [&](auto f) {
                        loop1<float, std::uint8_t>(n, a, dst, [f, v](float x) {
                            return static_cast<std::uint8_t>(f(static_cast<double>(x), v));
                        });
                    });
                } else {
                    const T v = scalar_as<T>(sc[in.s0]);
                    with_compare_fn<T>(op, [&](auto f) {
                        loop1<T, std::uint8_t>(
                            n, a, dst, [f, v](T x) { return static_cast<std::uint8_t>(f(x, v)); });
                    });
                }
            });
        }
        case OpKind::Where:  // a: mask, b: where true, c: where false
            return visit_reg(p.reg_dtype(in.b), [&]<typename T>(TypeTag<T>) {
                const std::uint8_t* __restrict m = static_cast<const std::uint8_t*>(a);
                const T* __restrict x = static_cast<const T*>(b);
                const T* __restrict z = static_cast<const T*>(c);
                T* __restrict y = static_cast<T*>(dst);
                for (std::size_t i = 0; i < n; ++i) y[i] = select(m[i] != 0, x[i], z[i]);
            });
        case OpKind::MaskFill:
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                const T v = scalar_as<T>(sc[in.s0]);
                loop2<T, std::uint8_t, T>(
                    n, a, b, dst, [v](T x, std::uint8_t m) { return select(m != 0, v, x); });
            });
        case OpKind::Clamp:
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                const T lo = scalar_as<T>(sc[in.s0]), hi = scalar_as<T>(sc[in.s1]);
                loop1<T, T>(n, a, dst, [lo, hi](T x) { return nan_min(nan_max(x, lo), hi); });
            });
        case OpKind::Cast:
            return visit_reg(da, [&]<typename S>(TypeTag<S>) {
                visit_reg(in.dtype, [&]<typename D>(TypeTag<D>) {
                    loop1<S, D>(n, a, dst, [](S x) { return static_cast<D>(x); });
                });
            });
    }
}

// Copies elements [begin, begin + n) of `t` (row-major over `shape`, t's strides) into dst.
void gather(const CpuTensor& t, const Shape& shape, std::size_t begin, std::size_t n, void* dst) {
    const std::size_t es = dtype_size(t.dtype), rank = shape.rank();
    const auto* base = static_cast<const unsigned char*>(t.storage->data) +
                       t.offset * static_cast<std::int64_t>(es);
    auto* out = static_cast<unsigned char*>(dst);
    if (rank == 0) {
        for (std::size_t i = 0; i < n; ++i) std::memcpy(out + i * es, base, es);
        return;
    }
    std::array<std::size_t, kMaxRank> idx{};
    std::size_t rest = begin;
    std::int64_t off = 0;
    for (std::size_t d = rank; d-- > 0;) {
        idx[d] = rest % shape[d];
        rest /= shape[d];
        off += static_cast<std::int64_t>(idx[d]) * t.strides[d];
    }
    const std::size_t last = rank - 1, inner = shape[last];
    const std::int64_t st = t.strides[last];
    std::size_t done = 0;
    while (done < n) {
        const std::size_t run = std::min(n - done, inner - idx[last]);
        const unsigned char* src = base + off * static_cast<std::int64_t>(es);
        if (st == 1) {
            std::memcpy(out + done * es, src, run * es);
        } else {
            for (std::size_t k = 0; k < run; ++k)
                std::memcpy(out + (done + k) * es,
                            src + static_cast<std::int64_t>(k) * st * static_cast<std::int64_t>(es),
                            es);
        }
        done += run;
        off += static_cast<std::int64_t>(run) * st;
        idx[last] += run;
        // Carry into the outer dims.
        for (std::size_t d = last; d > 0 && idx[d] == shape[d]; --d) {
            off -= static_cast<std::int64_t>(idx[d]) * t.strides[d];
            idx[d] = 0;
            ++idx[d - 1];
            off += t.strides[d - 1];
        }
    }
}

}  // namespace

std::shared_ptr<const FusedPlan> fused_compile(const Program& p) {
    fusion::check_program(p, kMaxRank);
    auto plan = std::make_shared<FusedPlan>();
    plan->prog = p;
    return plan;
}

std::vector<CpuTensor> fused_launch(const FusedPlan& plan, std::vector<CpuTensor> inputs,
                                    std::span<const Scalar> sc, const Shape& shape) {
    const Program& p = plan.prog;
    const std::size_t n_in = p.inputs.size(), n_regs = n_in + p.instrs.size();
    EMBER_CHECK(inputs.size() == n_in, Argument, "fused program: ", n_in, " inputs expected, got ",
                inputs.size());
    for (std::size_t k = 0; k < n_in; ++k)
        EMBER_CHECK(inputs[k].shape == shape && inputs[k].dtype == p.inputs[k].dtype, Shape,
                    "fused program: input ", k, " is ", inputs[k].shape.to_string(), " ",
                    dtype_name(inputs[k].dtype), ", expected ", shape.to_string(), " ",
                    dtype_name(p.inputs[k].dtype));
    std::vector<CpuTensor> outs;
    std::vector<int> out_of(n_regs, -1);
    for (std::size_t k = 0; k < p.outputs.size(); ++k) {
        out_of[p.outputs[k]] = static_cast<int>(k);
        outs.push_back(empty(shape, p.reg_dtype(p.outputs[k])));
    }
    std::vector<bool> dense(n_in);
    for (std::size_t k = 0; k < n_in; ++k) dense[k] = inputs[k].is_contiguous();
    const std::size_t n = shape.num_elements();
    if (n == 0) return outs;

    parallel_for(n, kChunk, [&](std::size_t begin, std::size_t end) {
        // Scratch for the registers that are neither dense inputs nor outputs: 8 bytes an
        // element covers every register type.
        std::vector<std::uint64_t> scratch(n_regs * kTile);
        std::vector<void*> r(n_regs);
        for (std::size_t t0 = begin; t0 < end; t0 += kTile) {
            const std::size_t len = std::min(kTile, end - t0);
            for (std::size_t k = 0; k < n_regs; ++k) {
                void* own = scratch.data() + k * kTile;
                if (k < n_in) {
                    const CpuTensor& in = inputs[k];
                    if (dense[k]) {
                        r[k] = const_cast<std::byte*>(in.bytes()) + t0 * dtype_size(in.dtype);
                    } else {
                        gather(in, shape, t0, len, own);
                        r[k] = own;
                    }
                } else if (out_of[k] >= 0) {
                    const CpuTensor& o = outs[static_cast<std::size_t>(out_of[k])];
                    r[k] = o.bytes() + t0 * dtype_size(o.dtype);
                } else {
                    r[k] = own;
                }
            }
            for (std::size_t i = 0; i < p.instrs.size(); ++i)
                exec(p, p.instrs[i], len, r.data(), r[n_in + i], sc);
        }
    });
    return outs;
}

}  // namespace ember::detail::cpu
