// The record layer: every recorder at every precision, the file formats' layouts, atomic saves,
// hostile files (missing, foreign, truncated, corrupted, crafted), and Serde for optimizer-style
// state. Expected values come from the documented rules (TensorData::convert for precision, the
// MessagePack spec, base64 by hand, CRC-32 by hand), never from the recorders themselves.
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <ember/record/recorder.hpp>
#include <ember/record/serde.hpp>
#include <nlohmann/json.hpp>

#if __has_include(<msgpack.hpp>)
#define MSGPACK_NO_BOOST 1
#include <msgpack.hpp>
#include <ember/detail/bit.hpp>
#define EMBER_TEST_HAVE_MSGPACK_CXX 1
#endif

namespace fs = std::filesystem;
namespace rec = ember::record;
using Catch::Contains;
using ember::DType;
using ember::Shape;
using ember::TensorData;
using rec::List;
using rec::Map;
using rec::Value;

namespace {

// ---- describing trees, so that a failed comparison shows what differs ------------------------

std::string describe(const Value& v) {
    return std::visit(
        []<typename T>(const T& x) -> std::string {
            if constexpr (std::is_same_v<T, std::monostate>) {
                return "null";
            } else if constexpr (std::is_same_v<T, bool>) {
                return x ? "true" : "false";
            } else if constexpr (std::is_same_v<T, std::int64_t>) {
                return std::to_string(x);
            } else if constexpr (std::is_same_v<T, double>) {
                char buf[48];
                std::snprintf(buf, sizeof buf, "%.17g(0x%016llx)", x,
                              static_cast<unsigned long long>(ember::detail::bit_cast<std::uint64_t>(x)));
                return buf;
            } else if constexpr (std::is_same_v<T, std::string>) {
                return '"' + x + '"';
            } else if constexpr (std::is_same_v<T, TensorData>) {
                return x.to_string();
            } else if constexpr (std::is_same_v<T, List>) {
                std::string s = "[";
                for (const Value& e : x) s += describe(e) + ", ";
                return s + "]";
            } else {
                std::string s = "{";
                for (const auto& [k, e] : x) s += '"' + k + "\": " + describe(e) + ", ";
                return s + "}";
            }
        },
        v.variant());
}

// ---- building trees -------------------------------------------------------------------------

double bits64(std::uint64_t b) {
    return ember::detail::bit_cast<double>(b);
}
float bits32(std::uint32_t b) {
    return ember::detail::bit_cast<float>(b);
}

// A tensor of 16-bit floats (H = ember::f16 or ember::bf16) given by their bit patterns.
template <typename H>
TensorData halves(std::initializer_list<std::uint16_t> bits, Shape shape) {
    std::vector<H> v;
    for (auto b : bits) {
        H h;
        h.bits = b;
        v.push_back(h);
    }
    return TensorData(v, shape);
}

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();

// Tensors of every dtype, with the awkward values each can hold, and awkward shapes.
Map sample_tensors() {
    const float fnan = std::numeric_limits<float>::quiet_NaN();
    return {
        {"f32",
         TensorData(
             {1.5f, -0.f, fnan, bits32(0x7fc00123), bits32(0xffc00000),
              std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
              std::numeric_limits<float>::denorm_min(), 1e-40f, 3.4e38f, 65520.f, 0.1f},
             {3, 4})},
        {"f64", TensorData({0.1, -0.0, kNaN, bits64(0x7ff8000000000abc), kInf, -kInf,
                            std::numeric_limits<double>::denorm_min(), 1e300},
                           {2, 2, 2})},
        {"f16",
         halves<ember::f16>({0x3c00, 0x8000, 0x7e00, 0x7d01, 0x7c00, 0xfc00, 0x0001, 0x7bff}, {8})},
        {"bf16", halves<ember::bf16>({0x3f80, 0x8000, 0x7fc1, 0xff80, 0x0001, 0x7f7f}, {2, 3})},
        {"i64", TensorData({kI64Min, kI64Max, std::int64_t{0}, std::int64_t{-1}}, {2, 2})},
        {"i32", TensorData({std::numeric_limits<std::int32_t>::min(), 7,
                            std::numeric_limits<std::int32_t>::max()},
                           {3})},
        {"i16", TensorData({std::int16_t{-32768}, std::int16_t{12}, std::int16_t{32767}}, {3, 1})},
        {"i8", TensorData({std::int8_t{-128}, std::int8_t{127}}, {2})},
        {"bool", TensorData({true, false, false, true}, {4})},
        {"u8", TensorData({std::uint8_t{0}, std::uint8_t{1}, std::uint8_t{128}, std::uint8_t{255},
                           std::uint8_t{7}},
                          {5})},
        {"empty_f32", TensorData(std::vector<float>{}, {0})},
        {"empty_i64", TensorData(std::vector<std::int64_t>{}, {2, 0, 3})},
        {"scalar_f32", TensorData(std::vector<float>{2.5f}, Shape())},
        {"rank8_u8", TensorData(std::vector<std::uint8_t>{9, 8}, {1, 1, 1, 2, 1, 1, 1, 1})},
    };
}

// A tree with every kind of value, including the ones each format finds awkward.
Value sample_tree() {
    Map scalars{
        {"null", Value()},
        {"yes", true},
        {"no", false},
        {"zero", 0},
        {"minus_five", -5},
        {"byte_edges", List{127, 128, 255, 256, -32, -33, -128, -129, 65535, 65536, -32768, -32769,
                            4294967295LL, 4294967296LL, -2147483648LL, -2147483649LL}},
        {"int64_min", kI64Min},
        {"int64_max", kI64Max},
        {"one", 1.0},
        {"tenth", 0.1},
        {"neg_zero", -0.0},
        {"inf", kInf},
        {"neg_inf", -kInf},
        {"nan", kNaN},
        {"nan_payload", bits64(0x7ff0000000000001)},
        {"neg_nan", bits64(0xfff8000000000000)},
        {"denormal", std::numeric_limits<double>::denorm_min()},
        {"denormal_2", 2.2250738585072e-309},
        {"max", std::numeric_limits<double>::max()},
        {"huge_int_valued", 1e300},
        {"from_float", 0.1f},
        {"empty", ""},
        {"ascii", "hello"},
        {"unicode", "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9d\x84\x9e"},
        {"escapes", "quote \" backslash \\ newline \n tab \t nul-free \x01"},
        {"looks_like_a_tag", "$tensor"},
    };
    Map keys{
        {"$tensor", 1},    // a user key equal to the tensor tag
        {"$$already", 2},  // a user key that looks escaped
        {"$float", "x"},   // the JSON float tag
        {"$", 3},         {"", 4}, {"k\xc3\xa9y", 5},
    };
    Map fake_tensor{{"$tensor", Value(Map{{"dtype", "f32"}, {"shape", List{}}, {"bytes", ""}})}};
    List lists{
        List{},
        List{Value(), true, 1, 2.5, "s", TensorData({1.f}, {1})},
        List{List{List{List{}}}},
        Map{},
    };
    return Map{
        {"scalars", std::move(scalars)}, {"tensors", sample_tensors()},
        {"keys", std::move(keys)},       {"fake_tensor", std::move(fake_tensor)},
        {"lists", std::move(lists)},     {"empty_map", Map{}},
    };
}

// Not precision settings: integers must be written as a signed dtype.
struct UnsignedIntSettings {
    static constexpr rec::PrecisionSettings value{DType::F32, DType::U8};
};

// A smaller tree for the byte-by-byte tests (every cut, every flipped byte).
Value small_tree() {
    return Map{
        {"w", TensorData({1.f, -2.f, 3.f, bits32(0x7fc00001)}, {2, 2})},
        {"b", TensorData({std::int64_t{-1}, std::int64_t{5}}, {2})},
        {"mask", TensorData({true, false}, {2})},
        {"step", 42},
        {"lr", 1e-3},
        {"name", "adam"},
        {"hist", List{Value(), false, -0.0, List{}}},
    };
}

// The documented precision rule, written independently of the recorders.
DType expected_dtype(DType d, rec::PrecisionSettings p) {
    switch (d) {
        case DType::F32:
        case DType::F64:
        case DType::F16:
        case DType::BF16:
            return p.float_dtype;
        case DType::I64:
        case DType::I32:
        case DType::I16:
        case DType::I8:
            return p.int_dtype;
        default:
            return d;
    }
}

Value at_precision(const Value& v, rec::PrecisionSettings p) {
    if (v.is<TensorData>()) {
        const auto& t = v.as<TensorData>();
        return Value(t.convert(expected_dtype(t.dtype(), p)));
    }
    if (v.is<List>()) {
        List out;
        for (const Value& e : v.as<List>()) out.push_back(at_precision(e, p));
        return out;
    }
    if (v.is<Map>()) {
        Map out;
        for (const auto& [k, e] : v.as<Map>()) out.emplace_back(k, at_precision(e, p));
        return out;
    }
    return v;
}

// Where two trees first differ, as "path: got ..., expected ...".
std::string first_difference(const Value& a, const Value& b, const std::string& path) {
    if (a.variant().index() == b.variant().index()) {
        if (a.is<List>() && a.as<List>().size() == b.as<List>().size()) {
            for (std::size_t i = 0; i < a.as<List>().size(); ++i)
                if (!(a.as<List>()[i] == b.as<List>()[i]))
                    return first_difference(a.as<List>()[i], b.as<List>()[i],
                                            path + "[" + std::to_string(i) + "]");
        }
        if (a.is<Map>() && a.as<Map>().size() == b.as<Map>().size()) {
            for (std::size_t i = 0; i < a.as<Map>().size(); ++i) {
                const auto& [ka, va] = a.as<Map>()[i];
                const auto& [kb, vb] = b.as<Map>()[i];
                if (ka != kb) return path + ": key '" + ka + "', expected '" + kb + "'";
                if (!(va == vb)) return first_difference(va, vb, path + "." + ka);
            }
        }
    }
    return path + ": got " + describe(a) + ", expected " + describe(b);
}

bool same_tree(const Value& a, const Value& b) {
    if (a == b) return true;
    UNSCOPED_INFO(first_difference(a, b, "<root>"));
    return false;
}

// ---- files ----------------------------------------------------------------------------------

// A fresh directory, removed with everything in it when the test ends.
struct TempDir {
    fs::path path;
    TempDir() {
        std::random_device rd;
        path = fs::temp_directory_path() /
               ("ember-record-test-" + std::to_string(rd()) + std::to_string(rd()));
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    fs::path operator/(const std::string& name) const { return path / name; }
    std::vector<std::string> entries() const {
        std::vector<std::string> out;
        for (const auto& e : fs::directory_iterator(path))
            out.push_back(e.path().filename().string());
        std::sort(out.begin(), out.end());
        return out;
    }
};

std::vector<std::uint8_t> read_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& p, const std::vector<std::uint8_t>& bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
}

std::span<const std::byte> as_bytes(const std::vector<std::uint8_t>& v) {
    return {reinterpret_cast<const std::byte*>(v.data()), v.size()};
}

std::vector<std::uint8_t> to_u8(const std::vector<std::byte>& v) {
    std::vector<std::uint8_t> out(v.size());
    std::memcpy(out.data(), v.data(), v.size());
    return out;
}

// What loading gave: "ok", "FormatError", or the other exception (a test failure).
template <typename F>
std::string outcome(F&& load) {
    try {
        load();
        return "ok";
    } catch (const ember::FormatError&) {
        return "FormatError";
    } catch (const std::exception& e) {
        return std::string("other exception: ") + e.what();
    }
}

// Every file recorder behind one interface, so error tests can loop over them.
struct AnyRecorder {
    std::string name;
    std::string extension;
    std::function<void(const Value&, const fs::path&)> record;
    std::function<Value(const fs::path&)> load;
    std::function<fs::path(const fs::path&)> file_path;
};

template <class R>
AnyRecorder erase(std::string name) {
    return {std::move(name), std::string(R::extension),
            [](const Value& v, const fs::path& p) { R{}.record(v, p); },
            [](const fs::path& p) { return R{}.load(p); },
            [](const fs::path& p) { return R{}.file_path(p); }};
}

std::vector<AnyRecorder> all_recorders() {
    return {erase<rec::NamedMpkFileRecorder<>>("NamedMpk"),
            erase<rec::NamedMpkGzFileRecorder<>>("NamedMpkGz"),
            erase<rec::BinFileRecorder<>>("Bin"),
            erase<rec::BinGzFileRecorder<>>("BinGz"),
            erase<rec::JsonGzFileRecorder<>>("JsonGz"),
            erase<rec::PrettyJsonFileRecorder<>>("PrettyJson")};
}

// CRC-32 (IEEE 802.3, reflected, as zlib and gzip compute it), bit by bit.
std::uint32_t crc32(const std::uint8_t* p, std::size_t n) {
    std::uint32_t c = 0xffffffffu;
    for (std::size_t i = 0; i < n; ++i) {
        c ^= p[i];
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return ~c;
}

// Replaces a Bin record's trailer with the CRC of its contents, so that crafted bodies reach
// the structural checks behind the checksum.
std::vector<std::uint8_t> with_crc(std::vector<std::uint8_t> body) {
    const std::uint32_t c = crc32(body.data(), body.size());
    for (int i = 0; i < 4; ++i) body.push_back(static_cast<std::uint8_t>(c >> (8 * i)));
    return body;
}

// "EMBR", version 1, f32/i32, then `value`, then the CRC.
std::vector<std::uint8_t> bin_record(const std::vector<std::uint8_t>& value) {
    std::vector<std::uint8_t> b{'E', 'M', 'B', 'R', 1, 0, 0, 5};
    b.insert(b.end(), value.begin(), value.end());
    return with_crc(b);
}

void append_str(std::vector<std::uint8_t>& b, std::string_view s) {
    b.push_back(static_cast<std::uint8_t>(0xa0 | s.size()));
    b.insert(b.end(), s.begin(), s.end());
}

// A NamedMpk envelope {"ember_record": 1, "item": <item>}, built by hand from the spec.
std::vector<std::uint8_t> mpk_record(const std::vector<std::uint8_t>& item) {
    std::vector<std::uint8_t> b{0x82};
    append_str(b, "ember_record");
    b.push_back(0x01);
    append_str(b, "item");
    b.insert(b.end(), item.begin(), item.end());
    return b;
}

Value decode_mpk(const std::vector<std::uint8_t>& bytes) {
    return rec::detail::decode(as_bytes(bytes), rec::detail::Format::NamedMpk, "crafted.mpk");
}

Value decode_bin(const std::vector<std::uint8_t>& bytes) {
    return rec::BinBytesRecorder<>{}.load(as_bytes(bytes));
}

Value decode_json(const std::string& text) {
    std::vector<std::uint8_t> b(text.begin(), text.end());
    return rec::detail::decode(as_bytes(b), rec::detail::Format::PrettyJson, "crafted.json");
}

}  // namespace

namespace Catch {
template <>
struct StringMaker<Value> {
    static std::string convert(const Value& v) { return describe(v); }
};
}  // namespace Catch

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

TEST_CASE("records: file layouts", "[record]") {
    const Value tree = Map{{"w", TensorData({1.f, 2.f}, {2})}};
    const TempDir dir;

    SECTION("NamedMpk is plain MessagePack, byte for byte") {
        rec::NamedMpkFileRecorder<>{}.record(tree, dir / "m");
        std::vector<std::uint8_t> expected{0x84};
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
        CHECK(read_bytes(dir / "m.mpk") == expected);
    }
    SECTION("NamedMpk writes the smallest integer forms and float64 doubles") {
        const Value v = List{0, 127, 128, -1, -32, -33, kI64Min, 0.5};
        std::vector<std::uint8_t> item{0x98, 0x00, 0x7f, 0xcc, 0x80, 0xff, 0xe0, 0xd0, 0xdf,
                                       0xd3, 0x80, 0,    0,    0,    0,    0,    0,    0,
                                       0xcb, 0x3f, 0xe0, 0,    0,    0,    0,    0,    0};
        const auto bytes = to_u8(rec::detail::encode(v, rec::detail::Format::NamedMpk,
                                                     rec::FullPrecisionSettings::value));
        REQUIRE(bytes.size() > item.size());
        CHECK(std::vector<std::uint8_t>(bytes.end() - static_cast<long>(item.size()),
                                        bytes.end()) == item);
    }
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
        CHECK(t["shape"] == nlohmann::json::array({2}));
        CHECK(t["bytes"] == "AACAPwAAAEA=");
        CHECK(j["item"]["x"][0]["$float"] == "NaN");
        CHECK(j["item"]["x"][1]["$float"] == "-inf");
        CHECK(j["item"]["x"][2]["$float"] == "NaN(0x7ff0000000000001)");
        CHECK(j["item"]["x"][3].get<double>() == 0.1);
        CHECK(j["item"]["$$k"] == 1);
    }
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

TEST_CASE("records: crafted hostile input", "[record]") {
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

// ---- Serde -----------------------------------------------------------------------------------

namespace {

enum class Phase : std::uint8_t { Warmup = 1, Decay = 7 };

struct Moments {
    TensorData first;
    std::optional<TensorData> second;
    EMBER_RECORD(Moments, first, second)
    bool operator==(const Moments&) const = default;
};

struct OptimState {
    std::int64_t step = 0;
    double lr = 0;
    float beta = 0;
    bool amsgrad = false;
    std::uint16_t warmup = 0;
    std::int8_t tiny = 0;
    std::string name;
    Phase phase = Phase::Warmup;
    std::vector<Moments> moments;
    std::array<int, 3> window{};
    std::map<std::string, double> extras;
    std::pair<int, std::string> tag;
    std::optional<int> maybe;
    std::vector<bool> flags;
    EMBER_RECORD(OptimState, step, lr, beta, amsgrad, warmup, tiny, name, phase, moments, window,
                 extras, tag, maybe, flags)
    bool operator==(const OptimState&) const = default;
};

OptimState sample_state() {
    OptimState s;
    s.step = 1234567890123;
    s.lr = 3e-4;
    s.beta = 0.9f;
    s.amsgrad = true;
    s.warmup = 65535;
    s.tiny = -128;
    s.name = "adam\xe2\x9c\x93";
    s.phase = Phase::Decay;
    s.moments = {{TensorData({1.f, 2.f}, {2}), std::nullopt},
                 {TensorData({3.f}, {1}), TensorData({4.f}, {1})}};
    s.window = {1, -2, 3};
    s.extras = {{"b", 2.5}, {"a", -1.0}};
    s.tag = {7, "seven"};
    s.maybe = 0;
    s.flags = {true, false, true};
    return s;
}

// A user type with its own Serde: a temperature stored as a plain double.
struct Celsius {
    double degrees = 0;
    bool operator==(const Celsius&) const = default;
};

struct NotSerialisable {};

}  // namespace

template <>
struct ember::record::Serde<Celsius> {
    static Value to(const Celsius& c) { return Value(c.degrees); }
    static Celsius from(const Value& v, std::string_view path) {
        return {from_value<double>(v, path)};
    }
};

TEST_CASE("records: serde round trips", "[record]") {
    SECTION("scalars") {
        CHECK(rec::from_value<bool>(rec::to_value(true)) == true);
        CHECK(rec::to_value(std::int8_t{-128}) == Value(-128));
        CHECK(rec::from_value<std::int8_t>(Value(-128)) == -128);
        CHECK(rec::from_value<std::uint8_t>(Value(255)) == 255);
        CHECK(rec::from_value<std::int16_t>(Value(-32768)) == -32768);
        CHECK(rec::from_value<std::uint32_t>(Value(4294967295LL)) == 4294967295u);
        CHECK(rec::from_value<std::int64_t>(rec::to_value(kI64Min)) == kI64Min);
        CHECK(rec::from_value<std::int64_t>(rec::to_value(kI64Max)) == kI64Max);
        CHECK(rec::from_value<std::uint64_t>(rec::to_value(std::uint64_t(kI64Max))) ==
              std::uint64_t(kI64Max));
        CHECK(rec::from_value<char>(rec::to_value('x')) == 'x');
        CHECK(rec::from_value<std::size_t>(rec::to_value(std::size_t{42})) == 42);
        CHECK(rec::to_value(0.1f) == Value(static_cast<double>(0.1f)));
        CHECK(rec::from_value<float>(rec::to_value(0.1f)) == 0.1f);
        CHECK(ember::detail::bit_cast<std::uint64_t>(rec::from_value<double>(rec::to_value(-0.0))) ==
              ember::detail::bit_cast<std::uint64_t>(-0.0));
        CHECK(std::isnan(
            rec::from_value<float>(rec::to_value(std::numeric_limits<float>::quiet_NaN()))));
        CHECK(rec::from_value<double>(Value(3)) == 3.0);  // an int is accepted where a float is due
        CHECK(rec::from_value<std::string>(rec::to_value(std::string("s"))) == "s");
        const TensorData t({1.f, 2.f}, {2});
        CHECK(rec::from_value<TensorData>(rec::to_value(t)) == t);
        const Value v = Map{{"x", List{1, "y"}}};
        CHECK(rec::from_value<Value>(rec::to_value(v)) == v);
        CHECK(rec::to_value(Phase::Decay) == Value(7));
        CHECK(rec::from_value<Phase>(Value(1)) == Phase::Warmup);
        CHECK(rec::from_value<Celsius>(rec::to_value(Celsius{21.5})) == Celsius{21.5});
    }
    SECTION("containers") {
        const std::vector<int> v{1, 2, 3};
        CHECK(rec::to_value(v) == Value(List{1, 2, 3}));
        CHECK(rec::from_value<std::vector<int>>(rec::to_value(v)) == v);
        const std::vector<bool> bits{true, false};
        CHECK(rec::from_value<std::vector<bool>>(rec::to_value(bits)) == bits);
        const std::array<double, 2> a{0.5, -1.5};
        CHECK(rec::from_value<std::array<double, 2>>(rec::to_value(a)) == a);
        CHECK(rec::to_value(std::optional<int>()) == Value());
        CHECK(rec::from_value<std::optional<int>>(Value()) == std::nullopt);
        CHECK(rec::from_value<std::optional<int>>(Value(0)) == 0);
        const std::map<std::string, std::vector<float>> m{{"b", {1.f}}, {"a", {}}};
        CHECK(rec::to_value(m) == Value(Map{{"a", List{}}, {"b", List{1.0}}}));
        CHECK(rec::from_value<std::map<std::string, std::vector<float>>>(rec::to_value(m)) == m);
        const std::pair<std::string, std::optional<Phase>> p{"x", Phase::Decay};
        CHECK(rec::to_value(p) == Value(List{"x", 7}));
        CHECK(rec::from_value<std::pair<std::string, std::optional<Phase>>>(rec::to_value(p)) == p);
        using Nested = std::vector<std::optional<std::map<std::string, Celsius>>>;
        const Nested nested{std::nullopt, std::map<std::string, Celsius>{{"t", {1.0}}}};
        CHECK(rec::from_value<Nested>(rec::to_value(nested)) == nested);
    }
    SECTION("EMBER_RECORD structs are maps of their fields, in order") {
        const OptimState s = sample_state();
        const Value v = rec::to_value(s);
        const Map& fields = v.as<Map>();
        REQUIRE(fields.size() == 14);
        CHECK(fields[0].first == "step");
        CHECK(fields[13].first == "flags");
        CHECK(v.at("phase") == Value(7));
        CHECK(v.at("moments").as<List>()[0].at("second").is_null());
        CHECK(rec::from_value<OptimState>(v) == s);
    }
    SECTION("fields beyond the struct's are ignored") {
        Value v = rec::to_value(sample_state());
        v.as_mut<Map>().emplace_back("added_later", 1);
        CHECK(rec::from_value<OptimState>(v) == sample_state());
    }
    SECTION("through every recorder") {
        const TempDir dir;
        const OptimState s = sample_state();
        for (const AnyRecorder& r : all_recorders()) {
            INFO(r.name);
            r.record(rec::to_value(s), dir / "optim");
            CHECK(rec::from_value<OptimState>(r.load(dir / "optim")) == s);
        }
    }
    SECTION("what is serialisable") {
        STATIC_REQUIRE(rec::Serializable<OptimState>);
        STATIC_REQUIRE(rec::Serializable<std::vector<std::optional<Moments>>>);
        STATIC_REQUIRE(rec::Serializable<Celsius>);
        STATIC_REQUIRE(!rec::Serializable<NotSerialisable>);
        STATIC_REQUIRE(!rec::Serializable<std::vector<NotSerialisable>>);
    }
}

TEST_CASE("records: serde errors name the path", "[record]") {
    const Value good = rec::to_value(sample_state());
    auto with = [&](std::string_view field, Value replacement) {
        Value v = good;
        for (auto& [k, e] : v.as_mut<Map>())
            if (k == field) e = std::move(replacement);
        return v;
    };
    auto without = [&](std::string_view field) {
        Value v = good;
        auto& m = v.as_mut<Map>();
        m.erase(
            std::remove_if(m.begin(), m.end(), [&](const auto& kv) { return kv.first == field; }),
            m.end());
        return v;
    };
    using ember::FormatError;

    SECTION("a missing field") {
        REQUIRE_THROWS_AS(rec::from_value<OptimState>(without("lr"), "optim"), FormatError);
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(without("lr"), "optim"),
                            Contains("missing field 'optim.lr'"));
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(without("step")),
                            Contains("missing field 'step'"));
    }
    SECTION("a field of the wrong kind") {
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(with("lr", "fast"), "optim"),
                            Contains("'optim.lr' should be float but is string"));
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(with("amsgrad", 1), "optim"),
                            Contains("'optim.amsgrad' should be bool but is int"));
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(Value(3), "optim"),
                            Contains("'optim' should be map but is int"));
        REQUIRE_THROWS_WITH(rec::from_value<int>(Value(1.5)), Contains("'<root>' should be int"));
    }
    SECTION("errors deep inside containers") {
        Value moments = good.at("moments");
        moments.as_mut<List>()[1].as_mut<Map>()[0].second = List{};
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(with("moments", moments), "optim"),
                            Contains("'optim.moments[1].first' should be tensor but is list"));
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(with("extras", Map{{"a", "x"}}), "optim"),
                            Contains("'optim.extras.a'"));
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(with("tag", List{1, 2}), "optim"),
                            Contains("'optim.tag[1]' should be string"));
        REQUIRE_THROWS_WITH(
            (rec::from_value<std::map<std::string, int>>(Value(Map{{"a", 1}, {"a", 2}}), "m")),
            Contains("'m.a' appears twice"));
    }
    SECTION("integers out of range") {
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(with("tiny", 200), "optim"),
                            Contains("'optim.tiny' = 200 is out of range for int8"));
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(with("warmup", -1), "optim"),
                            Contains("out of range for uint16"));
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(with("phase", 256), "optim"),
                            Contains("'optim.phase' = 256 is out of range for uint8"));
        REQUIRE_THROWS_AS(rec::from_value<std::uint64_t>(Value(-1)), FormatError);
        REQUIRE_THROWS_AS(rec::to_value(std::numeric_limits<std::uint64_t>::max()),
                          ember::ArgumentError);
        REQUIRE_THROWS_WITH(rec::from_value<float>(Value(1e300), "x"),
                            Contains("out of range for float"));
    }
    SECTION("arrays of the wrong length") {
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(with("window", List{1, 2}), "optim"),
                            Contains("'optim.window' should have 3 elements but has 2"));
        REQUIRE_THROWS_WITH((rec::from_value<std::pair<int, int>>(Value(List{1}), "p")),
                            Contains("'p' should have 2 elements but has 1"));
    }
}
