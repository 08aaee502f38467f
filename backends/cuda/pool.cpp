// Pooling and interpolation on the GPU with PyTorch's geometry (output sizes, window clipping,
// divisors, index conventions), validated on the host before any launch.
#include <algorithm>
#include <optional>
#include <span>
#include <string>

#include "global_pool.hpp"
#include "ops.hpp"

namespace ember::detail::cuda {

namespace {
using i64 = std::int64_t;

DType float_compute(DType d) {
    return d == DType::F64 ? DType::F64 : DType::F32;
}

/// Validates a pooling problem (backends/common/pool_geometry.hpp); returns its geometry in the
/// kernels' form and the output shape.
PoolGeom pool_geometry(const char* base, const CudaTensor& x, const PoolParams& p, bool max_pool,
                       Shape& out_shape, const char* suffix = "") {
    const pool::Dims3 d = pool::pool_geometry(base, x, p, max_pool, out_shape, suffix);
    const pool::Window3 w = pool::window3(p);
    PoolGeom g;
    g.planes = static_cast<i64>(x.shape[0] * x.shape[1]);
    g.count_include_pad = p.count_include_pad;
    for (std::size_t s = 0; s < 3; ++s) {
        g.in[s] = d.in[s];
        g.out[s] = d.out[s];
        g.k[s] = w.k[s];
        g.stride[s] = w.s[s];
        g.pad[s] = w.pad[s];
        g.dil[s] = max_pool ? w.dil[s] : 1;
    }
    return g;
}

/// The geometry of an adaptive pooling problem checked by check::adaptive_avg_pool (or its
/// backward).
PoolGeom adaptive_geometry(const CudaTensor& x, const Shape& out_size) {
    const std::size_t n = out_size.rank();
    PoolGeom g;
    g.planes = static_cast<i64>(x.shape[0] * x.shape[1]);
    for (std::size_t d = 0; d < n; ++d) {
        const std::size_t s = 3 - n + d;
        g.in[s] = static_cast<i64>(x.shape[2 + d]);
        g.out[s] = static_cast<i64>(out_size[d]);
    }
    return g;
}

/// Adaptive pooling to every output size 1 of dense data (contiguous or channels-last): the
/// [n, c, s] view global_pool.cu reads (its kernels keep the dtype and layout), or nothing.
std::optional<GlobalPool> global_pool(const CudaTensor& x, std::span<const std::size_t> out_size) {
    for (std::size_t d : out_size)
        if (d != 1) return std::nullopt;
    const bool cl = is_channels_last(x);
    if (!cl && !x.is_contiguous()) return std::nullopt;
    if (x.dtype != DType::F32 && x.dtype != DType::F64 && x.dtype != DType::F16 &&
        x.dtype != DType::BF16)
        return std::nullopt;
    GlobalPool g;
    g.n = static_cast<i64>(x.shape[0]);
    g.c = static_cast<i64>(x.shape[1]);
    g.s = static_cast<i64>(x.shape.num_elements()) / std::max<i64>(g.n * g.c, 1);
    g.sn = g.c * g.s;
    g.sc = cl ? 1 : g.s;
    g.ss = cl ? g.c : 1;
    return g;
}
}  // namespace

CudaTensor avg_pool(CudaTensor x, const PoolParams& p) {
    Shape out_shape;
    const PoolGeom g = pool_geometry("avg_pool", x, p, false, out_shape);
    const DType result = x.dtype, cd = float_compute(x.dtype);
    x = contiguous(cast(std::move(x), cd));
    CudaTensor out = empty(out_shape, cd, x.device());
    launch_avg_pool(cd, g, x.ptr(), out.ptr(), stream(x.device()));
    return cast(std::move(out), result);
}

std::pair<CudaTensor, CudaTensor> max_pool_with_indices(CudaTensor x, const PoolParams& p,
                                                        bool want_indices) {
    Shape out_shape;
    const PoolGeom g = pool_geometry("max_pool", x, p, true, out_shape);
    const DType result = x.dtype, cd = float_compute(x.dtype);
    x = contiguous(cast(std::move(x), cd));
    CudaTensor out = empty(out_shape, cd, x.device());
    CudaTensor idx;
    if (want_indices) idx = empty(out_shape, DType::I64, x.device());
    launch_max_pool(cd, g, x.ptr(), out.ptr(),
                    want_indices ? static_cast<std::int64_t*>(idx.ptr()) : nullptr,
                    stream(x.device()));
    return {cast(std::move(out), result), std::move(idx)};
}

CudaTensor adaptive_avg_pool(CudaTensor x, std::span<const std::size_t> output_size) {
    const Shape out_shape = check::adaptive_avg_pool(x, output_size);
    if (const auto gp = global_pool(x, output_size)) {
        CudaTensor out = empty(out_shape, x.dtype, x.device());
        launch_global_avg_pool(x.dtype, *gp, x.ptr(), out.ptr(), stream(x.device()));
        return out;
    }
    const PoolGeom g = adaptive_geometry(x, Shape(output_size));
    const DType result = x.dtype, cd = float_compute(x.dtype);
    x = contiguous(cast(std::move(x), cd));
    CudaTensor out = empty(out_shape, cd, x.device());
    launch_adaptive_avg_pool(cd, g, x.ptr(), out.ptr(), false, stream(x.device()));
    return cast(std::move(out), result);
}

CudaTensor avg_pool_backward(CudaTensor x, CudaTensor grad, const PoolParams& p) {
    Shape out_shape;
    const PoolGeom g = pool_geometry("avg_pool", x, p, false, out_shape, "_backward");
    check::grad("avg_pool" + std::to_string(p.n) + "d_backward", x, grad, out_shape);
    check_same_device("avg_pool_backward", x, grad);
    const DType result = x.dtype, cd = float_compute(x.dtype);
    grad = contiguous(cast(std::move(grad), cd));
    CudaTensor dx = empty(x.shape, cd, x.device());
    launch_avg_pool_backward(cd, g, grad.ptr(), dx.ptr(), stream(x.device()));
    return cast(std::move(dx), result);
}

CudaTensor adaptive_avg_pool_backward(CudaTensor x, CudaTensor grad, std::size_t n) {
    check::adaptive_avg_pool_backward(x, grad, n);
    check_same_device("adaptive_avg_pool_backward", x, grad);
    Shape os;
    for (std::size_t d = 0; d < n; ++d) os.push_back(grad.shape[2 + d]);
    if (const auto gp = grad.dtype == x.dtype ? global_pool(x, os.dims()) : std::nullopt) {
        // dx in x's layout (channels-last stays so), straight from the [n, c] gradient.
        CudaTensor dx = empty_like_layout(x, x.shape, x.dtype);
        grad = contiguous(std::move(grad));
        launch_global_avg_pool_backward(x.dtype, *gp, grad.ptr(), dx.ptr(), stream(x.device()));
        return dx;
    }
    const PoolGeom g = adaptive_geometry(x, os);
    const DType result = x.dtype, cd = float_compute(x.dtype);
    grad = contiguous(cast(std::move(grad), cd));
    CudaTensor dx = empty(x.shape, cd, x.device());
    launch_adaptive_avg_pool(cd, g, grad.ptr(), dx.ptr(), true, stream(x.device()));
    return cast(std::move(dx), result);
}

namespace {
struct InterpSizes {
    i64 ih, iw, oh, ow;
    Shape out_shape;
};
/// The sizes of an interpolation problem checked by check::interpolate (or its backward).
InterpSizes interp_sizes(const CudaTensor& x, std::span<const std::size_t> output_size,
                         Shape out_shape) {
    const std::size_t n = output_size.size();
    InterpSizes s;
    s.ih = n == 2 ? static_cast<i64>(x.shape[2]) : 1;
    s.iw = static_cast<i64>(x.shape[n + 1]);
    s.oh = n == 2 ? static_cast<i64>(output_size[0]) : 1;
    s.ow = static_cast<i64>(output_size[n - 1]);
    s.out_shape = out_shape;
    return s;
}
}  // namespace

CudaTensor interpolate(CudaTensor x, std::span<const std::size_t> output_size,
                       const InterpolateOptions& o) {
    const InterpSizes s = interp_sizes(x, output_size, check::interpolate(x, output_size, o));
    const DType dt = x.dtype;
    // Nearest on ints moves values through f64, exact for every int up to 2^53.
    const DType cd = is_float(dt) ? float_compute(dt) : DType::F64;
    x = contiguous(cast(std::move(x), cd));
    CudaTensor out = empty(s.out_shape, cd, x.device());
    launch_interpolate(cd, o.mode, o.align_corners, static_cast<i64>(x.shape[0] * x.shape[1]), s.ih,
                       s.iw, s.oh, s.ow, x.ptr(), out.ptr(), false, stream(x.device()));
    return cast(std::move(out), dt);
}

CudaTensor interpolate_backward(CudaTensor x, CudaTensor grad,
                                std::span<const std::size_t> output_size,
                                const InterpolateOptions& o) {
    const InterpSizes s =
        interp_sizes(x, output_size, check::interpolate_backward(x, grad, output_size));
    check_same_device("interpolate_backward", x, grad);
    const DType result = x.dtype, cd = float_compute(x.dtype);
    grad = contiguous(cast(std::move(grad), cd));
    CudaTensor dx = empty(x.shape, cd, x.device());
    launch_interpolate(cd, o.mode, o.align_corners, static_cast<i64>(x.shape[0] * x.shape[1]), s.ih,
                       s.iw, s.oh, s.ow, grad.ptr(), dx.ptr(), true, stream(x.device()));
    return cast(std::move(dx), result);
}

}  // namespace ember::detail::cuda

// ---- CudaBackend's ops on the functions above ----
namespace ember {
namespace k = detail::cuda;

auto CudaBackend::avg_pool1d(FT x, const PoolOptions<1>& o) -> FT {
    return k::avg_pool(std::move(x), k::pool_params(o));
}
auto CudaBackend::avg_pool2d(FT x, const PoolOptions<2>& o) -> FT {
    return k::avg_pool(std::move(x), k::pool_params(o));
}
auto CudaBackend::max_pool1d(FT x, const PoolOptions<1>& o) -> FT {
    return k::max_pool_with_indices(std::move(x), k::pool_params(o), false).first;
}
auto CudaBackend::max_pool2d(FT x, const PoolOptions<2>& o) -> FT {
    return k::max_pool_with_indices(std::move(x), k::pool_params(o), false).first;
}
auto CudaBackend::max_pool1d_with_indices(FT x, const PoolOptions<1>& o) -> std::pair<FT, IT> {
    return k::max_pool_with_indices(std::move(x), k::pool_params(o), true);
}
auto CudaBackend::max_pool2d_with_indices(FT x, const PoolOptions<2>& o) -> std::pair<FT, IT> {
    return k::max_pool_with_indices(std::move(x), k::pool_params(o), true);
}
auto CudaBackend::adaptive_avg_pool1d(FT x, std::size_t n) -> FT {
    const std::size_t s[1] = {n};
    return k::adaptive_avg_pool(std::move(x), s);
}
auto CudaBackend::adaptive_avg_pool2d(FT x, std::array<std::size_t, 2> s) -> FT {
    return k::adaptive_avg_pool(std::move(x), s);
}
auto CudaBackend::interpolate(FT x, std::array<std::size_t, 2> s, const InterpolateOptions& o)
    -> FT {
    return k::interpolate(std::move(x), s, o);
}
auto CudaBackend::avg_pool1d_backward(FT x, FT grad, const PoolOptions<1>& o) -> FT {
    return k::avg_pool_backward(std::move(x), std::move(grad), k::pool_params(o));
}
auto CudaBackend::avg_pool2d_backward(FT x, FT grad, const PoolOptions<2>& o) -> FT {
    return k::avg_pool_backward(std::move(x), std::move(grad), k::pool_params(o));
}
auto CudaBackend::adaptive_avg_pool1d_backward(FT x, FT grad) -> FT {
    return k::adaptive_avg_pool_backward(std::move(x), std::move(grad), 1);
}
auto CudaBackend::adaptive_avg_pool2d_backward(FT x, FT grad) -> FT {
    return k::adaptive_avg_pool_backward(std::move(x), std::move(grad), 2);
}
auto CudaBackend::interpolate_backward(FT x, FT grad, std::array<std::size_t, 2> s,
                                       const InterpolateOptions& o) -> FT {
    return k::interpolate_backward(std::move(x), std::move(grad), s, o);
}

}  // namespace ember
