// The Bin recorders (file and in-memory): magic, version, precision, zigzag varints and the
// CRC-32 trailer, and the structural checks behind a valid checksum.
#include "record_check.hpp"

namespace test_record_bin {

TEST_CASE("records: Bin file layout", "[record]") {
    const Value tree = Map{{"w", TensorData({1.f, 2.f}, {2})}};
    const TempDir dir;
    SECTION("Bin: magic, version, precision, body, CRC-32") {
        rec::BinFileRecorder<rec::HalfPrecisionSettings>{}.record(tree, dir / "m");
        const auto b = read_bytes(dir / "m.bin");
        REQUIRE(b.size() > 12);
        CHECK(std::string(b.begin(), b.begin() + 4) == "EMBR");
        CHECK(b[4] == 1);  // version 1, little-endian u16
        CHECK(b[5] == 0);
        CHECK(b[6] == 2);  // f16
        CHECK(b[7] == 6);  // i16
        // map of 1: "w" → tensor f16 (code 2), rank 1, dim 2, bytes of 1.0 and 2.0 in f16
        const std::vector<std::uint8_t> body{8, 1, 1, 'w', 6, 2, 1, 2, 0x00, 0x3c, 0x00, 0x40};
        CHECK(std::vector<std::uint8_t>(b.begin() + 8, b.end() - 4) == body);
        const std::uint32_t crc = crc32(b.data(), b.size() - 4);
        CHECK(b[b.size() - 4] == (crc & 0xff));
        CHECK(b[b.size() - 1] == (crc >> 24));
    }
    SECTION("Bin ints are zigzag varints") {
        const auto b = to_u8(rec::BinBytesRecorder<>{}.record(List{0, -1, 1, 64, kI64Min}));
        const std::vector<std::uint8_t> body{7,    5,    3,    0,    3,    1,    3,    2,
                                             3,    0x80, 0x01, 3,    0xff, 0xff, 0xff, 0xff,
                                             0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
        CHECK(std::vector<std::uint8_t>(b.begin() + 8, b.end() - 4) == body);
    }
}

TEST_CASE("records: crafted hostile Bin records", "[record]") {
    SECTION("Bin: structural checks behind a valid checksum") {
        CHECK(decode_bin(bin_record({3, 0x01})) == Value(-1));
        REQUIRE_THROWS_WITH(decode_bin(bin_record({9})), Contains("unknown value tag 9"));
        REQUIRE_THROWS_WITH(decode_bin(bin_record({0, 0})), Contains("trailing bytes"));
        REQUIRE_THROWS_WITH(decode_bin(bin_record({5, 0xff, 0xff, 0xff, 0xff, 0x0f, 'a'})),
                            Contains("truncated"));
        REQUIRE_THROWS_WITH(
            decode_bin(bin_record({7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})),
            Contains("truncated"));
        REQUIRE_THROWS_WITH(
            decode_bin(bin_record({3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02})),
            Contains("overflows"));
        REQUIRE_THROWS_WITH(decode_bin(bin_record({6, 10, 1, 1, 0})), Contains("dtype code 10"));
        REQUIRE_THROWS_WITH(decode_bin(bin_record({6, 8, 9})), Contains("rank 9"));
        REQUIRE_THROWS_WITH(decode_bin(bin_record({6, 9, 1, 2, 1, 7})), Contains("bool"));
        REQUIRE_THROWS_WITH(decode_bin(bin_record({6, 0, 1, 3, 0, 0})), Contains("truncated"));
        std::vector<std::uint8_t> deep(100000, 7);
        for (std::size_t i = 1; i < deep.size(); i += 2) deep[i] = 1;
        deep.push_back(0);
        REQUIRE_THROWS_WITH(decode_bin(bin_record(deep)), Contains("nest deeper"));
    }
}

}  // namespace test_record_bin
