// ONNX's quantization operators (issue 11): QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv.
//
// ONNX quantizes to uint8 or int8 (the zero point's type says which; uint8 when there is none)
// and divides by the scale: q = saturate(round(x / scale) + zero_point), rounding half to even.
// The generated code follows those formulas with ember's float and int tensors: the integer
// sums (MatMulInteger, ConvInteger, and inside QLinear*) are computed in f32, exact for the
// products of 8-bit values over up to 258 terms (|sum| < 2^24), then rounded back to integers.
#include <algorithm>
#include <string>

#include "ops_common.hpp"

namespace ember::onnx::ops {
namespace {

constexpr int kOnnxInt8 = 3;  // TensorProto.DataType INT8 (UINT8 is 2)

// Whether input `i` (a zero point) is int8: its constant's dtype, else the graph's declared type;
// an absent zero point means uint8.
bool is_int8(NodeCtx& c, std::size_t i) {
    if (!c.has(i)) return false;
    if (c.in(i).constant) return c.in(i).constant->dtype() == DType::I8;
    const std::string& name = c.node.inputs[i];
    for (const auto* list : {&g_graph->inputs, &g_graph->value_info, &g_graph->outputs})
        for (const auto& vi : *list)
            if (vi.name == name) return vi.elem_type == kOnnxInt8;
    return false;
}

std::string lo_of(bool int8) {
    return int8 ? "-128.0" : "0.0";
}
std::string hi_of(bool int8) {
    return int8 ? "127.0" : "255.0";
}

// Input `i` (a scale or zero point: one value, or one per index of `axis`) as a float tensor of
// rank `rank` that broadcasts along `axis`.
std::string param_at(NodeCtx& c, std::size_t i, std::size_t rank, std::size_t axis) {
    const Value& p = c.in(i);
    c.require(p.rank <= 1, "input " + std::to_string(i) + " must be a scalar or 1-D");
    const bool per_axis = p.rank == 1 && !p.scalar && (p.dims.empty() || p.dims[0] != 1);
    std::vector<std::string> d(rank, "1");
    if (per_axis) d[axis] = "-1";
    return "(" + c.t_as(i, Kind::Float) + ").template reshape<" + r(rank) + ">({" + join(d) + "})";
}

// The node's `axis` attribute (default 1, as ONNX's), normalised against `rank`. It matters only
// when the scale (input `scale`) holds one value per index of the axis; otherwise 0.
std::size_t axis_attr(NodeCtx& c, std::size_t rank, std::size_t scale) {
    const Value& p = c.in(scale);
    if (!(p.rank == 1 && !p.scalar && (p.dims.empty() || p.dims[0] != 1))) return 0;
    auto a = c.attr_int("axis", 1);
    if (a < 0) a += std::int64_t(rank);
    c.require(a >= 0 && a < std::int64_t(rank), "axis " + std::to_string(c.attr_int("axis", 1)) +
                                                    " is out of range for rank " + r(rank));
    return std::size_t(a);
}

// q = saturate(round(f) + zero), as an int tensor expression.
std::string saturate(const std::string& f, const std::string& zero, bool int8) {
    std::string e = "(" + f + ").round()";
    if (!zero.empty()) e = "(" + e + " + " + zero + ")";
    return e + ".clamp(" + lo_of(int8) + ", " + hi_of(int8) + ").int_()";
}

void quantize_linear(NodeCtx& c) {
    const Value& x = c.in(0);
    const std::size_t axis = axis_attr(c, x.rank, 1);
    const bool int8 = is_int8(c, 2);
    const std::string s = param_at(c, 1, x.rank, axis);
    const std::string z = c.has(2) ? param_at(c, 2, x.rank, axis) : "";
    c.out(0, like(x, Kind::Int), saturate(c.t_as(0, Kind::Float) + " / " + s, z, int8));
}

void dequantize_linear(NodeCtx& c) {
    const Value& x = c.in(0);
    const std::size_t axis = axis_attr(c, x.rank, 1);
    std::string e = c.t_as(0, Kind::Float);
    if (c.has(2)) e = "(" + e + " - " + param_at(c, 2, x.rank, axis) + ")";
    c.out(0, like(x, Kind::Float), e + " * " + param_at(c, 1, x.rank, axis));
}

void dynamic_quantize_linear(NodeCtx& c) {
    const Value& x = c.in(0);
    const std::string xf = c.t_as(0, Kind::Float);
    // uint8: the range widened to contain 0, scale = range / 255, zero = round(saturate(-min /
    // scale)).
    const std::string lo = "(" + xf + ".min().clamp_max(0.0))",
                      hi = "(" + xf + ".max().clamp_min(0.0))";
    const std::string scale = "((" + hi + " - " + lo + ") / 255.0)";
    const std::string zero = "((" + lo + ".neg() / " + scale + ").clamp(0.0, 255.0).round())";
    Value one;
    one.rank = 1;
    one.scalar = true;
    one.dims = {1};
    one.kind = Kind::Float;
    c.out(1, one, scale);
    one.kind = Kind::Int;
    c.out(2, one, zero + ".int_()");
    const std::string ones = "({" + join(std::vector<std::string>(x.rank, "1")) + "})";
    const std::string b = ".template reshape<" + r(x.rank) + ">" + ones;
    c.out(0, like(x, Kind::Int), saturate(xf + " / " + scale + b, zero + b, false));
}

// The static dims of a matmul of `a` and `b` (-1 where unknown).
Value matmul_value(const Value& a, const Value& b, Kind k) {
    Value v;
    v.kind = k;
    v.rank = std::max(a.rank, b.rank);
    v.dims.assign(v.rank, -1);
    for (std::size_t i = 0; i + 2 < v.rank; ++i) {
        const std::int64_t da = i + a.rank >= v.rank ? a.dims[i + a.rank - v.rank] : 1;
        const std::int64_t db = i + b.rank >= v.rank ? b.dims[i + b.rank - v.rank] : 1;
        v.dims[i] = da == 1 ? db : db == 1 ? da : std::max(da, db);
    }
    v.dims[v.rank - 2] = a.dims[a.rank - 2];
    v.dims[v.rank - 1] = b.dims[b.rank - 1];
    return v;
}

// (input a - its zero point) as a float tensor; the zero point is a scalar or one per row
// (along dim `axis` of a rank-`rank` operand).
std::string centred(NodeCtx& c, std::size_t value, std::size_t zero, std::size_t rank,
                    std::size_t axis) {
    std::string e = c.t_rank(value, rank) + ".float_()";
    if (c.has(zero)) e = "(" + e + " - " + param_at(c, zero, rank, axis) + ")";
    return e;
}

void matmul_integer(NodeCtx& c) {
    const Value &a = c.in(0), &b = c.in(1);
    c.require(a.rank >= 2 && b.rank >= 2, "MatMulInteger of 1-D operands is not supported");
    const std::size_t rank = std::max(a.rank, b.rank);
    const std::string acc =
        centred(c, 0, 2, rank, rank - 2) + ".matmul(" + centred(c, 1, 3, rank, rank - 1) + ")";
    c.out(0, matmul_value(a, b, Kind::Int), "(" + acc + ").round().int_()");
}

void qlinear_matmul(NodeCtx& c) {
    const Value &a = c.in(0), &b = c.in(3);
    c.require(a.rank >= 2 && b.rank >= 2, "QLinearMatMul of 1-D operands is not supported");
    const std::size_t rank = std::max(a.rank, b.rank);
    const std::string acc =
        centred(c, 0, 2, rank, rank - 2) + ".matmul(" + centred(c, 3, 5, rank, rank - 1) + ")";
    const std::string m = param_at(c, 1, rank, rank - 2) + " * " + param_at(c, 4, rank, rank - 1) +
                          " / " + param_at(c, 6, rank, rank - 1);
    c.out(0, matmul_value(a, b, Kind::Int),
          saturate("(" + acc + ") * " + m, param_at(c, 7, rank, rank - 1), is_int8(c, 7)));
}

// conv2d of (x - x_zero) and (w - w_zero) with the node's attributes, as a float expression, and
// the output's value. Symmetric padding only.
std::pair<std::string, Value> integer_conv(NodeCtx& c, std::size_t x_zero, std::size_t w_in,
                                           std::size_t w_zero) {
    const Value &x = c.in(0), &w = c.in(w_in);
    c.require(x.rank == 4 && w.rank == 4, "only 2-d convolutions are supported");
    c.require(c.attr_str("auto_pad", "NOTSET") == "NOTSET", "auto_pad is not supported");
    const Dims strides = c.attr_ints("strides", Dims(2, 1)),
               dil = c.attr_ints("dilations", Dims(2, 1));
    const Dims pads = c.attr_ints("pads", Dims(4, 0));
    c.require(pads.size() == 4 && pads[0] == pads[2] && pads[1] == pads[3],
              "asymmetric padding is not supported");
    const auto groups = c.attr_int("group", 1);
    std::string xe = c.t_as(0, Kind::Float);
    if (c.has(x_zero)) xe = "(" + xe + " - " + param_at(c, x_zero, 4, 1) + ")";
    std::string we = c.t_as(w_in, Kind::Float);
    if (c.has(w_zero)) we = "(" + we + " - " + param_at(c, w_zero, 4, 0) + ")";
    const auto arr2 = [](const Dims& d, std::size_t at) {
        return "{" + std::to_string(d[at]) + ", " + std::to_string(d[at + 1]) + "}";
    };
    const std::string e = "ember::module::conv2d(" + xe + ", " + we +
                          ", std::nullopt, ember::ConvOptions<2>{" + arr2(strides, 0) + ", " +
                          arr2(pads, 0) + ", " + arr2(dil, 0) + ", " + std::to_string(groups) +
                          "})";
    Value v = like(x, Kind::Int);
    v.dims[1] = w.dims[0];
    for (std::size_t k = 0; k < 2; ++k) {
        const std::int64_t in = x.dims[2 + k], kk = w.dims[2 + k];
        v.dims[2 + k] =
            in < 0 || kk < 0 ? -1 : (in + 2 * pads[k] - dil[k] * (kk - 1) - 1) / strides[k] + 1;
    }
    return {e, v};
}

void conv_integer(NodeCtx& c) {
    auto [e, v] = integer_conv(c, 2, 1, 3);
    c.out(0, std::move(v), "(" + e + ").round().int_()");
}

void qlinear_conv(NodeCtx& c) {
    auto [e, v] = integer_conv(c, 2, 3, 5);
    if (c.has(8)) e = "(" + e + " + " + param_at(c, 8, 4, 1) + ")";  // int32 bias, same scale
    const std::string m =
        param_at(c, 1, 4, 1) + " * " + param_at(c, 4, 4, 1) + " / " + param_at(c, 6, 4, 1);
    c.out(0, std::move(v), saturate("(" + e + ") * " + m, param_at(c, 7, 4, 1), is_int8(c, 7)));
}

}  // namespace

void register_quant_ops(std::map<std::string, Handler>& t) {
    t["QuantizeLinear"] = quantize_linear;
    t["DequantizeLinear"] = dequantize_linear;
    t["DynamicQuantizeLinear"] = dynamic_quantize_linear;
    t["MatMulInteger"] = matmul_integer;
    t["QLinearMatMul"] = qlinear_matmul;
    t["ConvInteger"] = conv_integer;
    t["QLinearConv"] = qlinear_conv;
}

}  // namespace ember::onnx::ops
