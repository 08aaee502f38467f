// Pooling and interpolation. Max pooling is a direct kernel (shaders/maxpool.comp). Average
// pooling, adaptive average pooling and interpolation (nearest, bilinear, bicubic) are
// separable linear maps: out = A_h · x · A_wᵀ per plane, with per-axis matrices built from
// PyTorch's window and tap geometry (pool_geometry.hpp), so forward and backward
// (dx = A_hᵀ · g · A_w) are two batched matmuls on the device each. The matrices are
// parameters of the op (out × in, a few KiB), uploaded once per geometry and kept on the device:
// an upload is a host write, which a captured step (ember::vulkan::capture) must not contain, and
// a step replays the same geometry every time, so its first eager run leaves the matrices cached.
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "ember/detail/hash.hpp"

#include "pool_geometry.hpp"

namespace ember::detail::vk {

namespace {
constexpr std::uint32_t kLocal = 256;

/// A dense [out, in] matrix from per-row (index, weight) taps.
struct AxisMatrix {
    std::size_t out = 1, in = 1;
    std::vector<float> m;  ///< row-major out × in
    AxisMatrix(std::size_t o, std::size_t i) : out(o), in(i), m(o * i, 0.0f) {}
    void add(std::size_t o, i64 i, double w) {
        m[o * in + static_cast<std::size_t>(i)] += float(w);
    }
    VT upload(DType dt, std::uint32_t device) const;
};

/// The device copies of the matrices, keyed by content (a hash, confirmed by comparing the
/// values), dtype and device. Bounded: past kMaxCached entries the cache starts over (tensors
/// still using an evicted matrix keep their own reference to its buffer).
class MatrixCache {
public:
    VT get(const AxisMatrix& a, DType dt, std::uint32_t device) {
        const auto key = std::make_tuple(
            detail::fnv1a(a.m.data(), a.m.size() * sizeof(float), a.out * 131 + a.in), dt,
            device);
        std::lock_guard lock(mu_);
        auto it = cache_.find(key);
        if (it != cache_.end() && it->second.out == a.out && it->second.in == a.in &&
            it->second.m == a.m)
            return it->second.tensor;
        if (cache_.size() >= kMaxCached) cache_.clear();
        TensorData d(a.m, Shape{a.out, a.in});
        VT t = from_data(d, class_of(dt) == kF32 ? DType::F32 : DType::I64, device);
        cache_.insert_or_assign(key, Entry{a.out, a.in, a.m, t});
        return t;
    }

private:
    static constexpr std::size_t kMaxCached = 256;
    struct Entry {
        std::size_t out, in;
        std::vector<float> m;
        VT tensor;
    };
    std::mutex mu_;
    std::map<std::tuple<std::uint64_t, DType, std::uint32_t>, Entry> cache_;
};

VT AxisMatrix::upload(DType dt, std::uint32_t device) const {
    static MatrixCache* cache = new MatrixCache;  // never destroyed: outlives the device buffers' users
    return cache->get(*this, dt, device);
}

/// out = A_h · x · A_wᵀ over the last one (A_h null) or two dims of x.
VT apply_separable(VT x, const AxisMatrix* ah, const AxisMatrix& aw) {
    const DType dt = x.dtype;
    const std::size_t perm[] = {1, 0};
    VT mw = aw.upload(dt, x.device);
    VT y = matmul(std::move(x), permute(std::move(mw), perm));
    if (ah) y = matmul(ah->upload(dt, y.device), std::move(y));
    return y;
}

/// dx = A_hᵀ · g · A_w (the transpose of apply_separable).
VT apply_separable_t(VT g, const AxisMatrix* ah, const AxisMatrix& aw) {
    const std::size_t perm[] = {1, 0};
    VT y = matmul(std::move(g), aw.upload(g.dtype, g.device));
    if (ah) y = matmul(permute(ah->upload(y.dtype, y.device), perm), std::move(y));
    return y;
}

AxisMatrix avg_matrix(i64 in, i64 out, i64 k, i64 s, i64 pad, bool count_include_pad) {
    const AxisWindows w = avg_windows(in, out, k, s, pad, count_include_pad);
    AxisMatrix a(static_cast<std::size_t>(out), static_cast<std::size_t>(in));
    for (i64 o = 0; o < out; ++o)
        for (i64 i = w.lo[std::size_t(o)]; i < w.hi[std::size_t(o)]; ++i)
            a.add(std::size_t(o), i, 1.0 / double(w.count[std::size_t(o)]));
    return a;
}

AxisMatrix adaptive_matrix(i64 in, i64 out) {
    AxisMatrix a(static_cast<std::size_t>(out), static_cast<std::size_t>(in));
    for (i64 o = 0; o < out; ++o) {
        const i64 s = adaptive_start(o, out, in), e = adaptive_end(o, out, in);
        for (i64 i = s; i < e; ++i) a.add(std::size_t(o), i, 1.0 / double(e - s));
    }
    return a;
}

AxisMatrix interp_matrix(i64 in, i64 out, const InterpolateOptions& o) {
    AxisMatrix a(static_cast<std::size_t>(out), static_cast<std::size_t>(in));
    if (o.mode == InterpolateMode::Nearest) {
        for (i64 j = 0; j < out; ++j) a.add(std::size_t(j), nearest_index(j, in, out), 1.0);
    } else if (o.mode == InterpolateMode::Bilinear) {
        const auto w = linear_weights<float>(in, out, o.align_corners);
        for (i64 j = 0; j < out; ++j)
            for (int t = 0; t < 2; ++t)
                a.add(std::size_t(j), w.idx[std::size_t(2 * j + t)], w.wt[std::size_t(2 * j + t)]);
    } else {
        const auto w = cubic_weights<float>(in, out, o.align_corners);
        for (i64 j = 0; j < out; ++j)
            for (int t = 0; t < 4; ++t)
                a.add(std::size_t(j), w.idx[std::size_t(4 * j + t)], w.wt[std::size_t(4 * j + t)]);
    }
    return a;
}

/// The avg-pool matrices (height: null for 1-d) of a validated problem.
std::pair<std::optional<AxisMatrix>, AxisMatrix> avg_matrices(const Dims3& g, const PoolParams& p) {
    const Window3 w = window3(p);
    AxisMatrix aw = avg_matrix(g.in[2], g.out[2], w.k[2], w.s[2], w.pad[2], p.count_include_pad);
    if (p.n == 1) return {std::nullopt, std::move(aw)};
    return {avg_matrix(g.in[1], g.out[1], w.k[1], w.s[1], w.pad[1], p.count_include_pad),
            std::move(aw)};
}

std::pair<std::optional<AxisMatrix>, AxisMatrix> interp_matrices(const Shape& in,
                                                                 std::span<const std::size_t> os,
                                                                 const InterpolateOptions& o) {
    const std::size_t n = os.size();
    AxisMatrix aw = interp_matrix(i64(in[n + 1]), i64(os[n - 1]), o);
    if (n == 1) return {std::nullopt, std::move(aw)};
    return {interp_matrix(i64(in[2]), i64(os[0]), o), std::move(aw)};
}
}  // namespace

VT avg_pool(VT x, const PoolParams& p) {
    Shape out_shape;
    const Dims3 g = pool_geometry("avg_pool", x, p, false, out_shape);
    if (out_shape.num_elements() == 0) return empty(out_shape, x.dtype, x.device);
    EMBER_CHECK(p.n <= 2, Argument, "avg_pool: 1 or 2 spatial dims are supported, got ", p.n);
    auto [ah, aw] = avg_matrices(g, p);
    const DType dt = x.dtype;
    return cast(apply_separable(cast(std::move(x), DType::F32), ah ? &*ah : nullptr, aw), dt);
}

VT avg_pool_backward(VT x, VT grad, const PoolParams& p) {
    Shape out_shape;
    const Dims3 g = pool_geometry("avg_pool", x, p, false, out_shape, "_backward");
    check::grad("avg_pool" + std::to_string(p.n) + "d_backward", x, grad, out_shape);
    EMBER_CHECK(p.n <= 2, Argument, "avg_pool_backward: 1 or 2 spatial dims are supported");
    if (x.num_elements() == 0) return empty(x.shape, x.dtype, x.device);
    auto [ah, aw] = avg_matrices(g, p);
    const DType dt = x.dtype;
    return cast(apply_separable_t(cast(std::move(grad), DType::F32), ah ? &*ah : nullptr, aw), dt);
}

std::pair<VT, VT> max_pool_with_indices(VT x, const PoolParams& p) {
    Shape out_shape;
    const Dims3 g = pool_geometry("max_pool", x, p, true, out_shape);
    const DType dt = x.dtype;
    VT out = empty(out_shape, DType::F32, x.device);
    VT idx = empty(out_shape, DType::I64, x.device);
    const std::size_t total = out.num_elements();
    if (total > 0) {
        x = cast(std::move(x), DType::F32);
        const Window3 w = window3(p);
        Params pw;
        pw.push(static_cast<i64>(total));
        pw.push(static_cast<i64>(x.shape[0] * x.shape[1]));
        for (auto* a : {&g.in, &g.out, &w.k, &w.s, &w.pad, &w.dil})
            for (int i = 0; i < 3; ++i) pw.push((*a)[i]);
        pw.push(x.strides[0]);
        pw.push(x.strides[1]);
        for (std::size_t s = 0; s < 3; ++s) {
            const std::size_t first = 3 - p.n;
            pw.push(s < first ? 0 : x.strides[2 + s - first]);
        }
        pw.push(x.offset);
        pw.push(static_cast<i64>(x.shape[1]));
        Context& cx = ctx(x);
        const Pipeline& pipe = cx.pipeline("maxpool", {}, 3, kLocal);
        const Binding bs[] = {bind(out, true), bind(idx, true), bind(x, false)};
        cx.dispatch(pipe, bs, pw.w, (total + kLocal - 1) / kLocal);
    }
    return {cast(std::move(out), dt), std::move(idx)};
}

VT adaptive_avg_pool(VT x, std::span<const std::size_t> output_size) {
    const Shape out_shape = check::adaptive_avg_pool(x, output_size);
    const std::size_t n = output_size.size();
    EMBER_CHECK(n <= 2, Argument, "adaptive_avg_pool: 1 or 2 output dims are supported, got ", n,
                " (input ", x.shape, ")");
    if (out_shape.num_elements() == 0) return empty(out_shape, x.dtype, x.device);
    AxisMatrix aw = adaptive_matrix(i64(x.shape[n + 1]), i64(output_size[n - 1]));
    std::optional<AxisMatrix> ah;
    if (n == 2) ah = adaptive_matrix(i64(x.shape[2]), i64(output_size[0]));
    const DType dt = x.dtype;
    return cast(apply_separable(cast(std::move(x), DType::F32), ah ? &*ah : nullptr, aw), dt);
}

VT adaptive_avg_pool_backward(VT x, VT grad, std::size_t n) {
    check::adaptive_avg_pool_backward(x, grad, n);
    EMBER_CHECK(n <= 2, Argument,
                "adaptive_avg_pool_backward: 1 or 2 spatial dims are supported, got ", n,
                " (input ", x.shape, ")");
    std::array<std::size_t, 2> os{};
    for (std::size_t d = 0; d < n; ++d) os[d] = grad.shape[2 + d];
    if (x.num_elements() == 0) return empty(x.shape, x.dtype, x.device);
    AxisMatrix aw = adaptive_matrix(i64(x.shape[n + 1]), i64(os[n - 1]));
    std::optional<AxisMatrix> ah;
    if (n == 2) ah = adaptive_matrix(i64(x.shape[2]), i64(os[0]));
    const DType dt = x.dtype;
    return cast(apply_separable_t(cast(std::move(grad), DType::F32), ah ? &*ah : nullptr, aw), dt);
}

VT interpolate(VT x, std::span<const std::size_t> output_size, const InterpolateOptions& o) {
    const Shape out_shape = check::interpolate(x, output_size, o);
    const DType dt = x.dtype;
    if (out_shape.num_elements() == 0) return empty(out_shape, dt, x.device);
    auto [ah, aw] = interp_matrices(x.shape, output_size, o);
    // Nearest on ints: the one-hot matrices are int64 and the int matmul is exact.
    const DType cd = class_of(dt) == kF32 ? DType::F32 : DType::I64;
    return cast(apply_separable(cast(std::move(x), cd), ah ? &*ah : nullptr, aw), dt);
}

VT interpolate_backward(VT x, VT grad, std::span<const std::size_t> output_size,
                        const InterpolateOptions& o) {
    check::interpolate_backward(x, grad, output_size);
    if (x.num_elements() == 0) return empty(x.shape, x.dtype, x.device);
    auto [ah, aw] = interp_matrices(x.shape, output_size, o);
    const DType dt = x.dtype;
    return cast(apply_separable_t(cast(std::move(grad), DType::F32), ah ? &*ah : nullptr, aw), dt);
}

}  // namespace ember::detail::vk

// ---- VulkanBackend's ops on the kernels above ----
namespace ember {
namespace k = detail::vk;

auto VulkanBackend::avg_pool1d(FT x, const PoolOptions<1>& o) -> FT {
    return k::avg_pool(std::move(x), k::pool_params(o));
}
auto VulkanBackend::avg_pool2d(FT x, const PoolOptions<2>& o) -> FT {
    return k::avg_pool(std::move(x), k::pool_params(o));
}
auto VulkanBackend::max_pool1d(FT x, const PoolOptions<1>& o) -> FT {
    return k::max_pool_with_indices(std::move(x), k::pool_params(o)).first;
}
auto VulkanBackend::max_pool2d(FT x, const PoolOptions<2>& o) -> FT {
    return k::max_pool_with_indices(std::move(x), k::pool_params(o)).first;
}
auto VulkanBackend::max_pool1d_with_indices(FT x, const PoolOptions<1>& o) -> std::pair<FT, IT> {
    return k::max_pool_with_indices(std::move(x), k::pool_params(o));
}
auto VulkanBackend::max_pool2d_with_indices(FT x, const PoolOptions<2>& o) -> std::pair<FT, IT> {
    return k::max_pool_with_indices(std::move(x), k::pool_params(o));
}
auto VulkanBackend::adaptive_avg_pool1d(FT x, std::size_t n) -> FT {
    const std::size_t s[1] = {n};
    return k::adaptive_avg_pool(std::move(x), s);
}
auto VulkanBackend::adaptive_avg_pool2d(FT x, std::array<std::size_t, 2> s) -> FT {
    return k::adaptive_avg_pool(std::move(x), s);
}
auto VulkanBackend::interpolate(FT x, std::array<std::size_t, 2> s, const InterpolateOptions& o)
    -> FT {
    return k::interpolate(std::move(x), s, o);
}
auto VulkanBackend::avg_pool1d_backward(FT x, FT g, const PoolOptions<1>& o) -> FT {
    return k::avg_pool_backward(std::move(x), std::move(g), k::pool_params(o));
}
auto VulkanBackend::avg_pool2d_backward(FT x, FT g, const PoolOptions<2>& o) -> FT {
    return k::avg_pool_backward(std::move(x), std::move(g), k::pool_params(o));
}
auto VulkanBackend::adaptive_avg_pool1d_backward(FT x, FT g) -> FT {
    return k::adaptive_avg_pool_backward(std::move(x), std::move(g), 1);
}
auto VulkanBackend::adaptive_avg_pool2d_backward(FT x, FT g) -> FT {
    return k::adaptive_avg_pool_backward(std::move(x), std::move(g), 2);
}
auto VulkanBackend::interpolate_backward(FT x, FT g, std::array<std::size_t, 2> s,
                                         const InterpolateOptions& o) -> FT {
    return k::interpolate_backward(std::move(x), std::move(g), s, o);
}

}  // namespace ember
