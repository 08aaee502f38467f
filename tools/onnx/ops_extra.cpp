// Operators built on ember's composed tensor ops (<ember/tensor/composed.hpp>, issue 33):
// inverse trigonometric functions, CumSum, GatherND, ScatterND, ScatterElements, NonZero,
// CastLike, the loss operators (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), the
// window generators, MeanVarianceNormalization, LRN, BitShift, GridSample
// (<ember/tensor/sampling.hpp>), RNN and GRU.
//
// Like every handler, these write C++ built only from what the importer computed itself (ranks,
// dims, literals, fresh identifiers); no text of the model (names, strings) reaches the code.
#include <cmath>
#include <numbers>
#include <string>

#include "ops_common.hpp"

namespace ember::onnx::ops {
namespace {

// The ONNX element type of input `i`: its constant's, else the graph's declaration (0: unknown).
int elem_type_of(NodeCtx& c, std::size_t i) {
    const std::string& name = c.node.inputs[i];
    for (const auto* list : {&g_graph->inputs, &g_graph->value_info, &g_graph->outputs})
        for (const auto& vi : *list)
            if (vi.name == name) return vi.elem_type;
    return 0;
}

// An integer index tensor (input `i`) with negative entries counted from the end of input 0's
// dim `axis` (GatherElements' rule, which ScatterElements shares).
std::string wrapped_indices(NodeCtx& c, std::size_t i, std::size_t axis) {
    const std::string idx = c.em.fresh("indices");
    c.em.body.push_back("const auto " + idx + " = " + c.t_as(i, Kind::Int) + ";");
    return idx + ".mask_where(" + idx + ".lower_elem(static_cast<std::int64_t>(0)), " + idx +
           " + long(" + c.t(0) + ".dims()[" + r(axis) + "]))";
}

void cast_like(NodeCtx& c) {
    const Value& a = c.in(0);
    Kind k = c.in(1).kind;
    std::optional<DType> d;
    if (c.in(1).constant)
        d = c.in(1).constant->dtype();
    else if (const int et = elem_type_of(c, 1); et != 0) {
        d = dtype_of(et);
        c.require(d.has_value(), "CastLike to " + std::string(onnx_type_name(et)) +
                                     ", which ember has no dtype for");
    }
    if (d) k = kind_of(*d);
    if (a.constant && d)
        return c.out_const(0, a.constant->convert(k == Kind::Float ? DType::F32 : *d));
    c.out(0, like(a, k), c.t_as(0, k));
}

void cum_sum(NodeCtx& c) {
    const Value& x = c.in(0);
    c.require(x.kind != Kind::Bool, "CumSum of booleans");
    const auto ax = c.ints(1, "axis");
    c.require(ax.size() == 1, "axis must hold one value");
    const std::size_t axis = c.axis(ax[0], x.rank);
    const bool reverse = c.attr_int("reverse", 0) != 0, exclusive = c.attr_int("exclusive", 0) != 0;
    const std::string flip = ".flip({" + r(axis) + "L})";
    const std::string xs = c.em.fresh("scanned");
    c.em.body.push_back("const auto " + xs + " = " + c.t(0) + (reverse ? flip : "") + ";");
    // The exclusive sum is the inclusive one less each element (exact for integers; for floats
    // one rounding of the running sum).
    std::string e = "ember::cumsum(" + xs + ", " + r(axis) + ")";
    if (exclusive) e = "(" + e + " - " + xs + ")";
    if (reverse) e = "(" + e + ")" + flip;
    c.out(0, like(x, x.kind), e);
}

void gather_nd(NodeCtx& c) {
    const Value &x = c.in(0), &idx = c.in(1);
    c.require(c.attr_int("batch_dims", 0) == 0, "batch_dims other than 0 is not supported");
    c.require(idx.kind == Kind::Int, "indices must be integers");
    c.require(!idx.dims.empty() && idx.dims.back() > 0, "the last dim of indices must be known");
    const auto k = static_cast<std::size_t>(idx.dims.back());
    c.require(k <= x.rank,
              "index tuples of length " + std::to_string(k) + " into data of rank " + r(x.rank));
    Value v;
    v.kind = x.kind;
    for (std::size_t d = 0; d + 1 < idx.rank; ++d) v.dims.push_back(idx.dims[d]);
    for (std::size_t d = k; d < x.rank; ++d) v.dims.push_back(x.dims[d]);
    std::string i = c.t(1);
    if (v.dims.empty()) {  // one full tuple: an ONNX scalar, held as [1]
        v.scalar = true;
        v.dims = {1};
        i += ".template unsqueeze_dim<" + r(idx.rank + 1) + ">(0)";
    }
    v.rank = v.dims.size();
    const std::string e = "ember::gather_nd<" + r(v.rank) + ">(" + c.t(0) + ", " + i + ")";
    c.out(0, std::move(v), e);
}

void scatter_nd(NodeCtx& c) {
    const Value& x = c.in(0);
    c.require(x.kind != Kind::Bool, "ScatterND of booleans");
    c.require(c.in(1).kind == Kind::Int, "indices must be integers");
    const std::string red = c.attr_str("reduction", "none");
    const std::string xs = c.t(0), i = c.t(1), u = c.t_as(2, x.kind);
    // scatter_nd writes the sum of the updates a repeated tuple names, so "add" is the data plus
    // the updates scattered into zeros (repeated tuples included, as ONNX's reference does).
    if (red == "none")
        return c.out(0, like(x, x.kind), "ember::scatter_nd(" + xs + ", " + i + ", " + u + ")");
    if (red == "add")
        return c.out(
            0, like(x, x.kind),
            "(" + xs + " + ember::scatter_nd(" + xs + ".zeros_like(), " + i + ", " + u + "))");
    c.require(red == "mul", "reduction " + model_text(red) + " is not supported (none, add and mul are)");
    c.require(x.kind == Kind::Float, "reduction mul of integers is not supported");
    // The product of the updates each position receives, repeated tuples included, from sums:
    // exp(Σ log|u|), the sign from the count of negative factors, 0 where a factor is 0.
    const std::string uv = c.em.fresh("updates"), z = c.em.fresh("zeros");
    c.em.body.push_back("const auto " + uv + " = " + u + ";");
    c.em.body.push_back("const auto " + z + " = " + xs + ".zeros_like();");
    auto sum_of = [&](const std::string& v) {
        return "ember::scatter_nd(" + z + ", " + i + ", " + v + ")";
    };
    const std::string negs = sum_of(uv + ".lower_elem(0.0).float_()"),
                      nulls = sum_of(uv + ".equal_elem(0.0).float_()");
    c.out(0, like(x, x.kind),
          "(" + xs + " * " + sum_of(uv + ".abs().log()") + ".exp() * (1.0 - ember::fmod_scalar(" +
              negs + ", 2.0) * 2.0)).mask_fill(" + nulls + ".greater_elem(0.0), 0.0)");
}

void scatter_elements(NodeCtx& c) {
    const Value &x = c.in(0), &idx = c.in(1), &u = c.in(2);
    c.require(x.kind != Kind::Bool, "ScatterElements of booleans");
    c.require(idx.rank == x.rank && u.rank == x.rank,
              "data, indices and updates of different ranks");
    const std::size_t axis = c.axis(c.attr_int("axis", 0), x.rank);
    const std::string red = c.attr_str("reduction", "none");
    const std::string i = c.em.fresh("at");
    c.em.body.push_back("const auto " + i + " = " + wrapped_indices(c, 1, axis) + ";");
    const std::string xs = c.t(0), us = c.t_as(2, x.kind), zero = scalar_literal(0, x.kind);
    const std::string ax = r(axis);
    if (red == "add")
        return c.out(0, like(x, x.kind), xs + ".scatter(" + ax + ", " + i + ", " + us + ")");
    c.require(red == "none", "reduction " + model_text(red) + " is not supported (none and add are)");
    // Replace: clear the positions the indices name, then add the updates there.
    const std::string hit = c.em.fresh("hit");
    c.em.body.push_back("const auto " + hit + " = " + xs + ".zeros_like().scatter(" + ax + ", " +
                        i + ", " + us + ".ones_like()).greater_elem(" + zero + ");");
    c.out(0, like(x, x.kind),
          xs + ".mask_fill(" + hit + ", " + zero + ").scatter(" + ax + ", " + i + ", " + us + ")");
}

void non_zero(NodeCtx& c) {
    const Value& x = c.in(0);
    c.require(!x.scalar, "NonZero of a scalar is not supported");
    std::string m = x.kind == Kind::Bool
                        ? c.t(0)
                        : c.t(0) + ".not_equal_elem(" + scalar_literal(0, x.kind) + ")";
    Value v;
    v.kind = Kind::Int;
    v.rank = 2;
    v.dims = {std::int64_t(x.rank), -1};
    c.out(0, std::move(v), m + ".argwhere().transpose()");
}

// NegativeLogLikelihoodLoss on log-probabilities `lp` (input (N, C, d...), C++ expression) and
// targets (input `t`), optional class weights (input `w`): outputs 0 is the loss.
void nll(NodeCtx& c, const std::string& lp, std::size_t rank, std::size_t t, std::size_t w) {
    const Value& tgt = c.in(t);
    c.require(rank >= 2, "an input of rank " + r(rank) + " (N, C, d...) is needed");
    c.require(tgt.rank == rank - 1,
              "targets of rank " + r(tgt.rank) + " for an input of rank " + r(rank));
    c.require(tgt.kind == Kind::Int, "targets must be integers");
    const std::string red = c.attr_str("reduction", "mean");
    c.require(red == "none" || red == "sum" || red == "mean", "reduction " + model_text(red) + " is not known");
    const std::string tg = c.em.fresh("target"), ign = c.em.fresh("ignored"),
                      wt = c.em.fresh("weight"), ls = c.em.fresh("loss");
    c.em.body.push_back("const auto " + tg + " = " + c.t(t) + ";");
    const bool has_ignore = c.has_attr("ignore_index");
    std::string safe = tg;
    if (has_ignore) {  // ignored targets may lie outside [0, C): read class 0 there, weigh it 0
        const std::string ii =
            "static_cast<std::int64_t>(" + std::to_string(c.attr_int("ignore_index", 0)) + ")";
        c.em.body.push_back("const auto " + ign + " = " + tg + ".equal_elem(" + ii + ");");
        safe = tg + ".mask_fill(" + ign + ", static_cast<std::int64_t>(0))";
    }
    std::string weight = c.has(w)
                             ? "ember::take<" + r(rank - 1) + ">(" + c.t(w) + ", 0, " + safe + ")"
                             : tg + ".float_().ones_like()";
    if (has_ignore) weight = "(" + weight + ").mask_fill(" + ign + ", 0.0)";
    c.em.body.push_back("const auto " + wt + " = " + weight + ";");
    c.em.body.push_back("const auto " + ls + " = -(" + lp + ").gather(1, (" + safe +
                        ").template unsqueeze_dim<" + r(rank) + ">(1)).template squeeze<" +
                        r(rank - 1) + ">(1) * " + wt + ";");
    Value v;
    if (red == "none") {
        v = like(tgt, Kind::Float);
        return c.out(0, std::move(v), ls);
    }
    v.kind = Kind::Float, v.rank = 1, v.scalar = true, v.dims = {1};
    c.out(0, std::move(v), red == "sum" ? ls + ".sum()" : "(" + ls + ".sum() / " + wt + ".sum())");
}

// The window generators: values known at import time (the size must be).
void window(NodeCtx& c, const std::string& op) {
    const auto n = c.ints(0, "size");
    c.require(n.size() == 1 && n[0] >= 0, "size must be one non-negative integer");
    const int dt = int(c.attr_int("output_datatype", 1));
    const auto d = dtype_of(dt);
    c.require(d.has_value(), "output_datatype " + std::string(onnx_type_name(dt)) +
                                 ", which ember has no dtype for");
    const std::int64_t size = n[0];
    const double len = c.attr_int("periodic", 1) != 0 ? double(size) : double(size - 1);
    std::vector<double> w(static_cast<std::size_t>(size));
    for (std::int64_t k = 0; k < size; ++k) {
        const double a = 2.0 * std::numbers::pi * double(k) / len;
        // ONNX's coefficients: Hamming's are 25/46 and 21/46 (not 0.54 and 0.46).
        w[std::size_t(k)] = op == "hann"      ? 0.5 - 0.5 * std::cos(a)
                            : op == "hamming" ? 25.0 / 46.0 - 21.0 / 46.0 * std::cos(a)
                                              : 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2.0 * a);
    }
    c.out_const(0, TensorData(w, Shape{std::size_t(size)})
                       .convert(kind_of(*d) == Kind::Float ? DType::F32 : *d));
}

void mean_variance_norm(NodeCtx& c) {
    const Value& x = c.in(0);
    c.require(x.kind == Kind::Float, "needs a float input");
    std::vector<std::string> axes;
    for (auto a : c.attr_ints("axes", {0, 2, 3})) axes.push_back(r(c.axis(a, x.rank)));
    const std::string mean = c.em.fresh("mean"), cv = c.em.fresh("centered");
    c.em.body.push_back("const auto " + mean + " = ember::mean_dims(" + c.t(0) + ", {" +
                        join(axes) + "});");
    c.em.body.push_back("const auto " + cv + " = " + c.t(0) + " - " + mean + ";");
    // ONNX's definition: (x - E[x]) / (sqrt(E[x²] - E[x]²) + 1e-9).
    c.out(0, like(x, Kind::Float),
          cv + " / ((ember::mean_dims(" + c.t(0) + " * " + c.t(0) + ", {" + join(axes) + "}) - " +
              mean + " * " + mean + ").clamp_min(0.0).sqrt() + 1e-9)");
}

void bit_shift(NodeCtx& c) {
    const Value &a = c.in(0), &b = c.in(1);
    c.require(a.kind == Kind::Int && b.kind == Kind::Int, "needs integer inputs");
    const std::string dir = c.attr_str("direction", "");
    c.require(dir == "LEFT" || dir == "RIGHT", "direction must be LEFT or RIGHT");
    Value v = broadcast_value(c, a, b, Kind::Int);
    // ONNX shifts unsigned integers, ember's int tensors hold them as int64: the same bits for a
    // left shift; a right shift agrees while the values are below 2^63 (ember's is arithmetic).
    const std::string op = dir == "LEFT" ? ".bitwise_left_shift(" : ".bitwise_right_shift(";
    c.out(0, std::move(v), c.t_rank(0, v.rank) + op + c.t_rank(1, v.rank) + ")");
}

void grid_sample(NodeCtx& c) {
    const Value &x = c.in(0), &g = c.in(1);
    c.require(x.kind == Kind::Float && g.kind == Kind::Float, "needs float inputs");
    c.require(x.rank == 4 && g.rank == 4,
              "only 2-d sampling (an input and grid of rank 4) is supported");
    const std::string mode = c.attr_str("mode", "bilinear"),
                      pad = c.attr_str("padding_mode", "zeros");
    c.require(mode == "bilinear" || mode == "nearest",
              "mode " + model_text(mode) + " is not supported (bilinear and nearest are)");
    c.require(pad == "zeros" || pad == "border" || pad == "reflection",
              "padding_mode " + model_text(pad) + " is not known");
    const std::string o =
        std::string("ember::GridSampleOptions{") +
        (mode == "nearest" ? "ember::GridSampleMode::Nearest" : "ember::GridSampleMode::Bilinear") +
        ", " +
        (pad == "border"       ? "ember::GridSamplePadding::Border"
         : pad == "reflection" ? "ember::GridSamplePadding::Reflection"
                               : "ember::GridSamplePadding::Zeros") +
        ", " + (c.attr_int("align_corners", 0) != 0 ? "true" : "false") + "}";
    Value v = like(x, Kind::Float);
    v.dims = {x.dims[0], x.dims[1], g.dims[1], g.dims[2]};
    c.out(0, std::move(v), "ember::grid_sample_2d(" + c.t(0) + ", " + c.t(1) + ", " + o + ")");
}

// LRN: x / (bias + alpha/size · Σ x²)^beta, the sum over the channels [c - ⌊(size-1)/2⌋,
// c + ⌈(size-1)/2⌉]: a product with a band matrix built here, over the channels moved last.
void lrn(NodeCtx& c) {
    const Value& x = c.in(0);
    c.require(x.kind == Kind::Float && x.rank >= 3, "needs a float input (N, C, d...)");
    const std::int64_t ch = x.dims[1], size = c.attr_int("size", 0);
    c.require(ch > 0, "the channels must be known at import");
    c.require(size >= 1, "size must be positive");
    const std::int64_t pre = (size - 1) / 2, post = size - 1 - pre;
    std::vector<float> band(std::size_t(ch * ch), 0.0f);  // [C_in, C_out]
    for (std::int64_t o = 0; o < ch; ++o)
        for (std::int64_t i = std::max<std::int64_t>(0, o - pre); i <= std::min(ch - 1, o + post);
             ++i)
            band[std::size_t(i * ch + o)] = 1.0f;
    const std::string m = c.em.fresh("band"), sq = c.em.fresh("squares"), last = r(x.rank - 1);
    c.em.body.push_back(
        "const auto " + m + " = " +
        inline_tensor(TensorData(band, Shape{std::size_t(ch), std::size_t(ch)}), 2, Kind::Float) +
        ";");
    c.em.body.push_back("const auto " + sq + " = (" + c.t(0) + " * " + c.t(0) + ").swap_dims(1, " +
                        last + ");");
    std::vector<std::string> dims;
    for (std::size_t d = 0; d < x.rank; ++d)
        dims.push_back("long(" + sq + ".dims()[" + r(d) + "])");
    const std::string sum = sq + ".template reshape<2>({-1, " + std::to_string(ch) + "}).matmul(" +
                            m + ").template reshape<" + r(x.rank) + ">({" + join(dims) +
                            "}).swap_dims(1, " + last + ")";
    c.out(0, like(x, Kind::Float),
          c.t(0) + " / (" + sum + " * " + literal(c.attr_float("alpha", 1e-4) / double(size)) +
              " + " + literal(c.attr_float("bias", 1.0)) + ").powf_scalar(" +
              literal(c.attr_float("beta", 0.75)) + ")");
}

// RNN (gru = false) and GRU, one direction: a loop over the time steps in the generated code,
// the input projections of all steps computed first as one matmul. W, R and B are the graph's
// tensors (parameters of the struct when they are initializers).
void recurrent(NodeCtx& c, bool gru) {
    const Value& x = c.in(0);
    const std::string dir = c.attr_str("direction", "forward");
    c.require(dir == "forward" || dir == "reverse",
              "direction " + model_text(dir) + " is not supported (forward and reverse are)");
    c.require(!c.has(4), "sequence_lens is not supported");
    c.require(!c.has_attr("clip"), "clip is not supported");
    c.require(!c.has_attr("activations"), "only the default activations are supported");
    c.require(x.kind == Kind::Float && x.rank == 3, "needs a float input of rank 3");
    c.require(c.in(1).rank == 3 && c.in(2).rank == 3, "W and R must be of rank 3");
    const std::int64_t hs = c.attr_int("hidden_size", c.in(2).dims[2]);
    c.require(hs > 0, "the hidden size must be known");
    const std::size_t gates = gru ? 3 : 1;
    const std::string H = std::to_string(hs), GH = std::to_string(std::int64_t(gates) * hs);
    const bool batch_first = c.attr_int("layout", 0) == 1, reverse = dir == "reverse";
    const std::string seq = dim_expr(c, 0, batch_first ? 1 : 0),
                      batch = dim_expr(c, 0, batch_first ? 0 : 1);
    const std::string in = dim_expr(c, 0, 2);
    auto name = [&](const char* hint) { return c.em.fresh(hint); };
    const std::string xw = name("xw"), rt = name("rt"), hv = name("h"), ys = name("ys"),
                      br = name("rb");
    std::string xs = c.t(0);
    if (batch_first) xs += ".swap_dims(0, 1)";
    if (reverse) xs += ".flip({0L})";
    // [seq, batch, in] @ W^T (+ Wb) → [seq, batch, G·H]
    std::string proj = "(" + xs + ").template reshape<2>({" + seq + " * " + batch + ", " + in +
                       "}).matmul(" + c.t(1) + ".template squeeze<2>(0).transpose())";
    if (c.has(3)) {
        c.require(c.in(3).rank == 2, "B must be of rank 2");
        proj += " + " + c.t(3) + ".narrow(1, 0, " + GH + ")";
        c.em.body.push_back("const auto " + br + " = " + c.t(3) + ".narrow(1, " + GH + ", " + GH +
                            ");");
    }
    c.em.body.push_back("const auto " + xw + " = (" + proj + ").template reshape<3>({" + seq +
                        ", " + batch + ", " + GH + "});");
    c.em.body.push_back("const auto " + rt + " = " + c.t(2) +
                        ".template squeeze<2>(0).transpose();");
    std::string init =
        "ember::Tensor<B, 2>::zeros(ember::Shape{std::size_t(" + batch + "), " + H + "}, device)";
    if (c.has(5)) init = c.t(5) + ".template squeeze<2>(" + (batch_first ? "1" : "0") + ")";
    // The loop's own names are fresh too: the graph's names cannot shadow them.
    const std::string t = name("step"), xt = name("xt"), hr = name("hr"), z = name("z"),
                      rg = name("r"), n = name("n");
    std::string step = "        const auto " + xt + " = " + xw + ".narrow(0, long(" + t +
                       "), 1).template squeeze<2>(0);\n" + "        const auto " + hr + " = " + hv +
                       ".matmul(" + rt + ")" + (c.has(3) ? " + " + br : "") + ";\n";
    if (!gru) {
        step += "        " + hv + " = ember::activation::tanh(" + xt + " + " + hr + ");\n";
    } else {
        // ONNX's gate order z, r, h; linear_before_reset applies r after R's product (PyTorch's
        // GRU).
        const bool lbr = c.attr_int("linear_before_reset", 0) != 0;
        auto g = [&](const std::string& v, int k) {
            return v + ".narrow(1, " + std::to_string(k * hs) + ", " + H + ")";
        };
        step += "        const auto " + z + " = ember::activation::sigmoid(" + g(xt, 0) + " + " +
                g(hr, 0) + ");\n";
        step += "        const auto " + rg + " = ember::activation::sigmoid(" + g(xt, 1) + " + " +
                g(hr, 1) + ");\n";
        const std::string cand = lbr ? g(xt, 2) + " + " + rg + " * " + g(hr, 2)
                                     : g(xt, 2) + " + (" + rg + " * " + hv + ").matmul(" +
                                           g(rt, 2) + ")" + (c.has(3) ? " + " + g(br, 2) : "");
        step += "        const auto " + n + " = ember::activation::tanh(" + cand + ");\n";
        step += "        " + hv + " = (1.0 - " + z + ") * " + n + " + " + z + " * " + hv + ";\n";
    }
    const std::string steps = name("steps");
    c.em.body.push_back("const auto " + steps + " = std::size_t(" + seq + ");");
    c.em.body.push_back("auto " + hv + " = " + init + ";\n    std::vector<ember::Tensor<B, 2>> " +
                        ys + ";\n    for (std::size_t " + t + " = 0; " + t + " < " + steps +
                        "; ++" + t + ") {\n" + step + "        " + ys + ".push_back(" + hv +
                        ");\n    }");
    std::string y = "ember::Tensor<B, 2>::stack(" + ys + ", 0)";
    if (reverse) y += ".flip({0L})";
    const std::int64_t sq = x.dims[batch_first ? 1 : 0], bt = x.dims[batch_first ? 0 : 1];
    Value yv;
    yv.kind = Kind::Float, yv.rank = 4;
    yv.dims = batch_first ? Dims{bt, sq, 1, hs} : Dims{sq, 1, bt, hs};
    y = batch_first ? y + ".swap_dims(0, 1).template unsqueeze_dim<4>(2)"
                    : y + ".template unsqueeze_dim<4>(1)";
    c.out(0, yv, y);
    Value st;
    st.kind = Kind::Float, st.rank = 3;
    st.dims = batch_first ? Dims{bt, 1, hs} : Dims{1, bt, hs};
    c.out(1, st, hv + ".template unsqueeze_dim<3>(" + (batch_first ? "1" : "0") + ")");
}

}  // namespace

void register_extra_ops(std::map<std::string, Handler>& t) {
    for (const char* op :
         {"Asin", "Acos", "Atan", "Tan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"}) {
        std::string fn = op;
        fn[0] = char(std::tolower(fn[0]));
        t[op] = [fn](NodeCtx& c) { unary(c, "ember::" + fn + "(", ")"); };
    }
    t["CastLike"] = cast_like;
    t["CumSum"] = cum_sum;
    t["GatherND"] = gather_nd;
    t["ScatterND"] = scatter_nd;
    t["ScatterElements"] = scatter_elements;
    t["NonZero"] = non_zero;
    t["NegativeLogLikelihoodLoss"] = [](NodeCtx& c) {
        c.require(c.in(0).kind == Kind::Float, "needs float log-probabilities");
        nll(c, c.t(0), c.in(0).rank, 1, 2);
    };
    t["SoftmaxCrossEntropyLoss"] = [](NodeCtx& c) {
        const Value& x = c.in(0);
        c.require(x.kind == Kind::Float, "needs float scores");
        c.require(x.rank >= 2, "scores of rank " + r(x.rank) + " (N, C, d... is needed)");
        const std::string lp = c.em.fresh("log_prob");
        c.em.body.push_back("const auto " + lp + " = ember::activation::log_softmax(" + c.t(0) +
                            ", 1);");
        nll(c, lp, x.rank, 1, 2);
        if (c.node.outputs.size() > 1 && !c.node.outputs[1].empty())
            c.out(1, like(x, Kind::Float), lp);
    };
    t["HannWindow"] = [](NodeCtx& c) { window(c, "hann"); };
    t["HammingWindow"] = [](NodeCtx& c) { window(c, "hamming"); };
    t["BlackmanWindow"] = [](NodeCtx& c) { window(c, "blackman"); };
    t["MeanVarianceNormalization"] = mean_variance_norm;
    t["BitShift"] = bit_shift;
    t["GridSample"] = grid_sample;
    t["LRN"] = lrn;
    t["RNN"] = [](NodeCtx& c) { recurrent(c, false); };
    t["GRU"] = [](NodeCtx& c) { recurrent(c, true); };
}

}  // namespace ember::onnx::ops
