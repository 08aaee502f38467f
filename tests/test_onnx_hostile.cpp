// Code injection through ember-onnx: a model whose producer strings, file name and names hold
// newlines, `*/`, backslash-newlines, trigraphs, non-ASCII bytes and names that collide once
// made identifiers (fixtures/gen_onnx_hostile.py). The build imports it (tests/CMakeLists.txt),
// so the generated header compiling at all is the first check; these cases check that the code
// it smuggles is nowhere in it, never ran, and that the model still computes what it says.
#include <ember/backend/cpu.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "../tools/onnx/import.hpp"
#include "harness.hpp"
#include "hostile.hpp"

namespace test_onnx_hostile {

namespace {

namespace fs = std::filesystem;
namespace onnx = ember::onnx;
using ember::Cpu;
using ember::TensorData;
using T2 = ember::Tensor<Cpu, 2>;

const fs::path kHostile = fs::path(EMBER_FIXTURE_DIR) / "onnx" / "hostile.onnx";

// Every line of `header` that is code, not comment, holding `needle`.
std::vector<std::string> code_lines_with(const std::string& header, const std::string& needle) {
    std::vector<std::string> out;
    std::istringstream in(header);
    for (std::string line; std::getline(in, line);) {
        const auto first = line.find_first_not_of(' ');
        if (first != std::string::npos && line.compare(first, 2, "//") == 0) {
            // A comment line must not end in a backslash (that would splice the next line in).
            CHECK(line.back() != '\\');
            continue;
        }
        if (line.find(needle) != std::string::npos) out.push_back(line);
    }
    return out;
}

}  // namespace

TEST_CASE(
    "attack: an ONNX producer_name with a newline and a std::system initialiser stays a comment",
    "[onnx][hostile]") {
    // Had the producer string escaped its comment, the static initialiser would have run when
    // this program started (it is linked into ember_tests) and set this variable.
    CHECK(std::getenv("HOSTILE_ONNX_INJECTED") == nullptr);

    const auto model = onnx::load_model(kHostile);
    REQUIRE(model.producer_name.find('\n') != std::string::npos);  // the fixture is hostile
    // The file name is hostile too: a model named so on disk reaches the header the same way.
    const std::string evil_source = "m.onnx\nstatic int x = std::system(\"true\"); /*\\\n*/";
    onnx::ImportOptions opt;
    opt.name_space = "hostile_api";
    const auto result = onnx::import_model(model, opt, evil_source);
    const std::string& h = result.header;
    CHECK(code_lines_with(h, "std::system(").empty());
    CHECK(code_lines_with(h, "setenv").empty());
    CHECK(code_lines_with(h, "#error").empty());
    CHECK(code_lines_with(h, "ember_onnx_injected").empty());
    CHECK(h.find("*/") == std::string::npos);
    CHECK(h.find("?\?/") == std::string::npos);
    CHECK(h.find('\r') == std::string::npos);
    CHECK(h.find('\\') == std::string::npos);
    CHECK(std::all_of(h.begin(), h.end(), [](char ch) {
        const auto c = static_cast<unsigned char>(ch);
        return c == '\n' || (c >= 0x20 && c < 0x7f);
    }));
    // The escaped text is still there to read.
    CHECK(h.find("pwned%0Astatic const int ember_onnx_injected") != std::string::npos);
}

TEST_CASE(
    "attack: ONNX names that collide once sanitised, keywords and EMBER_MODULE's member names "
    "become distinct identifiers",
    "[onnx][hostile]") {
    const auto model = onnx::load_model(kHostile);
    const auto result = onnx::import_model(model, {}, "hostile.onnx");
    const std::string& h = result.header;
    // a.b and a-b both sanitise to a_b; `class` is a keyword; é∑ has no ASCII letter.
    CHECK(h.find("auto forward(const ember::Tensor<B, 2> a_b, const ember::Tensor<B, 2> a_b_2, "
                 "const ember::Tensor<B, 2> class_2, const ember::Tensor<B, 2> v)") !=
          std::string::npos);
    // Initialisers named after EMBER_MODULE's members become other fields.
    CHECK(h.find(" visit;") == std::string::npos);
    CHECK(h.find(" ember_fields;") == std::string::npos);
    CHECK(h.find(" visit_2;") != std::string::npos);
    CHECK(h.find(" v_ember_fields;") != std::string::npos);
    // The graph's inputs keep their ONNX names in the signature ember-onnx reports.
    REQUIRE(result.inputs.size() == 4);
    CHECK(result.inputs[0].name == "a.b");
    CHECK(result.inputs[3].name == "\u00e9\u2211");
}

TEST_CASE("attack: the hostile ONNX model imported at build time computes what its graph says",
          "[onnx][hostile]") {
    const auto m = hostile::Model<Cpu>::from_file(EMBER_ONNX_RECORD_hostile);
    const std::vector<float> a{1, 2, 3, 4, 5, 6}, b{0.5f, -1, 2, 0, 1, -3}, c{1, 1, 2, 2, 3, 3},
        d{2, -1, 0.5f, 1, -2, 3};
    auto t = [](const std::vector<float>& v) { return T2::from_data(TensorData(v, {2, 3})); };
    const auto y = m.forward(t(a), t(b), t(c), t(d)).to_data().to_vec<float>();
    // y = ((a + b) * visit + 0.5 - c) * d with visit = 1..6 (gen_onnx_hostile.py).
    REQUIRE(y.size() == 6);
    for (std::size_t i = 0; i < 6; ++i)
        CHECK(y[i] == Approx(((a[i] + b[i]) * float(i + 1) + 0.5f - c[i]) * d[i]));
}

TEST_CASE("attack: a namespace or embedded symbol that is not an identifier is refused",
          "[onnx][hostile]") {
    const auto model = onnx::load_model(kHostile);
    onnx::ImportOptions opt;
    opt.name_space = "x {} int y; namespace z";
    CHECK_THROWS_AS(onnx::import_model(model, opt, "m.onnx"), ember::ArgumentError);
    opt.name_space = "outer::inner";
    CHECK_NOTHROW(onnx::import_model(model, opt, "m.onnx"));
    opt.name_space = "outer::class";
    CHECK_THROWS_AS(onnx::import_model(model, opt, "m.onnx"), ember::ArgumentError);
    opt.name_space = "ok";
    opt.embedded_symbol = "sym[]; int evil";
    CHECK_THROWS_AS(onnx::import_model(model, opt, "m.onnx"), ember::ArgumentError);
    CHECK(onnx::to_identifier("my-model.v2") == "my_model_v2");
    CHECK(onnx::to_identifier("2nd") == "m_2nd");
    CHECK(onnx::to_identifier("class") == "class_");
    CHECK(onnx::is_identifier(onnx::to_identifier("\n;__x")));
}

TEST_CASE("attack: comment_text leaves nothing that ends, splices or escapes a comment",
          "[onnx][hostile]") {
    CHECK(onnx::comment_text("a*/b") == "a%2A/b");
    CHECK(onnx::comment_text("x\\") == "x%5C");
    CHECK(onnx::comment_text("?\?/") == "%3F%3F/");
    CHECK(onnx::comment_text("l1\nl2\r") == "l1%0Al2%0D");
    CHECK(onnx::comment_text("\u00e9") == "%C3%A9");
    CHECK(onnx::comment_text("100%") == "100%25");
    CHECK(onnx::comment_text(std::string(500, 'a')).size() == 203);
}

}  // namespace test_onnx_hostile
