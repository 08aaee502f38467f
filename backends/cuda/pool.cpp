// Pooling and interpolation on the GPU with PyTorch's geometry (output sizes, window clipping,
// divisors, index conventions), validated on the host before any launch.
#include <string>

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

PoolGeom adaptive_geometry(const CudaTensor& x, const Shape& out_size, const char* op) {
    const std::size_t n = out_size.rank();
    EMBER_CHECK(n >= 1 && n <= 3, Argument, op, ": 1, 2 or 3 output dims are supported, got ", n,
                " (input ", x.shape, ")");
    EMBER_CHECK(x.shape.rank() == n + 2, Shape, op, ": input must have rank ", n + 2,
                " [N, C, spatial...], got ", x.shape, " for output size ", out_size);
    EMBER_CHECK(is_float(x.dtype), DType, op, ": needs a float input, got ", dtype_name(x.dtype),
                " ", x.shape);
    PoolGeom g;
    g.planes = static_cast<i64>(x.shape[0] * x.shape[1]);
    for (std::size_t d = 0; d < n; ++d) {
        const std::size_t s = 3 - n + d;
        EMBER_CHECK(x.shape[2 + d] >= 1 || out_size[d] == 0, Shape, op,
                    ": input spatial dims must be non-empty, got ", x.shape);
        g.in[s] = static_cast<i64>(x.shape[2 + d]);
        g.out[s] = static_cast<i64>(out_size[d]);
    }
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
    const Shape os(output_size);
    const PoolGeom g = adaptive_geometry(x, os, "adaptive_avg_pool");
    Shape out_shape{x.shape[0], x.shape[1]};
    for (std::size_t d : output_size) out_shape.push_back(d);
    const DType result = x.dtype, cd = float_compute(x.dtype);
    x = contiguous(cast(std::move(x), cd));
    CudaTensor out = empty(out_shape, cd, x.device());
    launch_adaptive_avg_pool(cd, g, x.ptr(), out.ptr(), false, stream(x.device()));
    return cast(std::move(out), result);
}

CudaTensor avg_pool_backward(CudaTensor x, CudaTensor grad, const PoolParams& p) {
    Shape out_shape;
    const PoolGeom g = pool_geometry("avg_pool", x, p, false, out_shape, "_backward");
    EMBER_CHECK(grad.shape == out_shape, Shape, "avg_pool", p.n, "d_backward: grad ", grad.shape,
                " must be ", out_shape, " for input ", x.shape);
    const DType result = x.dtype, cd = float_compute(x.dtype);
    grad = contiguous(cast(std::move(grad), cd));
    CudaTensor dx = empty(x.shape, cd, x.device());
    launch_avg_pool_backward(cd, g, grad.ptr(), dx.ptr(), stream(x.device()));
    return cast(std::move(dx), result);
}

CudaTensor adaptive_avg_pool_backward(CudaTensor x, CudaTensor grad, std::size_t n) {
    EMBER_CHECK(grad.shape.rank() == n + 2, Shape, "adaptive_avg_pool", n,
                "d_backward: grad must have rank ", n + 2, ", got ", grad.shape);
    Shape os;
    for (std::size_t d = 0; d < n; ++d) os.push_back(grad.shape[2 + d]);
    const PoolGeom g = adaptive_geometry(x, os, "adaptive_avg_pool_backward");
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
InterpSizes interp_sizes(const CudaTensor& x, std::span<const std::size_t> output_size) {
    const std::size_t n = output_size.size();
    const Shape os(output_size);
    EMBER_CHECK(n == 1 || n == 2, Argument,
                "interpolate: output size must have 1 ([N, C, L] input) or 2 ([N, C, H, W]) dims, "
                "got ",
                os, " for input ", x.shape);
    EMBER_CHECK(x.shape.rank() == n + 2, Shape, "interpolate: input must have rank ", n + 2,
                " for output size ", os, ", got ", x.shape);
    InterpSizes s;
    s.ih = n == 2 ? static_cast<i64>(x.shape[2]) : 1;
    s.iw = static_cast<i64>(x.shape[n + 1]);
    s.oh = n == 2 ? static_cast<i64>(output_size[0]) : 1;
    s.ow = static_cast<i64>(output_size[n - 1]);
    EMBER_CHECK(s.oh >= 1 && s.ow >= 1, Argument, "interpolate: output size must be positive, got ",
                os, " for input ", x.shape);
    EMBER_CHECK(s.ih >= 1 && s.iw >= 1, Shape,
                "interpolate: input spatial dims must be non-empty, got ", x.shape);
    s.out_shape = Shape{x.shape[0], x.shape[1]};
    for (std::size_t d = 0; d < n; ++d) s.out_shape.push_back(output_size[d]);
    return s;
}
}  // namespace

CudaTensor interpolate(CudaTensor x, std::span<const std::size_t> output_size,
                       const InterpolateOptions& o) {
    const InterpSizes s = interp_sizes(x, output_size);
    const DType dt = x.dtype;
    EMBER_CHECK(dt != DType::Bool, DType, "interpolate: bool input ", x.shape, " is not supported");
    EMBER_CHECK(o.mode == InterpolateMode::Nearest || is_float(dt), DType,
                "interpolate: ", o.mode == InterpolateMode::Bilinear ? "bilinear" : "bicubic",
                " mode needs a float input, got ", dtype_name(dt), " ", x.shape);
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
    const InterpSizes s = interp_sizes(x, output_size);
    EMBER_CHECK(grad.shape == s.out_shape, Shape, "interpolate_backward: grad ", grad.shape,
                " must be ", s.out_shape);
    EMBER_CHECK(is_float(x.dtype), DType, "interpolate_backward: needs a float input, got ",
                dtype_name(x.dtype));
    const DType result = x.dtype, cd = float_compute(x.dtype);
    grad = contiguous(cast(std::move(grad), cd));
    CudaTensor dx = empty(x.shape, cd, x.device());
    launch_interpolate(cd, o.mode, o.align_corners, static_cast<i64>(x.shape[0] * x.shape[1]), s.ih,
                       s.iw, s.oh, s.ow, grad.ptr(), dx.ptr(), true, stream(x.device()));
    return cast(std::move(dx), result);
}

}  // namespace ember::detail::cuda
