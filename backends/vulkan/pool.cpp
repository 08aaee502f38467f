// Pooling and interpolation. Max pooling is a direct kernel (shaders/maxpool.comp). Average
// pooling, adaptive average pooling and interpolation (nearest, bilinear, bicubic) are
// separable linear maps: out = A_h · x · A_wᵀ per plane, with per-axis matrices built from
// PyTorch's window and tap geometry (pool_geometry.hpp), so forward and backward
// (dx = A_hᵀ · g · A_w) are two batched matmuls on the device each. The matrices are
// parameters of the op (out × in, a few KiB), uploaded once per call.
#include <string>

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
    VT upload(DType dt, std::uint32_t device) const {
        TensorData d(m, Shape{out, in});
        return from_data(d, class_of(dt) == kF32 ? DType::F32 : DType::I64, device);
    }
};

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

void check_grad(const std::string& op, const VT& x, const VT& grad, const Shape& expected) {
    EMBER_CHECK(is_float(x.dtype), DType, op, ": needs a float input, got ", dtype_name(x.dtype),
                " ", x.shape);
    EMBER_CHECK(grad.dtype == x.dtype, DType, op, ": output gradient dtype ",
                dtype_name(grad.dtype), " ", grad.shape, " differs from input dtype ",
                dtype_name(x.dtype), " ", x.shape);
    EMBER_CHECK(grad.shape == expected, Shape, op, ": output gradient must be ", expected,
                " for input ", x.shape, ", got ", grad.shape);
}

/// The avg-pool matrices (height: null for 1-d) of a validated problem.
std::pair<std::optional<AxisMatrix>, AxisMatrix> avg_matrices(const Dims3& g, const PoolParams& p) {
    const Window3 w = window3(p);
    AxisMatrix aw = avg_matrix(g.in[2], g.out[2], w.k[2], w.s[2], w.pad[2], p.count_include_pad);
    if (p.n == 1) return {std::nullopt, std::move(aw)};
    return {avg_matrix(g.in[1], g.out[1], w.k[1], w.s[1], w.pad[1], p.count_include_pad),
            std::move(aw)};
}

Shape adaptive_shape(const std::string& op, const VT& x, std::span<const std::size_t> os) {
    const std::size_t n = os.size();
    EMBER_CHECK(x.shape.rank() == n + 2, Shape, op, ": input must have rank ", n + 2,
                " [N, C, spatial...], got ", x.shape, " for output size ", Shape(os));
    EMBER_CHECK(is_float(x.dtype), DType, op, ": needs a float input, got ", dtype_name(x.dtype),
                " ", x.shape);
    Shape out{x.shape[0], x.shape[1]};
    for (std::size_t d = 0; d < n; ++d) {
        EMBER_CHECK(x.shape[2 + d] >= 1 || os[d] == 0, Shape, op,
                    ": input spatial dims must be non-empty, got ", x.shape);
        out.push_back(os[d]);
    }
    return out;
}

Shape interp_shape(const VT& x, std::span<const std::size_t> output_size) {
    const std::size_t n = output_size.size();
    const Shape os(output_size);
    EMBER_CHECK(n == 1 || n == 2, Argument,
                "interpolate: output size must have 1 ([N, C, L] input) or 2 ([N, C, H, W]) dims, "
                "got ",
                os, " for input ", x.shape);
    EMBER_CHECK(x.shape.rank() == n + 2, Shape, "interpolate: input must have rank ", n + 2,
                " for output size ", os, ", got ", x.shape);
    for (std::size_t d = 0; d < n; ++d) {
        EMBER_CHECK(output_size[d] >= 1, Argument,
                    "interpolate: output size must be positive, got ", os, " for input ", x.shape);
        EMBER_CHECK(x.shape[2 + d] >= 1, Shape,
                    "interpolate: input spatial dims must be non-empty, got ", x.shape);
    }
    Shape out{x.shape[0], x.shape[1]};
    for (std::size_t d = 0; d < n; ++d) out.push_back(output_size[d]);
    return out;
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
    check_grad("avg_pool" + std::to_string(p.n) + "d_backward", x, grad, out_shape);
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
        std::lock_guard lock(cx.mu);
        const Pipeline& pipe = cx.pipeline("maxpool", {}, 3, kLocal);
        const Binding bs[] = {bind(out, true), bind(idx, true), bind(x, false)};
        cx.dispatch(pipe, bs, pw.w, (total + kLocal - 1) / kLocal);
    }
    return {cast(std::move(out), dt), std::move(idx)};
}

VT adaptive_avg_pool(VT x, std::span<const std::size_t> output_size) {
    const std::size_t n = output_size.size();
    EMBER_CHECK(n >= 1 && n <= 2, Argument,
                "adaptive_avg_pool: 1 or 2 output dims are supported, got ", n, " (input ", x.shape,
                ")");
    const std::string op = "adaptive_avg_pool" + std::to_string(n) + "d";
    const Shape out_shape = adaptive_shape(op, x, output_size);
    if (out_shape.num_elements() == 0) return empty(out_shape, x.dtype, x.device);
    AxisMatrix aw = adaptive_matrix(i64(x.shape[n + 1]), i64(output_size[n - 1]));
    std::optional<AxisMatrix> ah;
    if (n == 2) ah = adaptive_matrix(i64(x.shape[2]), i64(output_size[0]));
    const DType dt = x.dtype;
    return cast(apply_separable(cast(std::move(x), DType::F32), ah ? &*ah : nullptr, aw), dt);
}

VT adaptive_avg_pool_backward(VT x, VT grad, std::size_t n) {
    const std::string op = "adaptive_avg_pool" + std::to_string(n) + "d_backward";
    EMBER_CHECK(grad.shape.rank() == n + 2, Shape, op, ": output gradient must have rank ", n + 2,
                ", got ", grad.shape);
    std::array<std::size_t, 2> os{};
    for (std::size_t d = 0; d < n; ++d) os[d] = grad.shape[2 + d];
    const Shape expected = adaptive_shape(op, x, std::span(os.data(), n));
    check_grad(op, x, grad, expected);
    if (x.num_elements() == 0) return empty(x.shape, x.dtype, x.device);
    AxisMatrix aw = adaptive_matrix(i64(x.shape[n + 1]), i64(os[n - 1]));
    std::optional<AxisMatrix> ah;
    if (n == 2) ah = adaptive_matrix(i64(x.shape[2]), i64(os[0]));
    const DType dt = x.dtype;
    return cast(apply_separable_t(cast(std::move(grad), DType::F32), ah ? &*ah : nullptr, aw), dt);
}

VT interpolate(VT x, std::span<const std::size_t> output_size, const InterpolateOptions& o) {
    const Shape out_shape = interp_shape(x, output_size);
    const DType dt = x.dtype;
    EMBER_CHECK(dt != DType::Bool, DType, "interpolate: bool input ", x.shape, " is not supported");
    if (o.mode != InterpolateMode::Nearest)
        EMBER_CHECK(is_float(dt), DType,
                    "interpolate: ", o.mode == InterpolateMode::Bilinear ? "bilinear" : "bicubic",
                    " mode needs a float input, got ", dtype_name(dt), " ", x.shape);
    if (out_shape.num_elements() == 0) return empty(out_shape, dt, x.device);
    auto [ah, aw] = interp_matrices(x.shape, output_size, o);
    // Nearest on ints: the one-hot matrices are int64 and the int matmul is exact.
    const DType cd = class_of(dt) == kF32 ? DType::F32 : DType::I64;
    return cast(apply_separable(cast(std::move(x), cd), ah ? &*ah : nullptr, aw), dt);
}

VT interpolate_backward(VT x, VT grad, std::span<const std::size_t> output_size,
                        const InterpolateOptions& o) {
    const Shape out_shape = interp_shape(x, output_size);
    check_grad("interpolate_backward", x, grad, out_shape);
    if (x.num_elements() == 0) return empty(x.shape, x.dtype, x.device);
    auto [ah, aw] = interp_matrices(x.shape, output_size, o);
    const DType dt = x.dtype;
    return cast(apply_separable_t(cast(std::move(grad), DType::F32), ah ? &*ah : nullptr, aw), dt);
}

}  // namespace ember::detail::vk
