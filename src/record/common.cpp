// The rules every record format shares.
#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "codec.hpp"
#include "ember/record/value.hpp"

namespace ember::record::detail {
namespace {

// CRC-32 (the IEEE polynomial, reflected: zlib's and gzip's), written here so that firmware
// reading Bin records needs no zlib.
constexpr std::array<std::uint32_t, 256> kCrcTable = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[i] = c;
    }
    return t;
}();

}  // namespace

std::uint32_t crc32(std::span<const std::byte> bytes) {
    std::uint32_t c = 0xFFFFFFFFu;
    for (std::byte b : bytes)
        c = kCrcTable[(c ^ std::to_integer<std::uint32_t>(b)) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

void check_precision(PrecisionSettings precision) {
    EMBER_CHECK(is_float(precision.float_dtype), Argument,
                "record: precision settings write floats as ", dtype_name(precision.float_dtype),
                ", which is not a float dtype");
    EMBER_CHECK(is_signed_int(precision.int_dtype), Argument,
                "record: precision settings write integers as ", dtype_name(precision.int_dtype),
                ", which is not a signed integer dtype");
}

DType stored_dtype(DType d, PrecisionSettings precision) {
    if (is_float(d)) return precision.float_dtype;
    if (is_signed_int(d)) return precision.int_dtype;
    return d;  // bool and u8 hold flags and bytes (masks, images): no precision to change
}

void check_encode_depth(int depth) {
    EMBER_CHECK(depth <= kMaxDepth, Argument, "record: the tree nests lists and maps deeper than ",
                kMaxDepth, " levels, more than recorders read back");
}

std::optional<DType> dtype_from_name(std::string_view name) {
    for (int i = 0; i <= static_cast<int>(DType::Bool); ++i) {
        const auto d = static_cast<DType>(i);
        if (dtype_name(d) == name) return d;
    }
    return std::nullopt;
}

std::size_t tensor_bytes(DType dtype, std::span<const std::uint64_t> dims, const Source& src) {
    if (std::find(dims.begin(), dims.end(), 0u) != dims.end()) return 0;
    std::uint64_t n = dtype_size(dtype);
    for (std::uint64_t d : dims) {
        if (__builtin_mul_overflow(n, d, &n))
            src.fail("tensor of ", dims.size(), " dims is too large");
    }
    if (n > std::numeric_limits<std::size_t>::max()) src.fail("tensor is too large");
    return static_cast<std::size_t>(n);
}

TensorData make_tensor(DType dtype, std::span<const std::uint64_t> dims,
                       std::span<const std::byte> bytes, const Source& src) {
    if (dims.size() > kMaxRank)
        src.fail("tensor of rank ", dims.size(), " (at most ", kMaxRank, ")");
    const std::size_t expected = tensor_bytes(dtype, dims, src);
    if (bytes.size() != expected) {
        src.fail("tensor of ", dtype_name(dtype), " holds ", bytes.size(),
                 " bytes where its shape needs ", expected);
    }
    if (dtype == DType::Bool) {
        // A bool byte other than 0 or 1 is undefined behaviour the moment a kernel reads it.
        for (std::byte b : bytes)
            if (std::to_integer<unsigned>(b) > 1)
                src.fail("bool tensor holds a byte other than 0 and 1");
    }
    Shape shape;
    for (std::uint64_t d : dims) {
        if (d > std::numeric_limits<std::size_t>::max())
            src.fail("tensor dim ", d, " is too large");
        shape.push_back(static_cast<std::size_t>(d));
    }
    return TensorData(std::vector<std::byte>(bytes.begin(), bytes.end()), shape, dtype);
}

std::string escape_key(std::string_view key) {
    std::string s;
    if (!key.empty() && key.front() == '$') s.push_back('$');
    s.append(key);
    return s;
}

std::string unescape_key(std::string_view key, const Source& src) {
    if (key.empty() || key.front() != '$') return std::string(key);
    if (key.size() >= 2 && key[1] == '$') return std::string(key.substr(1));
    src.fail("map key '", printable(key), "' is reserved ('$' starts the tags $tensor and $float)");
}

void map_append(Map& map, std::string_view name, Value value) {
    map.emplace_back(std::string(name), std::move(value));
}

Value param_map(std::string id, TensorData data) {
    return Map{{"id", std::move(id)}, {"param", std::move(data)}};
}

}  // namespace ember::record::detail

namespace ember::record {

Value::Value() noexcept = default;
Value::Value(bool v) : v_(std::in_place_index<1>, v) {}
Value::Value(std::int64_t v) : v_(std::in_place_index<2>, v) {}
Value::Value(double v) : v_(std::in_place_index<3>, v) {}
Value::Value(std::string v) : v_(std::in_place_index<4>, std::move(v)) {}
Value::Value(TensorData v) : v_(std::in_place_index<5>, std::move(v)) {}
Value::Value(List v) : v_(std::in_place_index<6>, std::move(v)) {}
Value::Value(Map v) : v_(std::in_place_index<7>, std::move(v)) {}
Value::Value(const Value& other) = default;
Value::Value(Value&& other) noexcept = default;
Value& Value::operator=(const Value& other) = default;
Value& Value::operator=(Value&& other) noexcept = default;
Value::~Value() = default;

bool operator==(const Value& a, const Value& b) {
    if (const double* x = std::get_if<double>(&a.v_)) {
        const double* y = std::get_if<double>(&b.v_);
        return y && ember::detail::bit_cast<std::uint64_t>(*x) ==
                        ember::detail::bit_cast<std::uint64_t>(*y);
    }
    return a.v_ == b.v_;
}

const Value* Value::find(std::string_view key, std::string_view path) const {
    for (const auto& [k, v] : as<Map>(path))
        if (k == key) return &v;
    return nullptr;
}

const Value& Value::at(std::string_view key, std::string_view path) const {
    if (const Value* v = find(key, path)) return *v;
    EMBER_FAIL(Format, "record: missing field '", join_path(path, key), "'");
}

std::string Value::join_path(std::string_view path, std::string_view key) {
    std::string s(path);
    if (!s.empty()) s += '.';
    s += key;
    return s;
}

void Value::kind_error(std::string_view path, std::size_t want, std::size_t have) {
    EMBER_FAIL(Format, "record: '", path.empty() ? std::string_view("<root>") : path,
               "' should be ", kind_name(want), " but is ", kind_name(have));
}

}  // namespace ember::record
