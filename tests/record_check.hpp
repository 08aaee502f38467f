// Shared helpers of the record suites (test_record*.cpp): describing and building trees, the
// documented precision rule, temporary directories, every recorder behind one interface, and
// records crafted by hand from the formats' specs (CRC-32, MessagePack, Bin).
#pragma once

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
#include <ember/detail/bit.hpp>
#include <msgpack.hpp>
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

namespace record_check {

// ---- describing trees, so that a failed comparison shows what differs ------------------------

inline std::string describe(const Value& v) {
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
                std::snprintf(
                    buf, sizeof buf, "%.17g(0x%016llx)", x,
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

inline double bits64(std::uint64_t b) {
    return ember::detail::bit_cast<double>(b);
}
inline float bits32(std::uint32_t b) {
    return ember::detail::bit_cast<float>(b);
}

// A tensor of 16-bit floats (H = ember::f16 or ember::bf16) given by their bit patterns.
template <typename H>
inline TensorData halves(std::initializer_list<std::uint16_t> bits, Shape shape) {
    std::vector<H> v;
    for (auto b : bits) {
        H h;
        h.bits = b;
        v.push_back(h);
    }
    return TensorData(v, shape);
}

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();
inline constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();

// Tensors of every dtype, with the awkward values each can hold, and awkward shapes.
inline Map sample_tensors() {
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
inline Value sample_tree() {
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
        // [[[[]]]]: each list that is another's only element is wrapped in Value(...), or Clang
        // copies it instead of nesting it (include/ember/record/value.hpp, List).
        List{Value(List{Value(List{Value(List{})})})},
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
inline Value small_tree() {
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
inline DType expected_dtype(DType d, rec::PrecisionSettings p) {
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

inline Value at_precision(const Value& v, rec::PrecisionSettings p) {
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
inline std::string first_difference(const Value& a, const Value& b, const std::string& path) {
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

inline bool same_tree(const Value& a, const Value& b) {
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

inline std::vector<std::uint8_t> read_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const fs::path& p, const std::vector<std::uint8_t>& bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
}

inline std::span<const std::byte> as_bytes(const std::vector<std::uint8_t>& v) {
    return {reinterpret_cast<const std::byte*>(v.data()), v.size()};
}

inline std::vector<std::uint8_t> to_u8(const std::vector<std::byte>& v) {
    std::vector<std::uint8_t> out(v.size());
    std::memcpy(out.data(), v.data(), v.size());
    return out;
}

// What loading gave: "ok", "FormatError", or the other exception (a test failure).
template <typename F>
inline std::string outcome(F&& load) {
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
inline AnyRecorder erase(std::string name) {
    return {std::move(name), std::string(R::extension),
            [](const Value& v, const fs::path& p) { R{}.record(v, p); },
            [](const fs::path& p) { return R{}.load(p); },
            [](const fs::path& p) { return R{}.file_path(p); }};
}

inline std::vector<AnyRecorder> all_recorders() {
    return {erase<rec::NamedMpkFileRecorder<>>("NamedMpk"),
            erase<rec::NamedMpkGzFileRecorder<>>("NamedMpkGz"),
            erase<rec::BinFileRecorder<>>("Bin"),
            erase<rec::BinGzFileRecorder<>>("BinGz"),
            erase<rec::JsonGzFileRecorder<>>("JsonGz"),
            erase<rec::PrettyJsonFileRecorder<>>("PrettyJson")};
}

// CRC-32 (IEEE 802.3, reflected, as zlib and gzip compute it), bit by bit.
inline std::uint32_t crc32(const std::uint8_t* p, std::size_t n) {
    std::uint32_t c = 0xffffffffu;
    for (std::size_t i = 0; i < n; ++i) {
        c ^= p[i];
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return ~c;
}

// Replaces a Bin record's trailer with the CRC of its contents, so that crafted bodies reach
// the structural checks behind the checksum.
inline std::vector<std::uint8_t> with_crc(std::vector<std::uint8_t> body) {
    const std::uint32_t c = crc32(body.data(), body.size());
    for (int i = 0; i < 4; ++i) body.push_back(static_cast<std::uint8_t>(c >> (8 * i)));
    return body;
}

// "EMBR", version 1, f32/i32, then `value`, then the CRC.
inline std::vector<std::uint8_t> bin_record(const std::vector<std::uint8_t>& value) {
    std::vector<std::uint8_t> b{'E', 'M', 'B', 'R', 1, 0, 0, 5};
    b.insert(b.end(), value.begin(), value.end());
    return with_crc(b);
}

inline void append_str(std::vector<std::uint8_t>& b, std::string_view s) {
    b.push_back(static_cast<std::uint8_t>(0xa0 | s.size()));
    b.insert(b.end(), s.begin(), s.end());
}

// A NamedMpk envelope {"ember_record": 1, "item": <item>}, built by hand from the spec.
inline std::vector<std::uint8_t> mpk_record(const std::vector<std::uint8_t>& item) {
    std::vector<std::uint8_t> b{0x82};
    append_str(b, "ember_record");
    b.push_back(0x01);
    append_str(b, "item");
    b.insert(b.end(), item.begin(), item.end());
    return b;
}

inline Value decode_mpk(const std::vector<std::uint8_t>& bytes) {
    return rec::detail::decode(as_bytes(bytes), rec::detail::Format::NamedMpk, "crafted.mpk");
}

inline Value decode_bin(const std::vector<std::uint8_t>& bytes) {
    return rec::BinBytesRecorder<>{}.load(as_bytes(bytes));
}

inline Value decode_json(const std::string& text) {
    std::vector<std::uint8_t> b(text.begin(), text.end());
    return rec::detail::decode(as_bytes(b), rec::detail::Format::PrettyJson, "crafted.json");
}

}  // namespace record_check

using namespace record_check;

namespace Catch {
template <>
struct StringMaker<Value> {
    static std::string convert(const Value& v) { return describe(v); }
};
}  // namespace Catch
