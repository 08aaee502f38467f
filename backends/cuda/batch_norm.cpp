// Batch norm on CUDA (CudaBackend::float_batch_norm, _backward, _eval, and the ReLU-fused
// float_batch_norm_relu and its backward): checks, the dtype rules (data in its own dtype,
// per-channel vectors and statistics in f32, f64 for f64 data) and the launches of
// batch_norm.cu. The fused form's forward adds an optional residual and applies the ReLU in
// the normalising pass; its backward masks dy by the output's sign inside both backward passes
// and writes the masked gradient out once for the residual: two elementwise passes (the ReLU
// and its gradient) and, with a residual, the addition fewer a layer.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "batch_norm.hpp"
#include "graph.hpp"
#include "ops.hpp"

namespace ember::detail::cuda {
namespace {

DType acc_dtype(DType t) {
    return t == DType::F64 ? DType::F64 : DType::F32;
}

/// The [N, C, HW] geometry of x, after checking every per-channel vector is [C] on x's device.
BatchNormShape geometry(std::string_view op, const CudaTensor& x,
                        std::initializer_list<const CudaTensor*> channels) {
    EMBER_CHECK(x.shape.rank() >= 2, Shape, op, ": the input needs a batch and a channel dim, ",
                "got shape ", x.shape);
    EMBER_CHECK(is_float(x.dtype), DType, op, ": needs a float input, got ", dtype_name(x.dtype));
    BatchNormShape g;
    g.n = static_cast<std::int64_t>(x.shape[0]);
    g.c = static_cast<std::int64_t>(x.shape[1]);
    g.hw = 1;
    for (std::size_t d = 2; d < x.shape.rank(); ++d) g.hw *= static_cast<std::int64_t>(x.shape[d]);
    for (const CudaTensor* t : channels) {
        EMBER_CHECK(t->shape.rank() == 1 && static_cast<std::int64_t>(t->shape[0]) == g.c, Shape,
                    op, ": per-channel operand of shape ", t->shape, " does not match the ", g.c,
                    " channels of input ", x.shape);
        EMBER_CHECK(is_float(t->dtype), DType, op, ": per-channel operands must be float, got ",
                    dtype_name(t->dtype));
        check_same_device(op.data(), x, *t);
    }
    return g;
}

/// Whether x's data (dense) may be read four elements at a time.
bool quad_aligned(const CudaTensor& x, std::int64_t hw) {
    const auto bytes = static_cast<std::uintptr_t>(4 * dtype_size(x.dtype));
    return hw % 4 == 0 && reinterpret_cast<std::uintptr_t>(x.ptr()) % bytes == 0;
}

/// Whether one block's share of a channel fits the kernels' 32-bit element counter.
bool split_fits(const BatchNormShape& g) {
    if (g.channels_last) return true;  // its kernels count rows in 64 bits
    const std::int64_t per_split = (g.n + g.splits - 1) / g.splits * g.hw;
    return per_split < (std::int64_t{1} << 31);
}

CudaTensor per_channel(CudaTensor t, DType a) {
    return contiguous(cast(std::move(t), a));
}

/// EMBER_CUDA_BATCH_NORM=0 declines every batch norm (nn::BatchNorm then composes tensor ops),
/// to compare both paths without rebuilding. Read at each call, so a test can compare them
/// layer by layer in one process.
bool kernels_enabled() {
    const char* v = std::getenv("EMBER_CUDA_BATCH_NORM");
    return v == nullptr || std::string_view(v) != "0";
}

/// EMBER_CUDA_BN_MASK=recompute lets the ReLU-fused backward recompute its mask from x where
/// the forward had no residual (the 16-byte channels-last kernels); otherwise, the default, it
/// reads the forward's output. Opt-in until measured: the one A/B so far (2026-11-30, H200,
/// ResNet-18 bf16 replayed) was of two runs whose cuDNN picks differed, 3.725 ms recomputing
/// against 3.627 reading. Read at each call, so a test can switch it.
bool mask_recompute() {
    const char* v = std::getenv("EMBER_CUDA_BN_MASK");
    return v != nullptr && std::string_view(v) == "recompute";
}

}  // namespace

namespace {
/// Training-mode batch norm; with `relu`, y = max(bn(x) + residual, 0) (residual optional).
std::optional<std::array<CudaTensor, 5>> batch_norm_impl(std::string_view op, CudaTensor x,
                                                         CudaTensor gamma, CudaTensor beta,
                                                         CudaTensor rm, CudaTensor rv,
                                                         const BatchNormScalars& s, bool relu,
                                                         std::optional<CudaTensor> residual) {
    if (!kernels_enabled()) return std::nullopt;
    BatchNormShape g = geometry(op, x, {&gamma, &beta, &rm, &rv});
    if (residual) {
        EMBER_CHECK(residual->shape == x.shape, Shape, op, ": residual of shape ", residual->shape,
                    " for an input of shape ", x.shape);
        check_same_device(op.data(), x, *residual);
    }
    EMBER_CHECK(g.n * g.hw > 1, Argument, op, ": training needs more than one value per channel, ",
                "got input of shape ", x.shape);
    if (g.c == 0) return std::nullopt;  // nothing to normalise: the composed path's empty result
    // Channels-last data stays so (its output too); any other layout is made contiguous.
    g.channels_last = is_channels_last(x);
    g.splits = batch_norm_splits(g.n, g.c, g.hw, g.channels_last, dtype_size(x.dtype));
    if (!split_fits(g)) return std::nullopt;
    const DType a = acc_dtype(x.dtype);
    const DType rm_dtype = rm.dtype, rv_dtype = rv.dtype;
    const void* rm_own = rm.ptr();
    const void* rv_own = rv.ptr();
    gamma = per_channel(std::move(gamma), a);
    beta = per_channel(std::move(beta), a);
    rm = per_channel(std::move(rm), a);
    rv = per_channel(std::move(rv), a);
    // Inside a captured step the running statistics are updated in place, as the optimizer's
    // state is (graph.cpp): the next replay reads them where this one wrote them. Eagerly they
    // are new tensors, so a handle kept on the old ones keeps its values.
    const bool in_place =
        capturing(x.device()) != nullptr && rm.ptr() == rm_own && rv.ptr() == rv_own;
    if (!g.channels_last) x = contiguous(std::move(x));
    g.vec4 = quad_aligned(x, g.hw);
    g.relu = relu;
    if (residual) {
        // Read as x is: its dtype, its layout.
        *residual = to_layout_of(cast(std::move(*residual), x.dtype), x);
        g.residual = residual->ptr();
        g.vec4 = g.vec4 && quad_aligned(*residual, g.hw);
    }
    const int dev = x.device();
    const Shape cs{static_cast<std::size_t>(g.c)};
    CudaTensor part = empty(Shape{static_cast<std::size_t>(2 * g.c * g.splits)}, a, dev);
    CudaTensor mean = empty(cs, a, dev), rstd = empty(cs, a, dev);
    CudaTensor rm_out = in_place ? reuse(rm) : empty(cs, a, dev);
    CudaTensor rv_out = in_place ? reuse(rv) : empty(cs, a, dev);
    // x may be overwritten by y (each element is read before it is written, by one thread).
    CudaTensor y = x.is_unique() ? reuse(x) : empty_like_layout(x, x.shape, x.dtype);
    launch_batch_norm_forward(x.dtype, g, x.ptr(), gamma.ptr(), beta.ptr(), rm.ptr(), rv.ptr(),
                              s.epsilon, s.momentum, part.ptr(), mean.ptr(), rstd.ptr(),
                              rm_out.ptr(), rv_out.ptr(), y.ptr(), stream(dev));
    return std::array<CudaTensor, 5>{std::move(y), std::move(mean), std::move(rstd),
                                     cast(std::move(rm_out), rm_dtype),
                                     cast(std::move(rv_out), rv_dtype)};
}

/// The backward pass; with `out` (the ReLU-fused forward's y), dy masked by out > 0, and with
/// `residual_grad` that masked gradient returned as the fourth result. With `beta` too (a
/// forward without a residual), the channels-last kernels recompute the mask from x instead of
/// reading `out` (one read of the activation less in each of the two passes).
std::pair<std::array<CudaTensor, 3>, std::optional<CudaTensor>> batch_norm_backward_impl(
    std::string_view op, CudaTensor x, CudaTensor dy, CudaTensor gamma, CudaTensor mean,
    CudaTensor rstd, std::optional<CudaTensor> out, bool residual_grad,
    std::optional<CudaTensor> beta = std::nullopt) {
    BatchNormShape g = geometry(op, x, {&gamma, &mean, &rstd});
    if (beta) {
        EMBER_CHECK(beta->shape == gamma.shape, Shape, op, ": beta of shape ", beta->shape,
                    " for gamma of shape ", gamma.shape);
        check_same_device(op.data(), x, *beta);
    }
    EMBER_CHECK(dy.shape == x.shape, Shape, op, ": gradient of shape ", dy.shape,
                " for an input of shape ", x.shape);
    check_same_device(op.data(), x, dy);
    if (out) {
        EMBER_CHECK(out->shape == x.shape, Shape, op, ": output of shape ", out->shape,
                    " for an input of shape ", x.shape);
        check_same_device(op.data(), x, *out);
    }
    const DType a = acc_dtype(x.dtype), gamma_dtype = gamma.dtype;
    const int dev = x.device();
    const Shape cs{static_cast<std::size_t>(g.c)};
    if (x.num_elements() == 0) {
        std::optional<CudaTensor> dr;
        if (residual_grad) dr = empty(x.shape, x.dtype, dev);
        return {{empty(x.shape, x.dtype, dev), full(cs, Scalar(0.0), gamma_dtype, dev),
                 full(cs, Scalar(0.0), gamma_dtype, dev)},
                std::move(dr)};
    }
    g.channels_last = is_channels_last(x);
    g.splits = batch_norm_splits(g.n, g.c, g.hw, g.channels_last, dtype_size(x.dtype));
    EMBER_CHECK(split_fits(g), Shape, op, ": input of shape ", x.shape,
                " has too many values per channel");
    gamma = per_channel(std::move(gamma), a);
    mean = per_channel(std::move(mean), a);
    rstd = per_channel(std::move(rstd), a);
    // dy walked as x is: in x's layout.
    if (!g.channels_last) x = contiguous(std::move(x));
    dy = to_layout_of(cast(std::move(dy), x.dtype), x);
    g.vec4 = quad_aligned(x, g.hw) && quad_aligned(dy, g.hw);
    if (out) {
        *out = to_layout_of(cast(std::move(*out), x.dtype), x);
        g.relu = true;
        g.out = out->ptr();
        g.vec4 = g.vec4 && quad_aligned(*out, g.hw);
        if (beta && mask_recompute()) {
            beta = per_channel(std::move(*beta), a);
            g.beta = beta->ptr();
        }
    }
    CudaTensor part = empty(Shape{static_cast<std::size_t>(2 * g.c * g.splits)}, a, dev);
    CudaTensor coef = empty(Shape{static_cast<std::size_t>(3 * g.c)}, a, dev);
    CudaTensor dgamma = empty(cs, a, dev), dbeta = empty(cs, a, dev);
    // dx (or, with a residual, its gradient) may take dy's buffer: the last kernel reads each
    // element before writing it.
    std::optional<CudaTensor> dr;
    if (residual_grad) {
        dr = dy.is_unique() ? reuse(dy) : empty_like_layout(x, x.shape, x.dtype);
        g.dresidual = dr->ptr();
    }
    CudaTensor dx =
        !residual_grad && dy.is_unique() ? reuse(dy) : empty_like_layout(x, x.shape, x.dtype);
    launch_batch_norm_backward(x.dtype, g, x.ptr(), dy.ptr(), gamma.ptr(), mean.ptr(), rstd.ptr(),
                               part.ptr(), coef.ptr(), dgamma.ptr(), dbeta.ptr(), dx.ptr(),
                               stream(dev));
    return {
        {std::move(dx), cast(std::move(dgamma), gamma_dtype), cast(std::move(dbeta), gamma_dtype)},
        std::move(dr)};
}
}  // namespace

std::optional<std::array<CudaTensor, 5>> batch_norm(CudaTensor x, CudaTensor gamma, CudaTensor beta,
                                                    CudaTensor rm, CudaTensor rv,
                                                    const BatchNormScalars& s) {
    return batch_norm_impl("batch_norm", std::move(x), std::move(gamma), std::move(beta),
                           std::move(rm), std::move(rv), s, false, std::nullopt);
}

std::array<CudaTensor, 3> batch_norm_backward(CudaTensor x, CudaTensor dy, CudaTensor gamma,
                                              CudaTensor mean, CudaTensor rstd) {
    return batch_norm_backward_impl("batch_norm_backward", std::move(x), std::move(dy),
                                    std::move(gamma), std::move(mean), std::move(rstd),
                                    std::nullopt, false)
        .first;
}

std::optional<CudaTensor> batch_norm_eval(CudaTensor x, CudaTensor gamma, CudaTensor beta,
                                          CudaTensor mean, CudaTensor var, double eps) {
    constexpr std::string_view op = "batch_norm_eval";
    if (!kernels_enabled()) return std::nullopt;
    BatchNormShape g = geometry(op, x, {&gamma, &beta, &mean, &var});
    const DType a = acc_dtype(x.dtype);
    gamma = per_channel(std::move(gamma), a);
    beta = per_channel(std::move(beta), a);
    mean = per_channel(std::move(mean), a);
    var = per_channel(std::move(var), a);
    g.channels_last = is_channels_last(x);
    if (!g.channels_last) x = contiguous(std::move(x));
    g.vec4 = quad_aligned(x, g.hw);
    const int dev = x.device();
    CudaTensor y = x.is_unique() ? reuse(x) : empty_like_layout(x, x.shape, x.dtype);
    launch_batch_norm_eval(x.dtype, g, x.ptr(), gamma.ptr(), beta.ptr(), mean.ptr(), var.ptr(), eps,
                           y.ptr(), stream(dev));
    return y;
}

}  // namespace ember::detail::cuda

namespace ember {
namespace k = detail::cuda;

auto CudaBackend::float_batch_norm(FT x, FT gamma, FT beta, FT running_mean, FT running_var,
                                   const BatchNormScalars& s) -> std::optional<std::array<FT, 5>> {
    return k::batch_norm(std::move(x), std::move(gamma), std::move(beta), std::move(running_mean),
                         std::move(running_var), s);
}
auto CudaBackend::float_batch_norm_backward(FT x, FT grad, FT gamma, FT mean, FT rstd)
    -> std::array<FT, 3> {
    return k::batch_norm_backward(std::move(x), std::move(grad), std::move(gamma), std::move(mean),
                                  std::move(rstd));
}
auto CudaBackend::float_batch_norm_eval(FT x, FT gamma, FT beta, FT mean, FT var, double eps)
    -> std::optional<FT> {
    return k::batch_norm_eval(std::move(x), std::move(gamma), std::move(beta), std::move(mean),
                              std::move(var), eps);
}
auto CudaBackend::float_batch_norm_relu(FT x, FT gamma, FT beta, FT running_mean, FT running_var,
                                        std::optional<FT> residual, const BatchNormScalars& s)
    -> std::optional<std::array<FT, 5>> {
    return k::batch_norm_impl("batch_norm_relu", std::move(x), std::move(gamma), std::move(beta),
                              std::move(running_mean), std::move(running_var), s, true,
                              std::move(residual));
}
auto CudaBackend::float_batch_norm_relu_backward(FT x, FT y, FT grad, FT gamma, FT mean, FT rstd,
                                                 bool residual, std::optional<FT> beta)
    -> BatchNormReluGrads<FT> {
    auto [d, dr] = k::batch_norm_backward_impl(
        "batch_norm_relu_backward", std::move(x), std::move(grad), std::move(gamma),
        std::move(mean), std::move(rstd), std::move(y), residual, std::move(beta));
    return {std::move(d[0]), std::move(d[1]), std::move(d[2]), std::move(dr)};
}

}  // namespace ember
