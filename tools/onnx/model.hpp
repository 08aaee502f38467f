#pragma once
// An ONNX model as ember-onnx reads it: the parts of onnx.proto that describe a graph of
// operators over tensors (ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto,
// ValueInfoProto), converted in one place (model.cpp) from libonnx's generated protobuf classes.
// Reading a model runs, in order: protobuf's parser under ember's limits (size, nesting),
// ember's own checks (what ember cannot hold — strings, complex numbers, external data files,
// sparse tensors — is refused naming the tensor; declared sizes are bounded and must match the
// data), ONNX's checker, and ONNX's shape inference, whose static dims of intermediate values
// end up in Graph::value_info. Nothing of libonnx or protobuf appears in this header.
#include <ember/tensor/data.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace ember::onnx {

struct Graph;

/// A dimension of a declared shape: a number, or a symbolic name ("batch"), or unknown.
struct Dim {
    std::int64_t value = -1;  ///< the size, or -1 when symbolic or unknown
    std::string param;        ///< the symbolic name, when there is one
};

/// A graph input's or output's declared type: element type and, when known, shape.
struct ValueInfo {
    std::string name;                        ///< the value's name
    int elem_type = 0;                       ///< ONNX TensorProto.DataType (0: unknown)
    std::optional<std::vector<Dim>> shape;   ///< absent when the rank is unknown
};

/// A tensor: a constant or an initializer.
struct Tensor {
    std::string name;  ///< its name (empty for an attribute's tensor)
    TensorData data;   ///< its elements and shape
};

/// One attribute of a node.
struct Attribute {
    /// The value, by ONNX attribute type.
    using Value = std::variant<float, std::int64_t, std::string, Tensor, std::shared_ptr<Graph>,
                               std::vector<float>, std::vector<std::int64_t>,
                               std::vector<std::string>, std::vector<Tensor>>;
    std::string name;  ///< the attribute's name
    Value value;       ///< its value
};

/// One operator application.
struct Node {
    std::string name;                     ///< the node's name (may be empty)
    std::string op_type;                  ///< "Conv", "MatMul", ...
    std::string domain;                   ///< "" or "ai.onnx" for the standard operators
    std::vector<std::string> inputs;      ///< value names; "" for an omitted optional input
    std::vector<std::string> outputs;     ///< value names
    std::vector<Attribute> attributes;    ///< in file order

    /// The attribute `name`, or nullptr.
    const Attribute* find(std::string_view name) const;
    /// The node's name for messages: `'name' (OpType)`, or `#index (OpType)` when unnamed.
    std::string describe() const;
    std::size_t index = 0;  ///< position in the graph
};

/// A graph: nodes in topological order, constant initializers, inputs and outputs.
struct Graph {
    std::string name;                   ///< the graph's name
    std::vector<Node> nodes;            ///< topologically sorted
    std::vector<Tensor> initializers;   ///< weights and other constants
    std::vector<ValueInfo> inputs;      ///< graph inputs (may include initializers' names)
    std::vector<ValueInfo> outputs;     ///< graph outputs
    /// Shapes of intermediate values as ONNX's shape inference derives them (the main graph:
    /// only what inference finds, not what the file claims; subgraphs: as the file records).
    std::vector<ValueInfo> value_info;
};

/// An operator set the model uses.
struct OpsetImport {
    std::string domain;    ///< "" for the standard operators
    std::int64_t version;  ///< the opset version
};

/// A whole model file.
struct Model {
    std::int64_t ir_version = 0;        ///< ONNX IR version
    std::vector<OpsetImport> opsets;    ///< operator sets
    std::string producer_name;          ///< e.g. "pytorch"
    std::string producer_version;       ///< e.g. "1.13.0"
    Graph graph;                        ///< the main graph

    /// The standard domain's opset version (0 when absent).
    std::int64_t opset() const;
};

/// Shapes to assume for graph inputs (name → dims, a negative dim unknown): `--input-shape`.
using InputShapes = std::map<std::string, std::vector<std::int64_t>>;

/// Parses a ModelProto from `bytes`, checks it (ember's limits, then ONNX's checker) and runs
/// ONNX's shape inference; `input_shapes` replace the declared shapes of those inputs first.
/// `source` names the bytes in errors (FormatError, with the checker's message escaped).
Model parse_model(std::span<const std::byte> bytes, std::string_view source = "ONNX bytes",
                  const InputShapes& input_shapes = {});
/// Reads and parses the model file `path` (a regular file within ember's read limits).
Model load_model(const std::filesystem::path& path, const InputShapes& input_shapes = {});
/// Parses a TensorProto (a node test's input_N.pb / output_N.pb).
Tensor parse_tensor(std::span<const std::byte> bytes, std::string_view source = "TensorProto bytes");

/// The ember dtype of ONNX data type `t`, or nullopt when ember has none.
std::optional<DType> dtype_of(int t);
/// ONNX's name of data type `t` ("FLOAT", "INT64", ...).
std::string_view onnx_type_name(int t);

}  // namespace ember::onnx
