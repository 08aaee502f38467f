// The op handlers of layers and the less common operators (see ops.cpp for the rest and the
// table): Gemm/MatMul → Linear, Conv, pooling, normalisations, LSTM, and the operators beyond
// what PyTorch's exporter commonly writes.
#include <ember/backend/cpu.hpp>
#include <ember/nn.hpp>
#include <ember/tensor/error.hpp>

#include <algorithm>
#include <cmath>

#include "ops_common.hpp"

namespace ember::onnx::ops {

using ember::Cpu;

const Graph* g_graph = nullptr;

// ---- layers ------------------------------------------------------------------------------------

// The unique node reading `value`, or nullptr.
const Node* sole_consumer(const Emitter& em, const Graph& g, const std::string& value) {
    auto u = em.uses.find(value);
    if (u == em.uses.end() || u->second != 1) return nullptr;
    for (const auto& n : g.nodes)
        for (const auto& i : n.inputs)
            if (i == value) return &n;
    return nullptr;
}

namespace {

// The single value of `name` when it is a constant of one element known at import time: an
// initializer or a value already lowered, or a Constant node's (which may come later in the
// graph's order than the node asking); nullopt otherwise.
std::optional<double> constant_scalar(Emitter& em, const Graph& g, const std::string& name) {
    if (auto it = em.values.find(name); it != em.values.end()) {
        const Value& v = it->second;
        if (v.constant && v.constant->num_elements() == 1)
            return v.constant->convert(DType::F64).to_vec<double>()[0];
        return std::nullopt;
    }
    for (const auto& n : g.nodes) {
        if (n.op_type != "Constant" || n.outputs.empty() || n.outputs[0] != name) continue;
        const NodeCtx k(n, em);
        if (k.has_attr("value_float")) return k.attr_float("value_float", 0.0);
        if (!k.has_attr("value")) return std::nullopt;
        const TensorData& t = k.attr_tensor("value");
        if (t.num_elements() != 1 || !is_float(t.dtype())) return std::nullopt;
        return t.convert(DType::F64).to_vec<double>()[0];
    }
    return std::nullopt;
}

// The input of two-input node `n` other than `value`, or "" when `value` is not one of them.
std::string other_input(const Node& n, const std::string& value) {
    if (n.inputs.size() != 2) return "";
    if (n.inputs[0] == value) return n.inputs[1];
    if (n.inputs[1] == value) return n.inputs[0];
    return "";
}

}  // namespace

bool gelu_chain(NodeCtx& c) {
    if (!g_graph || c.node.inputs.size() != 2 || c.node.outputs.size() != 1) return false;
    const Value& x = c.in(0);
    const auto root2 = c.scalar(1);
    if (x.kind != Kind::Float || x.constant || !root2 || std::abs(*root2 - std::sqrt(2.0)) > 1e-6)
        return false;
    const std::string& xn = c.node.inputs[0];
    const Node* erf = sole_consumer(c.em, *g_graph, c.node.outputs[0]);
    if (!erf || erf->op_type != "Erf" || erf->outputs.size() != 1) return false;
    const Node* add = sole_consumer(c.em, *g_graph, erf->outputs[0]);
    if (!add || add->op_type != "Add" || add->outputs.size() != 1) return false;
    const auto one = constant_scalar(c.em, *g_graph, other_input(*add, erf->outputs[0]));
    if (!one || *one != 1.0) return false;
    const Node* mul = sole_consumer(c.em, *g_graph, add->outputs[0]);
    if (!mul || mul->op_type != "Mul" || mul->outputs.size() != 1 ||
        other_input(*mul, add->outputs[0]) != xn)
        return false;
    const Node* half = sole_consumer(c.em, *g_graph, mul->outputs[0]);
    if (!half || half->op_type != "Mul" || half->outputs.size() != 1) return false;
    const auto h = constant_scalar(c.em, *g_graph, other_input(*half, mul->outputs[0]));
    if (!h || *h != 0.5) return false;
    for (const Node* n : {erf, add, mul, half}) c.em.fused.insert(n->outputs[0]);
    NodeCtx hc(*half, c.em);
    hc.out(0, like(x, Kind::Float), "ember::activation::gelu(" + c.t(0) + ")");
    // This node's own output is read by the fused Erf only.
    c.em.values[c.node.outputs[0]] = c.em.values[half->outputs[0]];
    return true;
}

// y = x·W (+ b) through nn::Linear; W [in, out] as ember's Linear holds it.
std::string linear_module(NodeCtx& c, const TensorData& w, const std::optional<TensorData>& b) {
    const std::size_t in = w.shape()[0], out = w.shape()[1];
    nn::Linear<Cpu> lin{Param<ember::Tensor<Cpu, 2>>(ember::Tensor<Cpu, 2>::from_data(w.convert(DType::F32))), std::nullopt};
    if (b) lin.bias = Param<ember::Tensor<Cpu, 1>>(ember::Tensor<Cpu, 1>::from_data(b->convert(DType::F32)));
    return c.field("linear", "ember::nn::Linear<B>",
                   "ember::nn::LinearConfig{" + std::to_string(in) + ", " + std::to_string(out) + ", " +
                       (b ? "true" : "false") + "}.template init<B>(device)",
                   lin.into_record());
}

std::optional<TensorData> bias_of(const Value& v, std::size_t n) {
    if (!v.constant || v.constant->num_elements() != n || !is_float(v.constant->dtype())) return std::nullopt;
    return TensorData(v.constant->convert(DType::F32).to_vec<float>(), Shape{n});
}

TensorData transpose2(const TensorData& w) {
    const std::size_t a = w.shape()[0], b = w.shape()[1];
    auto v = w.convert(DType::F32).to_vec<float>();
    std::vector<float> t(v.size());
    for (std::size_t i = 0; i < a; ++i)
        for (std::size_t j = 0; j < b; ++j) t[j * a + i] = v[i * b + j];
    return TensorData(t, Shape{b, a});
}

void matmul(NodeCtx& c) {
    const Value &a = c.in(0), &b = c.in(1);
    c.require(a.kind == Kind::Float && b.kind == Kind::Float, "MatMul of integers");
    if (b.constant && b.rank == 2 && a.rank >= 2) {
        // MatMul + Add of a constant [N]: one Linear with a bias.
        std::optional<TensorData> bias;
        const Node* add = g_graph ? sole_consumer(c.em, *g_graph, c.node.outputs[0]) : nullptr;
        if (add && add->op_type == "Add" && add->inputs.size() == 2) {
            const std::string other = add->inputs[0] == c.node.outputs[0] ? add->inputs[1] : add->inputs[0];
            auto it = c.em.values.find(other);
            if (it != c.em.values.end() && it->second.rank <= 2) bias = bias_of(it->second, b.constant->shape()[1]);
            if (bias && it->second.rank == 2 && it->second.dims[0] != 1) bias.reset();
        }
        const std::string f = linear_module(c, *b.constant, bias);
        Value v = like(a, Kind::Float);
        v.dims.back() = b.dims[1];
        if (bias) {
            c.em.fused.insert(add->outputs[0]);
            NodeCtx addc(*add, c.em);
            addc.out(0, v, "this->" + f + ".forward(" + c.t(0) + ")");
            // This node's own output is read by the Add only.
            c.em.values[c.node.outputs[0]] = c.em.values[add->outputs[0]];
            return;
        }
        return c.out(0, std::move(v), "this->" + f + ".forward(" + c.t(0) + ")");
    }
    if (a.rank == 1 || b.rank == 1) {
        c.require(a.rank >= 1 && b.rank >= 1, "scalar MatMul");
        const std::size_t rank = std::max<std::size_t>({a.rank, b.rank, 2});
        std::string ea = a.rank == 1 ? c.t(0) + ".template unsqueeze_dim<2>(0)" : c.t(0);
        std::string eb = b.rank == 1 ? c.t(1) + ".template unsqueeze_dim<2>(1)" : c.t(1);
        Value v;
        v.kind = Kind::Float;
        if (a.rank == 1 && b.rank == 1) {
            v.rank = 1, v.scalar = true, v.dims = {1};
            return c.out(0, std::move(v), "(" + ea + ").matmul(" + eb + ").template reshape<1>({1})");
        }
        (void)rank;
        c.require(a.rank <= 2 && b.rank <= 2, "MatMul of a vector with a batch of matrices");
        v.rank = 1;
        v.dims = {a.rank == 1 ? b.dims[1] : a.dims[0]};
        return c.out(0, std::move(v), "(" + ea + ").matmul(" + eb + ").template flatten<1>(0, 1)");
    }
    const std::size_t rank = std::max(a.rank, b.rank);
    Value v;
    v.kind = Kind::Float;
    v.rank = rank;
    v.dims.assign(rank, -1);
    v.dims[rank - 2] = a.dims[a.rank - 2];
    v.dims[rank - 1] = b.dims[b.rank - 1];
    c.out(0, std::move(v), c.t_rank(0, rank) + ".matmul(" + c.t_rank(1, rank) + ")");
}

void gemm(NodeCtx& c) {
    const Value &a = c.in(0), &b = c.in(1);
    const double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
    const bool ta = c.attr_int("transA", 0) != 0, tb = c.attr_int("transB", 0) != 0;
    c.require(a.rank == 2 && b.rank == 2, "Gemm of inputs that are not matrices");
    if (b.constant && !ta && alpha == 1.0 && (beta == 1.0 || !c.has(2))) {
        const TensorData w = tb ? transpose2(*b.constant) : b.constant->convert(DType::F32);
        const std::size_t n = w.shape()[1];
        std::optional<TensorData> bias;
        if (c.has(2)) {
            bias = bias_of(c.in(2), n);
            if (!bias && !(c.in(2).constant && c.in(2).constant->num_elements() == 1)) goto generic;
            if (!bias) {  // a scalar bias broadcast to every column
                const float s = c.in(2).constant->convert(DType::F32).to_vec<float>()[0];
                bias = TensorData(std::vector<float>(n, s), Shape{n});
            }
        }
        {
            const std::string f = linear_module(c, w, bias);
            Value v = like(a, Kind::Float);
            v.dims[1] = std::int64_t(n);
            return c.out(0, std::move(v), "this->" + f + ".forward(" + c.t(0) + ")");
        }
    }
generic:
    Value v = like(a, Kind::Float);
    v.dims = {ta ? a.dims[1] : a.dims[0], tb ? b.dims[0] : b.dims[1]};
    std::string e = "(" + c.t(0) + (ta ? ".transpose()" : "") + ").matmul(" + c.t(1) + (tb ? ".transpose()" : "") + ")";
    if (alpha != 1.0) e = "(" + e + " * " + literal(alpha) + ")";
    if (c.has(2)) {
        std::string cc = c.t_rank(2, 2);
        if (beta != 1.0) cc = "(" + cc + " * " + literal(beta) + ")";
        e = "(" + e + " + " + cc + ")";
    }
    c.out(0, std::move(v), e);
}

// Padding per spatial dim from ONNX's [begin..., end...] pads and auto_pad.
struct Pads {
    Dims begin, end;
    bool symmetric() const { return begin == end; }
};

Pads spatial_pads(NodeCtx& c, const Value& x, const Dims& kernel, const Dims& strides, const Dims& dil) {
    const std::size_t n = kernel.size();
    Dims pads = c.attr_ints("pads", Dims(2 * n, 0));
    const std::string auto_pad = c.attr_str("auto_pad", "NOTSET");
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        pads.assign(2 * n, 0);
        for (std::size_t k = 0; k < n; ++k) {
            const auto in = x.dims[2 + k];
            c.require(in >= 0, "auto_pad " + auto_pad + " needs the input's spatial size");
            const auto out = (in + strides[k] - 1) / strides[k];
            const auto total = std::max<std::int64_t>(0, (out - 1) * strides[k] + (kernel[k] - 1) * dil[k] + 1 - in);
            pads[k] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
            pads[n + k] = total - pads[k];
        }
    } else if (auto_pad == "VALID") {
        pads.assign(2 * n, 0);
    }
    c.require(pads.size() == 2 * n, "pads has the wrong length");
    return {Dims(pads.begin(), pads.begin() + n), Dims(pads.begin() + n, pads.end())};
}

// `x` padded explicitly (2-d only) where the padding is not the same on both sides; the layer
// then pads nothing.
std::string pre_pad_always(NodeCtx& c, const std::string& x, Pads& p, std::string_view fill);
std::string pre_pad(NodeCtx& c, const std::string& x, Pads& p, std::string_view fill) {
    if (p.symmetric()) return x;
    return pre_pad_always(c, x, p, fill);
}
std::string pre_pad_always(NodeCtx& c, const std::string& x, Pads& p, std::string_view fill) {
    c.require(p.begin.size() == 2, "asymmetric padding of a 1-d or 3-d input is not supported");
    const std::string e = x + ".pad({" + std::to_string(p.begin[1]) + ", " + std::to_string(p.end[1]) + ", " +
                          std::to_string(p.begin[0]) + ", " + std::to_string(p.end[0]) + "}, " + std::string(fill) + ")";
    p.begin.assign(2, 0), p.end.assign(2, 0);
    return e;
}

Dims spatial_out(const Value& x, const Dims& kernel, const Dims& strides, const Pads& pads, const Dims& dil, bool ceil) {
    Dims out;
    for (std::size_t k = 0; k < kernel.size(); ++k) {
        const auto in = x.dims[2 + k];
        if (in < 0) {
            out.push_back(-1);
            continue;
        }
        const auto span = in + pads.begin[k] + pads.end[k] - dil[k] * (kernel[k] - 1) - 1;
        out.push_back((ceil ? (span + strides[k] - 1) / strides[k] : span / strides[k]) + 1);
    }
    return out;
}

std::string arr(const Dims& v) { return "{" + join_ints(v) + "}"; }

void conv(NodeCtx& c) {
    const Value &x = c.in(0), &w = c.in(1);
    const std::size_t n = x.rank - 2;
    c.require(n >= 1 && n <= 3, "Conv over " + r(n) + " spatial dims (1 to 3 are supported)");
    Dims kernel = c.attr_ints("kernel_shape");
    if (kernel.empty()) kernel.assign(w.dims.begin() + 2, w.dims.end());
    c.require(kernel.size() == n && std::all_of(kernel.begin(), kernel.end(), [](auto k) { return k > 0; }),
              "the kernel's size must be known");
    const Dims strides = c.attr_ints("strides", Dims(n, 1)), dil = c.attr_ints("dilations", Dims(n, 1));
    Pads pads = spatial_pads(c, x, kernel, strides, dil);
    const Dims out_sp = spatial_out(x, kernel, strides, pads, dil, false);
    const std::string xin = pre_pad(c, c.t(0), pads, "0.0");
    const auto groups = c.attr_int("group", 1);
    Value v = like(x, Kind::Float);
    v.dims[1] = w.dims[0];
    std::copy(out_sp.begin(), out_sp.end(), v.dims.begin() + 2);
    if (!w.constant || (c.has(2) && !c.is_const(2)) || n == 3) {  // the functional op (3-d: no layer)
        const std::string b = c.has(2) ? "std::optional(" + c.t(2) + ")" : "std::nullopt";
        c.out(0, std::move(v), "ember::module::conv" + r(n) + "d(" + xin + ", " + c.t(1) + ", " + b +
                                   ", ember::ConvOptions<" + r(n) + ">{" + arr(strides) + ", " + arr(pads.begin) +
                                   ", " + arr(dil) + ", " + std::to_string(groups) + "})");
        return;
    }
    const std::size_t cout = w.constant->shape()[0], cin = w.constant->shape()[1] * std::size_t(groups);
    std::optional<TensorData> bias;
    if (c.has(2)) {
        bias = bias_of(c.in(2), cout);
        c.require(bias.has_value(), "the bias must be [" + std::to_string(cout) + "]");
    }
    const TensorData wd = w.constant->convert(DType::F32);
    const Dims& pd = pads.begin;
    std::string f;
    if (n == 2) {
        auto m = nn::Conv2dConfig{{cin, cout}, {std::size_t(kernel[0]), std::size_t(kernel[1])},
                                  {std::size_t(strides[0]), std::size_t(strides[1])},
                                  {std::size_t(dil[0]), std::size_t(dil[1])}, std::size_t(groups),
                                  nn::PaddingConfig2d::Explicit(pd[0], pd[1]), bias.has_value()}
                     .init<Cpu>();
        m.weight = Param<ember::Tensor<Cpu, 4>>(ember::Tensor<Cpu, 4>::from_data(wd));
        if (bias) m.bias = Param<ember::Tensor<Cpu, 1>>(ember::Tensor<Cpu, 1>::from_data(*bias));
        f = c.field("conv", "ember::nn::Conv2d<B>",
                    "ember::nn::Conv2dConfig{{" + std::to_string(cin) + ", " + std::to_string(cout) + "}, " +
                        arr(kernel) + ", " + arr(strides) + ", " + arr(dil) + ", " + std::to_string(groups) +
                        ", ember::nn::PaddingConfig2d::Explicit(" + std::to_string(pd[0]) + ", " +
                        std::to_string(pd[1]) + "), " + (bias ? "true" : "false") + "}.template init<B>(device)",
                    m.into_record());
    } else {
        auto m = nn::Conv1dConfig{cin, cout, std::size_t(kernel[0]), std::size_t(strides[0]),
                                  std::size_t(dil[0]), std::size_t(groups),
                                  nn::PaddingConfig1d::Explicit(pd[0]), bias.has_value()}
                     .init<Cpu>();
        m.weight = Param<ember::Tensor<Cpu, 3>>(ember::Tensor<Cpu, 3>::from_data(wd));
        if (bias) m.bias = Param<ember::Tensor<Cpu, 1>>(ember::Tensor<Cpu, 1>::from_data(*bias));
        f = c.field("conv", "ember::nn::Conv1d<B>",
                    "ember::nn::Conv1dConfig{" + std::to_string(cin) + ", " + std::to_string(cout) + ", " +
                        std::to_string(kernel[0]) + ", " + std::to_string(strides[0]) + ", " +
                        std::to_string(dil[0]) + ", " + std::to_string(groups) +
                        ", ember::nn::PaddingConfig1d::Explicit(" + std::to_string(pd[0]) + "), " +
                        (bias ? "true" : "false") + "}.template init<B>(device)",
                    m.into_record());
    }
    c.out(0, std::move(v), "this->" + f + ".forward(" + xin + ")");
}

void pool(NodeCtx& c, bool max) {
    const Value& x = c.in(0);
    const std::size_t n = x.rank - 2;
    c.require(n == 1 || n == 2, "pooling over " + r(n) + " spatial dims (1 and 2 are supported)");
    const Dims kernel = c.attr_ints("kernel_shape");
    c.require(kernel.size() == n, "kernel_shape is missing or of the wrong length");
    const Dims strides = c.attr_ints("strides", Dims(n, 1));
    const Dims dil = c.attr_ints("dilations", Dims(n, 1));
    c.require(x.kind == Kind::Float, "pooling of integers is not supported");
    Pads pp = spatial_pads(c, x, kernel, strides, dil);
    const bool ceil = c.attr_int("ceil_mode", 0) != 0;
    // ember's pools pad at most half a window: wider padding is done first, explicitly.
    const bool wide = [&] {
        for (std::size_t k = 0; k < n; ++k)
            if (2 * pp.begin[k] > kernel[k] || 2 * pp.end[k] > kernel[k]) return true;
        return false;
    }();
    const bool include_pad = c.attr_int("count_include_pad", 0) != 0;
    c.require(!max || c.node.outputs.size() < 2 || c.node.outputs[1].empty(), "MaxPool's indices output is not supported");
    Value v = like(x, Kind::Float);
    const Dims sp = spatial_out(x, kernel, strides, pp, dil, ceil);
    std::copy(sp.begin(), sp.end(), v.dims.begin() + 2);
    c.require(max || include_pad || (pp.symmetric() && !wide), "padding ember pads only explicitly, left out of the average");
    const std::string fill = max ? "-std::numeric_limits<float>::infinity()" : "0.0";
    const std::string xin = wide ? pre_pad_always(c, c.t(0), pp, fill) : pre_pad(c, c.t(0), pp, fill);
    const Dims pads = pp.begin;
    std::string e;
    if (n == 2) {
        e = max ? "ember::module::max_pool2d(" + xin + ", " + arr(kernel) + ", " + arr(strides) + ", " +
                      arr(pads) + ", " + arr(dil) + ", " + (ceil ? "true" : "false") + ")"
                : "ember::module::avg_pool2d(" + xin + ", " + arr(kernel) + ", " + arr(strides) + ", " +
                      arr(pads) + ", " + (include_pad ? "true" : "false") + ", " +
                      (ceil ? "true" : "false") + ")";
    } else {
        e = max ? "ember::module::max_pool1d(" + xin + ", " + std::to_string(kernel[0]) + ", " +
                      std::to_string(strides[0]) + ", " + std::to_string(pads[0]) + ", " + std::to_string(dil[0]) +
                      ", " + (ceil ? "true" : "false") + ")"
                : "ember::module::avg_pool1d(" + xin + ", " + std::to_string(kernel[0]) + ", " +
                      std::to_string(strides[0]) + ", " + std::to_string(pads[0]) + ", " +
                      (include_pad ? "true" : "false") + ", " + (ceil ? "true" : "false") + ")";
    }
    c.out(0, std::move(v), e);
}

void global_pool(NodeCtx& c, const std::string& method) {
    const Value& x = c.in(0);
    c.require(x.rank >= 3, "global pooling of an input without spatial dims");
    Value v = like(x, Kind::Float);
    std::string e = c.t(0);
    for (std::size_t d = 2; d < x.rank; ++d) {
        e += "." + method + "_dim(" + r(d) + ")";
        v.dims[d] = 1;
    }
    c.out(0, std::move(v), e);
}

void batch_norm(NodeCtx& c) {
    const Value& x = c.in(0);
    c.require(c.attr_int("training_mode", 0) == 0, "training_mode=1 is not supported");
    bool consts = true;
    for (std::size_t i = 1; i <= 4; ++i) consts = consts && c.is_const(i);
    if (!consts) {  // statistics computed in the graph: written out, per channel
        auto chan = [&](std::size_t i) {
            std::string e = c.t(i) + ".template unsqueeze_dim<2>(0)";
            for (std::size_t d = 2; d < x.rank; ++d) e += ".template unsqueeze_dim<" + r(d + 1) + ">(" + r(d) + ")";
            return e;
        };
        const double eps = c.attr_float("epsilon", 1e-5);
        c.out(0, like(x, Kind::Float), "(" + c.t(0) + " - " + chan(3) + ") / (" + chan(4) + " + " + literal(eps) +
                                           ").sqrt() * " + chan(1) + " + " + chan(2));
        return;
    }
    const std::size_t ch = c.in(1).constant->num_elements();
    const double eps = c.attr_float("epsilon", 1e-5);
    auto m = nn::BatchNormConfig{ch, eps}.init<Cpu>();
    auto vec = [&](std::size_t i) { return ember::Tensor<Cpu, 1>::from_data(TensorData(c.in(i).constant->convert(DType::F32).to_vec<float>(), Shape{ch})); };
    m.gamma = Param<ember::Tensor<Cpu, 1>>(vec(1));
    m.beta = Param<ember::Tensor<Cpu, 1>>(vec(2));
    m.running_mean = RunningState<ember::Tensor<Cpu, 1>>(vec(3));
    m.running_var = RunningState<ember::Tensor<Cpu, 1>>(vec(4));
    const std::string f = c.field("batch_norm", "ember::nn::BatchNorm<B>",
                                  "ember::nn::BatchNormConfig{" + std::to_string(ch) + ", " + literal(eps) +
                                      "}.template init<B>(device)",
                                  m.into_record());
    c.out(0, like(x, Kind::Float), "this->" + f + ".forward(" + c.t(0) + ")");
}

// Normalisation written out: (x - mean) / sqrt(var + eps) over dims [axis, rank), for the cases
// nn::LayerNorm does not cover (other axes, scales computed in the graph, the Mean and
// InvStdDev outputs).
void layer_norm_ops(NodeCtx& c, std::size_t axis) {
    const Value& x = c.in(0);
    const double eps = c.attr_float("epsilon", 1e-5);
    std::string mean = c.t(0), var;
    for (std::size_t d = axis; d < x.rank; ++d) mean += ".mean_dim(" + r(d) + ")";
    Value stat = like(x, Kind::Float);
    for (std::size_t d = axis; d < x.rank; ++d) stat.dims[d] = 1;
    const std::string mv = c.em.fresh("ln_mean");
    c.em.body.push_back("const auto " + mv + " = " + mean + ";");
    const std::string cv = c.em.fresh("ln_centered");
    c.em.body.push_back("const auto " + cv + " = " + c.t(0) + " - " + mv + ";");
    var = "(" + cv + " * " + cv + ")";
    for (std::size_t d = axis; d < x.rank; ++d) var += ".mean_dim(" + r(d) + ")";
    const std::string inv = c.em.fresh("ln_inv_std");
    c.em.body.push_back("const auto " + inv + " = (" + var + " + " + literal(eps) + ").sqrt().recip();");
    std::string y = "(" + cv + " * " + inv + ") * " + c.t_rank(1, x.rank);
    if (c.has(2)) y = "(" + y + " + " + c.t_rank(2, x.rank) + ")";
    c.out(0, like(x, Kind::Float), y);
    c.out(1, stat, mv);
    c.out(2, stat, inv);
}

void layer_norm(NodeCtx& c) {
    const Value& x = c.in(0);
    const std::size_t axis = c.axis(c.attr_int("axis", -1), x.rank);
    const bool extra = (c.node.outputs.size() > 1 && !c.node.outputs[1].empty()) ||
                       (c.node.outputs.size() > 2 && !c.node.outputs[2].empty());
    if (axis != x.rank - 1 || !c.is_const(1) || (c.has(2) && !c.is_const(2)) || extra)
        return layer_norm_ops(c, axis);
    const std::size_t d = c.in(1).constant->num_elements();
    const double eps = c.attr_float("epsilon", 1e-5);
    auto m = nn::LayerNormConfig{d}.init<Cpu>();
    m.epsilon = eps;
    m.gamma = Param<ember::Tensor<Cpu, 1>>(ember::Tensor<Cpu, 1>::from_data(TensorData(c.in(1).constant->convert(DType::F32).to_vec<float>(), Shape{d})));
    if (c.has(2))
        m.beta = Param<ember::Tensor<Cpu, 1>>(ember::Tensor<Cpu, 1>::from_data(TensorData(c.in(2).constant->convert(DType::F32).to_vec<float>(), Shape{d})));
    else
        m.beta = Param<ember::Tensor<Cpu, 1>>(ember::Tensor<Cpu, 1>::zeros(Shape{d}));
    const std::string f = c.field("layer_norm", "ember::nn::LayerNorm<B>",
                                  "ember::nn::LayerNormConfig{" + std::to_string(d) + ", " + literal(eps) +
                                      "}.template init<B>(device)",
                                  m.into_record());
    c.out(0, like(x, Kind::Float), "this->" + f + ".forward(" + c.t(0) + ")");
}

// LSTM (one direction, default activations) → nn::Lstm. ONNX stacks the gates i, o, f, c in W
// [1, 4H, I], R [1, 4H, H] and B [1, 8H] (input then recurrence biases); ember's gates hold
// [in, out] Linear layers, so each block is transposed into its gate.
void lstm(NodeCtx& c) {
    const Value& x = c.in(0);
    c.require(c.attr_str("direction", "forward") == "forward", "only forward LSTMs are supported");
    c.require(!c.has(4), "sequence_lens is not supported");
    c.require(!c.has_attr("clip") && c.attr_int("input_forget", 0) == 0, "clip and input_forget are not supported");
    c.require(!c.has_attr("activations"), "only the default activations are supported");
    c.require(c.is_const(1) && c.is_const(2) && (!c.has(3) || c.is_const(3)), "W, R and B must be constants");
    const bool batch_first = c.attr_int("layout", 0) == 1;
    const std::size_t h = std::size_t(c.attr_int("hidden_size", c.in(2).dims[2]));
    const std::size_t in = c.in(1).constant->shape()[2];
    const auto w = c.in(1).constant->convert(DType::F32).to_vec<float>();
    const auto rr = c.in(2).constant->convert(DType::F32).to_vec<float>();
    const std::vector<float> b = c.has(3) ? c.in(3).constant->convert(DType::F32).to_vec<float>()
                                          : std::vector<float>(8 * h, 0.0f);
    auto m = nn::LstmConfig{in, h, true}.init<Cpu>();
    m.batch_first = batch_first;
    // block k of a [4H, cols] matrix, transposed to [cols, H]
    auto block = [&](const std::vector<float>& src, std::size_t k, std::size_t cols) {
        std::vector<float> t(cols * h);
        for (std::size_t o = 0; o < h; ++o)
            for (std::size_t i = 0; i < cols; ++i) t[i * h + o] = src[(k * h + o) * cols + i];
        return ember::Tensor<Cpu, 2>::from_data(TensorData(t, Shape{cols, h}));
    };
    auto bias = [&](std::size_t k) {
        return ember::Tensor<Cpu, 1>::from_data(
            TensorData(std::vector<float>(b.begin() + long(k * h), b.begin() + long((k + 1) * h)), Shape{h}));
    };
    auto set = [&](nn::GateController<Cpu>& g, std::size_t k) {  // k: ONNX's block (i0 o1 f2 c3)
        g.input_transform.weight = Param<ember::Tensor<Cpu, 2>>(block(w, k, in));
        g.input_transform.bias = Param<ember::Tensor<Cpu, 1>>(bias(k));
        g.hidden_transform.weight = Param<ember::Tensor<Cpu, 2>>(block(rr, k, h));
        g.hidden_transform.bias = Param<ember::Tensor<Cpu, 1>>(bias(4 + k));
    };
    set(m.input_gate, 0);
    set(m.output_gate, 1);
    set(m.forget_gate, 2);
    set(m.cell_gate, 3);
    const std::string f = c.field("lstm", "ember::nn::Lstm<B>",
                                  "ember::nn::LstmConfig{" + std::to_string(in) + ", " + std::to_string(h) +
                                      ", true, ember::nn::rnn_default_initializer(), " +
                                      (batch_first ? "true" : "false") + "}.template init<B>(device)",
                                  m.into_record());
    std::string state = "std::nullopt";
    if (c.has(5) || c.has(6)) {
        c.require(c.has(5) && c.has(6), "initial_h and initial_c must be given together");
        state = "ember::nn::LstmState<B, 2>{" + c.t(6) + ".template squeeze<2>(0), " + c.t(5) +
                ".template squeeze<2>(0)}";
    }
    const std::string run = c.em.fresh("lstm_run");
    c.em.body.push_back("const auto " + run + " = this->" + f + ".forward(" + c.t(0) + ", " + state + ");");
    const std::int64_t seq = x.dims[batch_first ? 1 : 0], batch = x.dims[batch_first ? 0 : 1];
    Value y;
    y.kind = Kind::Float;
    y.rank = 4;
    y.dims = batch_first ? Dims{batch, seq, 1, std::int64_t(h)} : Dims{seq, 1, batch, std::int64_t(h)};
    c.out(0, y, run + ".first.template unsqueeze_dim<4>(" + (batch_first ? "2" : "1") + ")");
    Value st;
    st.kind = Kind::Float;
    st.rank = 3;
    st.dims = batch_first ? Dims{batch, 1, std::int64_t(h)} : Dims{1, batch, std::int64_t(h)};
    const std::string at = batch_first ? "1" : "0";
    c.out(1, st, run + ".second.hidden.template unsqueeze_dim<3>(" + at + ")");
    c.out(2, st, run + ".second.cell.template unsqueeze_dim<3>(" + at + ")");
}

// ---- more operators ----------------------------------------------------------------------------

void topk(NodeCtx& c) {
    const Value& x = c.in(0);
    const auto k = c.ints(1, "K");
    c.require(k.size() == 1 && k[0] >= 0, "K must be one non-negative integer");
    const std::size_t axis = c.axis(c.attr_int("axis", -1), x.rank);
    const bool largest = c.attr_int("largest", 1) != 0;
    const std::string run = c.em.fresh("topk");
    c.em.body.push_back("const auto " + run + " = " + (largest ? c.t(0) : "(-" + c.t(0) + ")") +
                        ".topk_with_indices(" + std::to_string(k[0]) + ", " + r(axis) + ");");
    Value v = like(x, x.kind);
    v.dims[axis] = k[0];
    c.out(0, v, largest ? run + ".first" : "-" + run + ".first");
    c.out(1, like(v, Kind::Int), run + ".second");
}

void trilu(NodeCtx& c) {
    const Value& x = c.in(0);
    c.require(x.rank >= 2, "Trilu of a tensor of rank below 2");
    const std::int64_t k = c.has(1) ? c.ints(1, "k").at(0) : 0;
    c.out(0, like(x, x.kind), c.t(0) + (c.attr_int("upper", 1) ? ".triu(" : ".tril(") + std::to_string(k) + ")");
}

void gather_elements(NodeCtx& c) {
    const Value &x = c.in(0), &idx = c.in(1);
    c.require(idx.rank == x.rank, "indices and data of different ranks");
    const std::size_t axis = c.axis(c.attr_int("axis", 0), x.rank);
    std::string i = c.t(1);
    if (!idx.constant || x.dims[axis] < 0)  // negative indices count from the end
        i = "(" + i + ").mask_where((" + i + ").lower_elem(static_cast<std::int64_t>(0)), (" + i + ") + long(" + c.t(0) +
            ".dims()[" + r(axis) + "]))";
    else {
        auto list = idx.constant->convert(DType::I64).to_vec<std::int64_t>();
        for (auto& e : list) e = e < 0 ? e + x.dims[axis] : e;
        const std::string var = c.em.fresh("indices");
        c.em.body.push_back("const auto " + var + " = " +
                            inline_tensor(TensorData(list, idx.constant->shape()), idx.rank, Kind::Int) + ";");
        i = var;
    }
    Value v = like(idx, x.kind);
    c.out(0, std::move(v), c.t(0) + ".gather(" + r(axis) + ", " + i + ")");
}

void pad_op(NodeCtx& c) {
    const Value& x = c.in(0);
    const std::string mode = c.attr_str("mode", "constant");
    c.require(mode == "constant" || mode == "edge" || mode == "reflect",
              "mode " + model_text(mode) + " is not supported (constant, edge and reflect are)");
    Dims pads = c.em.opset >= 11 ? c.ints(1, "pads") : c.attr_ints("pads");
    double value = c.em.opset >= 11 ? (c.has(2) ? c.scalar(2).value_or(0.0) : 0.0) : c.attr_float("value", 0.0);
    if (c.em.opset >= 11 && c.has(2)) c.require(c.scalar(2).has_value(), "constant_value must be a constant");
    Dims axes;
    if (c.has(3)) axes = c.ints(3, "axes");
    else for (std::size_t d = 0; d < x.rank; ++d) axes.push_back(std::int64_t(d));
    c.require(pads.size() == 2 * axes.size(), "pads has the wrong length");
    Dims begin(x.rank, 0), end(x.rank, 0);
    for (std::size_t k = 0; k < axes.size(); ++k) {
        const std::size_t a = c.axis(axes[k], x.rank);
        begin[a] = pads[k], end[a] = pads[axes.size() + k];
        c.require(begin[a] >= 0 && end[a] >= 0, "negative pads (cropping) are not supported");
    }
    Value v = like(x, x.kind);
    if (mode != "constant") {  // each padded dim re-read through an index list built here
        std::string e = c.t(0);
        for (std::size_t d = 0; d < x.rank; ++d) {
            if (begin[d] == 0 && end[d] == 0) continue;
            const std::int64_t n = x.dims[d];
            c.require(n > 0, mode + " padding of a dim whose size is not known at import");
            c.require(mode == "edge" || (begin[d] < n && end[d] < n),
                      "reflect padding by " + std::to_string(std::max(begin[d], end[d])) +
                          " of a dim of size " + std::to_string(n));
            std::vector<std::int64_t> list;
            for (std::int64_t i = -begin[d]; i < n + end[d]; ++i) {
                std::int64_t j =
                    i;  // edge: the nearest end; reflect: mirrored at the ends, not repeating them
                if (mode == "edge")
                    j = std::clamp<std::int64_t>(i, 0, n - 1);
                else if (i < 0)
                    j = -i;
                else if (i >= n)
                    j = 2 * (n - 1) - i;
                list.push_back(j);
            }
            const std::string var = c.em.fresh("pad_index");
            c.em.body.push_back("const auto " + var + " = " +
                                inline_tensor(TensorData(list, Shape{list.size()}), 1, Kind::Int) +
                                ";");
            e += ".select(" + r(d) + ", " + var + ")";
            v.dims[d] += begin[d] + end[d];
        }
        return c.out(0, std::move(v), e);
    }
    std::vector<std::string> dims, ranges;
    for (std::size_t d = 0; d < x.rank; ++d) {
        const std::string n = dim_expr(c, 0, d);
        dims.push_back("std::size_t(" + n + " + " + std::to_string(begin[d] + end[d]) + ")");
        ranges.push_back("ember::Slice{" + std::to_string(begin[d]) + ", " + std::to_string(begin[d]) + " + " + n + "}");
        if (v.dims[d] >= 0) v.dims[d] += begin[d] + end[d];
    }
    c.out(0, std::move(v), tensor_type(x.kind, x.rank) + "::full(ember::Shape{" + join(dims) + "}, " +
                               scalar_literal(value, x.kind) + ", device).slice_assign(std::vector<ember::Slice>{" +
                               join(ranges) + "}, " + c.t(0) + ")");
}

void one_hot(NodeCtx& c) {
    const Value& idx = c.in(0);
    const auto depth = c.scalar(1);
    c.require(depth.has_value(), "depth must be a constant");
    c.require(c.is_const(2) && c.in(2).constant->num_elements() == 2, "values must be a constant pair");
    const auto vals = c.in(2).constant->convert(DType::F64).to_vec<double>();
    const Kind k = kind_of(c.in(2).constant->dtype());
    const std::size_t out_rank = idx.rank + 1;
    const std::size_t axis = c.axis(c.attr_int("axis", -1), out_rank);
    const auto n = static_cast<std::int64_t>(*depth);
    std::string i = c.t_as(0, Kind::Int);
    i = "(" + i + ").mask_where((" + i + ").lower_elem(static_cast<std::int64_t>(0)), (" + i + ") + static_cast<std::int64_t>(" +
        std::to_string(n) + "))";
    std::string e = i + ".one_hot(" + std::to_string(n) + ")";
    e = k == Kind::Float ? "(" + e + ".float_() * " + literal(vals[1] - vals[0]) + " + " + literal(vals[0]) + ")"
                         : "(" + e + " * " + scalar_literal(vals[1] - vals[0], k) + " + " + scalar_literal(vals[0], k) + ")";
    Value v;
    v.kind = k;
    v.rank = out_rank;
    v.dims = idx.dims;
    v.dims.push_back(n);
    if (axis != out_rank - 1) {
        Dims perm;
        for (std::size_t d = 0; d < out_rank - 1; ++d) perm.push_back(std::int64_t(d));
        perm.insert(perm.begin() + long(axis), std::int64_t(out_rank - 1));
        Dims moved(out_rank);
        for (std::size_t d = 0; d < out_rank; ++d) moved[d] = v.dims[std::size_t(perm[d])];
        v.dims = moved;
        e += ".permute({" + join_ints(perm) + "})";
    }
    c.out(0, std::move(v), e);
}

void instance_norm(NodeCtx& c) {
    const Value& x = c.in(0);
    c.require(x.rank >= 3, "InstanceNormalization of an input without spatial dims");
    const double eps = c.attr_float("epsilon", 1e-5);
    std::string mean = c.t(0);
    for (std::size_t d = 2; d < x.rank; ++d) mean += ".mean_dim(" + r(d) + ")";
    const std::string cv = c.em.fresh("centered");
    c.em.body.push_back("const auto " + cv + " = " + c.t(0) + " - " + mean + ";");
    std::string var = "(" + cv + " * " + cv + ")";
    for (std::size_t d = 2; d < x.rank; ++d) var += ".mean_dim(" + r(d) + ")";
    auto chan = [&](std::size_t i) {
        std::string e = c.t(i) + ".template unsqueeze_dim<2>(0)";
        for (std::size_t d = 2; d < x.rank; ++d) e += ".template unsqueeze_dim<" + r(d + 1) + ">(" + r(d) + ")";
        return e;
    };
    c.out(0, like(x, Kind::Float), cv + " / (" + var + " + " + literal(eps) + ").sqrt() * " + chan(1) + " + " + chan(2));
}

void conv_transpose(NodeCtx& c) {
    const Value &x = c.in(0), &w = c.in(1);
    const std::size_t n = x.rank - 2;
    c.require(n >= 1 && n <= 3, "ConvTranspose over " + r(n) + " spatial dims (1 to 3 are supported)");
    c.require(!c.has_attr("output_shape"), "output_shape is not supported (give pads and output_padding)");
    const std::string ap = c.attr_str("auto_pad", "NOTSET");
    c.require(ap == "NOTSET" || ap == "VALID", "auto_pad " + model_text(ap) + " is not supported");
    Dims kernel = c.attr_ints("kernel_shape");
    if (kernel.empty()) kernel.assign(w.dims.begin() + 2, w.dims.end());
    const Dims strides = c.attr_ints("strides", Dims(n, 1)), dil = c.attr_ints("dilations", Dims(n, 1));
    const Dims out_pad = c.attr_ints("output_padding", Dims(n, 0));
    Dims pads = c.attr_ints("pads", Dims(2 * n, 0));
    for (std::size_t k = 0; k < n; ++k)
        c.require(pads[k] == pads[n + k], "asymmetric padding is not supported");
    const auto groups = c.attr_int("group", 1);
    Value v = like(x, Kind::Float);
    v.dims[1] = w.dims[1] < 0 ? -1 : w.dims[1] * groups;
    for (std::size_t k = 0; k < n; ++k)
        v.dims[2 + k] = x.dims[2 + k] < 0 ? -1
                                          : (x.dims[2 + k] - 1) * strides[k] - 2 * pads[k] + dil[k] * (kernel[k] - 1) +
                                                out_pad[k] + 1;
    const std::string b = c.has(2) ? "std::optional(" + c.t(2) + ")" : "std::nullopt";
    c.out(0, std::move(v), "ember::module::conv_transpose" + r(n) + "d(" + c.t(0) + ", " + c.t(1) + ", " + b +
                               ", ember::ConvTransposeOptions<" + r(n) + ">{" + arr(strides) + ", " +
                               arr(Dims(pads.begin(), pads.begin() + long(n))) + ", " + arr(out_pad) + ", " + arr(dil) +
                               ", " + std::to_string(groups) + "})");
}

void depth_space(NodeCtx& c, bool to_space) {
    const Value& x = c.in(0);
    c.require(x.rank == 4, "needs [N, C, H, W]");
    for (std::size_t d = 1; d < 4; ++d) c.require(x.dims[d] >= 0, "needs static C, H and W");
    const auto b = c.attr_int("blocksize", 0);
    c.require(b > 0, "blocksize must be positive");
    const std::string nd = "long(" + c.t(0) + ".dims()[0])";
    const auto C = x.dims[1], H = x.dims[2], W = x.dims[3];
    Value v = like(x, Kind::Float);
    std::string e;
    if (to_space) {
        const bool crd = c.attr_str("mode", "DCR") == "CRD";
        e = crd ? c.t(0) + ".template reshape<6>({" + nd + ", " + std::to_string(C / (b * b)) + ", " + std::to_string(b) +
                      ", " + std::to_string(b) + ", " + std::to_string(H) + ", " + std::to_string(W) +
                      "}).permute({0, 1, 4, 2, 5, 3})"
                : c.t(0) + ".template reshape<6>({" + nd + ", " + std::to_string(b) + ", " + std::to_string(b) + ", " +
                      std::to_string(C / (b * b)) + ", " + std::to_string(H) + ", " + std::to_string(W) +
                      "}).permute({0, 3, 4, 1, 5, 2})";
        v.dims = {x.dims[0], C / (b * b), H * b, W * b};
    } else {
        e = c.t(0) + ".template reshape<6>({" + nd + ", " + std::to_string(C) + ", " + std::to_string(H / b) + ", " +
            std::to_string(b) + ", " + std::to_string(W / b) + ", " + std::to_string(b) + "}).permute({0, 3, 5, 1, 2, 4})";
        v.dims = {x.dims[0], C * b * b, H / b, W / b};
    }
    c.out(0, v, e + ".template reshape<4>({" + nd + ", " + std::to_string(v.dims[1]) + ", " + std::to_string(v.dims[2]) +
                    ", " + std::to_string(v.dims[3]) + "})");
}

namespace {
// Resize along each dim separately, with ONNX's reference definition (onnx/backend/test/case/
// node/resize.py): output index o maps to x = the coordinate transformation of o; with
// base = ceil(x) - 1 and ratio = x - base in (0, 1], nearest picks base or base + 1 by
// nearest_mode, linear weighs base and base + 1, cubic base - 1 .. base + 2 with the cubic
// convolution coefficients; indices outside the input read its edge (or weigh 0 with
// exclude_outside); tf_crop_and_resize writes extrapolation_value where x leaves the input.
// Index lists and weights are computed here, so every resized dim must be known at import.
struct ResizeTaps {
    std::vector<std::vector<std::int64_t>> index;  // per tap, per output position
    std::vector<std::vector<double>> weight;       // per tap, per output position
    std::vector<double> extra;                     // added per output position
};

ResizeTaps resize_taps(NodeCtx& c, const std::string& mode, const std::string& coord,
                       std::int64_t in, std::int64_t out, double scale, double roi_lo,
                       double roi_hi) {
    const std::string nearest = c.attr_str("nearest_mode", "round_prefer_floor");
    const double a = c.attr_float("cubic_coeff_a", -0.75),
                 extrapolation = c.attr_float("extrapolation_value", 0.0);
    const bool exclude = c.attr_int("exclude_outside", 0) != 0;
    const std::size_t n = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
    ResizeTaps t;
    t.index.assign(n, {}), t.weight.assign(n, {});
    const double width = scale * double(in);  // the reference's (unrounded) output width
    for (std::int64_t o = 0; o < out; ++o) {
        const double od = double(o);
        double x = 0.0;
        bool outside = false;
        if (coord == "half_pixel")
            x = (od + 0.5) / scale - 0.5;
        else if (coord == "pytorch_half_pixel")
            x = width > 1.0 ? (od + 0.5) / scale - 0.5 : -0.5;
        else if (coord == "align_corners")
            x = width == 1.0 ? 0.0 : od * double(in - 1) / (width - 1.0);
        else if (coord == "asymmetric")
            x = od / scale;
        else if (coord == "tf_half_pixel_for_nearest" || coord == "tf_half_pixel_for_nn")
            x = (od + 0.5) / scale;
        else if (coord == "tf_crop_and_resize") {
            x = width == 1.0 ? (roi_hi - roi_lo) * double(in - 1) / 2.0
                             : od * (roi_hi - roi_lo) * double(in - 1) / (width - 1.0);
            x += roi_lo * double(in - 1);
            outside = x < 0.0 || x > double(in - 1);
        } else {
            c.fail("coordinate_transformation_mode " + model_text(coord) + " is not known");
        }
        const double base = std::ceil(x) - 1.0, ratio = x - base;
        std::vector<double> w;
        if (mode == "nearest") {
            bool up = true;  // ratio 1: x is an integer, base + 1
            if (ratio < 1.0) {
                if (nearest == "round_prefer_floor")
                    up = ratio > 0.5;
                else if (nearest == "round_prefer_ceil")
                    up = ratio >= 0.5;
                else if (nearest == "floor")
                    up = false;
                else if (nearest == "ceil")
                    up = true;
                else
                    c.fail("nearest_mode " + model_text(nearest) + " is not known");
            }
            t.index[0].push_back(
                std::clamp<std::int64_t>(std::int64_t(base) + (up ? 1 : 0), 0, in - 1));
            t.weight[0].push_back(outside ? 0.0 : 1.0);
            t.extra.push_back(outside ? extrapolation : 0.0);
            continue;
        }
        if (mode == "linear") {
            w = {1.0 - ratio, ratio};
        } else {
            const double r1 = ratio + 1.0, q = 1.0 - ratio, q1 = q + 1.0;
            w = {((a * r1 - 5.0 * a) * r1 + 8.0 * a) * r1 - 4.0 * a,
                 ((a + 2.0) * ratio - (a + 3.0)) * ratio * ratio + 1.0,
                 ((a + 2.0) * q - (a + 3.0)) * q * q + 1.0,
                 ((a * q1 - 5.0 * a) * q1 + 8.0 * a) * q1 - 4.0 * a};
        }
        const std::int64_t first = std::int64_t(base) - (mode == "linear" ? 0 : 1);
        if (exclude) {
            double sum = 0.0;
            for (std::size_t j = 0; j < n; ++j) {
                const std::int64_t i = first + std::int64_t(j);
                if (i < 0 || i >= in) w[j] = 0.0;
                sum += w[j];
            }
            for (auto& v : w) v = sum != 0.0 ? v / sum : 0.0;
        }
        for (std::size_t j = 0; j < n; ++j) {
            t.index[j].push_back(std::clamp<std::int64_t>(first + std::int64_t(j), 0, in - 1));
            t.weight[j].push_back(outside ? 0.0 : w[j]);
        }
        t.extra.push_back(outside ? extrapolation : 0.0);
    }
    return t;
}
}  // namespace

void resize(NodeCtx& c) {
    const Value& x = c.in(0);
    const std::string mode = c.attr_str("mode", "nearest");
    const std::string coord = c.attr_str("coordinate_transformation_mode", "half_pixel");
    c.require(mode == "nearest" || mode == "linear" || mode == "cubic",
              "mode " + model_text(mode) + " is not known");
    Dims size;
    std::vector<double> scales;
    if (c.has(3)) {
        size = c.ints(3, "sizes");
        c.require(size.size() == x.rank, "sizes must have one entry per dim");
        for (std::size_t d = 0; d < x.rank; ++d)
            scales.push_back(x.dims[d] > 0 ? double(size[d]) / double(x.dims[d]) : 1.0);
    } else {
        c.require(c.is_const(2), "scales must be constants");
        scales = c.in(2).constant->convert(DType::F64).to_vec<double>();
        c.require(scales.size() == x.rank, "scales must have one entry per dim");
        for (std::size_t d = 0; d < x.rank; ++d) {
            c.require(x.dims[d] >= 0 || scales[d] == 1.0,
                      "scales need the size of the dims they resize");
            size.push_back(scales[d] == 1.0
                               ? x.dims[d]
                               : std::int64_t(std::floor(double(x.dims[d]) * scales[d])));
        }
    }
    Value v = like(x, Kind::Float);
    for (std::size_t d = 0; d < x.rank; ++d) v.dims[d] = size[d];
    // The 2-d cases ember's interpolate computes the same way (exact scales, outputs wider than
    // one pixel) go there; every other one through index lists and weights.
    bool exact = x.rank == 4 && (x.dims[0] < 0 || size[0] == x.dims[0]) &&
                 (x.dims[1] < 0 || size[1] == x.dims[1]);
    for (std::size_t d = 2; exact && d < 4; ++d)
        exact = x.dims[d] > 0 && size[d] > 1 && double(size[d]) == double(x.dims[d]) * scales[d];
    std::string opts;
    if (mode == "nearest" && coord == "asymmetric" &&
        c.attr_str("nearest_mode", "round_prefer_floor") == "floor")
        opts = "ember::InterpolateOptions{ember::InterpolateMode::Nearest, false}";
    else if (mode == "linear" && (coord == "half_pixel" || coord == "pytorch_half_pixel"))
        opts = "ember::InterpolateOptions{ember::InterpolateMode::Bilinear, false}";
    else if (mode == "linear" && coord == "align_corners")
        opts = "ember::InterpolateOptions{ember::InterpolateMode::Bilinear, true}";
    if (exact && !opts.empty())
        return c.out(0, std::move(v),
                     "ember::module::interpolate(" + c.t_as(0, Kind::Float) + ", {" +
                         std::to_string(size[2]) + ", " + std::to_string(size[3]) + "}, " + opts +
                         ")");
    std::vector<double> roi;
    if (coord == "tf_crop_and_resize") {
        c.require(c.is_const(1), "roi must be a constant");
        roi = c.in(1).constant->convert(DType::F64).to_vec<double>();
        c.require(roi.size() == 2 * x.rank, "roi must have two entries per dim");
    }
    std::string e = c.em.fresh("resized");
    c.em.body.push_back("auto " + e + " = " + c.t_as(0, Kind::Float) + ";");
    for (std::size_t d = 0; d < x.rank; ++d) {
        const bool crop = !roi.empty() && (roi[d] != 0.0 || roi[x.rank + d] != 1.0);
        if (scales[d] == 1.0 && (x.dims[d] < 0 || size[d] == x.dims[d]) && !crop) continue;
        c.require(x.dims[d] > 0 && size[d] > 0,
                  "resizing dim " + r(d) + " needs its size at import");
        const auto taps =
            resize_taps(c, mode, coord, x.dims[d], size[d], scales[d], roi.empty() ? 0.0 : roi[d],
                        roi.empty() ? 1.0 : roi[x.rank + d]);
        Shape along(std::vector<std::size_t>(x.rank, 1));
        along[d] = std::size_t(size[d]);
        std::vector<std::string> terms;
        for (std::size_t j = 0; j < taps.index.size(); ++j) {
            const std::string iv = c.em.fresh("resize_index"), wv = c.em.fresh("resize_weight");
            c.em.body.push_back(
                "const auto " + iv + " = " +
                inline_tensor(TensorData(taps.index[j], Shape{taps.index[j].size()}), 1,
                              Kind::Int) +
                ";");
            std::vector<float> w(taps.weight[j].begin(), taps.weight[j].end());
            c.em.body.push_back("const auto " + wv + " = " +
                                inline_tensor(TensorData(w, along), x.rank, Kind::Float) + ";");
            terms.push_back(e + ".select(" + r(d) + ", " + iv + ") * " + wv);
        }
        if (std::any_of(taps.extra.begin(), taps.extra.end(), [](double v) { return v != 0.0; })) {
            const std::string xv = c.em.fresh("resize_extra");
            std::vector<float> w(taps.extra.begin(), taps.extra.end());
            c.em.body.push_back("const auto " + xv + " = " +
                                inline_tensor(TensorData(w, along), x.rank, Kind::Float) + ";");
            terms.push_back(xv);
        }
        c.em.body.push_back(e + " = " + join(terms, " + ") + ";");
    }
    c.out(0, std::move(v), e);
}

void eye_like(NodeCtx& c) {
    const Value& x = c.in(0);
    c.require(x.rank == 2 && x.dims[0] >= 0 && x.dims[1] >= 0, "needs a 2-d input of static shape");
    const auto k = c.attr_int("k", 0);
    const auto rows = std::size_t(x.dims[0]), cols = std::size_t(x.dims[1]);
    std::vector<float> v(rows * cols, 0.0f);
    for (std::size_t i = 0; i < rows; ++i) {
        const auto j = std::int64_t(i) + k;
        if (j >= 0 && j < std::int64_t(cols)) v[i * cols + std::size_t(j)] = 1.0f;
    }
    TensorData d(v, Shape{rows, cols});
    const int to = int(c.attr_int("dtype", 0));
    DType dt = to ? dtype_of(to).value_or(DType::F32) : x.constant ? x.constant->dtype()
                                                    : (x.kind == Kind::Float ? DType::F32 : DType::I64);
    c.out_const(0, d.convert(dt));
}

void random_op(NodeCtx& c, bool normal, bool like) {
    Dims shape;
    Value v;
    if (like) {
        const Value& x = c.in(0);
        v = like_value(x);
        std::vector<std::string> dims;
        for (std::size_t d = 0; d < x.rank; ++d) dims.push_back("std::size_t(" + dim_expr(c, 0, d) + ")");
        const std::string dist = normal ? "ember::Distribution::Normal(" + literal(c.attr_float("mean", 0.0)) + ", " +
                                              literal(c.attr_float("scale", 1.0)) + ")"
                                        : "ember::Distribution::Uniform(" + literal(c.attr_float("low", 0.0)) + ", " +
                                              literal(c.attr_float("high", 1.0)) + ")";
        c.out(0, std::move(v), tensor_type(Kind::Float, x.rank) + "::random(ember::Shape{" + join(dims) + "}, " + dist +
                                   ", device)");
        return;
    }
    shape = c.attr_ints("shape");
    c.require(!shape.empty(), "the shape attribute is missing");
    v.kind = Kind::Float;
    v.rank = shape.size();
    v.dims = shape;
    const std::string dist = normal ? "ember::Distribution::Normal(" + literal(c.attr_float("mean", 0.0)) + ", " +
                                          literal(c.attr_float("scale", 1.0)) + ")"
                                    : "ember::Distribution::Uniform(" + literal(c.attr_float("low", 0.0)) + ", " +
                                          literal(c.attr_float("high", 1.0)) + ")";
    c.out(0, std::move(v), tensor_type(Kind::Float, shape.size()) + "::random(ember::Shape{" + join_ints(shape) + "}, " +
                               dist + ", device)");
}

void hardmax(NodeCtx& c) {
    const Value& x = c.in(0);
    const std::size_t axis = c.axis(c.attr_int("axis", -1), x.rank);
    c.require(c.em.opset >= 13, "Hardmax before opset 13 (over flattened dims) is not supported");
    c.require(x.dims[axis] >= 0, "Hardmax needs the size of its axis");
    // The first maximum along the axis: its index compared with every position.
    const std::string idx = c.t(0) + ".argmax(" + r(axis) + ")";
    std::vector<std::string> shape(x.rank, "1");
    shape[axis] = std::to_string(x.dims[axis]);
    const std::string pos = "ember::Tensor<B, 1, ember::Int>::arange(0, " + std::to_string(x.dims[axis]) +
                            ", device).template reshape<" + r(x.rank) + ">({" + join(shape) + "})";
    c.out(0, like_value(x), idx + ".equal(" + pos + ").float_()");
}

}  // namespace ember::onnx::ops
