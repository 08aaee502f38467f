#pragma once
// What every generated conformance runner (run.py) shares: reading a node test's input and
// output tensors (TensorProto .pb files) and comparing ember's outputs with ONNX's.
#include <ember/backend/cpu.hpp>
#include <ember/ember.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "model.hpp"

namespace conformance {

using ember::Cpu;

inline ember::TensorData read_pb(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    auto t = ember::onnx::parse_tensor(std::as_bytes(std::span(bytes)), path).data;
    if (t.shape().rank() == 0) {  // ONNX scalars are held as [1]
        auto b = std::vector<std::byte>(t.bytes().begin(), t.bytes().end());
        t = ember::TensorData(std::move(b), ember::Shape{1}, t.dtype());
    }
    return t;
}

template <std::size_t D, class K>
ember::Tensor<Cpu, D, K> input(const std::string& path) {
    auto t = read_pb(path);
    if constexpr (std::same_as<K, ember::Float>) t = t.convert(ember::DType::F32);
    else if constexpr (std::same_as<K, ember::Int>) t = t.convert(ember::DType::I64);
    return ember::Tensor<Cpu, D, K>::from_data(t);
}

// Empty when `got` matches the expected output at `path`; the difference otherwise.
template <class T>
std::string compare(const T& got_tensor, const std::string& path) {
    const auto want = read_pb(path);
    const auto got = got_tensor.to_data();
    if (got.shape() != want.shape())
        return "shape " + got.shape().to_string() + ", expected " + want.shape().to_string();
    if (ember::is_float(want.dtype())) {
        const auto g = got.convert(ember::DType::F64).template to_vec<double>();
        const auto w = want.convert(ember::DType::F64).template to_vec<double>();
        for (std::size_t i = 0; i < g.size(); ++i) {
            if (std::isnan(w[i]) && std::isnan(g[i])) continue;
            if (!(std::fabs(g[i] - w[i]) <= 1e-5 + 1e-3 * std::fabs(w[i]))) {
                std::ostringstream s;
                s << "element " << i << ": " << g[i] << ", expected " << w[i];
                return s.str();
            }
        }
        return {};
    }
    const auto g = got.convert(ember::DType::I64).template to_vec<std::int64_t>();
    const auto w = want.convert(ember::DType::I64).template to_vec<std::int64_t>();
    for (std::size_t i = 0; i < g.size(); ++i)
        if (g[i] != w[i]) return "element " + std::to_string(i) + ": " + std::to_string(g[i]) +
                                 ", expected " + std::to_string(w[i]);
    return {};
}

/// The tests of one runner, registered by the generated code.
inline std::vector<std::pair<std::string, std::function<std::string()>>>& tests() {
    static std::vector<std::pair<std::string, std::function<std::string()>>> t;
    return t;
}

inline int run_all() {
    int failed = 0;
    for (const auto& [name, fn] : tests()) {
        std::string why;
        try {
            why = fn();
        } catch (const std::exception& e) {
            why = std::string("threw: ") + e.what();
        }
        for (auto& ch : why)
            if (ch == '\n') ch = ' ';
        std::printf("%s %s%s%s\n", why.empty() ? "PASS" : "FAIL", name.c_str(), why.empty() ? "" : ": ",
                    why.c_str());
        failed += !why.empty();
    }
    return failed ? 1 : 0;
}

}  // namespace conformance
