#pragma once
// ONNX → C++: ember-onnx's code generator. import_model walks the graph once, in its
// topological order, giving each node to the handler of its op (ops.cpp). Handlers infer the
// outputs' kinds, ranks and static dims, fold what is known at import time (shapes, constant
// index lists), and write the C++ that computes the rest. Weighted nodes become ember modules
// (Gemm and MatMul with constant weights → nn::Linear, Conv → nn::Conv1d/2d, BatchNormalization
// → nn::BatchNorm, ...); other constants become parameters. The result is a header holding a
// `Model<B>` struct and the record of its weights. Anything the generator cannot translate fails
// here, at import time, naming the node and the op — never in the generated code at run time.
#include <ember/record/value.hpp>

#include <map>
#include <string>
#include <vector>

#include "model.hpp"

namespace ember::onnx {

/// How to generate.
struct ImportOptions {
    std::string name_space = "model";     ///< C++ namespace of the generated code
    std::string record_type = "NamedMpk"; ///< NamedMpk, NamedMpkGz, Bin, BinGz, JsonGz, PrettyJson
    bool half_precision = false;          ///< weights stored as f16 (HalfPrecisionSettings)
    std::string embedded_symbol;          ///< non-empty: from_embedded() reads these Bin bytes
    std::string record_file;              ///< the record's file name, for the header's comment
    /// Shapes to assume for graph inputs (name → dims), overriding the file's.
    std::map<std::string, std::vector<std::int64_t>> input_shapes;
    /// Graph inputs fixed to a value at import time (name → value): they become constants and
    /// leave forward's parameters (shapes, axes or index lists a model takes as inputs).
    std::map<std::string, TensorData> bound_inputs;
};

/// A graph input or output as the generated forward takes or returns it.
struct Signature {
    std::string name;    ///< the ONNX name
    char kind = 'F';     ///< F(loat), I(nt) or B(ool)
    std::size_t rank;    ///< ember rank
    bool scalar = false; ///< rank 0 in ONNX (held as [1])
    std::size_t index = 0;  ///< position among the graph's inputs or outputs
};

/// What import_model produces.
struct ImportResult {
    std::vector<Signature> inputs;      ///< forward's parameters, in order
    std::vector<Signature> outputs;     ///< forward's results, in order
    std::string header;                 ///< the generated C++ header
    record::Value record;               ///< the weights, as the generated Model's record
    std::vector<std::string> ops_used;  ///< distinct op types of the graph, sorted
};

/// Translates `model` (read from `source`, named in messages). Throws ArgumentError naming the
/// node and the op for anything it cannot translate.
ImportResult import_model(const Model& model, const ImportOptions& options,
                          std::string_view source);

/// `text` (from a model file: its name, its producer's) as it may appear in a `//` comment of
/// generated code: printable ASCII stays, every other byte and the characters that could end,
/// extend or escape a comment (backslash, `?`, `*`) and `%` become %XX; at most `max_chars` bytes
/// are kept, then "...".
std::string comment_text(std::string_view text, std::size_t max_chars = 200);

/// True when `s` may name a namespace or symbol of generated code: letters, digits and `_`,
/// not starting with a digit, not a C++ keyword or a lower-case C macro.
bool is_identifier(std::string_view s);

/// An identifier (is_identifier) made from `s`: other characters become `_`, a leading digit
/// gets `m_` before it and a keyword `_` after it; an identifier stays as it is (a model file's
/// stem as the default namespace).
std::string to_identifier(std::string_view s);

/// The op types ember-onnx translates, sorted.
std::vector<std::string> supported_ops();

}  // namespace ember::onnx
