// libFuzzer target: ONNX model bytes (tools/onnx/model.cpp). Any input must either parse or
// give an ember::Error; a crash, a sanitizer report or a leak is a bug.
#include <cstddef>
#include <cstdint>
#include <span>

#include "../tools/onnx/model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        (void)ember::onnx::parse_model(std::as_bytes(std::span(data, size)), "fuzz.onnx");
    } catch (const ember::Error&) {
    }
    try {
        (void)ember::onnx::parse_tensor(std::as_bytes(std::span(data, size)), "fuzz.pb");
    } catch (const ember::Error&) {
    }
    return 0;
}
