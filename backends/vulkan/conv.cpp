// Convolutions (shaders/conv.comp): im2col + the backend's matmul for 1-, 2- and 3-d
// convolution and its weight gradient, a direct kernel for the transposed convolution, and
// torchvision's deformable convolution (bilinear im2col + matmul). Every spatial rank is
// handled in 3-d form with leading unit dims.
#include <string>

#include "kernels.hpp"

namespace ember::detail::vk {

namespace {
constexpr std::uint32_t kLocal = 256;

/// Spatial geometry in 3-d form.
struct Geo {
    std::array<i64, 3> in{1, 1, 1}, k{1, 1, 1}, out{1, 1, 1}, stride{1, 1, 1}, pad{0, 0, 0},
        dil{1, 1, 1};
    i64 k_size() const { return k[0] * k[1] * k[2]; }
    i64 out_size() const { return out[0] * out[1] * out[2]; }
};

std::string op_name(const char* base, std::size_t n) {
    return std::string(base) + std::to_string(n) + "d";
}

void check_common(const std::string& op, const VT& x, const VT& w, const std::optional<VT>& bias,
                  std::size_t n) {
    EMBER_CHECK(x.shape.rank() == n + 2, Shape, op, ": input must have rank ", n + 2,
                " [N, C, spatial...], got ", x.shape);
    EMBER_CHECK(w.shape.rank() == n + 2, Shape, op, ": weight must have rank ", n + 2, ", got ",
                w.shape);
    EMBER_CHECK(is_float(x.dtype), DType, op, ": needs a float input, got ", dtype_name(x.dtype),
                " ", x.shape);
    EMBER_CHECK(w.dtype == x.dtype, DType, op, ": weight dtype ", dtype_name(w.dtype),
                " differs from input dtype ", dtype_name(x.dtype));
    if (bias)
        EMBER_CHECK(bias->dtype == x.dtype, DType, op, ": bias dtype ", dtype_name(bias->dtype),
                    " differs from input dtype ", dtype_name(x.dtype));
}

void check_options(const std::string& op, const ConvParams& p, const Shape& x, const Shape& w) {
    for (std::size_t d = 0; d < p.n; ++d) {
        EMBER_CHECK(p.stride[d] >= 1, Argument, op, ": stride must be >= 1 in every dim (input ", x,
                    ", weight ", w, ")");
        EMBER_CHECK(p.dilation[d] >= 1, Argument, op,
                    ": dilation must be >= 1 in every dim (input ", x, ", weight ", w, ")");
        EMBER_CHECK(w[2 + d] >= 1, Shape, op, ": kernel dims must be >= 1, weight ", w);
    }
    EMBER_CHECK(p.groups >= 1, Argument, op, ": groups must be >= 1 (input ", x, ", weight ", w,
                ")");
}

/// The forward geometry of conv(x, w) (errors name `op`); fills the output shape.
Geo conv_geometry(const std::string& op, const ConvParams& p, const Shape& x, const Shape& w,
                  Shape& out_shape) {
    Geo g;
    out_shape = Shape{x[0], w[0]};
    for (std::size_t d = 0; d < p.n; ++d) {
        const std::size_t s = 3 - p.n + d;
        g.in[s] = static_cast<i64>(x[2 + d]);
        g.k[s] = static_cast<i64>(w[2 + d]);
        g.stride[s] = static_cast<i64>(p.stride[d]);
        g.pad[s] = static_cast<i64>(p.padding[d]);
        g.dil[s] = static_cast<i64>(p.dilation[d]);
        const i64 span = g.in[s] + 2 * g.pad[s] - g.dil[s] * (g.k[s] - 1) - 1;
        EMBER_CHECK(span >= 0, Shape, op, ": kernel ", w, " (dilation ", p.dilation[d],
                    ") is larger than the padded input ", x, " (padding ", p.padding[d],
                    ") in spatial dim ", d);
        g.out[s] = span / g.stride[s] + 1;
        out_shape.push_back(static_cast<std::size_t>(g.out[s]));
    }
    return g;
}

/// Parameter words shared by conv.comp's modes.
Params conv_params_words(i64 total, const VT& x, const Geo& g, std::size_t n_spatial) {
    Params p;
    p.push(total);
    p.push(static_cast<i64>(x.shape[0]));
    p.push(static_cast<i64>(x.shape[1]));
    for (auto* a : {&g.in, &g.k, &g.out, &g.stride, &g.pad, &g.dil})
        for (int i = 0; i < 3; ++i) p.push((*a)[i]);
    p.push(x.strides[0]);
    p.push(x.strides[1]);
    for (std::size_t s = 0; s < 3; ++s) {
        const std::size_t first = 3 - n_spatial;
        p.push(s < first ? 0 : x.strides[2 + s - first]);
    }
    p.push(x.offset);
    return p;
}

/// cols [N, C * K, P] of x for geometry g.
VT im2col(const VT& x, const Geo& g, std::size_t n_spatial) {
    const std::size_t N = x.shape[0], C = x.shape[1];
    const auto K = static_cast<std::size_t>(g.k_size()), P = static_cast<std::size_t>(g.out_size());
    VT cols = empty(Shape{N, C * K, P}, DType::F32, x.device);
    const std::size_t total = cols.num_elements();
    if (total == 0) return cols;
    Params p = conv_params_words(static_cast<i64>(total), x, g, n_spatial);
    for (int i = 0; i < 6; ++i) p.push(0);
    Context& cx = ctx(x);
    const std::int32_t spec[] = {0};
    std::lock_guard lock(cx.mu);
    const Pipeline& pipe = cx.pipeline("conv", spec, 4, kLocal);
    const Binding o = bind(cols, true);
    const Binding bs[] = {o, bind(x, false), o, o};
    cx.dispatch(pipe, bs, p.w, (total + kLocal - 1) / kLocal);
    return cols;
}

/// out [N, C_out, P] = w [G, C_out/G, Cg*K] @ cols [N, G, Cg*K, P] (+ bias), reshaped.
VT conv_from_cols(VT cols, VT w, const std::optional<VT>& bias, std::size_t groups,
                  const Shape& out_shape) {
    const std::size_t N = cols.shape[0], CK = cols.shape[1], P = cols.shape[2];
    const std::size_t cout = w.shape[0];
    cols = reshape(std::move(cols), Shape{N, groups, CK / groups, P});
    w = reshape(contiguous(std::move(w)), Shape{groups, cout / groups, CK / groups});
    VT out = reshape(matmul(std::move(w), std::move(cols)), out_shape);
    if (bias) {
        Shape bs = Shape::filled(out_shape.rank(), 1);
        bs[1] = cout;
        out = binary(BinaryOp::Add, std::move(out), reshape(*bias, bs));
    }
    return out;
}
}  // namespace

VT conv(VT x, VT w, std::optional<VT> bias, const ConvParams& p) {
    EMBER_CHECK(p.n >= 1 && p.n <= 3, Argument, "conv: 1, 2 or 3 spatial dims are supported, got ",
                p.n, " (input ", x.shape, ")");
    const std::string op = op_name("conv", p.n);
    check_common(op, x, w, bias, p.n);
    check_options(op, p, x.shape, w.shape);
    const std::size_t cin = x.shape[1], cout = w.shape[0];
    EMBER_CHECK(cin % p.groups == 0 && cout % p.groups == 0, Shape, op, ": in channels (", cin,
                ") and out channels (", cout, ") must be divisible by groups (", p.groups,
                "); input ", x.shape, ", weight ", w.shape);
    EMBER_CHECK(w.shape[1] == cin / p.groups, Shape, op, ": weight ", w.shape, " expects ",
                w.shape[1] * p.groups, " input channels, input ", x.shape, " has ", cin,
                " (groups ", p.groups, ")");
    if (bias)
        EMBER_CHECK(bias->shape.rank() == 1 && bias->shape[0] == cout, Shape, op, ": bias ",
                    bias->shape, " must be [", cout, "] for weight ", w.shape);
    Shape out_shape;
    const Geo g = conv_geometry(op, p, x.shape, w.shape, out_shape);
    if (out_shape.num_elements() == 0) return empty(out_shape, x.dtype, x.device);
    const DType dt = x.dtype;
    VT out = conv_from_cols(im2col(x, g, p.n), cast(std::move(w), DType::F32),
                            bias ? std::optional<VT>(cast(*bias, DType::F32)) : std::nullopt,
                            p.groups, out_shape);
    return cast(std::move(out), dt);
}

VT conv_transpose(VT x, VT w, std::optional<VT> bias, const ConvParams& p) {
    EMBER_CHECK(p.n >= 1 && p.n <= 3, Argument,
                "conv_transpose: 1, 2 or 3 spatial dims are supported, got ", p.n, " (input ",
                x.shape, ")");
    const std::string op = op_name("conv_transpose", p.n);
    check_common(op, x, w, bias, p.n);
    check_options(op, p, x.shape, w.shape);
    const std::size_t cin = x.shape[1];
    EMBER_CHECK(w.shape[0] == cin, Shape, op, ": weight ", w.shape, " must have ", cin,
                " rows (the input channels of ", x.shape, ")");
    EMBER_CHECK(cin % p.groups == 0, Shape, op, ": in channels (", cin,
                ") must be divisible by groups (", p.groups, "); input ", x.shape, ", weight ",
                w.shape);
    const std::size_t cout = w.shape[1] * p.groups;
    if (bias)
        EMBER_CHECK(bias->shape.rank() == 1 && bias->shape[0] == cout, Shape, op, ": bias ",
                    bias->shape, " must be [", cout, "] for weight ", w.shape, " and groups ",
                    p.groups);
    Geo g;
    Shape out_shape{x.shape[0], cout};
    for (std::size_t d = 0; d < p.n; ++d) {
        const std::size_t s = 3 - p.n + d;
        EMBER_CHECK(p.padding_out[d] < p.stride[d] || p.padding_out[d] < p.dilation[d], Argument,
                    op, ": output padding (", p.padding_out[d],
                    ") must be smaller than either stride (", p.stride[d], ") or dilation (",
                    p.dilation[d], "); input ", x.shape);
        g.in[s] = static_cast<i64>(x.shape[2 + d]);
        g.k[s] = static_cast<i64>(w.shape[2 + d]);
        g.stride[s] = static_cast<i64>(p.stride[d]);
        g.pad[s] = static_cast<i64>(p.padding[d]);
        g.dil[s] = static_cast<i64>(p.dilation[d]);
        const i64 o = (g.in[s] - 1) * g.stride[s] - 2 * g.pad[s] + g.dil[s] * (g.k[s] - 1) +
                      static_cast<i64>(p.padding_out[d]) + 1;
        EMBER_CHECK(o >= 1, Shape, op, ": output size ", o, " in spatial dim ", d,
                    " is not positive (input ", x.shape, ", weight ", w.shape, ", padding ",
                    p.padding[d], ")");
        g.out[s] = o;
        out_shape.push_back(static_cast<std::size_t>(o));
    }
    const DType dt = x.dtype;
    VT out = empty(out_shape, DType::F32, x.device);
    const std::size_t total = out.num_elements();
    if (total == 0) return cast(std::move(out), dt);
    x = cast(std::move(x), DType::F32);
    w = contiguous(cast(std::move(w), DType::F32));
    std::optional<VT> b;
    if (bias) b = contiguous(cast(*bias, DType::F32));  // read at offset + co
    Params pw = conv_params_words(static_cast<i64>(total), x, g, p.n);
    pw.push(static_cast<i64>(cout));
    pw.push(static_cast<i64>(p.groups));
    pw.push(b ? 1 : 0);
    pw.push(w.offset);
    pw.push(b ? b->offset : 0);
    pw.push(1);
    Context& cx = ctx(x);
    const std::int32_t spec[] = {1};
    std::lock_guard lock(cx.mu);
    const Pipeline& pipe = cx.pipeline("conv", spec, 4, kLocal);
    const Binding bs[] = {bind(out, true), bind(x, false), bind(w, false),
                          b ? bind(*b, false) : bind(w, false)};
    cx.dispatch(pipe, bs, pw.w, (total + kLocal - 1) / kLocal);
    return cast(std::move(out), dt);
}

VT conv_weight_backward(VT x, VT grad, const Shape& weight_shape, const ConvParams& p) {
    EMBER_CHECK(p.n >= 1 && p.n <= 3, Argument,
                "conv_weight_backward: 1, 2 or 3 spatial dims are supported, got ", p.n, " (input ",
                x.shape, ")");
    const std::string op = "conv" + std::to_string(p.n) + "d_weight_backward";
    const std::size_t n = p.n;
    EMBER_CHECK(x.shape.rank() == n + 2, Shape, op, ": input must have rank ", n + 2,
                " [N, C, spatial...], got ", x.shape);
    EMBER_CHECK(weight_shape.rank() == n + 2, Shape, op, ": weight shape must have rank ", n + 2,
                ", got ", weight_shape);
    EMBER_CHECK(grad.shape.rank() == n + 2, Shape, op, ": output gradient must have rank ", n + 2,
                ", got ", grad.shape, " (input ", x.shape, ", weight ", weight_shape, ")");
    EMBER_CHECK(is_float(x.dtype) && is_float(grad.dtype), DType, op, ": needs float tensors, got ",
                dtype_name(x.dtype), " and ", dtype_name(grad.dtype));
    check_options(op, p, x.shape, weight_shape);
    const std::size_t cin = x.shape[1], cout = weight_shape[0];
    EMBER_CHECK(cin % p.groups == 0 && cout % p.groups == 0, Shape, op, ": in channels (", cin,
                ") and out channels (", cout, ") must be divisible by groups (", p.groups,
                "); input ", x.shape, ", weight ", weight_shape);
    EMBER_CHECK(weight_shape[1] * p.groups == cin, Shape, op, ": weight ", weight_shape,
                " expects ", weight_shape[1] * p.groups, " input channels, input ", x.shape,
                " has ", cin, " (groups ", p.groups, ")");
    Shape out_shape;
    const Geo g = conv_geometry(op, p, x.shape, weight_shape, out_shape);
    EMBER_CHECK(grad.shape == out_shape, Shape, op, ": output gradient ", grad.shape,
                " does not match the convolution's output ", out_shape, " (input ", x.shape,
                ", weight ", weight_shape, ")");
    const DType dt = x.dtype;
    const std::size_t N = x.shape[0], G = p.groups;
    if (N == 0 || out_shape.num_elements() == 0) return full(weight_shape, Scalar(0), dt, x.device);
    VT cols = im2col(cast(std::move(x), DType::F32), g, p.n);
    const std::size_t CK = cols.shape[1], P = cols.shape[2];
    cols = reshape(std::move(cols), Shape{N, G, CK / G, P});
    VT gr = reshape(contiguous(cast(std::move(grad), DType::F32)), Shape{N, G, cout / G, P});
    // dW[g] = Σ_n grad[n, g] @ cols[n, g]ᵀ.
    const std::size_t perm[] = {0, 1, 3, 2};
    VT gw = matmul(std::move(gr), permute(std::move(cols), perm));
    gw = reduce_dim(ReduceOp::Sum, std::move(gw), 0);
    return cast(reshape(std::move(gw), weight_shape), dt);
}

}  // namespace ember::detail::vk
