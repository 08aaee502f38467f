// The shared op checks of include/ember/tensor/check.hpp: one definition of each op's rules and
// messages, called by every backend.
#include "ember/tensor/check.hpp"

#include <algorithm>
#include <string>

namespace ember::detail::check {

namespace {

std::string op_name(const char* base, std::size_t n) {
    return std::string(base) + std::to_string(n) + "d";
}

/// The operands every convolution shares: ranks, a float input, matching dtypes.
void conv_operands(const std::string& op, const Operand& x, const Operand& w,
                   const std::optional<Operand>& bias, std::size_t n) {
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

/// Strides, dilations, kernel dims and groups.
void conv_options(const std::string& op, const ConvParams& p, const Shape& x, const Shape& w) {
    for (std::size_t d = 0; d < p.n; ++d) {
        EMBER_CHECK(p.stride[d] >= 1, Argument, op, ": stride must be >= 1 in every dim (input ", x,
                    ", weight ", w, ")");
        EMBER_CHECK(p.dilation[d] >= 1, Argument, op,
                    ": dilation must be >= 1 in every dim (input ", x, ", weight ", w, ")");
        EMBER_CHECK(w[2 + d] >= 1, Shape, op, ": kernel dims must be >= 1, weight ", w);
        // Bounded like a dim, so that the signed 64-bit output-size arithmetic cannot wrap.
        EMBER_CHECK(p.stride[d] <= kMaxElements && p.padding[d] <= kMaxElements &&
                        p.dilation[d] <= kMaxElements,
                    Argument, op, ": stride ", p.stride[d], ", padding ", p.padding[d],
                    " and dilation ", p.dilation[d], " must be at most ", kMaxElements, " (input ",
                    x, ", weight ", w, ")");
    }
    EMBER_CHECK(p.groups >= 1, Argument, op, ": groups must be >= 1 (input ", x, ", weight ", w,
                ")");
}

void spatial_dims(const char* base, std::size_t n, const Shape& x) {
    EMBER_CHECK(n >= 1 && n <= 3, Argument, base, ": 1, 2 or 3 spatial dims are supported, got ", n,
                " (input ", x, ")");
}

/// The forward convolution's geometry (x and w already checked).
Conv forward_geometry(const std::string& op, const ConvParams& p, const Shape& x, const Shape& w) {
    Conv c;
    c.out = Shape{x[0], w[0]};
    for (std::size_t d = 0; d < p.n; ++d) {
        const std::size_t s = 3 - p.n + d;
        ConvGeo& g = c.g;
        g.in[s] = static_cast<i64>(x[2 + d]);
        g.k[s] = static_cast<i64>(w[2 + d]);
        g.stride[s] = static_cast<i64>(p.stride[d]);
        g.pad[s] = static_cast<i64>(p.padding[d]);
        g.dil[s] = static_cast<i64>(p.dilation[d]);
        // Every operand is at most kMaxElements (conv_options), the product checked: the span
        // fits a signed 64-bit integer.
        const auto extent = static_cast<i64>(checked_mul(p.dilation[d], w[2 + d] - 1, op.c_str(),
                                                         "kernel extent (dilation * (k - 1))"));
        const i64 span = g.in[s] + 2 * g.pad[s] - extent - 1;
        EMBER_CHECK(span >= 0, Shape, op, ": kernel ", w, " (dilation ", p.dilation[d],
                    ") is larger than the padded input ", x, " (padding ", p.padding[d],
                    ") in spatial dim ", d);
        g.out[s] = span / g.stride[s] + 1;
        c.out.push_back(static_cast<std::size_t>(g.out[s]));
    }
    return c;
}

void same_dtype(const char* op, const Operand& t, const Operand& values) {
    EMBER_CHECK(values.dtype == t.dtype, DType, op, ": values have dtype ",
                dtype_name(values.dtype), " but the tensor has ", dtype_name(t.dtype));
}

void index_rank(const char* op, const Operand& indices) {
    EMBER_CHECK(indices.shape.rank() <= 1, Shape, op, ": indices must be 1-d, got shape ",
                indices.shape);
}

}  // namespace

// ---- dims ----------------------------------------------------------------------------------

void dim(const char* op, std::size_t d, const Shape& shape) {
    EMBER_CHECK(d < shape.rank(), Dim, op, ": dim ", d, " is out of range for shape ", shape);
}

void nonempty_dim(const char* op, std::size_t d, const Shape& shape) {
    dim(op, d, shape);
    EMBER_CHECK(shape[d] > 0, Argument, op, ": dim ", d, " of shape ", shape, " is empty");
}

void reduce_all(const char* op, bool has_identity, const Shape& shape) {
    EMBER_CHECK(has_identity || shape.num_elements() > 0, Argument, op, ": the tensor of shape ",
                shape, " is empty");
}

void reduce_dim(const char* op, bool has_identity, std::size_t d, const Shape& shape) {
    if (has_identity)
        dim(op, d, shape);
    else
        nonempty_dim(op, d, shape);
}

// ---- names and creation --------------------------------------------------------------------

const char* binary_op_name(BinaryOp op) {
    constexpr const char* names[] = {
        "add", "sub", "mul", "div", "rem", "pow", "max_pair",           "min_pair",           "and",
        "or",  "xor", "sub", "div", "pow", "rem", "bitwise_left_shift", "bitwise_right_shift"};
    static_assert(sizeof(names) / sizeof(names[0]) == static_cast<int>(BinaryOp::Shr) + 1);
    return names[static_cast<int>(op)];
}

namespace {
bool is_int_dtype(DType d) {
    return d == DType::I64 || d == DType::I32 || d == DType::I16 || d == DType::I8 ||
           d == DType::U8;
}
}  // namespace

const char* binary_op_name(BinaryOp op, DType d) {
    constexpr const char* bitwise[] = {"bitwise_and", "bitwise_or", "bitwise_xor"};
    if (is_int_dtype(d) && (op == BinaryOp::And || op == BinaryOp::Or || op == BinaryOp::Xor))
        return bitwise[static_cast<int>(op) - static_cast<int>(BinaryOp::And)];
    return binary_op_name(op);
}

void binary_dtype(BinaryOp op, DType d) {
    const bool logical = op == BinaryOp::And || op == BinaryOp::Or || op == BinaryOp::Xor;
    const bool shift = op == BinaryOp::Shl || op == BinaryOp::Shr;
    if (d == DType::Bool) {
        EMBER_CHECK(logical || op == BinaryOp::Add || op == BinaryOp::Mul || op == BinaryOp::Max ||
                        op == BinaryOp::Min,
                    DType, binary_op_name(op), ": not defined for bool tensors");
        return;
    }
    if (is_int_dtype(d)) return;
    // Named by the int forms (Burn's bitwise_*), the only ones a float tensor could mean.
    EMBER_CHECK(!logical, DType, binary_op_name(op, DType::I64),
                ": only defined for int and bool tensors, got ", dtype_name(d));
    EMBER_CHECK(!shift, DType, binary_op_name(op), ": only defined for int tensors, got ",
                dtype_name(d));
}

void unary_dtype(UnaryOp op, DType d) {
    if (d == DType::Bool) {
        EMBER_CHECK(op == UnaryOp::Not, DType, "unary op ", static_cast<int>(op),
                    " is not defined for bool tensors");
        return;
    }
    EMBER_CHECK(op != UnaryOp::Not || is_int_dtype(d), DType,
                "bitwise_not: only defined for int and bool tensors, got ", dtype_name(d));
}

const char* compare_op_name(CompareOp op) {
    constexpr const char* names[] = {"equal",         "not_equal", "greater",
                                     "greater_equal", "lower",     "lower_equal"};
    return names[static_cast<int>(op)];
}

void random(const Distribution& dist) {
    EMBER_CHECK(dist.kind != Distribution::Kind::Uniform || dist.a <= dist.b, Argument,
                "random: uniform range [", dist.a, ", ", dist.b, ") is empty");
    EMBER_CHECK(dist.kind != Distribution::Kind::Normal || dist.b >= 0, Argument,
                "random: normal std must be >= 0, got ", dist.b);
    EMBER_CHECK(dist.kind != Distribution::Kind::Bernoulli || (dist.a >= 0 && dist.a <= 1),
                Argument, "random: bernoulli probability must be in [0, 1], got ", dist.a);
}

Shape topk(std::size_t k, std::size_t d, const Shape& shape) {
    dim("topk", d, shape);
    EMBER_CHECK(k <= shape[d], Argument, "topk: k = ", k, " is larger than dim ", d, " of shape ",
                shape);
    Shape out = shape;
    out[d] = k;
    return out;
}

// ---- matmul --------------------------------------------------------------------------------

Matmul matmul(const Operand& a, const Operand& b) {
    const std::size_t ra = a.shape.rank(), rb = b.shape.rank();
    EMBER_CHECK(ra >= 1 && rb >= 1, Shape, "matmul: both operands need at least one dim, got ",
                a.shape, " and ", b.shape);
    EMBER_CHECK(a.dtype == b.dtype, DType, "matmul: dtypes differ: ", dtype_name(a.dtype), " ",
                a.shape, " and ", dtype_name(b.dtype), " ", b.shape);
    EMBER_CHECK(a.dtype != DType::Bool, DType, "matmul: bool operands are not supported: ", a.shape,
                " and ", b.shape);
    Matmul g;
    g.k = a.shape[ra - 1];
    const std::size_t kb = rb == 1 ? b.shape[0] : b.shape[rb - 2];
    EMBER_CHECK(g.k == kb, Shape, "matmul: inner dims do not match: ", a.shape, " and ", b.shape,
                " (", g.k, " vs ", kb, ")");
    g.m = ra == 1 ? 1 : a.shape[ra - 2];
    g.n = rb == 1 ? 1 : b.shape[rb - 1];
    g.ba = ra == 1 ? 0 : ra - 2;
    g.bb = rb == 1 ? 0 : rb - 2;
    const std::size_t nb = std::max(g.ba, g.bb);
    for (std::size_t i = 0; i < nb; ++i) {
        const std::size_t da = i >= nb - g.ba ? a.shape[i - (nb - g.ba)] : 1;
        const std::size_t db = i >= nb - g.bb ? b.shape[i - (nb - g.bb)] : 1;
        EMBER_CHECK(da == db || da == 1 || db == 1, Shape,
                    "matmul: batch dims do not broadcast: ", a.shape, " and ", b.shape);
        g.batch.push_back(da == 1 ? db : da);
    }
    g.out = g.batch;
    if (ra != 1) g.out.push_back(g.m);
    if (rb != 1) g.out.push_back(g.n);
    // ember has no rank-0 tensors: a vector · vector product is [1] (torch: a 0-d tensor).
    if (g.out.rank() == 0) g.out.push_back(1);
    return g;
}

// ---- convolution ---------------------------------------------------------------------------

Conv conv(const Operand& x, const Operand& w, const std::optional<Operand>& bias,
          const ConvParams& p) {
    spatial_dims("conv", p.n, x.shape);
    const std::string op = op_name("conv", p.n);
    conv_operands(op, x, w, bias, p.n);
    conv_options(op, p, x.shape, w.shape);
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
    return forward_geometry(op, p, x.shape, w.shape);
}

Conv conv_transpose(const Operand& x, const Operand& w, const std::optional<Operand>& bias,
                    const ConvParams& p) {
    spatial_dims("conv_transpose", p.n, x.shape);
    const std::string op = op_name("conv_transpose", p.n);
    conv_operands(op, x, w, bias, p.n);
    conv_options(op, p, x.shape, w.shape);
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
    Conv c;
    c.out = Shape{x.shape[0], cout};
    for (std::size_t d = 0; d < p.n; ++d) {
        const std::size_t s = 3 - p.n + d;
        EMBER_CHECK(p.padding_out[d] < p.stride[d] || p.padding_out[d] < p.dilation[d], Argument,
                    op, ": output padding (", p.padding_out[d],
                    ") must be smaller than either stride (", p.stride[d], ") or dilation (",
                    p.dilation[d], "); input ", x.shape);
        ConvGeo& g = c.g;
        g.in[s] = static_cast<i64>(x.shape[2 + d]);
        g.k[s] = static_cast<i64>(w.shape[2 + d]);
        g.stride[s] = static_cast<i64>(p.stride[d]);
        g.pad[s] = static_cast<i64>(p.padding[d]);
        g.dil[s] = static_cast<i64>(p.dilation[d]);
        // Products checked, each term at most kMaxElements (conv_options; the output padding is
        // below the stride or the dilation): the sum fits a signed 64-bit integer.
        const i64 stretched =
            x.shape[2 + d] == 0
                ? -g.stride[s]
                : static_cast<i64>(checked_mul(x.shape[2 + d] - 1, p.stride[d], op.c_str(),
                                               "output extent ((input - 1) * stride)"));
        const auto extent = static_cast<i64>(checked_mul(
            p.dilation[d], w.shape[2 + d] - 1, op.c_str(), "kernel extent (dilation * (k - 1))"));
        const i64 o = stretched - 2 * g.pad[s] + extent + static_cast<i64>(p.padding_out[d]) + 1;
        EMBER_CHECK(o >= 1 && static_cast<std::uint64_t>(o) <= kMaxElements, Shape, op,
                    ": output size ", o, " in spatial dim ", d,
                    " is not positive or too large (input ", x.shape, ", weight ", w.shape,
                    ", padding ", p.padding[d], ")");
        g.out[s] = o;
        c.out.push_back(static_cast<std::size_t>(o));
    }
    return c;
}

Conv conv_weight_backward(const Operand& x, const Operand& grad, const Shape& weight_shape,
                          const ConvParams& p) {
    spatial_dims("conv_weight_backward", p.n, x.shape);
    const std::string op = "conv" + std::to_string(p.n) + "d_weight_backward";
    const std::size_t n = p.n;
    EMBER_CHECK(x.shape.rank() == n + 2, Shape, op, ": input must have rank ", n + 2,
                " [N, C, spatial...], got ", x.shape);
    EMBER_CHECK(weight_shape.rank() == n + 2, Shape, op, ": weight shape must have rank ", n + 2,
                ", got ", weight_shape);
    EMBER_CHECK(grad.shape.rank() == n + 2, Shape, op, ": output gradient must have rank ", n + 2,
                ", got ", grad.shape, " (input ", x.shape, ", weight ", weight_shape, ")");
    check::grad(op, x, grad);
    conv_options(op, p, x.shape, weight_shape);
    const std::size_t cin = x.shape[1], cout = weight_shape[0];
    EMBER_CHECK(cin % p.groups == 0 && cout % p.groups == 0, Shape, op, ": in channels (", cin,
                ") and out channels (", cout, ") must be divisible by groups (", p.groups,
                "); input ", x.shape, ", weight ", weight_shape);
    EMBER_CHECK(weight_shape[1] * p.groups == cin, Shape, op, ": weight ", weight_shape,
                " expects ", weight_shape[1] * p.groups, " input channels, input ", x.shape,
                " has ", cin, " (groups ", p.groups, ")");
    Conv c = forward_geometry(op, p, x.shape, weight_shape);
    EMBER_CHECK(grad.shape == c.out, Shape, op, ": output gradient must be ", c.out, " for input ",
                x.shape, " and weight ", weight_shape, ", got ", grad.shape);
    return c;
}

Deform deform_conv2d(const char* op, const Operand& x, const Operand& offset, const Operand& w,
                     const std::optional<Operand>& mask, const std::optional<Operand>& bias,
                     const DeformConvOptions& o) {
    conv_operands(op, x, w, bias, 2);
    EMBER_CHECK(offset.dtype == x.dtype && (!mask || mask->dtype == x.dtype), DType, op,
                ": offset and mask must have the input's dtype ", dtype_name(x.dtype));
    for (std::size_t d = 0; d < 2; ++d) {
        EMBER_CHECK(o.stride[d] >= 1 && o.dilation[d] >= 1, Argument, op,
                    ": stride and dilation must be >= 1 (input ", x.shape, ", weight ", w.shape,
                    ")");
        // Bounded like a dim, so that the signed 64-bit output-size arithmetic cannot wrap.
        EMBER_CHECK(o.stride[d] <= kMaxElements && o.padding[d] <= kMaxElements &&
                        o.dilation[d] <= kMaxElements,
                    Argument, op, ": stride ", o.stride[d], ", padding ", o.padding[d],
                    " and dilation ", o.dilation[d], " must be at most ", kMaxElements, " (input ",
                    x.shape, ", weight ", w.shape, ")");
        EMBER_CHECK(w.shape[2 + d] >= 1, Shape, op, ": kernel dims must be >= 1, weight ", w.shape);
    }
    EMBER_CHECK(o.weight_groups >= 1 && o.offset_groups >= 1, Argument, op,
                ": weight_groups and offset_groups must be >= 1");
    const std::size_t n = x.shape[0], cin = x.shape[1], cout = w.shape[0];
    const std::size_t kh = w.shape[2], kw = w.shape[3];
    EMBER_CHECK(cin % o.weight_groups == 0 && cout % o.weight_groups == 0, Shape, op,
                ": in channels (", cin, ") and out channels (", cout,
                ") must be divisible by weight_groups (", o.weight_groups, "); input ", x.shape,
                ", weight ", w.shape);
    EMBER_CHECK(w.shape[1] == cin / o.weight_groups, Shape, op, ": weight ", w.shape,
                " does not match input ", x.shape, " with weight_groups ", o.weight_groups);
    EMBER_CHECK(cin % o.offset_groups == 0, Shape, op, ": in channels (", cin,
                ") must be divisible by offset_groups (", o.offset_groups, "); input ", x.shape);
    i64 out_hw[2];
    for (std::size_t d = 0; d < 2; ++d) {
        const auto extent = static_cast<i64>(checked_mul(o.dilation[d], w.shape[2 + d] - 1, op,
                                                         "kernel extent (dilation * (k - 1))"));
        const i64 span =
            static_cast<i64>(x.shape[2 + d]) + 2 * static_cast<i64>(o.padding[d]) - extent - 1;
        EMBER_CHECK(span >= 0, Shape, op, ": kernel ", w.shape, " is larger than the padded input ",
                    x.shape);
        out_hw[d] = span / static_cast<i64>(o.stride[d]) + 1;
    }
    const auto oh = static_cast<std::size_t>(out_hw[0]), ow = static_cast<std::size_t>(out_hw[1]);
    const Shape off_shape{n, 2 * o.offset_groups * kh * kw, oh, ow};
    EMBER_CHECK(offset.shape == off_shape, Shape, op, ": offset must be ", off_shape, ", got ",
                offset.shape, " (input ", x.shape, ", weight ", w.shape, ")");
    if (mask) {
        const Shape mask_shape{n, o.offset_groups * kh * kw, oh, ow};
        EMBER_CHECK(mask->shape == mask_shape, Shape, op, ": mask must be ", mask_shape, ", got ",
                    mask->shape, " (input ", x.shape, ", weight ", w.shape, ")");
    }
    if (bias)
        EMBER_CHECK(bias->shape.rank() == 1 && bias->shape[0] == cout, Shape, op, ": bias ",
                    bias->shape, " must be [", cout, "] for weight ", w.shape);
    return {Shape{n, cout, oh, ow}, out_hw[0], out_hw[1]};
}

void grad(const std::string& op, const Operand& x, const Operand& grad,
          const std::optional<Shape>& expected) {
    EMBER_CHECK(is_float(x.dtype), DType, op, ": needs a float input, got ", dtype_name(x.dtype),
                " ", x.shape);
    EMBER_CHECK(grad.dtype == x.dtype, DType, op, ": output gradient dtype ",
                dtype_name(grad.dtype), " ", grad.shape, " differs from input dtype ",
                dtype_name(x.dtype), " ", x.shape);
    if (expected)
        EMBER_CHECK(grad.shape == *expected, Shape, op, ": output gradient must be ", *expected,
                    " for input ", x.shape, ", got ", grad.shape);
}

void add_layer_norm(const Operand& x, const Operand& residual, const std::optional<Operand>& gamma,
                    const std::optional<Operand>& beta, double eps, std::optional<DType> out) {
    const char* op = "add_layer_norm";
    EMBER_CHECK(x.shape == residual.shape && x.shape.rank() > 0, Shape, op, ": x ", x.shape,
                " and residual ", residual.shape, " must have the same shape, of rank 1 or more");
    EMBER_CHECK(is_float(x.dtype) && is_float(residual.dtype), DType, op,
                ": needs float operands, got x ", dtype_name(x.dtype), " and residual ",
                dtype_name(residual.dtype));
    const std::size_t c = x.shape[x.shape.rank() - 1];
    for (const auto* p : {&gamma, &beta})
        if (*p)
            EMBER_CHECK((*p)->shape == Shape{c}, Shape, op, ": ", p == &gamma ? "gamma" : "beta",
                        " of shape ", (*p)->shape, " does not match the last dim of x ", x.shape);
    EMBER_CHECK(eps >= 0.0, Argument, op, ": eps must be non-negative, got ", eps);
    if (out)
        EMBER_CHECK(is_float(*out), DType, op,
                    ": the normed output's dtype must be a float dtype, got ", dtype_name(*out));
}

// ---- pooling and interpolation -------------------------------------------------------------

Shape adaptive_avg_pool(const Operand& x, std::span<const std::size_t> output_size) {
    const std::size_t n = output_size.size();
    EMBER_CHECK(n >= 1 && n <= 3, Argument,
                "adaptive_avg_pool: 1, 2 or 3 output dims are supported, got ", n, " (input ",
                x.shape, ")");
    const std::string op = op_name("adaptive_avg_pool", n);
    const Shape os(output_size);
    EMBER_CHECK(x.shape.rank() == n + 2, Shape, op, ": input must have rank ", n + 2,
                " [N, C, spatial...], got ", x.shape, " for output size ", os);
    EMBER_CHECK(is_float(x.dtype), DType, op, ": needs a float input, got ", dtype_name(x.dtype),
                " ", x.shape);
    Shape out{x.shape[0], x.shape[1]};
    for (std::size_t d = 0; d < n; ++d) {
        EMBER_CHECK(x.shape[2 + d] >= 1 || output_size[d] == 0, Shape, op,
                    ": input spatial dims must be non-empty, got ", x.shape);
        out.push_back(output_size[d]);
    }
    return out;
}

namespace {
/// The output shape of interpolate(x, output_size); errors name `op`.
Shape interpolate_shape(const char* op, const Operand& x,
                        std::span<const std::size_t> output_size) {
    const std::size_t n = output_size.size();
    const Shape os(output_size);
    EMBER_CHECK(n == 1 || n == 2, Argument, op,
                ": output size must have 1 ([N, C, L] input) or 2 ([N, C, H, W]) dims, got ", os,
                " for input ", x.shape);
    EMBER_CHECK(x.shape.rank() == n + 2, Shape, op, ": input must have rank ", n + 2,
                " for output size ", os, ", got ", x.shape);
    Shape out{x.shape[0], x.shape[1]};
    for (std::size_t d = 0; d < n; ++d) {
        EMBER_CHECK(output_size[d] >= 1, Argument, op, ": output size must be positive, got ", os,
                    " for input ", x.shape);
        out.push_back(output_size[d]);
    }
    for (std::size_t d = 0; d < n; ++d)
        EMBER_CHECK(x.shape[2 + d] >= 1, Shape, op, ": input spatial dims must be non-empty, got ",
                    x.shape);
    return out;
}
}  // namespace

Shape interpolate(const Operand& x, std::span<const std::size_t> output_size,
                  const InterpolateOptions& o) {
    const Shape out = interpolate_shape("interpolate", x, output_size);
    if (o.mode == InterpolateMode::Nearest)
        EMBER_CHECK(x.dtype != DType::Bool, DType, "interpolate: bool input ", x.shape,
                    " is not supported");
    else
        EMBER_CHECK(is_float(x.dtype), DType,
                    "interpolate: ", o.mode == InterpolateMode::Bilinear ? "bilinear" : "bicubic",
                    " mode needs a float input, got ", dtype_name(x.dtype), " ", x.shape);
    return out;
}

void adaptive_avg_pool_backward(const Operand& x, const Operand& grad, std::size_t n) {
    EMBER_CHECK(n >= 1 && n <= 3, Argument,
                "adaptive_avg_pool_backward: 1, 2 or 3 spatial dims are supported, got ", n,
                " (input ", x.shape, ")");
    const std::string op = op_name("adaptive_avg_pool", n) + "_backward";
    EMBER_CHECK(x.shape.rank() == n + 2, Shape, op, ": input must have rank ", n + 2,
                " [N, C, spatial...], got ", x.shape);
    EMBER_CHECK(
        grad.shape.rank() == n + 2 && grad.shape[0] == x.shape[0] && grad.shape[1] == x.shape[1],
        Shape, op, ": output gradient must be [", x.shape[0], ", ", x.shape[1],
        ", spatial...] of rank ", n + 2, " for input ", x.shape, ", got ", grad.shape);
    check::grad(op, x, grad);
    for (std::size_t d = 0; d < n; ++d)
        EMBER_CHECK(x.shape[2 + d] >= 1 || grad.shape[2 + d] == 0, Shape, op,
                    ": input spatial dims must be non-empty, got ", x.shape);
}

Shape interpolate_backward(const Operand& x, const Operand& grad,
                           std::span<const std::size_t> output_size) {
    const char* op = "interpolate_backward";
    const Shape out = interpolate_shape(op, x, output_size);
    check::grad(op, x, grad, out);
    return out;
}

// ---- index ops -----------------------------------------------------------------------------

void index_dtype(const char* op, DType indices) {
    EMBER_CHECK(is_int(indices), DType, op, ": indices must be an int tensor, got ",
                dtype_name(indices));
}

void index_out_of_range(const char* op, i64 index, std::size_t d, std::size_t size) {
    EMBER_FAIL(Index, op, ": index ", index, " is out of range for dim ", d, " of size ", size);
}

Shape gather(std::size_t d, const Operand& t, const Operand& indices) {
    dim("gather", d, t.shape);
    EMBER_CHECK(indices.shape.rank() == t.shape.rank(), Shape, "gather: indices of shape ",
                indices.shape, " must have the rank of the tensor of shape ", t.shape);
    for (std::size_t i = 0; i < t.shape.rank(); ++i)
        EMBER_CHECK(i == d || indices.shape[i] <= t.shape[i], Shape, "gather: indices of shape ",
                    indices.shape, " are larger than the tensor of shape ", t.shape, " in dim ", i);
    index_dtype("gather", indices.dtype);
    return indices.shape;
}

void scatter_add(std::size_t d, const Operand& t, const Operand& indices, const Operand& values) {
    dim("scatter_add", d, t.shape);
    const std::size_t rank = t.shape.rank();
    same_dtype("scatter_add", t, values);
    EMBER_CHECK(indices.shape.rank() == rank && values.shape.rank() == rank, Shape,
                "scatter_add: tensor ", t.shape, ", indices ", indices.shape, " and values ",
                values.shape, " must have the same rank");
    for (std::size_t i = 0; i < rank; ++i) {
        EMBER_CHECK(indices.shape[i] <= values.shape[i], Shape, "scatter_add: indices of shape ",
                    indices.shape, " are larger than values of shape ", values.shape, " in dim ",
                    i);
        EMBER_CHECK(i == d || indices.shape[i] <= t.shape[i], Shape,
                    "scatter_add: indices of shape ", indices.shape,
                    " are larger than the tensor of shape ", t.shape, " in dim ", i);
    }
    index_dtype("scatter_add", indices.dtype);
}

Shape select(const Operand& t, std::size_t d, const Operand& indices) {
    dim("select", d, t.shape);
    index_rank("select", indices);
    index_dtype("select", indices.dtype);
    Shape out = t.shape;
    out[d] = indices.shape.num_elements();
    return out;
}

void select_assign(const Operand& t, std::size_t d, const Operand& indices, const Operand& values) {
    dim("select_assign", d, t.shape);
    index_rank("select_assign", indices);
    same_dtype("select_assign", t, values);
    const std::size_t k = indices.shape.num_elements();
    Shape expected = t.shape;
    expected[d] = k;
    EMBER_CHECK(values.shape == expected, Shape, "select_assign: values of shape ", values.shape,
                " do not match ", expected, " (the tensor's shape ", t.shape, " with ", k,
                " indices in dim ", d, ")");
    index_dtype("select_assign", indices.dtype);
}

// ---- shape ops -----------------------------------------------------------------------------

Shape cat(std::span<const Operand> tensors, std::size_t d) {
    EMBER_CHECK(!tensors.empty(), Argument, "cat: expected at least one tensor");
    const Operand& first = tensors[0];
    const std::size_t rank = first.shape.rank();
    EMBER_CHECK(d < rank, Dim, "cat: dim ", d, " is out of range for rank ", rank);
    Shape out = first.shape;
    out[d] = 0;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const Operand& t = tensors[i];
        EMBER_CHECK(t.dtype == first.dtype, DType, "cat: tensor ", i, " has dtype ",
                    dtype_name(t.dtype), " but tensor 0 has ", dtype_name(first.dtype));
        EMBER_CHECK(t.shape.rank() == rank, Shape, "cat: tensor ", i, " has shape ", t.shape,
                    " of rank ", t.shape.rank(), " but tensor 0 has shape ", first.shape);
        for (std::size_t j = 0; j < rank; ++j)
            EMBER_CHECK(j == d || t.shape[j] == first.shape[j], Shape, "cat: tensor ", i,
                        " has shape ", t.shape, " but tensor 0 has shape ", first.shape,
                        "; they must match except in dim ", d);
        out[d] += t.shape[d];
    }
    return out;
}

Region slice(const char* op, const Shape& t, std::span<const Slice> ranges) {
    EMBER_CHECK(ranges.size() <= t.rank(), Dim, op, ": ", ranges.size(),
                " ranges given for a tensor of shape ", t);
    Region r;
    r.shape = t;
    for (std::size_t d = 0; d < ranges.size(); ++d) {
        const auto [start, len] = ranges[d].resolve(t[d], op);
        r.start[d] = start;
        r.shape[d] = len;
    }
    return r;
}

Region slice_assign(const Operand& t, std::span<const Slice> ranges, const Operand& values) {
    same_dtype("slice_assign", t, values);
    Region r = slice("slice_assign", t.shape, ranges);
    EMBER_CHECK(r.shape == values.shape, Shape, "slice_assign: values of shape ", values.shape,
                " do not match the region of shape ", r.shape, " in a tensor of shape ", t.shape);
    return r;
}

void reshape(const Shape& from, const Shape& to) {
    EMBER_CHECK(to.num_elements() == from.num_elements(), Shape, "reshape: cannot reshape ", from,
                " (", from.num_elements(), " elements) into ", to, " (", to.num_elements(),
                " elements)");
}

void permute(const Shape& t, std::span<const std::size_t> axes) {
    EMBER_CHECK(axes.size() == t.rank(), Dim, "permute: ", axes.size(),
                " axes given for a tensor of shape ", t);
    bool seen[kMaxRank] = {};
    for (const std::size_t a : axes) {
        EMBER_CHECK(a < axes.size() && !seen[a], Dim, "permute: axes are not a permutation of 0..",
                    axes.size() - 1, " for shape ", t);
        seen[a] = true;
    }
}

void expand(const Shape& from, const Shape& to) {
    EMBER_CHECK(to.rank() >= from.rank(), Shape, "expand: cannot expand ", from,
                " to the lower rank shape ", to);
    const std::size_t off = to.rank() - from.rank();
    for (std::size_t i = off; i < to.rank(); ++i) {
        const std::size_t d = from[i - off];
        EMBER_CHECK(d == to[i] || d == 1, Shape, "expand: cannot expand ", from, " to ", to,
                    " (dim ", i, ": ", d, " vs ", to[i], ")");
    }
}

std::array<bool, kMaxRank> flip(const Shape& t, std::span<const std::size_t> axes) {
    std::array<bool, kMaxRank> flipped{};
    for (const std::size_t a : axes) {
        EMBER_CHECK(a < t.rank(), Dim, "flip: axis ", a, " is out of range for shape ", t);
        EMBER_CHECK(!flipped[a], Dim, "flip: axis ", a, " is given more than once");
        flipped[a] = true;
    }
    return flipped;
}

Shape repeat_dim(const Shape& t, std::size_t d, std::size_t times) {
    dim("repeat_dim", d, t);
    Shape out = t;
    out[d] = t[d] * times;
    return out;
}

// ---- masks ---------------------------------------------------------------------------------

Shape mask_where(const Operand& t, const Operand& mask, const Operand& value) {
    EMBER_CHECK(mask.dtype == DType::Bool, DType, "mask_where: mask must be bool, got ",
                dtype_name(mask.dtype));
    return broadcast_shapes(broadcast_shapes(mask.shape, value.shape, "mask_where"), t.shape,
                            "mask_where");
}

void mask_fill(const Operand& t, const Operand& mask) {
    EMBER_CHECK(mask.dtype == DType::Bool, DType, "mask_fill: mask must be bool, got ",
                dtype_name(mask.dtype));
    const Shape shape = broadcast_shapes(t.shape, mask.shape, "mask_fill");
    EMBER_CHECK(shape == t.shape, Shape, "mask_fill: mask ", mask.shape,
                " does not broadcast to the tensor's shape ", t.shape);
}

}  // namespace ember::detail::check
