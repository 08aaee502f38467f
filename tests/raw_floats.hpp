#pragma once
// The float32 values of a raw little-endian file (the ONNX fixtures' inputs and PyTorch's
// outputs, written by fixtures/gen_onnx_models.py).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace ember::test {

/// The floats of raw file `p` (its size over four).
inline std::vector<float> raw_floats(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
    std::vector<float> v(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), v.size() * 4);
    return v;
}

}  // namespace ember::test
