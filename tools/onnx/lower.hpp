#pragma once
// The machinery op handlers (ops.cpp) use: what the generator knows of each value, the
// generated struct's fields and forward body, and a node's view of its inputs and attributes.
#include <ember/record/value.hpp>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model.hpp"

namespace ember::onnx {

/// The kind of an ember tensor.
enum class Kind { Float, Int, Bool };

/// What the generator knows of one value of the graph.
struct Value {
    Kind kind = Kind::Float;
    std::size_t rank = 0;              ///< ember rank (an ONNX scalar is held as [1])
    bool scalar = false;               ///< rank 0 in ONNX
    std::vector<std::int64_t> dims;    ///< static dims; -1 where unknown
    std::string var;                   ///< the C++ expression holding it (empty: not materialised)
    std::optional<TensorData> constant;  ///< known at import time
    /// A 1-D integer value known element by element as C++ integer expressions (shapes and
    /// index lists: literals where known at import time, `long(x.dims()[1])` where not).
    std::optional<std::vector<std::string>> elems;

    /// Number of elements, or -1 when a dim is unknown.
    std::int64_t numel() const;
};

/// A field of the generated struct.
struct Field {
    std::string name;     ///< C++ member name
    std::string type;     ///< C++ type
    std::string init;     ///< expression building it from `device`
    record::Value record; ///< its record
};

/// The generator's state while it walks the graph.
class Emitter {
  public:
    std::map<std::string, Value> values;  ///< by ONNX name
    std::vector<Field> fields;            ///< in declaration order
    std::vector<std::string> body;        ///< forward's statements
    std::int64_t opset = 0;               ///< the standard domain's version
    std::map<std::string, int> uses;      ///< consumers of each value
    std::set<std::string> fused;          ///< nodes folded into another (by output name)
    /// Static dims ONNX's shape inference found for intermediate values (by ONNX name; -1
    /// where it found none): they fill in what a handler leaves unknown.
    std::map<std::string, std::vector<std::int64_t>> inferred;

    /// A fresh C++ identifier from `hint` (an ONNX name or an op).
    std::string fresh(std::string_view hint);

  private:
    std::set<std::string> taken_;
};

/// A node's view of the generator: its inputs, attributes and outputs.
class NodeCtx {
  public:
    NodeCtx(const Node& node, Emitter& em) : node(node), em(em) {}
    const Node& node;  ///< the node
    Emitter& em;       ///< the generator

    /// Number of inputs (omitted optional ones included).
    std::size_t inputs() const { return node.inputs.size(); }
    /// True when input `i` is given.
    bool has(std::size_t i) const { return i < node.inputs.size() && !node.inputs[i].empty(); }
    /// Input `i`, which must be given.
    const Value& in(std::size_t i) const;
    /// True when input `i` is known at import time.
    bool is_const(std::size_t i) const { return has(i) && in(i).constant.has_value(); }
    /// Input `i` as a C++ tensor expression (constants become parameters or literals).
    std::string t(std::size_t i);
    /// Input `i` as a tensor of kind `k` (cast when it is not).
    std::string t_as(std::size_t i, Kind k);
    /// Input `i` at rank `rank`, with leading dims of 1 added (ONNX's broadcasting).
    std::string t_rank(std::size_t i, std::size_t rank);
    /// Input `i`'s single value, when it is a constant of one element.
    std::optional<double> scalar(std::size_t i) const;
    /// Input `i` as a list of integers known at import time; fails naming `what` otherwise.
    std::vector<std::int64_t> ints(std::size_t i, std::string_view what) const;
    /// Input `i`'s elements as C++ integer expressions (shape arithmetic), when known.
    std::optional<std::vector<std::string>> elems(std::size_t i) const;

    /// True when the node has attribute `name`.
    bool has_attr(std::string_view name) const { return node.find(name) != nullptr; }
    /// Integer attribute `name`, or `fallback`.
    std::int64_t attr_int(std::string_view name, std::int64_t fallback) const;
    /// Float attribute `name`, or `fallback`.
    double attr_float(std::string_view name, double fallback) const;
    /// String attribute `name`, or `fallback`.
    std::string attr_str(std::string_view name, std::string_view fallback) const;
    /// Integer-list attribute `name`, or `fallback`.
    std::vector<std::int64_t> attr_ints(std::string_view name,
                                        std::vector<std::int64_t> fallback = {}) const;
    /// Float-list attribute `name`, or `fallback`.
    std::vector<float> attr_floats(std::string_view name, std::vector<float> fallback = {}) const;
    /// Tensor attribute `name`, which must be there.
    const TensorData& attr_tensor(std::string_view name) const;

    /// Defines output `k` as `expr` (a C++ expression) with what is known of it.
    void out(std::size_t k, Value v, const std::string& expr);
    /// Defines output `k` as a constant known at import time (no code).
    void out_const(std::size_t k, TensorData data);
    /// Defines output `k` as an alias of input `i` (Identity, Dropout in inference).
    void out_alias(std::size_t k, std::size_t i);
    /// Adds a field of the struct; returns its member name.
    std::string field(std::string_view hint, std::string type, std::string init,
                      record::Value record);
    /// Adds a float parameter holding `data`; returns the expression of its value.
    std::string param(std::string_view hint, const TensorData& data);

    /// Throws ArgumentError naming the node and the op.
    [[noreturn]] void fail(const std::string& why) const;
    /// Fails unless `cond`.
    void require(bool cond, const std::string& why) const {
        if (!cond) fail(why);
    }
    /// `dim` (possibly negative) normalised for rank `rank`; fails when out of range.
    std::size_t axis(std::int64_t dim, std::size_t rank) const;
};

/// The C++ type of a tensor of kind `k` and rank `rank` over backend B.
std::string tensor_type(Kind k, std::size_t rank);
/// A C++ literal for `v` ("2.5", "-1", "inf" spelled as a numeric_limits call).
std::string literal(double v);
/// The kind ember gives an ONNX data type (TensorProto.DataType).
Kind kind_of(int onnx_type);
/// The kind of dtype `d`.
Kind kind_of(DType d);
/// C++ code for a tensor of `data` built in forward (small constants, index lists).
std::string inline_tensor(const TensorData& data, std::size_t rank, Kind kind);

/// Tells the handlers which graph is being imported (some look at a value's consumers).
void set_import_graph(const Graph* g);

/// An op handler: reads the node, writes its outputs.
using Handler = std::function<void(NodeCtx&)>;
/// The handlers, by op type.
const std::map<std::string, Handler>& handlers();

}  // namespace ember::onnx
