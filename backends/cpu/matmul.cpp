// Matrix products with torch.matmul's semantics: vectors promoted to matrices and squeezed
// back, batch dims broadcast. Float products go to the shared GEMM (OpenBLAS or the portable
// one) straight from the operands' memory whenever their strides describe a plain or
// transposed row-major matrix; integer products use plain loops.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>
#if !EMBER_FREESTANDING
#include <mutex>
#include <unordered_map>
#endif

#include "elementwise_fns.hpp"
#include "gemm.hpp"
#include "kernels.hpp"
#include "parallel.hpp"

namespace ember::detail::cpu {
namespace {

/// How the last two dims of an operand reach GEMM: op(X) = X or Xᵀ with row stride `ld`.
struct MatLayout {
    bool ok = false;
    bool trans = false;
    std::size_t ld = 1;
};

/// A rows×cols matrix whose element (r, c) sits at r*rs + c*cs.
MatLayout blas_layout(std::size_t rows, std::size_t cols, std::int64_t rs, std::int64_t cs) {
    const auto r = static_cast<std::int64_t>(rows), c = static_cast<std::int64_t>(cols);
    // A size-1 dim may carry any stride; broadcast (0) or overlapping strides elsewhere cannot
    // be expressed as a leading dimension and need a copy.
    if ((cols <= 1 || cs == 1) && (rows <= 1 || rs >= std::max<std::int64_t>(c, 1)))
        return {true, false, rows <= 1 ? std::max<std::size_t>(cols, 1) : std::size_t(rs)};
    if ((rows <= 1 || rs == 1) && (cols <= 1 || cs >= std::max<std::int64_t>(r, 1)))
        return {true, true, cols <= 1 ? std::max<std::size_t>(rows, 1) : std::size_t(cs)};
    return {};
}

/// The problem after promoting vectors: out[batch..., m, n] = a[batch..., m, k] @ b[..., k, n].
struct Problem {
    std::size_t m = 1, n = 1, k = 1;
    std::size_t nb = 0;               ///< number of output batch dims
    Shape batch;                      ///< output batch dims
    Strides a_bs{}, b_bs{};           ///< per output batch dim (0 where broadcast)
    std::int64_t a_rs = 0, a_cs = 0;  ///< strides of a's matrix (rows m, cols k)
    std::int64_t b_rs = 0, b_cs = 0;  ///< strides of b's matrix (rows k, cols n)
};

Problem describe(const CpuTensor& a, const CpuTensor& b, const Problem& shape_only) {
    Problem p = shape_only;
    const std::size_t ra = a.shape.rank(), rb = b.shape.rank();
    const std::size_t ba = ra == 1 ? 0 : ra - 2, bb = rb == 1 ? 0 : rb - 2;
    for (std::size_t i = 0; i < p.nb; ++i) {
        p.a_bs[i] = 0;
        p.b_bs[i] = 0;
        if (i >= p.nb - ba) {
            const std::size_t d = i - (p.nb - ba);
            if (a.shape[d] != 1) p.a_bs[i] = a.strides[d];
        }
        if (i >= p.nb - bb) {
            const std::size_t d = i - (p.nb - bb);
            if (b.shape[d] != 1) p.b_bs[i] = b.strides[d];
        }
    }
    if (ra == 1) {
        p.a_rs = static_cast<std::int64_t>(p.k);
        p.a_cs = a.strides[0];
    } else {
        p.a_rs = a.strides[ra - 2];
        p.a_cs = a.strides[ra - 1];
    }
    if (rb == 1) {
        p.b_rs = b.strides[0];
        p.b_cs = 1;
    } else {
        p.b_rs = b.strides[rb - 2];
        p.b_cs = b.strides[rb - 1];
    }
    return p;
}

/// Element offsets of batch `idx` (row-major over p.batch) in a and b.
std::pair<std::int64_t, std::int64_t> batch_offsets(const Problem& p, std::size_t idx) {
    std::int64_t oa = 0, ob = 0;
    for (std::size_t d = p.nb; d-- > 0;) {
        const auto i = static_cast<std::int64_t>(idx % p.batch[d]);
        idx /= p.batch[d];
        oa += i * p.a_bs[d];
        ob += i * p.b_bs[d];
    }
    return {oa, ob};
}

#if !EMBER_FREESTANDING
// ---- Weights packed once ---------------------------------------------------------------------
// The blocked GEMM packs B into panels at every call, which for a model's weights at inference
// repeats the same work at every pass (ONNX Runtime packs its MatMul weights once, when it
// loads the model). A B operand seen twice in a row with the same buffer, view and sampled
// values is packed whole and kept, keyed by its buffer; the entry holds a reference to that
// buffer, so that no op can write it in place (they all need the only reference), and is
// dropped once that reference is the buffer's last. Training weights change between two
// uses (or move to new buffers) and so are not kept.
namespace packed_weights {

/// What is packed: a matrix (k × n, row stride ld, stored transposed when trans) as a product's
/// B, or (kind 1) as A: `groups` blocks of n × k rows (a convolution's weights).
struct Key {
    const Storage* storage;
    std::int64_t offset;
    std::size_t k, n, ld;
    bool trans;
    DType dtype;
    int kind = 0;
    bool operator==(const Key&) const = default;
};

struct KeyHash {
    std::size_t operator()(const Key& key) const {
        std::size_t h = std::hash<const void*>{}(key.storage);
        for (const std::size_t v :
             {std::size_t(key.offset), key.k, key.n, key.ld, std::size_t(key.trans),
              std::size_t(key.dtype), std::size_t(key.kind)})
            h = (h ^ v) * 1099511628211ull;
        return h;
    }
};

struct Seen {
    std::weak_ptr<Storage> storage;
    std::uint64_t sample;
};

struct Entry {
    std::shared_ptr<Storage> pin;  ///< keeps the buffer from being written in place
    std::shared_ptr<const PackedB> packed;
    std::size_t bytes;
};

struct Cache {
    std::mutex mu;
    std::unordered_map<Key, Seen, KeyHash> seen;
    std::unordered_map<Key, Entry, KeyHash> kept;
    std::size_t bytes = 0;
    const std::size_t limit = [] {
        if (const char* e = std::getenv("EMBER_CPU_PACKED_WEIGHTS_BYTES"))
            return std::size_t(std::strtoull(e, nullptr, 10));
        return std::size_t{1} << 30;
    }();
};

Cache& cache() {
    static Cache* c = new Cache;  // never destroyed: its buffers may outlive static destruction
    return *c;
}

/// Drops entries whose buffer only the cache still holds, and records of dead buffers.
void sweep(Cache& c) {
    for (auto it = c.kept.begin(); it != c.kept.end();) {
        if (it->second.pin.use_count() == 1) {
            c.bytes -= it->second.bytes;
            it = c.kept.erase(it);
        } else {
            ++it;
        }
    }
    if (c.seen.size() > 1024) c.seen.clear();
    for (auto it = c.seen.begin(); it != c.seen.end();)
        it = it->second.storage.expired() ? c.seen.erase(it) : std::next(it);
}

/// 16 of op(B)'s values (k × n) hashed: spread over its rows and columns.
template <typename T>
std::uint64_t sample(const T* b, std::size_t k, std::size_t n, std::size_t ld, bool trans) {
    std::uint64_t h = 1469598103934665603ull;
    for (std::size_t i = 0; i < 16; ++i) {
        const std::size_t p = (k - 1) * i / 15, j = (n - 1) * ((i * 7) % 16) / 15;
        const T v = trans ? b[j * ld + p] : b[p * ld + j];
        std::uint64_t bits = 0;
        std::memcpy(&bits, &v, sizeof(T));
        h = (h ^ bits) * 1099511628211ull;
    }
    return h;
}

/// The kept packing for `key` (values sampled as `s`, `bytes` at most), made by `pack` at the
/// second time of asking with unchanged values; nullptr before that, and when full or off.
template <typename Pack>
std::shared_ptr<const PackedB> find_or_pack(const CpuTensor& t, const Key& key, std::uint64_t s,
                                            std::size_t bytes, Pack&& pack) {
    Cache& c = cache();
    {
        std::lock_guard<std::mutex> lock(c.mu);
        sweep(c);
        if (auto it = c.kept.find(key); it != c.kept.end()) return it->second.packed;
        auto it = c.seen.find(key);
        if (it == c.seen.end() || it->second.storage.lock() != t.storage ||
            it->second.sample != s) {
            c.seen.insert_or_assign(key, Seen{t.storage, s});
            return nullptr;
        }
        c.seen.erase(it);
        if (c.bytes + bytes > c.limit) return nullptr;
    }
    // Packed outside the lock; the caller's reference keeps the buffer from being written.
    auto packed = std::make_shared<const PackedB>(pack());
    const std::size_t got = packed->buf->bytes;
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.bytes + got > c.limit) return packed;  // this call's, not kept
    const auto [it, added] = c.kept.try_emplace(key, Entry{t.storage, packed, got});
    if (added) c.bytes += got;
    return it->second.packed;
}

/// B packed whole for a product with m rows, or nullptr where the product is to run as usual.
template <typename T>
std::shared_ptr<const PackedB> find(const CpuTensor& b, const T* bp, bool trans, std::size_t ld,
                                    bool trans_a, std::size_t m, std::size_t k, std::size_t n) {
    if (cache().limit == 0 || !gemm_prepack_pays(trans_a, trans, m, n, k)) return nullptr;
    const Key key{b.storage.get(), bp - static_cast<const T*>(b.storage->data), k, n, ld, trans,
                  b.dtype};
    return find_or_pack(b, key, sample(bp, k, n, ld, trans), k * n * sizeof(T),
                        [&] { return gemm_prepack_b(trans, k, n, bp, ld); });
}

/// A (groups blocks of m × k, row-major, one after another) packed as gemm_pack_a packs each.
template <typename T>
std::shared_ptr<const PackedB> find_a(const CpuTensor& w, const T* a, std::size_t groups,
                                      std::size_t m, std::size_t k) {
    if (cache().limit == 0) return nullptr;
    const Key key{w.storage.get(),
                  a - static_cast<const T*>(w.storage->data),
                  k,
                  m,
                  groups,
                  false,
                  w.dtype,
                  1};
    const std::size_t each = gemm_packed_a_size(m, k);
    return find_or_pack(w, key, sample(a, groups * m, k, k, false), groups * each * sizeof(T), [&] {
        PackedB out;
        out.buf = allocate(groups * each * sizeof(T));
        out.k = k;
        out.n = m;
        for (std::size_t gi = 0; gi < groups; ++gi)
            gemm_pack_a(m, k, a + gi * m * k, k, static_cast<T*>(out.buf->data) + gi * each, false);
        return out;
    });
}

/// Values derived from A (groups blocks of m × k) by the caller's `make`, kept under `kind`.
std::shared_ptr<const PackedB> find_derived(const CpuTensor& w, const float* a, int kind,
                                            std::size_t groups, std::size_t m, std::size_t k,
                                            std::size_t bytes, void (*make)(const void*, void*),
                                            const void* ctx) {
    if (cache().limit == 0) return nullptr;
    const Key key{w.storage.get(),
                  a - static_cast<const float*>(w.storage->data),
                  k,
                  m,
                  groups,
                  false,
                  w.dtype,
                  kind};
    return find_or_pack(w, key, sample(a, groups * m, k, k, false), bytes, [&] {
        PackedB out;
        out.buf = allocate(bytes);
        out.k = k;
        out.n = m;
        make(ctx, out.buf->data);
        return out;
    });
}

}  // namespace packed_weights
#endif

}  // namespace

namespace {
// kept_packed_b for either element type (none on the freestanding build: no cache there).
template <typename T>
std::shared_ptr<const PackedB> kept_b(const CpuTensor& t, const T* bp, bool trans, std::size_t ld,
                                      bool trans_a, std::size_t m, std::size_t k, std::size_t n) {
#if !EMBER_FREESTANDING
    return packed_weights::find<T>(t, bp, trans, ld, trans_a, m, k, n);
#else
    return nullptr;
#endif
}
}  // namespace

std::shared_ptr<const PackedB> kept_packed_b(const CpuTensor& t, const float* bp, bool trans,
                                             std::size_t ld, bool trans_a, std::size_t m,
                                             std::size_t k, std::size_t n) {
    return kept_b(t, bp, trans, ld, trans_a, m, k, n);
}

std::shared_ptr<const PackedB> kept_packed_b(const CpuTensor& t, const double* bp, bool trans,
                                             std::size_t ld, bool trans_a, std::size_t m,
                                             std::size_t k, std::size_t n) {
    return kept_b(t, bp, trans, ld, trans_a, m, k, n);
}

std::shared_ptr<const PackedB> kept_packed_a(const CpuTensor& t, const float* a, std::size_t groups,
                                             std::size_t m, std::size_t k) {
#if !EMBER_FREESTANDING
    return packed_weights::find_a<float>(t, a, groups, m, k);
#else
    return nullptr;
#endif
}

std::shared_ptr<const PackedB> kept_derived(const CpuTensor& t, const float* a, int kind,
                                            std::size_t groups, std::size_t m, std::size_t k,
                                            std::size_t bytes, void (*make)(const void*, void*),
                                            const void* ctx) {
#if !EMBER_FREESTANDING
    return packed_weights::find_derived(t, a, kind, groups, m, k, bytes, make, ctx);
#else
    return nullptr;
#endif
}

std::shared_ptr<const PackedB> kept_packed_a(const CpuTensor& t, const double* a,
                                             std::size_t groups, std::size_t m, std::size_t k) {
#if !EMBER_FREESTANDING
    return packed_weights::find_a<double>(t, a, groups, m, k);
#else
    return nullptr;
#endif
}

void release_dropped_packed_weights() {
#if !EMBER_FREESTANDING
    packed_weights::Cache& c = packed_weights::cache();
    std::lock_guard<std::mutex> lock(c.mu);
    packed_weights::sweep(c);
#endif
}

namespace {

/// Runs gemm (C = op(A)·op(B), beta 0), from B packed once when B is a kept weight.
template <typename T>
void product(const CpuTensor& b, bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k,
             const T* a, std::size_t lda, const T* bp, std::size_t ldb, T* c, std::size_t ldc,
             bool parallel = true) {
    if (auto packed = kept_packed_b(b, bp, tb, ldb, ta, m, k, n))
        return gemm_prepacked(ta, m, n, k, T(1), a, lda, *packed, T(0), c, ldc, parallel);
    gemm(ta, tb, m, n, k, T(1), a, lda, bp, ldb, T(0), c, ldc, parallel);
}

/// Per-batch products below this many multiply-adds run one batch per task in the pool (and
/// single-threaded inside GEMM, where OpenBLAS would not thread them anyway).
constexpr std::size_t kSmallProduct = std::size_t{1} << 18;

template <typename T>
void matmul_float(CpuTensor& a, CpuTensor& b, const Problem& shape_only, CpuTensor& out) {
    Problem p = describe(a, b, shape_only);
    MatLayout la = blas_layout(p.m, p.k, p.a_rs, p.a_cs);
    if (!la.ok) {
        a = contiguous(std::move(a));
        p = describe(a, b, shape_only);
        la = blas_layout(p.m, p.k, p.a_rs, p.a_cs);
    }
    MatLayout lb = blas_layout(p.k, p.n, p.b_rs, p.b_cs);
    if (!lb.ok) {
        b = contiguous(std::move(b));
        p = describe(a, b, shape_only);
        la = blas_layout(p.m, p.k, p.a_rs, p.a_cs);
        lb = blas_layout(p.k, p.n, p.b_rs, p.b_cs);
    }
    const T* A = a.data<T>();
    const T* B = b.data<T>();
    T* C = out.data<T>();
    const std::size_t batches = p.batch.num_elements();

    // b shared by every batch and a's batches evenly spaced rows: one tall GEMM (the common
    // linear-layer case [batch, seq, in] @ [in, out]) instead of many short ones.
    bool b_shared = true;
    for (std::size_t d = 0; d < p.nb; ++d) b_shared = b_shared && p.b_bs[d] == 0;
    if (batches > 1 && b_shared && !la.trans) {
        bool folds = true;
        std::int64_t expect = static_cast<std::int64_t>(p.m) * static_cast<std::int64_t>(la.ld);
        for (std::size_t d = p.nb; d-- > 0;) {
            if (p.batch[d] == 1) continue;
            if (p.a_bs[d] != expect) {
                folds = false;
                break;
            }
            expect *= static_cast<std::int64_t>(p.batch[d]);
        }
        if (folds) {
            product(b, false, lb.trans, batches * p.m, p.n, p.k, A, la.ld, B, lb.ld, C, p.n);
            return;
        }
    }
    if (batches == 1) {
        product(b, la.trans, lb.trans, p.m, p.n, p.k, A, la.ld, B, lb.ld, C, p.n);
        return;
    }

    const std::size_t work = p.m * p.n * p.k;
    auto run = [&](std::size_t begin, std::size_t end, bool parallel) {
        for (std::size_t i = begin; i < end; ++i) {
            const auto [oa, ob] = batch_offsets(p, i);
            gemm(la.trans, lb.trans, p.m, p.n, p.k, T(1), A + oa, la.ld, B + ob, lb.ld, T(0),
                 C + i * p.m * p.n, p.n, parallel);
        }
    };
    // Across the pool, each product single-threaded, when the products are small (too small
    // to thread) or numerous enough to give every thread two (attention's batch x heads
    // products): one parallel region instead of a threaded GEMM, and its wake-ups, per product.
    if (batches > 1 && (work < kSmallProduct || batches >= 2 * num_threads())) {
        const std::size_t grain =
            std::max<std::size_t>(1, kSmallProduct / std::max<std::size_t>(work, 1));
        parallel_for(batches, grain, [&](std::size_t b0, std::size_t b1) { run(b0, b1, false); });
    } else {
        run(0, batches, true);
    }
}

template <typename T>
void matmul_int(CpuTensor& a, CpuTensor& b, const Problem& shape_only, CpuTensor& out) {
    a = contiguous(std::move(a));
    b = contiguous(std::move(b));
    const Problem p = describe(a, b, shape_only);
    const T* A = a.data<T>();
    const T* B = b.data<T>();
    T* C = out.data<T>();
    const std::size_t batches = p.batch.num_elements();
    // Unsigned 64-bit arithmetic wraps like the narrower type does after the final cast,
    // without signed overflow's undefined behaviour.
    parallel_for(
        batches * p.m, std::max<std::size_t>(1, 65536 / std::max<std::size_t>(p.n * p.k, 1)),
        [&](std::size_t r0, std::size_t r1) {
            std::vector<std::uint64_t> acc(p.n);
            for (std::size_t r = r0; r < r1; ++r) {
                const std::size_t bi = r / p.m, i = r % p.m;
                const auto [oa, ob] = batch_offsets(p, bi);
                std::fill(acc.begin(), acc.end(), 0);
                for (std::size_t q = 0; q < p.k; ++q) {
                    const auto x = static_cast<std::uint64_t>(
                        static_cast<std::int64_t>(A[oa + static_cast<std::int64_t>(i) * p.a_rs +
                                                    static_cast<std::int64_t>(q) * p.a_cs]));
                    const T* brow = B + ob + static_cast<std::int64_t>(q) * p.b_rs;
                    for (std::size_t j = 0; j < p.n; ++j)
                        acc[j] += x * static_cast<std::uint64_t>(static_cast<std::int64_t>(
                                          brow[static_cast<std::int64_t>(j) * p.b_cs]));
                }
                T* crow = C + r * p.n;
                for (std::size_t j = 0; j < p.n; ++j) crow[j] = static_cast<T>(acc[j]);
            }
        });
}

}  // namespace

CpuTensor matmul(CpuTensor a, CpuTensor b) {
    const check::Matmul g = check::matmul(a, b);
    Problem p;
    p.k = g.k;
    p.m = g.m;
    p.n = g.n;
    p.nb = g.batch.rank();
    p.batch = g.batch;
    const Shape& out_shape = g.out;

    if (a.dtype == DType::F16 || a.dtype == DType::BF16) {
        const DType dt = a.dtype;
        return cast(matmul(cast(std::move(a), DType::F32), cast(std::move(b), DType::F32)), dt);
    }
    if (out_shape.num_elements() == 0) return empty(out_shape, a.dtype);
    if (p.k == 0) return full(out_shape, Scalar(0), a.dtype);

    CpuTensor out = empty(out_shape, a.dtype);
    visit_dtype(a.dtype, [&]<typename T>(TypeTag<T>) {
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
            matmul_float<T>(a, b, p, out);
        } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            matmul_int<T>(a, b, p, out);
        }
    });
    return out;
}

std::optional<CpuTensor> matmul_epilogue(const CpuTensor& a, const CpuTensor& b,
                                         const std::optional<CpuTensor>& bias, bool relu) {
    if (a.dtype != DType::F32 || b.dtype != DType::F32 || a.shape.rank() != 2 ||
        b.shape.rank() != 2 || (bias && bias->dtype != DType::F32))
        return std::nullopt;
    CpuTensor out = matmul(a, b);  // fresh and contiguous: finished in place
    const std::size_t m = out.shape[0], n = out.shape[1];
    float* o = out.data<float>();
    const float* bp = bias ? bias->data<float>() : nullptr;
    const std::int64_t bs = bias ? bias->strides[bias->shape.rank() - 1] : 0;
    // The unfused kernels' own functors, so that the bits are theirs.
    with_binary_fn<float>(BinaryOp::Add, [&](auto add) {
        with_unary_fn<float>(UnaryOp::Relu, [&](auto rl) {
            const std::size_t grain = std::max<std::size_t>(1, 16384 / std::max<std::size_t>(n, 1));
            parallel_for(m, grain, [&](std::size_t r0, std::size_t r1) {
                for (std::size_t i = r0; i < r1; ++i) {
                    float* row = o + i * n;
                    if (bp && bs == 1)
                        for (std::size_t j = 0; j < n; ++j) row[j] = add(row[j], bp[j]);
                    else if (bp)
                        for (std::size_t j = 0; j < n; ++j)
                            row[j] = add(row[j], bp[static_cast<std::int64_t>(j) * bs]);
                    if (relu)
                        for (std::size_t j = 0; j < n; ++j) row[j] = rl(row[j]);
                }
            });
        });
    });
    return out;
}

}  // namespace ember::detail::cpu
