// ONNX model and tensor bytes (tools/onnx/protobuf.cpp, model.cpp): the protobuf reader and the
// ModelProto, GraphProto, NodeProto and TensorProto decoding behind ember-onnx.
#include "../../tools/onnx/model.hpp"
#include "fuzz.hpp"

EMBER_FUZZ_TARGET(onnx) {
    using namespace ember;
    fuzz::refused_or_fine([&] { (void)onnx::parse_model(input, "fuzz.onnx"); });
    fuzz::refused_or_fine([&] { (void)onnx::parse_tensor(input, "fuzz.pb"); });
}
