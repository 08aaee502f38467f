// Models exported from PyTorch to ONNX (tests/fixtures/gen_onnx_models.py), turned into C++ by
// ember-onnx at build time (ember_import_onnx in tests/CMakeLists.txt): each generated Model<B>
// loads its weights and reproduces PyTorch's output on the same input within 1e-4 (an MLP, CNNs,
// a transformer encoder layer, an LSTM, a stack of 70 Linear layers); the MLP also
// from weights compiled into the binary, trained further through Autodiff<Cpu>, and the CNN
// (exported with a dynamic batch) at another batch size.
#include <ember/backend/cpu.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bn_cnn.hpp"
#include "cnn.hpp"
#include "deep.hpp"
#include "harness.hpp"
#include "lstm.hpp"
#include "mlp.hpp"
#include "raw_floats.hpp"
#include "transformer.hpp"

namespace test_onnx_models {

namespace {

namespace fs = std::filesystem;
using ember::Cpu;
using ember::TensorData;

const fs::path kDir = fs::path(EMBER_FIXTURE_DIR) / "onnx_models";

using ember::test::raw_floats;

// The input's and output's shapes (NAME.shape.txt).
std::pair<ember::Shape, ember::Shape> shapes(const std::string& name) {
    std::ifstream in(kDir / (name + ".shape.txt"));
    auto line = [&] {
        std::string s;
        std::getline(in, s);
        std::stringstream ss(s);
        std::vector<std::size_t> d;
        for (std::size_t x; ss >> x;) d.push_back(x);
        return ember::Shape(std::span<const std::size_t>(d));
    };
    auto a = line();
    return {a, line()};
}

template <std::size_t D>
ember::Tensor<Cpu, D> input(const std::string& name) {
    return ember::Tensor<Cpu, D>::from_data(
        TensorData(raw_floats(kDir / (name + ".input.bin")), shapes(name).first));
}

template <std::size_t D>
void check_output(const ember::Tensor<Cpu, D>& y, const std::string& name) {
    const auto want = raw_floats(kDir / (name + ".output.bin"));
    CHECK(y.shape() == shapes(name).second);
    const auto got = y.to_data().template to_vec<float>();
    REQUIRE(got.size() == want.size());
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / (1.0 + std::fabs(want[i])));
    INFO(name << ": largest difference from PyTorch " << worst);
    CHECK(worst < 1e-4);
}

}  // namespace

TEST_CASE("ONNX models imported by ember-onnx match PyTorch", "[onnx]") {
    SECTION("MLP (Gemm → Linear)") {
        const auto model = mlp::Model<Cpu>::from_file(EMBER_ONNX_RECORD_mlp);
        check_output(model.forward(input<2>("mlp")), "mlp");
        // The same weights compiled into the binary.
        check_output(mlp::Model<Cpu>::from_embedded().forward(input<2>("mlp")), "mlp");
    }
    SECTION("CNN with a dynamic batch (Shape → Gather → Concat → Reshape)") {
        const auto model = cnn::Model<Cpu>::from_file(EMBER_ONNX_RECORD_cnn);
        const auto x = input<4>("cnn");
        check_output(model.forward(x), "cnn");
        // Batch 1: the first row of the batch-2 result.
        const auto one = model.forward(x.slice({ember::Slice{0, 1}})).to_data().to_vec<float>();
        const auto all = raw_floats(kDir / "cnn.output.bin");
        for (std::size_t i = 0; i < one.size(); ++i) CHECK(std::fabs(one[i] - all[i]) < 1e-4);
    }
    SECTION("CNN with batch norm, max pool, global average pool, softmax") {
        check_output(bn_cnn::Model<Cpu>::from_file(EMBER_ONNX_RECORD_bn_cnn).forward(input<4>("bn_cnn")),
                     "bn_cnn");
    }
    SECTION("transformer encoder layer (attention, layer norm from primitive ops)") {
        check_output(transformer::Model<Cpu>::from_file(EMBER_ONNX_RECORD_transformer)
                         .forward(input<3>("transformer")),
                     "transformer");
    }
    SECTION("LSTM (→ nn::Lstm) with initial states built in the graph") {
        check_output(lstm::Model<Cpu>::from_file(EMBER_ONNX_RECORD_lstm).forward(input<3>("lstm")), "lstm");
    }
    SECTION("more modules than EMBER_MODULE lists: the Model holds them in parts") {
        const auto model = deep::Model<Cpu>::from_file(EMBER_ONNX_RECORD_deep);
        check_output(model.forward(input<2>("deep")), "deep");
        // 70 Linear layers in two parts of at most 64, each layer's weight and bias under
        // part_<K>: the record's paths.
        std::size_t params = 0, in_part_1 = 0;
        model.visit([&](std::string_view path, const auto&) {
            ++params;
            if (path.starts_with("part_1.")) ++in_part_1;
        });
        CHECK(params == 140);
        CHECK(in_part_1 == 12);
        CHECK(deep::Model<Cpu>{}.num_params() == 70 * (16 + 4));
    }
    SECTION("an imported model trains further") {
        using AD = ember::Autodiff<Cpu>;
        auto model = mlp::Model<AD>::from_file(EMBER_ONNX_RECORD_mlp);
        const auto x = ember::Tensor<AD, 2>::from_data(input<2>("mlp").to_data());
        auto loss = model.forward(x).powf_scalar(2.0).mean();
        auto grads = loss.backward();
        std::size_t with_grad = 0;
        model.visit([&](std::string_view, const auto& p) {
            if (p.val().grad(grads)) ++with_grad;
        });
        CHECK(with_grad == 4);  // two weights, two biases
        // Fresh weights: the same structure, other values.
        const mlp::Model<Cpu> fresh{};
        CHECK(fresh.num_params() == 20 * 16 + 16 + 16 * 10 + 10);
    }
}

}  // namespace test_onnx_models
