// safetensors: a file written by an independent writer (tests/fixtures/gen_safetensors.py, from
// the format's definition) read back with its values recomputed from their formulas; ember's
// writer read back, with its header checked as JSON; and each way a file can be broken giving a
// FormatError that names the problem.
#include <ember/record/safetensors.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "harness.hpp"

namespace test_safetensors {

namespace {

namespace fs = std::filesystem;
using ember::DType;
using ember::TensorData;
using ember::record::decode_safetensors;
using ember::record::encode_safetensors;
using ember::record::SafetensorsFile;

std::vector<std::byte> read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::vector<char> chars((std::istreambuf_iterator<char>(in)), {});
    std::vector<std::byte> out(chars.size());
    std::memcpy(out.data(), chars.data(), chars.size());
    return out;
}

const fs::path kSample = fs::path(EMBER_FIXTURE_DIR) / "safetensors" / "sample.safetensors";

// A file with one header and body, for breaking.
std::vector<std::byte> make(const std::string& header, std::size_t body_bytes) {
    std::vector<std::byte> out(8 + header.size() + body_bytes);
    const std::uint64_t n = header.size();
    std::memcpy(out.data(), &n, 8);
    std::memcpy(out.data() + 8, header.data(), header.size());
    return out;
}

void check_fails(const std::vector<std::byte>& bytes, const std::string& why) {
    INFO("expected: " << why);
    CHECK_THROWS_AS(decode_safetensors(bytes, "broken.safetensors"), ember::FormatError);
    CHECK_THROWS_WITH(decode_safetensors(bytes, "broken.safetensors"),
                      Catch::Contains("broken.safetensors") && Catch::Contains(why));
}

}  // namespace

TEST_CASE("safetensors", "[record][safetensors]") {
    SECTION("a file from an independent writer: every dtype, metadata, out-of-order header") {
        const SafetensorsFile f = decode_safetensors(read_file(kSample), kSample.string());
        REQUIRE(f.tensors.size() == 10);
        CHECK(f.metadata == std::vector<std::pair<std::string, std::string>>{
                                {"format", "pt"}, {"source", "gen_safetensors.py"}});
        auto get = [&](const char* name) {
            const TensorData* t = f.find(name);
            REQUIRE(t != nullptr);
            return *t;
        };
        CHECK(get("f32") == TensorData({0.f, 1.f, 2.f, 3.f, 4.f, 5.f}, {2, 3}));
        CHECK(get("f64") == TensorData({-1.5, 0.25, 1e300}, {3}));
        CHECK(get("f16").dtype() == DType::F16);
        CHECK(get("f16").convert(DType::F32) == TensorData({0.5f, -2.0f}, {2}));
        CHECK(get("bf16").dtype() == DType::BF16);
        CHECK(get("bf16").convert(DType::F32) == TensorData({1.0f, -3.5f}, {2}));
        CHECK(get("i64") == TensorData(std::vector<std::int64_t>{-1, std::int64_t{1} << 40}, {2}));
        CHECK(get("i32") == TensorData(std::vector<std::int32_t>{-7, 0, 7, 2147483647}, {2, 2}));
        CHECK(get("i8") == TensorData(std::vector<std::int8_t>{-128, 0, 127}, {3}));
        CHECK(get("u8") == TensorData(std::vector<std::uint8_t>{0, 1, 254, 255}, {4}));
        CHECK(get("bool") == TensorData(std::vector<bool>{true, false, true}, {3}));
        CHECK(get("empty").shape() == ember::Shape{0, 4});
        CHECK(f.find("missing") == nullptr);
    }
    SECTION("ember's writer: a header the format describes, read back unchanged") {
        SafetensorsFile f;
        f.metadata = {{"written_by", "ember"}};
        f.tensors = {{"layer.weight", TensorData({1.f, 2.f, 3.f, 4.f}, {2, 2})},
                     {"layer.bias", TensorData({0.5, -0.5}, {2})},
                     {"steps", TensorData(std::vector<std::int64_t>{3}, {1})}};
        const auto bytes = encode_safetensors(f);
        std::uint64_t n = 0;
        std::memcpy(&n, bytes.data(), 8);
        CHECK((8 + n) % 8 == 0);  // the body starts aligned
        const auto header =
            nlohmann::json::parse(std::string(reinterpret_cast<const char*>(bytes.data()) + 8, n));
        CHECK(header["layer.weight"]["dtype"] == "F32");
        CHECK(header["layer.weight"]["shape"] == nlohmann::json::array({2, 2}));
        CHECK(header["layer.weight"]["data_offsets"] == nlohmann::json::array({0, 16}));
        CHECK(header["layer.bias"]["data_offsets"] == nlohmann::json::array({16, 32}));
        CHECK(header["steps"]["dtype"] == "I64");
        CHECK(header["__metadata__"]["written_by"] == "ember");
        CHECK(bytes.size() == 8 + n + 40);

        const auto back = decode_safetensors(bytes);
        REQUIRE(back.tensors.size() == 3);
        for (std::size_t i = 0; i < 3; ++i) {
            CHECK(back.tensors[i].first == f.tensors[i].first);
            CHECK(back.tensors[i].second == f.tensors[i].second);
        }
        CHECK(back.metadata == f.metadata);
    }
    SECTION("files: written atomically, read back, a missing one named") {
        const fs::path dir = fs::temp_directory_path() / "ember-safetensors-test";
        fs::create_directories(dir);
        SafetensorsFile f;
        f.tensors = {{"x", TensorData({1.f, 2.f}, {2})}};
        ember::record::save_safetensors(f, dir / "a.safetensors");
        CHECK(ember::record::load_safetensors(dir / "a.safetensors").tensors[0].second ==
              f.tensors[0].second);
        CHECK_THROWS_WITH(ember::record::load_safetensors(dir / "missing.safetensors"),
                          Catch::Contains("missing.safetensors"));
        fs::remove_all(dir);
    }
    SECTION("writer errors") {
        SafetensorsFile twice;
        twice.tensors = {{"a", TensorData({1.f}, {1})}, {"a", TensorData({2.f}, {1})}};
        CHECK_THROWS_AS(encode_safetensors(twice), ember::ArgumentError);
        SafetensorsFile reserved;
        reserved.tensors = {{"__metadata__", TensorData({1.f}, {1})}};
        CHECK_THROWS_AS(encode_safetensors(reserved), ember::ArgumentError);
    }
    SECTION("broken and hostile files") {
        const std::string one = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
        CHECK_NOTHROW(decode_safetensors(make(one, 8)));
        check_fails(std::vector<std::byte>(5), "fewer than the 8");
        auto huge = make(one, 8);
        const std::uint64_t big = std::uint64_t{1} << 62;
        std::memcpy(huge.data(), &big, 8);
        check_fails(huge, "the header claims");
        auto longer = make(one, 8);
        const std::uint64_t too_long = one.size() + 100;
        std::memcpy(longer.data(), &too_long, 8);
        check_fails(longer, "only");
        check_fails(make("[1, 2]", 0), "not a JSON object");
        check_fails(make("{\"t\": ", 0), "not a JSON object");
        check_fails(make(R"({"t":{"dtype":"F32","shape":[2]}})", 8), "lacks dtype");
        check_fails(make(R"({"t":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", 2),
                    "F8_E4M3");
        check_fails(make(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
                    "non-negative");
        check_fails(make(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,80]}})", 8),
                    "outside the body");
        check_fails(make(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
                    "holds 8 bytes");
        check_fails(make(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 12),
                    "cover 8 of the body's 12");
        check_fails(make(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                         12),
                    "overlap");
        check_fails(make(R"({"t":{"dtype":"F32","shape":[4611686018427387904, 8],)"
                         R"("data_offsets":[0,8]}})",
                         8),
                    "safetensors");
        auto bad_bool = make(R"({"t":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}})", 1);
        bad_bool.back() = std::byte{7};
        check_fails(bad_bool, "other than 0 and 1");
        check_fails(make(R"({"__metadata__":{"k":3}})", 0), "not a string");
    }
    SECTION("the fuzzer's corpus seeds and past crashes (tests/fuzz/)") {
        std::size_t files = 0;
        for (const char* dir : {"corpus/safetensors", "crashes/safetensors"}) {
            for (const auto& e :
                 fs::directory_iterator(fs::path(EMBER_SOURCE_DIR) / "tests" / "fuzz" / dir)) {
                if (e.path().filename() == ".keep") continue;
                ++files;
                try {
                    (void)decode_safetensors(read_file(e.path()), e.path().string());
                } catch (const ember::FormatError&) {
                }
            }
        }
        CHECK(files >= 1);
    }
}

}  // namespace test_safetensors
