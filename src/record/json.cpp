// JsonGz and PrettyJson: the record tree as JSON, through nlohmann::ordered_json (ordered, so
// that maps keep their field order and read back equal).
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>

#include <nlohmann/json.hpp>

#include "codec.hpp"
#include <ember/detail/bit.hpp>

namespace ember::record::detail {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64_encode(std::span<const std::byte> in) {
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 3 <= in.size(); i += 3) {
        const unsigned v = std::to_integer<unsigned>(in[i]) << 16 |
                           std::to_integer<unsigned>(in[i + 1]) << 8 |
                           std::to_integer<unsigned>(in[i + 2]);
        out += {kBase64[v >> 18], kBase64[(v >> 12) & 63], kBase64[(v >> 6) & 63], kBase64[v & 63]};
    }
    if (const std::size_t rest = in.size() - i; rest > 0) {
        unsigned v = std::to_integer<unsigned>(in[i]) << 16;
        if (rest == 2) v |= std::to_integer<unsigned>(in[i + 1]) << 8;
        out += kBase64[v >> 18];
        out += kBase64[(v >> 12) & 63];
        out += rest == 2 ? kBase64[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

// Strict: padded, no whitespace, unused bits zero, so that one tensor has one spelling.
std::vector<std::byte> base64_decode(std::string_view in, const Source& src) {
    if (in.size() % 4 != 0) src.fail("tensor bytes are not base64 (length ", in.size(), ")");
    auto digit = [&](char c) -> unsigned {
        if (c >= 'A' && c <= 'Z') return static_cast<unsigned>(c - 'A');
        if (c >= 'a' && c <= 'z') return static_cast<unsigned>(c - 'a' + 26);
        if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0' + 52);
        if (c == '+') return 62;
        if (c == '/') return 63;
        src.fail("tensor bytes are not base64 (character '", printable(std::string_view(&c, 1)),
                 "')");
    };
    std::vector<std::byte> out;
    out.reserve(in.size() / 4 * 3);
    for (std::size_t i = 0; i < in.size(); i += 4) {
        const bool last = i + 4 == in.size();
        const int pad = last ? (in[i + 3] == '=') + (in[i + 2] == '=' && in[i + 3] == '=') : 0;
        unsigned v = digit(in[i]) << 18 | digit(in[i + 1]) << 12;
        if (pad < 2) v |= digit(in[i + 2]) << 6;
        if (pad < 1) v |= digit(in[i + 3]);
        if ((pad == 1 && (v & 0xffu)) || (pad == 2 && (v & 0xffffu)))
            src.fail("tensor bytes are not canonical base64");
        out.push_back(static_cast<std::byte>(v >> 16));
        if (pad < 2) out.push_back(static_cast<std::byte>((v >> 8) & 0xffu));
        if (pad < 1) out.push_back(static_cast<std::byte>(v & 0xffu));
    }
    return out;
}

// nlohmann refuses to write strings that are not UTF-8; checking first lets the error name the
// string's place in the tree.
bool valid_utf8(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        int n;
        std::uint32_t cp;
        if (c < 0x80) {
            ++i;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            n = 1, cp = c & 0x1fu;
        } else if ((c & 0xf0) == 0xe0) {
            n = 2, cp = c & 0x0fu;
        } else if ((c & 0xf8) == 0xf0) {
            n = 3, cp = c & 0x07u;
        } else {
            return false;
        }
        if (s.size() - i <= static_cast<std::size_t>(n)) return false;
        for (int k = 1; k <= n; ++k) {
            const auto t = static_cast<unsigned char>(s[i + k]);
            if ((t & 0xc0) != 0x80) return false;
            cp = cp << 6 | (t & 0x3fu);
        }
        constexpr std::uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
        if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += static_cast<std::size_t>(n) + 1;
    }
    return true;
}

std::string nan_spelling(double d) {
    const auto bits = ember::detail::bit_cast<std::uint64_t>(d);
    if (bits == ember::detail::bit_cast<std::uint64_t>(std::numeric_limits<double>::quiet_NaN()))
        return "NaN";
    char buf[32];
    std::snprintf(buf, sizeof buf, "NaN(0x%016llx)", static_cast<unsigned long long>(bits));
    return buf;
}

class JsonWriter {
  public:
    explicit JsonWriter(PrecisionSettings precision) : precision_(precision) {}

    Json envelope(const Value& item) {
        Json root = Json::object();
        root[std::string(kVersionKey)] = kVersion;
        root["float"] = std::string(dtype_name(precision_.float_dtype));
        root["int"] = std::string(dtype_name(precision_.int_dtype));
        root[std::string(kItemKey)] = value(item, 0);
        return root;
    }

  private:
    std::string where() const {
        std::string p;
        for (const std::string& s : path_) p += s;
        return p.empty() ? "<root>" : p;
    }
    std::string checked(std::string_view s, const char* what) const {
        EMBER_CHECK(valid_utf8(s), Argument, "record: the ", what, " at '", where(),
                    "' is not valid UTF-8, which JSON requires");
        return std::string(s);
    }
    Json tensor(const TensorData& t) {
        Json shape = Json::array();
        for (std::size_t d : t.shape()) shape.push_back(d);
        Json body = Json::object();
        body["dtype"] = std::string(dtype_name(t.dtype()));
        body["shape"] = std::move(shape);
        body["bytes"] = base64_encode(t.bytes());
        Json tagged = Json::object();
        tagged[std::string(kTensorTag)] = std::move(body);
        return tagged;
    }
    Json value(const Value& v, int depth) {
        return std::visit(
            [&]<typename T>(const T& x) -> Json {
                if constexpr (std::is_same_v<T, std::monostate>) {
                    return nullptr;
                } else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::int64_t>) {
                    return x;
                } else if constexpr (std::is_same_v<T, double>) {
                    if (std::isfinite(x)) return x;  // nlohmann writes the shortest exact digits
                    Json tagged = Json::object();
                    tagged[std::string(kFloatTag)] =
                        std::isnan(x) ? nan_spelling(x) : (x > 0 ? "inf" : "-inf");
                    return tagged;
                } else if constexpr (std::is_same_v<T, std::string>) {
                    return checked(x, "string");
                } else if constexpr (std::is_same_v<T, TensorData>) {
                    Json out;
                    with_stored(x, precision_, [&](const TensorData& t) { out = tensor(t); });
                    return out;
                } else if constexpr (std::is_same_v<T, List>) {
                    check_encode_depth(depth + 1);
                    Json out = Json::array();
                    for (std::size_t i = 0; i < x.size(); ++i) {
                        path_.push_back("[" + std::to_string(i) + "]");
                        out.push_back(value(x[i], depth + 1));
                        path_.pop_back();
                    }
                    return out;
                } else {
                    check_encode_depth(depth + 1);
                    Json out = Json::object();
                    for (const auto& [k, e] : x) {
                        path_.push_back(path_.empty() ? k : "." + k);
                        std::string key = escape_key(checked(k, "map key"));
                        EMBER_CHECK(!out.contains(key), Argument, "record: the map at '", where(),
                                    "' has the key '", k, "' twice, which JSON cannot hold");
                        out.emplace(std::move(key), value(e, depth + 1));
                        path_.pop_back();
                    }
                    return out;
                }
            },
            v.variant());
    }

    PrecisionSettings precision_;
    std::vector<std::string> path_;  // where the writer is, for error messages
};

class JsonReader {
  public:
    explicit JsonReader(const Source& src) : src_(src) {}

    Value envelope(Json& root) {
        if (!root.is_object()) src_.fail("its top level is not an object");
        const auto version = root.find(kVersionKey);
        if (version == root.end() || !version->is_number_integer())
            src_.fail("no '", kVersionKey, "' header: not written by ember");
        const auto v = version->get<std::int64_t>();
        if (v < 1 || v > kVersion)
            src_.fail("record format version ", v, " (this ember reads version ", kVersion, ")");
        const auto item = root.find(kItemKey);
        if (item == root.end()) src_.fail("no '", kItemKey, "' field");
        return value(*item, 0);
    }

  private:
    std::int64_t integer(const Json& j) {
        if (j.is_number_unsigned()) {
            const auto u = j.get<std::uint64_t>();
            if (u > static_cast<std::uint64_t>(INT64_MAX))
                src_.fail("integer ", u, " exceeds int64");
            return static_cast<std::int64_t>(u);
        }
        return j.get<std::int64_t>();
    }
    double special_float(const Json& j) {
        if (!j.is_string())
            src_.fail("'", kFloatTag, "' holds a ", j.type_name(), ", not a string");
        const auto& s = j.get_ref<const std::string&>();
        if (s == "inf") return std::numeric_limits<double>::infinity();
        if (s == "-inf") return -std::numeric_limits<double>::infinity();
        if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
        if (s.size() == 23 && s.starts_with("NaN(0x") && s.back() == ')') {
            std::uint64_t bits = 0;
            for (char c : std::string_view(s).substr(6, 16)) {
                unsigned d;
                if (c >= '0' && c <= '9')
                    d = static_cast<unsigned>(c - '0');
                else if (c >= 'a' && c <= 'f')
                    d = static_cast<unsigned>(c - 'a' + 10);
                else
                    src_.fail("bad NaN spelling '", printable(s), "'");
                bits = bits << 4 | d;
            }
            const double d = ember::detail::bit_cast<double>(bits);
            if (std::isnan(d)) return d;
        }
        src_.fail("'", kFloatTag, "' holds '", printable(s), "', not inf, -inf or NaN");
    }
    TensorData tensor(const Json& j) {
        if (!j.is_object() || j.size() != 3 || !j.contains("dtype") || !j.contains("shape") ||
            !j.contains("bytes"))
            src_.fail("'", kTensorTag, "' is not an object of dtype, shape and bytes");
        const Json& dtype = j["dtype"];
        const Json& shape = j["shape"];
        const Json& bytes = j["bytes"];
        if (!dtype.is_string()) src_.fail("tensor dtype is not a string");
        const auto d = dtype_from_name(dtype.get_ref<const std::string&>());
        if (!d) src_.fail("unknown dtype '", printable(dtype.get_ref<const std::string&>()), "'");
        if (!shape.is_array() || shape.size() > kMaxRank)
            src_.fail("tensor shape is not a list of at most ", kMaxRank, " dims");
        std::vector<std::uint64_t> dims;
        for (const Json& dim : shape) {
            if (!dim.is_number_unsigned())
                src_.fail("tensor dim ", printable(dim.dump()), " is not a size");
            dims.push_back(dim.get<std::uint64_t>());
        }
        if (!bytes.is_string()) src_.fail("tensor bytes are not a base64 string");
        // Check the size before decoding, so that a huge string of the wrong size costs nothing.
        const std::size_t expected = tensor_bytes(*d, dims, src_);
        const auto& text = bytes.get_ref<const std::string&>();
        if (text.size() / 4 * 3 < expected || text.size() / 4 * 3 > expected + 2)
            src_.fail("tensor of ", dtype_name(*d), " holds about ", text.size() / 4 * 3,
                      " bytes where its shape needs ", expected);
        return make_tensor(*d, dims, base64_decode(text, src_), src_);
    }
    Value value(Json& j, int depth) {
        switch (j.type()) {
            case Json::value_t::null:
                return Value();
            case Json::value_t::boolean:
                return Value(j.get<bool>());
            case Json::value_t::number_integer:
            case Json::value_t::number_unsigned:
                return Value(integer(j));
            case Json::value_t::number_float:
                return Value(j.get<double>());
            case Json::value_t::string:
                return Value(std::move(j.get_ref<std::string&>()));
            case Json::value_t::array: {
                if (depth >= kMaxDepth) src_.fail("lists and maps nest deeper than ", kMaxDepth);
                List list;
                list.reserve(j.size());
                for (Json& e : j) list.push_back(value(e, depth + 1));
                return Value(std::move(list));
            }
            case Json::value_t::object: {
                if (depth >= kMaxDepth) src_.fail("lists and maps nest deeper than ", kMaxDepth);
                if (j.size() == 1) {
                    auto& [key, inner] = *j.get_ref<Json::object_t&>().begin();
                    if (key == kTensorTag) return Value(tensor(inner));
                    if (key == kFloatTag) return Value(special_float(inner));
                }
                Map map;
                map.reserve(j.size());
                for (auto& [key, e] : j.get_ref<Json::object_t&>())
                    map.emplace_back(unescape_key(key, src_), value(e, depth + 1));
                return Value(std::move(map));
            }
            default:
                src_.fail("unexpected JSON ", j.type_name());
        }
    }

    const Source& src_;
};

}  // namespace

std::vector<std::byte> encode_json(const Value& value, PrecisionSettings precision, bool pretty) {
    const Json root = JsonWriter(precision).envelope(value);
    const std::string text = pretty ? root.dump(2) : root.dump();
    const auto* p = reinterpret_cast<const std::byte*>(text.data());
    return std::vector<std::byte>(p, p + text.size());
}

Value decode_json(std::span<const std::byte> bytes, const Source& src) {
    const auto* p = reinterpret_cast<const char*>(bytes.data());
    Json root;
    try {
        root = Json::parse(p, p + bytes.size());
    } catch (const Json::exception& e) {
        src.fail("invalid JSON: ", printable(e.what()));
    }
    return JsonReader(src).envelope(root);
}

}  // namespace ember::record::detail
