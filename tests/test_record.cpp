// The record layer: every recorder at every precision, the file formats' layouts, atomic saves,
// hostile files common to every format (missing, foreign, truncated, corrupted), and trees a
// format cannot hold. Each format's own layout and crafted input:
// test_record_{mpk,bin,json,gz}.cpp; Serde: test_record_serde.cpp. Expected values come from the
// documented rules (TensorData::convert for precision, the MessagePack spec, base64 by hand, CRC-32
// by hand), never from the recorders.
#include "record_check.hpp"

namespace test_record {

// ---- every recorder, every precision ---------------------------------------------------------

TEMPLATE_PRODUCT_TEST_CASE("records: a tree round-trips through every file recorder", "[record]",
                           (rec::NamedMpkFileRecorder, rec::NamedMpkGzFileRecorder,
                            rec::BinFileRecorder, rec::BinGzFileRecorder, rec::JsonGzFileRecorder,
                            rec::PrettyJsonFileRecorder),
                           (rec::DoublePrecisionSettings, rec::FullPrecisionSettings,
                            rec::HalfPrecisionSettings)) {
    const TestType recorder;
    const rec::PrecisionSettings precision = TestType::precision;
    const TempDir dir;
    const Value tree = sample_tree();

    SECTION("tensors come back converted to the settings' dtypes, everything else exactly") {
        recorder.record(tree, dir / "model");
        const Value loaded = recorder.load(dir / "model");
        REQUIRE(same_tree(loaded, at_precision(tree, precision)));
        const auto& f32 = loaded.at("tensors").at("f32").as<TensorData>();
        CHECK(f32.dtype() == precision.float_dtype);
        CHECK(loaded.at("tensors").at("i8").as<TensorData>().dtype() == precision.int_dtype);
        CHECK(loaded.at("tensors").at("bool").as<TensorData>().dtype() == DType::Bool);
        CHECK(loaded.at("tensors").at("u8").as<TensorData>().dtype() == DType::U8);
    }
    SECTION("a tree already at the settings' precision comes back bit-exact") {
        const Value exact = at_precision(tree, precision);
        recorder.record(exact, dir / "model");
        REQUIRE(same_tree(recorder.load(dir / "model"), exact));
    }
    SECTION("the extension is appended once, and the file is named by it") {
        recorder.record(tree, dir / "model");
        const std::string file = "model." + std::string(TestType::extension);
        REQUIRE(dir.entries() == std::vector<std::string>{file});
        CHECK(recorder.file_path(dir / "model") == dir / file);
        CHECK(recorder.file_path(dir / file) == dir / file);
        REQUIRE(same_tree(recorder.load(dir / file), at_precision(tree, precision)));
    }
    SECTION("saving twice gives the same bytes") {
        recorder.record(tree, dir / "a");
        recorder.record(tree, dir / "b");
        const std::string ext = "." + std::string(TestType::extension);
        CHECK(read_bytes(dir / ("a" + ext)) == read_bytes(dir / ("b" + ext)));
    }
    SECTION("scalar roots and empty containers") {
        for (const Value& v : {Value(), Value(7), Value(-0.0), Value("x"), Value(List{}),
                               Value(Map{}), Value(TensorData({1.f}, {1}))}) {
            recorder.record(v, dir / "v");
            CHECK(same_tree(recorder.load(dir / "v"), at_precision(v, precision)));
        }
    }
}

TEMPLATE_TEST_CASE("records: BinBytesRecorder round-trips in memory", "[record]",
                   rec::DoublePrecisionSettings, rec::FullPrecisionSettings,
                   rec::HalfPrecisionSettings) {
    const rec::BinBytesRecorder<TestType> recorder;
    const Value tree = sample_tree();

    SECTION("converted to the settings' dtypes") {
        const std::vector<std::byte> bytes = recorder.record(tree);
        REQUIRE(same_tree(recorder.load(bytes), at_precision(tree, TestType::value)));
    }
    SECTION("bit-exact at its own precision, and the same bytes as a Bin file") {
        const Value exact = at_precision(tree, TestType::value);
        const std::vector<std::byte> bytes = recorder.record(exact);
        REQUIRE(same_tree(recorder.load(bytes), exact));
        const TempDir dir;
        rec::BinFileRecorder<TestType>{}.record(exact, dir / "m");
        CHECK(read_bytes(dir / "m.bin") == to_u8(bytes));
    }
}

TEST_CASE("records: recorder types", "[record]") {
    SECTION("extensions") {
        STATIC_REQUIRE(rec::NamedMpkFileRecorder<>::extension == "mpk");
        STATIC_REQUIRE(rec::NamedMpkGzFileRecorder<>::extension == "mpk.gz");
        STATIC_REQUIRE(rec::BinFileRecorder<>::extension == "bin");
        STATIC_REQUIRE(rec::BinGzFileRecorder<>::extension == "bin.gz");
        STATIC_REQUIRE(rec::JsonGzFileRecorder<>::extension == "json.gz");
        STATIC_REQUIRE(rec::PrettyJsonFileRecorder<>::extension == "json");
    }
    SECTION("the default recorder is named MessagePack at full precision") {
        STATIC_REQUIRE(std::is_same_v<rec::DefaultFileRecorder,
                                      rec::NamedMpkFileRecorder<rec::FullPrecisionSettings>>);
        STATIC_REQUIRE(rec::DefaultFileRecorder::precision.float_dtype == DType::F32);
        STATIC_REQUIRE(rec::DefaultFileRecorder::precision.int_dtype == DType::I32);
    }
    SECTION("concepts") {
        STATIC_REQUIRE(rec::FileRecorder<rec::DefaultFileRecorder>);
        STATIC_REQUIRE(rec::FileRecorder<rec::BinGzFileRecorder<rec::HalfPrecisionSettings>>);
        STATIC_REQUIRE(!rec::FileRecorder<rec::BinBytesRecorder<>>);
        STATIC_REQUIRE(rec::BytesRecorder<rec::BinBytesRecorder<>>);
        STATIC_REQUIRE(rec::PrecisionSettingsType<rec::HalfPrecisionSettings>);
        STATIC_REQUIRE(!rec::PrecisionSettingsType<UnsignedIntSettings>);
        STATIC_REQUIRE(!rec::PrecisionSettingsType<int>);
    }
}

// ---- paths, extensions, atomic saves --------------------------------------------------------

TEST_CASE("records: file paths and extensions", "[record]") {
    const rec::NamedMpkFileRecorder<> mpk;
    const rec::BinGzFileRecorder<> bin_gz;

    SECTION("the extension is appended unless the name already ends with it") {
        CHECK(mpk.file_path("model") == fs::path("model.mpk"));
        CHECK(mpk.file_path("model.mpk") == fs::path("model.mpk"));
        CHECK(mpk.file_path("dir/model") == fs::path("dir/model.mpk"));
        CHECK(mpk.file_path("model.v2") == fs::path("model.v2.mpk"));
        CHECK(mpk.file_path("model.json") == fs::path("model.json.mpk"));
        CHECK(bin_gz.file_path("model") == fs::path("model.bin.gz"));
        CHECK(bin_gz.file_path("model.bin.gz") == fs::path("model.bin.gz"));
        CHECK(bin_gz.file_path("model.gz") == fs::path("model.gz.bin.gz"));
        CHECK(bin_gz.file_path("model.bin") == fs::path("model.bin.bin.gz"));
    }
    SECTION("a path naming a directory is an error") {
        REQUIRE_THROWS_AS(mpk.file_path("dir/"), ember::ArgumentError);
        REQUIRE_THROWS_AS(mpk.file_path("."), ember::ArgumentError);
        REQUIRE_THROWS_AS(mpk.file_path(""), ember::ArgumentError);
    }
    SECTION("load takes the path with or without the extension") {
        const TempDir dir;
        mpk.record(Value(1), dir / "m");
        CHECK(mpk.load(dir / "m") == Value(1));
        CHECK(mpk.load(dir / "m.mpk") == Value(1));
    }
}

TEST_CASE("records: saves are atomic", "[record]") {
    const TempDir dir;
    const Value first = small_tree();
    const Value second = Map{{"replaced", true}};

    for (const AnyRecorder& r : all_recorders()) {
        DYNAMIC_SECTION(r.name) {
            const std::string file = "model." + r.extension;
            SECTION("a save leaves the file and nothing else") {
                r.record(first, dir / "model");
                CHECK(dir.entries() == std::vector<std::string>{file});
            }
            SECTION("a save replaces an existing file") {
                r.record(first, dir / "model");
                r.record(second, dir / "model");
                CHECK(r.load(dir / "model") == second);
                CHECK(dir.entries() == std::vector<std::string>{file});
            }
            SECTION("saving into a missing directory throws and creates nothing") {
                REQUIRE_THROWS_WITH(r.record(first, dir / "missing" / "model"),
                                    Contains("cannot write") && Contains("missing"));
                CHECK(!fs::exists(dir / "missing"));
                CHECK(dir.entries().empty());
            }
            SECTION("saving over a directory throws and leaves no temporary file") {
                fs::create_directory(dir / file);
                REQUIRE_THROWS_AS(r.record(first, dir / "model"), ember::ArgumentError);
                CHECK(dir.entries() == std::vector<std::string>{file});
                CHECK(fs::is_directory(dir / file));
            }
            SECTION("a tree the format cannot hold leaves the old file untouched") {
                r.record(first, dir / "model");
                const auto before = read_bytes(dir / file);
                Value deep = List{};
                for (int i = 0; i < 300; ++i) deep = List{std::move(deep)};
                REQUIRE_THROWS_WITH(r.record(deep, dir / "model"), Contains("deeper than"));
                CHECK(read_bytes(dir / file) == before);
                CHECK(dir.entries() == std::vector<std::string>{file});
            }
        }
    }
}

// ---- the formats' layouts -------------------------------------------------------------------

// ---- bad files ------------------------------------------------------------------------------

TEST_CASE("records: missing and foreign files", "[record]") {
    const TempDir dir;
    const auto recorders = all_recorders();

    SECTION("a missing file is a FormatError naming it") {
        for (const AnyRecorder& r : recorders) {
            INFO(r.name);
            REQUIRE_THROWS_AS(r.load(dir / "nothing"), ember::FormatError);
            REQUIRE_THROWS_WITH(r.load(dir / "nothing"),
                                Contains("nothing." + r.extension) && Contains("no such file"));
        }
    }
    SECTION("a directory is not a record") {
        fs::create_directory(dir / "d.mpk");
        REQUIRE_THROWS_WITH(rec::NamedMpkFileRecorder<>{}.load(dir / "d"),
                            Contains("is a directory"));
    }
    SECTION("every recorder rejects every other format") {
        for (const AnyRecorder& writer : recorders) {
            writer.record(small_tree(), dir / "src");
            const auto bytes = read_bytes(writer.file_path(dir / "src"));
            for (const AnyRecorder& reader : recorders) {
                if (reader.name == writer.name) continue;
                INFO(reader.name << " reading " << writer.name);
                write_bytes(reader.file_path(dir / "foreign"), bytes);
                REQUIRE_THROWS_AS(reader.load(dir / "foreign"), ember::FormatError);
                REQUIRE_THROWS_WITH(
                    reader.load(dir / "foreign"),
                    Contains("foreign." + reader.extension + ": not a " + reader.name + " record"));
            }
        }
    }
    SECTION("a JSON file renamed .mpk") {
        rec::PrettyJsonFileRecorder<>{}.record(small_tree(), dir / "model");
        fs::rename(dir / "model.json", dir / "model.mpk");
        REQUIRE_THROWS_WITH(rec::NamedMpkFileRecorder<>{}.load(dir / "model"),
                            Contains("model.mpk: not a NamedMpk record"));
    }
    SECTION("random bytes and empty files") {
        std::mt19937 rng(7);
        std::vector<std::uint8_t> noise(4096);
        for (auto& b : noise) b = static_cast<std::uint8_t>(rng());
        for (const AnyRecorder& r : recorders) {
            INFO(r.name);
            write_bytes(r.file_path(dir / "noise"), noise);
            CHECK_THROWS_AS(r.load(dir / "noise"), ember::FormatError);
            write_bytes(r.file_path(dir / "empty"), {});
            CHECK_THROWS_AS(r.load(dir / "empty"), ember::FormatError);
        }
    }
    SECTION("valid syntax without ember's header") {
        write_bytes(dir / "plain.json", {'{', '"', 'a', '"', ':', '1', '}'});
        REQUIRE_THROWS_WITH(rec::PrettyJsonFileRecorder<>{}.load(dir / "plain"),
                            Contains("not written by ember"));
        std::vector<std::uint8_t> plain{0x81};
        append_str(plain, "a");
        plain.push_back(0x01);
        write_bytes(dir / "plain.mpk", plain);
        REQUIRE_THROWS_WITH(rec::NamedMpkFileRecorder<>{}.load(dir / "plain"),
                            Contains("not written by ember"));
    }
    SECTION("a newer format version") {
        std::vector<std::uint8_t> newer{0x82};
        append_str(newer, "ember_record");
        newer.push_back(0x02);
        append_str(newer, "item");
        newer.push_back(0xc0);
        REQUIRE_THROWS_WITH(decode_mpk(newer), Contains("version 2"));
        REQUIRE_THROWS_WITH(decode_bin(with_crc({'E', 'M', 'B', 'R', 2, 0, 0, 5, 0})),
                            Contains("version 2"));
        REQUIRE_THROWS_WITH(decode_json(R"({"ember_record": 2, "item": null})"),
                            Contains("version 2"));
    }
}

TEST_CASE("records: every truncation is a FormatError", "[record]") {
    const TempDir dir;
    for (const AnyRecorder& r : all_recorders()) {
        DYNAMIC_SECTION(r.name) {
            r.record(small_tree(), dir / "full");
            const auto bytes = read_bytes(r.file_path(dir / "full"));
            REQUIRE(bytes.size() > 40);
            std::vector<std::string> bad;
            for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
                write_bytes(r.file_path(dir / "cut"),
                            {bytes.begin(), bytes.begin() + static_cast<long>(cut)});
                const std::string got = outcome([&] { r.load(dir / "cut"); });
                if (got != "FormatError") bad.push_back(std::to_string(cut) + ": " + got);
            }
            std::string first_bad;
            for (std::size_t i = 0; i < bad.size() && i < 5; ++i) first_bad += bad[i] + "\n";
            INFO("file of " << bytes.size() << " bytes; cuts that did not fail:\n" << first_bad);
            CHECK(bad.empty());
        }
    }
}

TEST_CASE("records: corrupted bytes never crash", "[record]") {
    const TempDir dir;
    for (const AnyRecorder& r : all_recorders()) {
        DYNAMIC_SECTION(r.name) {
            r.record(small_tree(), dir / "full");
            const auto bytes = read_bytes(r.file_path(dir / "full"));
            const bool checksummed = r.name != "NamedMpk" && r.name != "PrettyJson";
            std::vector<std::string> bad;
            std::size_t errors = 0;
            for (std::size_t pos = 0; pos < bytes.size(); ++pos) {
                for (std::uint8_t flip :
                     {std::uint8_t{0x01}, std::uint8_t{0x80}, std::uint8_t{0xff}}) {
                    auto corrupt = bytes;
                    corrupt[pos] ^= flip;
                    write_bytes(r.file_path(dir / "bad"), corrupt);
                    const std::string got = outcome([&] { r.load(dir / "bad"); });
                    if (got == "FormatError")
                        ++errors;
                    else if (got != "ok")
                        bad.push_back(std::to_string(pos) + ": " + got);
                }
            }
            INFO(bad.size() << " loads threw something other than FormatError"
                            << (bad.empty() ? "" : ", first: " + bad.front()));
            CHECK(bad.empty());
            if (r.name == "Bin") CHECK(errors == 3 * bytes.size());  // the CRC catches every flip
            if (checksummed) CHECK(errors > bytes.size());
        }
    }
}

TEST_CASE("records: trees a format cannot hold", "[record]") {
    const TempDir dir;
    SECTION("JSON needs UTF-8 strings and keys; the error names the place") {
        const Value bad = Map{{"opt", Map{{"names", List{"ok", "\xff\xfe"}}}}};
        REQUIRE_THROWS_WITH(rec::PrettyJsonFileRecorder<>{}.record(bad, dir / "m"),
                            Contains("opt.names[1]") && Contains("UTF-8"));
        REQUIRE_THROWS_AS(rec::JsonGzFileRecorder<>{}.record(Map{{"\xc0\x80", 1}}, dir / "m"),
                          ember::ArgumentError);
        CHECK(dir.entries().empty());
        // MessagePack and Bin hold any bytes.
        rec::NamedMpkFileRecorder<>{}.record(bad, dir / "m");
        CHECK(rec::NamedMpkFileRecorder<>{}.load(dir / "m") == bad);
    }
    SECTION("JSON objects cannot repeat a key; MessagePack and Bin keep both") {
        const Value dup = Map{{"a", 1}, {"a", 2}};
        REQUIRE_THROWS_WITH(rec::PrettyJsonFileRecorder<>{}.record(dup, dir / "m"),
                            Contains("twice"));
        rec::BinFileRecorder<>{}.record(dup, dir / "m");
        CHECK(rec::BinFileRecorder<>{}.load(dir / "m") == dup);
        rec::NamedMpkFileRecorder<>{}.record(dup, dir / "m");
        CHECK(rec::NamedMpkFileRecorder<>{}.load(dir / "m") == dup);
    }
    SECTION("nesting at the limit is fine, one deeper is refused") {
        Value ok = List{};
        for (int i = 1; i < 256; ++i) ok = List{std::move(ok)};
        for (const AnyRecorder& r : all_recorders()) {
            INFO(r.name);
            r.record(ok, dir / "deep");
            CHECK(r.load(dir / "deep") == ok);
        }
        Value too_deep = List{std::move(ok)};
        REQUIRE_THROWS_AS(rec::BinBytesRecorder<>{}.record(too_deep), ember::ArgumentError);
    }
}

}  // namespace test_record
