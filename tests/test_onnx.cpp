// ONNX reading (tools/onnx, the parser behind ember-onnx): a model written by python3-onnx
// (tests/fixtures/gen_onnx.py) read back with every kind of field checked against the values
// the script wrote; then hostile bytes — truncations, flipped bytes, runaway varints, lengths
// past the end, deep nesting, absurd declared sizes, data ember cannot hold — each giving a
// FormatError that names the problem, never a crash.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "../tools/onnx/model.hpp"
#include "harness.hpp"

namespace {

namespace fs = std::filesystem;
using ember::DType;
namespace onnx = ember::onnx;

std::vector<std::byte> read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::vector<char> chars((std::istreambuf_iterator<char>(in)), {});
    std::vector<std::byte> out(chars.size());
    std::memcpy(out.data(), chars.data(), chars.size());
    return out;
}

const fs::path kSample = fs::path(EMBER_FIXTURE_DIR) / "onnx" / "sample.onnx";

// A protobuf message written by hand, for the broken ones.
struct Pb {
    std::vector<std::byte> b;
    Pb& raw(std::initializer_list<int> bytes) {
        for (int x : bytes) b.push_back(std::byte(x));
        return *this;
    }
    Pb& varint(std::uint64_t v) {
        do {
            b.push_back(std::byte((v & 0x7f) | (v > 0x7f ? 0x80 : 0)));
            v >>= 7;
        } while (v);
        return *this;
    }
    Pb& key(int field, int wire) { return varint(std::uint64_t(field) << 3 | wire); }
    Pb& int_field(int field, std::uint64_t v) { return key(field, 0).varint(v); }
    Pb& bytes_field(int field, const std::vector<std::byte>& v) {
        key(field, 2).varint(v.size());
        b.insert(b.end(), v.begin(), v.end());
        return *this;
    }
    Pb& msg(int field, const Pb& m) { return bytes_field(field, m.b); }
    Pb& str(int field, std::string_view s) {
        return bytes_field(field, std::vector<std::byte>(reinterpret_cast<const std::byte*>(s.data()),
                                                         reinterpret_cast<const std::byte*>(s.data()) + s.size()));
    }
};

// A model around `graph`, with opset 13.
Pb model_with(const Pb& graph) {
    Pb opset;
    opset.int_field(2, 13);
    Pb m;
    m.int_field(1, 8).msg(7, graph).msg(8, opset);
    return m;
}

// A model whose graph holds one initializer, `tensor`.
Pb model_with_tensor(const Pb& tensor) { return model_with(Pb{}.msg(5, tensor)); }

std::string parse_error(const std::vector<std::byte>& bytes) {
    try {
        (void)onnx::parse_model(bytes, "test.onnx");
    } catch (const ember::FormatError& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace

TEST_CASE("ONNX models are read", "[onnx]") {
    const auto m = onnx::load_model(kSample);
    CHECK(m.ir_version == 8);
    CHECK(m.opset() == 13);
    CHECK(m.producer_name == "gen_onnx.py");
    CHECK(m.producer_version == "1.0");
    const auto& g = m.graph;
    CHECK(g.name == "sample");

    SECTION("inputs and outputs, with symbolic dims") {
        REQUIRE(g.inputs.size() == 1);
        CHECK(g.inputs[0].name == "x");
        CHECK(g.inputs[0].elem_type == 1);
        REQUIRE(g.inputs[0].shape);
        REQUIRE(g.inputs[0].shape->size() == 4);
        CHECK((*g.inputs[0].shape)[0].value == -1);
        CHECK((*g.inputs[0].shape)[0].param == "batch");
        CHECK((*g.inputs[0].shape)[3].value == 4);
        REQUIRE(g.outputs.size() == 1);
        CHECK(g.outputs[0].name == "y");
        CHECK(g.outputs[0].shape->size() == 2);
    }
    SECTION("initializers in every storage") {
        REQUIRE(g.initializers.size() == 7);
        auto find = [&](std::string_view name) -> const ember::TensorData& {
            for (const auto& t : g.initializers)
                if (t.name == name) return t.data;
            FAIL("no initializer " << name);
            throw;
        };
        CHECK(find("w_raw").shape() == ember::Shape{2, 3, 1, 1});
        CHECK(find("w_raw").to_vec<float>() == std::vector<float>{0, 1, 2, 3, 4, 5});
        CHECK(find("w_typed").to_vec<float>() == std::vector<float>{0.5f, -0.5f});
        CHECK(find("shape").dtype() == DType::I64);
        CHECK(find("shape").to_vec<std::int64_t>() == std::vector<std::int64_t>{-1, 2});
        CHECK(find("half").dtype() == DType::F16);
        CHECK(find("half").convert(DType::F32).to_vec<float>() == std::vector<float>{1.0f, -2.0f});
        CHECK(find("flags").dtype() == DType::Bool);
        CHECK(find("flags").to_vec<bool>() == std::vector<bool>{true, false, true});
        CHECK(find("big").dtype() == DType::I64);  // UINT32 widened
        CHECK(find("big").to_vec<std::int64_t>() == std::vector<std::int64_t>{4000000000});
        CHECK(find("d").shape().rank() == 0);
        CHECK(find("d").to_vec<double>() == std::vector<double>{2.5});
    }
    SECTION("nodes and attributes of every kind") {
        REQUIRE(g.nodes.size() == 5);
        const auto& conv = g.nodes[0];
        CHECK(conv.op_type == "Conv");
        CHECK(conv.inputs == std::vector<std::string>{"x", "w_raw", "w_typed"});
        CHECK(conv.outputs == std::vector<std::string>{"c"});
        REQUIRE(conv.find("kernel_shape"));
        CHECK(std::get<std::vector<std::int64_t>>(conv.find("kernel_shape")->value) ==
              std::vector<std::int64_t>{1, 1});
        CHECK(conv.find("dilations") == nullptr);
        const auto& k = g.nodes[2];
        REQUIRE(k.find("value"));
        CHECK(std::get<onnx::Tensor>(k.find("value")->value).data.to_vec<float>() ==
              std::vector<float>{1.5f, 2.5f});
        CHECK(g.nodes[3].describe() == "#3 (Reshape)");
        CHECK(g.nodes[4].describe() == "'mul' (Mul)");
        const auto& mul = g.nodes[4];
        CHECK(std::get<float>(mul.find("alpha")->value) == 0.25f);
        CHECK(std::get<std::string>(mul.find("mode")->value) == "linear");
        CHECK(std::get<std::vector<float>>(mul.find("scales")->value) == std::vector<float>{1.0f, 2.0f});
        CHECK(std::get<std::vector<std::string>>(mul.find("names")->value) ==
              std::vector<std::string>{"a", "b"});
    }
}

TEST_CASE("hostile ONNX bytes give FormatErrors", "[onnx]") {
    const auto good = read_file(kSample);

    SECTION("a missing file is named") {
        CHECK_THROWS_WITH(onnx::load_model("/nonexistent/model.onnx"),
                          Catch::Contains("/nonexistent/model.onnx"));
    }
    SECTION("no graph, no opset") {
        CHECK_THAT(parse_error({}), Catch::Contains("no graph"));
        CHECK_THAT(parse_error(Pb{}.msg(7, Pb{}).b), Catch::Contains("no standard opset"));
    }
    SECTION("every truncation") {
        for (std::size_t n = 0; n < good.size(); ++n) {
            INFO("first " << n << " bytes");
            CHECK_THROWS_AS(onnx::parse_model(std::span(good.data(), n), "cut.onnx"),
                            ember::FormatError);
        }
    }
    SECTION("flipped bytes: parsed or refused, never a crash") {
        std::mt19937 rng(1234);
        std::size_t refused = 0;
        for (int trial = 0; trial < 2000; ++trial) {
            auto bad = good;
            for (int k = 0; k < 3; ++k) bad[rng() % bad.size()] = std::byte(rng() & 0xff);
            try {
                (void)onnx::parse_model(bad, "flipped.onnx");
            } catch (const ember::Error&) {
                ++refused;
            }
        }
        CHECK(refused > 0);
    }
    SECTION("wire-level damage") {
        CHECK_THAT(parse_error(Pb{}.raw({0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                         0xff, 0xff, 0x01}).b),
                   Catch::Contains("varint"));
        CHECK_THAT(parse_error(Pb{}.raw({0x08, 0x80}).b), Catch::Contains("truncated varint"));
        CHECK_THAT(parse_error(Pb{}.key(7, 2).varint(100).raw({1, 2, 3}).b),
                   Catch::Contains("runs past the end"));
        CHECK_THAT(parse_error(Pb{}.raw({0x0b}).b), Catch::Contains("wire type 3"));
        CHECK_THAT(parse_error(Pb{}.key(7, 0).varint(1).b), Catch::Contains("should be length-delimited"));
        CHECK_THAT(parse_error(Pb{}.key(0, 0).varint(1).b), Catch::Contains("field number"));
    }
    SECTION("graphs nested without end") {
        // graph { node { attribute { type: GRAPH, g: graph { node { ... } } } } }
        Pb g;
        for (int depth = 0; depth < 40; ++depth) {
            Pb attr;
            attr.str(1, "body").int_field(20, 5).msg(6, g);
            Pb node;
            node.str(4, "Loop").msg(5, attr);
            g = Pb{}.msg(1, node);
        }
        CHECK_THAT(parse_error(model_with(g).b), Catch::Contains("nest more than 64"));
    }
    SECTION("tensors with absurd or inconsistent sizes") {
        auto tensor = [](std::initializer_list<std::uint64_t> dims, int type) {
            Pb t;
            for (auto d : dims) t.int_field(1, d);
            t.int_field(2, type).str(8, "w");
            return t;
        };
        CHECK_THAT(parse_error(model_with_tensor(tensor({1u << 20, 1u << 20, 1u << 20}, 1)).b),
                   Catch::Contains("more than 2^34"));
        CHECK_THAT(parse_error(model_with_tensor(tensor({1000000000}, 1).str(9, "abcd")).b),
                   Catch::Contains("4 bytes of raw data for 1000000000 elements"));
        CHECK_THAT(parse_error(model_with_tensor(tensor({3}, 1)).b),
                   Catch::Contains("tensor 'w' has 0 elements for shape [3]"));
        CHECK_THAT(parse_error(model_with_tensor(tensor({std::uint64_t(-2)}, 1)).b),
                   Catch::Contains("negative dim -2"));
        CHECK_THAT(parse_error(model_with_tensor(tensor({1, 1, 1, 1, 1, 1, 1, 1, 1}, 1)).b),
                   Catch::Contains("rank 9"));
        CHECK_THAT(parse_error(model_with_tensor(tensor({1}, 99)).b),
                   Catch::Contains("data type 99"));
    }
    SECTION("data ember cannot hold") {
        Pb strings;
        strings.int_field(1, 1).int_field(2, 8).str(6, "hello").str(8, "s");
        CHECK_THAT(parse_error(model_with_tensor(strings).b), Catch::Contains("strings"));
        Pb complex;
        complex.int_field(1, 1).int_field(2, 14).str(8, "c");
        CHECK_THAT(parse_error(model_with_tensor(complex).b), Catch::Contains("complex"));
        Pb external;
        external.int_field(1, 1).int_field(2, 1).str(8, "e").int_field(14, 1);
        CHECK_THAT(parse_error(model_with_tensor(external).b), Catch::Contains("external file"));
        Pb sparse = model_with(Pb{}.msg(15, Pb{}));
        CHECK_THAT(parse_error(sparse.b), Catch::Contains("sparse"));
    }
    SECTION("the fuzzer's corpus seeds and past crashes (tests/fuzz/)") {
        std::size_t files = 0;
        for (const char* dir : {"corpus/onnx", "crashes/onnx"}) {
            for (const auto& e :
                 fs::directory_iterator(fs::path(EMBER_SOURCE_DIR) / "tests" / "fuzz" / dir)) {
                if (e.path().filename() == ".keep") continue;
                ++files;
                const auto bytes = read_file(e.path());
                try {
                    (void)onnx::parse_model(bytes, e.path().string());
                } catch (const ember::FormatError&) {
                }
                try {
                    (void)onnx::parse_tensor(bytes, e.path().string());
                } catch (const ember::FormatError&) {
                }
            }
        }
        CHECK(files >= 2);
    }
    SECTION("attributes whose type and value disagree") {
        Pb attr;
        attr.str(1, "axis").int_field(20, 2);  // INT, but no i
        Pb node;
        node.str(4, "Softmax").msg(5, attr);
        CHECK_THAT(parse_error(model_with(Pb{}.msg(1, node)).b),
                   Catch::Contains("attribute 'axis' of type INT has no int"));
        CHECK_THAT(parse_error(model_with(Pb{}.msg(1, Pb{}.str(3, "n"))).b),
                   Catch::Contains("without an op_type"));
    }
}
