// ONNX model and tensor bytes (tools/onnx/model.cpp): protobuf's parsing under ember's limits,
// ember's checks and conversion of ModelProto, GraphProto, NodeProto and TensorProto, ONNX's
// checker and shape inference: everything ember-onnx does before generating code.
#include "../../tools/onnx/model.hpp"
#include "fuzz.hpp"

EMBER_FUZZ_TARGET(onnx) {
    using namespace ember;
    fuzz::refused_or_fine([&] { (void)onnx::parse_model(input, "fuzz.onnx"); });
    fuzz::refused_or_fine([&] { (void)onnx::parse_tensor(input, "fuzz.pb"); });
}
