// PrettyJson: indented JSON with base64 tensors and tagged non-finite doubles, and crafted
// hostile JSON.
#include "record_check.hpp"

namespace test_record_json {

TEST_CASE("records: PrettyJson file layout", "[record]") {
    const Value tree = Map{{"w", TensorData({1.f, 2.f}, {2})}};
    const TempDir dir;
    SECTION("PrettyJson: indented JSON, base64 tensors, tagged non-finite doubles, escaped keys") {
        const Value v = Map{{"w", TensorData({1.f, 2.f}, {2})},
                            {"x", List{kNaN, -kInf, bits64(0x7ff0000000000001), 0.1}},
                            {"$k", 1}};
        rec::PrettyJsonFileRecorder<>{}.record(v, dir / "m");
        const auto bytes = read_bytes(dir / "m.json");
        const std::string text(bytes.begin(), bytes.end());
        CHECK(text.find("\n  \"item\": {") != std::string::npos);
        const auto j = nlohmann::ordered_json::parse(text);
        CHECK(j["ember_record"] == 1);
        CHECK(j["float"] == "f32");
        CHECK(j["int"] == "i32");
        const auto& t = j["item"]["w"]["$tensor"];
        CHECK(t["dtype"] == "f32");
        CHECK(t["shape"] == nlohmann::ordered_json::array({2}));
        CHECK(t["bytes"] == "AACAPwAAAEA=");
        CHECK(j["item"]["x"][0]["$float"] == "NaN");
        CHECK(j["item"]["x"][1]["$float"] == "-inf");
        CHECK(j["item"]["x"][2]["$float"] == "NaN(0x7ff0000000000001)");
        CHECK(j["item"]["x"][3].get<double>() == 0.1);
        CHECK(j["item"]["$$k"] == 1);
    }
}

TEST_CASE("records: crafted hostile JSON", "[record]") {
    SECTION("JSON: malformed text, tensors and floats") {
        const std::string head = R"({"ember_record": 1, "item": )";
        CHECK(decode_json(head + "[1, 2.5, null]}") == Value(List{1, 2.5, Value()}));
        REQUIRE_THROWS_WITH(decode_json(head + "[1, 2"), Contains("invalid JSON"));
        REQUIRE_THROWS_WITH(decode_json(head + "18446744073709551615}"), Contains("exceeds int64"));
        REQUIRE_THROWS_WITH(
            decode_json(head + std::string(100000, '[') + std::string(100000, ']') + "}"),
            Contains("nest deeper"));
        REQUIRE_THROWS_WITH(decode_json(head + R"({"$float": "huge"}})"), Contains("huge"));
        REQUIRE_THROWS_WITH(decode_json(head + R"j({"$float": "NaN(0x0000000000000001)"}})j"),
                            Contains("NaN("));
        REQUIRE_THROWS_WITH(decode_json(head + R"({"$bogus": 1}})"), Contains("reserved"));
        const std::string t = R"({"$tensor": {"dtype": "u8", "shape": [2], "bytes": )";
        CHECK(decode_json(head + t + R"("AAE="}}})") ==
              Value(TensorData({std::uint8_t{0}, std::uint8_t{1}}, {2})));
        REQUIRE_THROWS_WITH(decode_json(head + t + R"("AAF="}}})"), Contains("canonical"));
        REQUIRE_THROWS_WITH(decode_json(head + t + R"("AA E"}}})"), Contains("base64"));
        REQUIRE_THROWS_WITH(decode_json(head + t + R"("AAEC"}}})"), Contains("needs 2"));
        REQUIRE_THROWS_WITH(decode_json(head + t + R"(5}}})"), Contains("base64"));
        REQUIRE_THROWS_WITH(
            decode_json(head + R"({"$tensor": {"dtype": "u8", "shape": [-1], "bytes": ""}}})"),
            Contains("not a size"));
        REQUIRE_THROWS_WITH(decode_json(head + R"({"$tensor": {"dtype": "u8"}}})"),
                            Contains("dtype, shape and bytes"));
    }
}

}  // namespace test_record_json
