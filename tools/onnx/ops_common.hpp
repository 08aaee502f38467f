#pragma once
// What the op handlers share across ops.cpp (elementwise, shapes, reductions, the handler table)
// and ops_layers.cpp (layers and the less common operators). Internal to ember-onnx.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "lower.hpp"

namespace ember::onnx::ops {

using Dims = std::vector<std::int64_t>;

/// The graph being imported (some handlers look at a value's consumers).
extern const Graph* g_graph;

// ---- helpers (ops.cpp) -----------------------------------------------------------------------
/// `v` joined with `sep`.
std::string join(const std::vector<std::string>& v, std::string_view sep = ", ");
/// Integers joined with ", ".
std::string join_ints(const Dims& v);
/// A rank as text.
std::string r(std::size_t rank);
/// A value with `a`'s rank and dims, of kind `k` (no expression, no constant).
Value like(const Value& a, Kind k);
/// like(a, Kind::Float).
Value like_value(const Value& a);
/// ONNX's multidirectional broadcasting of static dims (-1 unknown, -2 incompatible).
Dims broadcast(const Value& a, const Value& b);
/// The broadcast of `a` and `b` as a value of kind `k`; fails when they do not broadcast.
Value broadcast_value(NodeCtx& c, const Value& a, const Value& b, Kind k);
/// Text from the model (an attribute's string) as it may appear in an error message: escaped
/// (record::printable), at most 80 bytes.
std::string model_text(std::string_view s);
/// A C++ literal of `s` for a tensor of kind `k`.
std::string scalar_literal(double s, Kind k);
/// A one-input op: output 0 is `prefix + input + suffix`, like the input.
void unary(NodeCtx& c, const std::string& prefix, const std::string& suffix, bool float_only = true);
/// True when every expression is an integer literal.
bool all_literal(const std::vector<std::string>& e);
/// Output `k` as a 1-D integer value known element by element.
void out_elems(NodeCtx& c, std::size_t k, std::vector<std::string> e, bool scalar = false);
/// Input `i`'s dim `d`: a literal where static, else `long(x.dims()[d])`.
std::string dim_expr(NodeCtx& c, std::size_t i, std::size_t d);
/// The axes of a reduction: an attribute before `since_opset`, input `input` from it.
Dims axes_of(NodeCtx& c, std::size_t input, std::int64_t since_opset);
/// A reduction by `method` ("sum", "mean", ...) with `pre` applied to the input and `post` to
/// the result.
void reduce(NodeCtx& c, const std::string& method, std::int64_t axes_input_since,
            const std::string& pre = "", const std::string& post = "");

// ---- handlers (ops_layers.cpp) ---------------------------------------------------------------
/// PyTorch's exact GELU as its exporter writes it before opset 20's Gelu, at its first node:
/// Div(x, √2) → Erf → Add 1 → Mul by x → Mul by 0.5, each node the only reader of the one
/// before. When node `c` (a Div) starts that chain, emits ember::activation::gelu(x) (one pass
/// of the backend's GELU instead of five elementwise ops) as the last Mul's output, marks the
/// four others fused and returns true; false (nothing emitted) otherwise.
bool gelu_chain(NodeCtx& c);
void matmul(NodeCtx& c);
void gemm(NodeCtx& c);
void conv(NodeCtx& c);
void pool(NodeCtx& c, bool max);
void global_pool(NodeCtx& c, const std::string& method);
void batch_norm(NodeCtx& c);
void layer_norm(NodeCtx& c);
void lstm(NodeCtx& c);
void topk(NodeCtx& c);
void trilu(NodeCtx& c);
void gather_elements(NodeCtx& c);
void pad_op(NodeCtx& c);
void one_hot(NodeCtx& c);
void instance_norm(NodeCtx& c);
void conv_transpose(NodeCtx& c);
void depth_space(NodeCtx& c, bool to_space);
void resize(NodeCtx& c);
void eye_like(NodeCtx& c);
void random_op(NodeCtx& c, bool normal, bool like);
void hardmax(NodeCtx& c);

// ---- quantization (ops_quant.cpp) -------------------------------------------------------------
/// Adds QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul,
/// ConvInteger and QLinearConv to the handler table.
void register_quant_ops(std::map<std::string, Handler>& t);

// ---- on the composed tensor ops (ops_extra.cpp) ------------------------------------------------
/// Adds the inverse trigonometric and hyperbolic functions, CastLike, CumSum, GatherND,
/// ScatterND, ScatterElements, NonZero, the loss operators, the windows,
/// MeanVarianceNormalization, LRN, BitShift, GridSample, RNN and GRU to the handler table.
void register_extra_ops(std::map<std::string, Handler>& t);

}  // namespace ember::onnx::ops
