// The Gz recorders (JsonGz, NamedMpkGz, BinGz): gzip framing, its CRC, and trailing bytes.
#include "record_check.hpp"

namespace test_record_gz {

TEST_CASE("records: the Gz formats are gzip streams", "[record]") {
    const Value tree = Map{{"w", TensorData({1.f, 2.f}, {2})}};
    const TempDir dir;
    SECTION("the Gz formats are gzip streams") {
        rec::JsonGzFileRecorder<>{}.record(tree, dir / "m");
        rec::NamedMpkGzFileRecorder<>{}.record(tree, dir / "m");
        rec::BinGzFileRecorder<>{}.record(tree, dir / "m");
        for (const char* f : {"m.json.gz", "m.mpk.gz", "m.bin.gz"}) {
            const auto b = read_bytes(dir / f);
            REQUIRE(b.size() > 18);
            CHECK(b[0] == 0x1f);
            CHECK(b[1] == 0x8b);
        }
    }
    SECTION("a wrong gzip CRC is a FormatError") {
        rec::BinGzFileRecorder<>{}.record(small_tree(), dir / "m");
        auto bytes = read_bytes(dir / "m.bin.gz");
        bytes[bytes.size() - 8] ^= 0x01;  // the trailer: CRC-32 then the size
        write_bytes(dir / "m.bin.gz", bytes);
        REQUIRE_THROWS_WITH(rec::BinGzFileRecorder<>{}.load(dir / "m"),
                            Contains("m.bin.gz: not a BinGz record") && Contains("gzip"));
    }
    SECTION("bytes after the gzip stream are an error") {
        rec::JsonGzFileRecorder<>{}.record(small_tree(), dir / "m");
        auto bytes = read_bytes(dir / "m.json.gz");
        bytes.push_back(0);
        write_bytes(dir / "m.json.gz", bytes);
        REQUIRE_THROWS_WITH(rec::JsonGzFileRecorder<>{}.load(dir / "m"), Contains("trailing"));
    }
}

}  // namespace test_record_gz
