// NamedMpk (and its Gz form's body): the layout byte for byte against the MessagePack spec,
// interchange with msgpack-cxx, and crafted hostile MessagePack.
#include "record_check.hpp"

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
