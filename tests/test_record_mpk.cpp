// NamedMpk (and its Gz form's body): the layout byte for byte against the MessagePack spec,
// interchange with msgpack-cxx, and crafted hostile MessagePack.
#include "record_check.hpp"

namespace test_record_mpk {

TEST_CASE("records: NamedMpk file layout", "[record]") {
    const Value tree = Map{{"w", TensorData({1.f, 2.f}, {2})}};
    const TempDir dir;
    SECTION("NamedMpk is plain MessagePack, byte for byte") {
        rec::NamedMpkFileRecorder<>{}.record(tree, dir / "m");
        std::vector<std::uint8_t> expected{0x85};  // five entries: the checksum is the last
        append_str(expected, "ember_record");
        expected.push_back(0x01);
        append_str(expected, "float");
        append_str(expected, "f32");
        append_str(expected, "int");
        append_str(expected, "i32");
        append_str(expected, "item");
        expected.push_back(0x81);
        append_str(expected, "w");
        expected.push_back(0x81);
        append_str(expected, "$tensor");
        expected.push_back(0x83);
        append_str(expected, "dtype");
        append_str(expected, "f32");
        append_str(expected, "shape");
        expected.insert(expected.end(), {0x91, 0x02});
        append_str(expected, "bytes");
        expected.insert(expected.end(),
                        {0xc4, 0x08, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40});
        // "crc32": uint32 (0xce, big-endian) of the CRC-32 of every byte before its four.
        append_str(expected, "crc32");
        expected.push_back(0xce);
        const std::uint32_t crc = crc32(expected.data(), expected.size());
        for (int shift = 24; shift >= 0; shift -= 8) expected.push_back((crc >> shift) & 0xff);
        CHECK(read_bytes(dir / "m.mpk") == expected);
    }
    SECTION("NamedMpk writes the smallest integer forms and float64 doubles") {
        const Value v = List{0, 127, 128, -1, -32, -33, kI64Min, 0.5};
        std::vector<std::uint8_t> item{0x98, 0x00, 0x7f, 0xcc, 0x80, 0xff, 0xe0, 0xd0, 0xdf,
                                       0xd3, 0x80, 0,    0,    0,    0,    0,    0,    0,
                                       0xcb, 0x3f, 0xe0, 0,    0,    0,    0,    0,    0};
        const auto bytes = to_u8(rec::detail::encode(v, rec::detail::Format::NamedMpk,
                                                     rec::FullPrecisionSettings::value));
        // The item, then the checksum entry ("crc32", 0xce and 4 bytes: 11 bytes).
        REQUIRE(bytes.size() > item.size() + 11);
        CHECK(std::vector<std::uint8_t>(bytes.end() - static_cast<long>(item.size() + 11),
                                        bytes.end() - 11) == item);
    }
#ifdef EMBER_TEST_HAVE_MSGPACK_CXX
    SECTION("msgpack-cxx reads NamedMpk files, and NamedMpk reads what msgpack-cxx writes") {
        rec::NamedMpkFileRecorder<>{}.record(Map{{"a", List{1, -2, 2.5, "s", Value()}}}, dir / "m");
        const auto b = read_bytes(dir / "m.mpk");
        const msgpack::object_handle oh =
            msgpack::unpack(reinterpret_cast<const char*>(b.data()), b.size());
        const auto root = oh.get().as<std::map<std::string, msgpack::object>>();
        CHECK(root.at("ember_record").as<int>() == 1);
        const auto item = root.at("item").as<std::map<std::string, msgpack::object>>();
        const auto a = item.at("a").as<std::vector<msgpack::object>>();
        REQUIRE(a.size() == 5);
        CHECK(a[0].as<std::int64_t>() == 1);
        CHECK(a[1].as<std::int64_t>() == -2);
        CHECK(a[2].as<double>() == 2.5);
        CHECK(a[3].as<std::string>() == "s");
        CHECK(a[4].is_nil());

        msgpack::sbuffer buf;
        msgpack::packer<msgpack::sbuffer> pk(buf);
        pk.pack_map(2);
        pk.pack(std::string("ember_record"));
        pk.pack(1);
        pk.pack(std::string("item"));
        pk.pack_array(4);
        pk.pack(1.5f);  // float32: widened to double
        pk.pack(std::uint64_t{300});
        pk.pack(std::int64_t{-40000});
        pk.pack(std::string("x"));
        const std::vector<std::uint8_t> theirs(buf.data(), buf.data() + buf.size());
        CHECK(decode_mpk(theirs) == Value(List{1.5, 300, -40000, "x"}));
    }
#endif
}

// The tree tests/fixtures/gen_msgpack.py writes with Python's msgpack (python3-msgpack).
static Value python_tree() {
    List ints;
    for (std::int64_t i : {std::int64_t{0},
                           std::int64_t{1},
                           std::int64_t{127},
                           std::int64_t{128},
                           std::int64_t{255},
                           std::int64_t{256},
                           std::int64_t{65535},
                           std::int64_t{65536},
                           std::int64_t{4294967295},
                           std::int64_t{4294967296},
                           kI64Max,
                           std::int64_t{-1},
                           std::int64_t{-32},
                           std::int64_t{-33},
                           std::int64_t{-128},
                           std::int64_t{-129},
                           std::int64_t{-32768},
                           std::int64_t{-32769},
                           std::int64_t{-2147483648},
                           std::int64_t{-2147483649},
                           kI64Min})
        ints.emplace_back(i);
    Map wide;
    for (int i = 0; i < 16; ++i)
        wide.emplace_back((i < 10 ? "k0" : "k") + std::to_string(i), std::int64_t{i});
    auto tensor = [](TensorData t) { return Value(std::move(t)); };
    return Map{
        {"ints", std::move(ints)},
        {"floats", List{0.5, -2.25, 1e300, 0.0, -0.0, 2.0}},
        {"strings", List{"", std::string(31, 'a'), std::string(32, 'b'), std::string(255, 'c'),
                         std::string(256, 'd'), "\xc3\xa9t\xc3\xa9"}},
        {"flags", List{true, false, Value()}},
        // Value(...) around a list that is another list's only element: without it Clang
        // copies the inner list (include/ember/record/value.hpp, List).
        {"nested", Map{{"a", Map{{"b", List{List{}, Map{}, List{Value(List{1})}}}}}}},
        {"$dollar", "a key that starts with '$'"},
        {"wide", std::move(wide)},
        {"w", tensor(TensorData({1.f, -2.f, 0.5f, 3.25f, -0.125f, 100.f}, {2, 3}))},
        {"idx",
         tensor(TensorData({std::int32_t{-7}, std::int32_t{0}, std::int32_t{2147483647}}, {3}))},
        {"pixels",
         tensor(TensorData({std::uint8_t{0}, std::uint8_t{1}, std::uint8_t{254}, std::uint8_t{255}},
                           {2, 2}))},
        {"mask", tensor(TensorData({true, false, true}, {3}))},
        {"empty", tensor(TensorData(std::vector<float>{}, {0, 4}))},
    };
}

TEST_CASE("records: NamedMpk against Python's msgpack", "[record]") {
    // The file was written by another implementation (tests/fixtures/gen_msgpack.py); ember
    // reads it, and writes the same tree to the same bytes (the smallest forms, float64 even for
    // 2.0 and -0.0, str8), as the hand-written codec before msgpack-cxx did: this test passed
    // against that codec too, so files stay byte-compatible both ways.
    const auto theirs = read_bytes(fs::path(EMBER_FIXTURE_DIR) / "msgpack" / "python.mpk");
    REQUIRE(theirs.size() > 1000);
    const Value tree = python_tree();
    CHECK(decode_mpk(theirs) == tree);
    const auto ours = to_u8(rec::detail::encode(tree, rec::detail::Format::NamedMpk,
                                                rec::FullPrecisionSettings::value));
    CHECK(ours == theirs);
    // Through the file recorder as well (the checksum verified on load).
    const TempDir dir;
    rec::NamedMpkFileRecorder<>{}.record(tree, dir / "m");
    CHECK(read_bytes(dir / "m.mpk") == theirs);
    CHECK(rec::NamedMpkFileRecorder<>{}.load(dir / "m") == tree);
}

TEST_CASE("records: crafted hostile MessagePack", "[record]") {
    SECTION("msgpack: lengths beyond the data") {
        REQUIRE_THROWS_WITH(decode_mpk(mpk_record({0xdd, 0xff, 0xff, 0xff, 0xff})),
                            Contains("truncated"));
        REQUIRE_THROWS_WITH(decode_mpk(mpk_record({0xdf, 0x7f, 0xff, 0xff, 0xff})),
                            Contains("truncated"));
        REQUIRE_THROWS_WITH(decode_mpk(mpk_record({0xdb, 0xff, 0xff, 0xff, 0xf0, 'a'})),
                            Contains("truncated"));
    }
    SECTION("msgpack: nesting too deep for the stack") {
        std::vector<std::uint8_t> deep(100000, 0x91);
        deep.push_back(0xc0);
        REQUIRE_THROWS_WITH(decode_mpk(mpk_record(deep)), Contains("nest deeper"));
    }
    SECTION("msgpack: values a record never holds") {
        REQUIRE_THROWS_WITH(decode_mpk(mpk_record({0xc1})), Contains("0xc1"));
        REQUIRE_THROWS_WITH(decode_mpk(mpk_record({0xd4, 0x01, 0x00})), Contains("extension"));
        REQUIRE_THROWS_WITH(decode_mpk(mpk_record({0xc4, 0x01, 0x00})),
                            Contains("outside a tensor"));
        REQUIRE_THROWS_WITH(decode_mpk(mpk_record({0xcf, 0xff, 0, 0, 0, 0, 0, 0, 0})),
                            Contains("exceeds int64"));
        std::vector<std::uint8_t> int_key{0x81, 0x01, 0xc0};
        REQUIRE_THROWS_WITH(decode_mpk(mpk_record(int_key)), Contains("not a string"));
        std::vector<std::uint8_t> reserved{0x81};
        append_str(reserved, "$other");
        reserved.push_back(0xc0);
        REQUIRE_THROWS_WITH(decode_mpk(mpk_record(reserved)), Contains("reserved"));
    }
    SECTION("msgpack: malformed tensors") {
        auto tensor = [](std::string_view dtype, std::vector<std::uint8_t> shape,
                         std::vector<std::uint8_t> data) {
            std::vector<std::uint8_t> t{0x81};
            append_str(t, "$tensor");
            t.push_back(0x83);
            append_str(t, "dtype");
            append_str(t, dtype);
            append_str(t, "shape");
            t.insert(t.end(), shape.begin(), shape.end());
            append_str(t, "bytes");
            t.push_back(0xc4);
            t.push_back(static_cast<std::uint8_t>(data.size()));
            t.insert(t.end(), data.begin(), data.end());
            return mpk_record(t);
        };
        CHECK(decode_mpk(tensor("u8", {0x92, 1, 2}, {3, 4})) ==
              Value(TensorData({std::uint8_t{3}, std::uint8_t{4}}, {1, 2})));
        REQUIRE_THROWS_WITH(decode_mpk(tensor("f17", {0x91, 1}, {0})), Contains("unknown dtype"));
        REQUIRE_THROWS_WITH(decode_mpk(tensor("u8", {0x91, 3}, {0, 1})), Contains("needs 3"));
        REQUIRE_THROWS_WITH(decode_mpk(tensor("u8", {0x91, 0xff}, {0})), Contains("dim"));
        REQUIRE_THROWS_WITH(decode_mpk(tensor("bool", {0x91, 2}, {1, 2})), Contains("bool"));
        REQUIRE_THROWS_WITH(decode_mpk(tensor("u8", {0x99, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {0})),
                            Contains("at most 8"));
        REQUIRE_THROWS_WITH(
            decode_mpk(tensor("f64", {0x93, 0xcf, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,
                                      0xcf, 0xff, 0xff, 0xff, 0xff, 0,    0, 0, 0, 0xcf,
                                      0xff, 0xff, 0xff, 0xff, 0,    0,    0, 0},
                              {0})),
            Contains("too large"));
    }
}

}  // namespace test_record_mpk
