// NamedMpk: MessagePack (https://github.com/msgpack/msgpack/blob/master/spec.md), written and
// read by hand. The subset ember needs is small, and a hand-written reader can check every
// length against the bytes left before it allocates or reads, which a hostile file demands.
#include <bit>
#include <cstring>
#include <limits>

#include "codec.hpp"
#include <ember/detail/bit.hpp>

namespace ember::record::detail {
namespace {

class MpkWriter {
  public:
    explicit MpkWriter(PrecisionSettings precision) : precision_(precision) {}

    std::vector<std::byte> finish(const Value& item) {
        map_header(5);
        str(kVersionKey);
        integer(kVersion);
        str("float");
        str(dtype_name(precision_.float_dtype));
        str("int");
        str(dtype_name(precision_.int_dtype));
        str(kItemKey);
        value(item, 0);
        // The checksum entry comes last, a uint32 in its fixed 5-byte form; the CRC covers every
        // byte before its own four. Readers that predate it see one more envelope field.
        str(kChecksumKey);
        byte(0xce);
        be(crc32(out_), 4);
        return std::move(out_);
    }

  private:
    void byte(unsigned b) { out_.push_back(static_cast<std::byte>(b)); }
    // MessagePack is big-endian.
    void be(std::uint64_t v, int n) {
        for (int i = n - 1; i >= 0; --i) byte(static_cast<unsigned>((v >> (8 * i)) & 0xffu));
    }
    void raw(const void* p, std::size_t n) {
        const auto* b = static_cast<const std::byte*>(p);
        out_.insert(out_.end(), b, b + n);
    }
    // A length with a fixed-size form (fix_base | n when n < fix_limit) and 8/16/32-bit forms;
    // a zero marker means "no form of that width".
    void length(std::size_t n, unsigned fix_base, std::size_t fix_limit, unsigned m8, unsigned m16,
                unsigned m32, const char* what) {
        if (n < fix_limit) {
            byte(fix_base | static_cast<unsigned>(n));
        } else if (m8 && n <= 0xff) {
            byte(m8);
            be(n, 1);
        } else if (n <= 0xffff) {
            byte(m16);
            be(n, 2);
        } else {
            EMBER_CHECK(n <= 0xffffffffu, Argument, "NamedMpk: ", what, " of ", n,
                        " exceeds MessagePack's 32-bit lengths");
            byte(m32);
            be(n, 4);
        }
    }
    void map_header(std::size_t n) { length(n, 0x80, 16, 0, 0xde, 0xdf, "map"); }
    void array_header(std::size_t n) { length(n, 0x90, 16, 0, 0xdc, 0xdd, "list"); }
    void str(std::string_view s) {
        length(s.size(), 0xa0, 32, 0xd9, 0xda, 0xdb, "string");
        raw(s.data(), s.size());
    }
    void bin(std::span<const std::byte> b) {
        length(b.size(), 0, 0, 0xc4, 0xc5, 0xc6, "tensor");
        raw(b.data(), b.size());
    }
    void marked(unsigned marker, std::uint64_t v, int n) {
        byte(marker);
        be(v, n);
    }
    // The smallest encoding, as msgpack writers do.
    void integer(std::int64_t i) {
        const auto u = static_cast<std::uint64_t>(i);  // two's complement, as msgpack wants
        if (i >= 0) {
            if (u < 0x80)
                byte(static_cast<unsigned>(u));
            else if (u <= 0xff)
                marked(0xcc, u, 1);
            else if (u <= 0xffff)
                marked(0xcd, u, 2);
            else if (u <= 0xffffffffu)
                marked(0xce, u, 4);
            else
                marked(0xcf, u, 8);
        } else {
            if (i >= -32)
                byte(static_cast<unsigned>(u & 0xffu));
            else if (i >= INT8_MIN)
                marked(0xd0, u, 1);
            else if (i >= INT16_MIN)
                marked(0xd1, u, 2);
            else if (i >= INT32_MIN)
                marked(0xd2, u, 4);
            else
                marked(0xd3, u, 8);
        }
    }
    void tensor(const TensorData& t) {
        map_header(1);
        str(kTensorTag);
        map_header(3);
        str("dtype");
        str(dtype_name(t.dtype()));
        str("shape");
        array_header(t.shape().rank());
        for (std::size_t d : t.shape()) integer(static_cast<std::int64_t>(d));
        str("bytes");
        bin(t.bytes());
    }
    void value(const Value& v, int depth) {
        std::visit(
            [&]<typename T>(const T& x) {
                if constexpr (std::is_same_v<T, std::monostate>) {
                    byte(0xc0);
                } else if constexpr (std::is_same_v<T, bool>) {
                    byte(x ? 0xc3 : 0xc2);
                } else if constexpr (std::is_same_v<T, std::int64_t>) {
                    integer(x);
                } else if constexpr (std::is_same_v<T, double>) {
                    byte(0xcb);
                    be(ember::detail::bit_cast<std::uint64_t>(x), 8);
                } else if constexpr (std::is_same_v<T, std::string>) {
                    str(x);
                } else if constexpr (std::is_same_v<T, TensorData>) {
                    with_stored(x, precision_, [&](const TensorData& t) { tensor(t); });
                } else if constexpr (std::is_same_v<T, List>) {
                    check_encode_depth(depth + 1);
                    array_header(x.size());
                    for (const Value& e : x) value(e, depth + 1);
                } else {
                    check_encode_depth(depth + 1);
                    map_header(x.size());
                    for (const auto& [k, e] : x) {
                        str(escape_key(k));
                        value(e, depth + 1);
                    }
                }
            },
            v.variant());
    }

    PrecisionSettings precision_;
    std::vector<std::byte> out_;
};

// What a msgpack marker introduces.
enum class Kind { Nil, Bool, UInt, Int, Float32, Float64, Str, Bin, Array, Map };

struct Header {
    Kind kind;
    std::uint64_t n = 0;  // the value (bool, ints, float bits) or the length (str, bin, array, map)
};

class MpkReader {
  public:
    MpkReader(std::span<const std::byte> in, const Source& src) : in_(in), src_(src) {}

    Value envelope() {
        if (in_.empty()) src_.fail("the file is empty");
        const unsigned first = std::to_integer<unsigned>(in_[0]);
        const bool is_map = (first & 0xf0u) == 0x80u || first == 0xde || first == 0xdf;
        if (!is_map) src_.fail("it does not start with a MessagePack map (another format?)");
        const Header h = header();
        if (h.n > left() / 2) need(2 * h.n, "a map");
        Map fields;
        std::optional<std::size_t> checksum_at;  // offset of the checksum's value
        for (std::uint64_t i = 0; i < h.n; ++i) {
            const std::string_view key = str("a map key");
            if (h.n == 1 && key == kTensorTag)
                src_.fail("its top level is a tensor, not ember's record header");
            if (key == kChecksumKey) checksum_at = pos_;
            std::string name = unescape_key(key, src_);
            fields.emplace_back(std::move(name), value(0));
        }
        if (pos_ != in_.size())
            src_.fail("trailing bytes after the record (", in_.size() - pos_, " bytes at offset ",
                      pos_, ")");
        if (checksum_at) verify_checksum(*checksum_at);
        Value root(std::move(fields));
        const Value* version = root.find(kVersionKey);
        if (!version || !version->is<std::int64_t>())
            src_.fail("no '", kVersionKey, "' header: not written by ember");
        const std::int64_t v = version->as<std::int64_t>();
        if (v < 1 || v > kVersion)
            src_.fail("record format version ", v, " (this ember reads version ", kVersion, ")");
        for (auto& [k, item] : root.as_mut<Map>())
            if (k == kItemKey) return std::move(item);  // moved: tensors are not copied
        src_.fail("no '", kItemKey, "' field");
    }

  private:
    // The checksum entry is the envelope's last, a uint32 in its 5-byte form (0xce and four
    // big-endian bytes) ending the file; its CRC-32 covers every byte before those four.
    // Records written before it existed have no such entry and load unchecked.
    void verify_checksum(std::size_t at) const {
        if (at + 5 != in_.size() || std::to_integer<unsigned>(in_[at]) != 0xce)
            src_.fail("the '", kChecksumKey,
                      "' entry is not the envelope's last, a 32-bit unsigned integer");
        if (!read_limits().verify_checksums) return;
        std::uint32_t stored = 0;
        for (std::size_t i = at + 1; i < in_.size(); ++i)
            stored = (stored << 8) | std::to_integer<std::uint32_t>(in_[i]);
        if (stored != crc32(in_.first(in_.size() - 4)))
            src_.fail("checksum mismatch: the data is truncated or corrupted");
    }

    std::size_t left() const { return in_.size() - pos_; }
    void need(std::uint64_t n, const char* what) {
        if (n > left())
            src_.fail("truncated: ", what, " at offset ", pos_, " needs ", n, " bytes, ", left(),
                      " left");
    }
    std::uint64_t be(int n, const char* what) {
        need(static_cast<std::uint64_t>(n), what);
        std::uint64_t v = 0;
        for (int i = 0; i < n; ++i) v = (v << 8) | std::to_integer<std::uint64_t>(in_[pos_++]);
        return v;
    }
    Header header() {
        need(1, "a value");
        const std::size_t at = pos_;
        const unsigned m = std::to_integer<unsigned>(in_[pos_++]);
        if (m < 0x80) return {Kind::UInt, m};
        if (m >= 0xe0) return {Kind::Int, static_cast<std::uint64_t>(static_cast<std::int8_t>(m))};
        if ((m & 0xf0u) == 0x80u) return {Kind::Map, m & 0x0fu};
        if ((m & 0xf0u) == 0x90u) return {Kind::Array, m & 0x0fu};
        if ((m & 0xe0u) == 0xa0u) return {Kind::Str, m & 0x1fu};
        switch (m) {
            case 0xc0:
                return {Kind::Nil};
            case 0xc2:
                return {Kind::Bool, 0};
            case 0xc3:
                return {Kind::Bool, 1};
            case 0xc4:
                return {Kind::Bin, be(1, "a length")};
            case 0xc5:
                return {Kind::Bin, be(2, "a length")};
            case 0xc6:
                return {Kind::Bin, be(4, "a length")};
            case 0xca:
                return {Kind::Float32, be(4, "a float")};
            case 0xcb:
                return {Kind::Float64, be(8, "a float")};
            case 0xcc:
                return {Kind::UInt, be(1, "an integer")};
            case 0xcd:
                return {Kind::UInt, be(2, "an integer")};
            case 0xce:
                return {Kind::UInt, be(4, "an integer")};
            case 0xcf:
                return {Kind::UInt, be(8, "an integer")};
            case 0xd0:
                return {Kind::Int, sign_extend(be(1, "an integer"), 8)};
            case 0xd1:
                return {Kind::Int, sign_extend(be(2, "an integer"), 16)};
            case 0xd2:
                return {Kind::Int, sign_extend(be(4, "an integer"), 32)};
            case 0xd3:
                return {Kind::Int, be(8, "an integer")};
            case 0xd9:
                return {Kind::Str, be(1, "a length")};
            case 0xda:
                return {Kind::Str, be(2, "a length")};
            case 0xdb:
                return {Kind::Str, be(4, "a length")};
            case 0xdc:
                return {Kind::Array, be(2, "a length")};
            case 0xdd:
                return {Kind::Array, be(4, "a length")};
            case 0xde:
                return {Kind::Map, be(2, "a length")};
            case 0xdf:
                return {Kind::Map, be(4, "a length")};
            default:
                break;
        }
        if (m == 0xc1) src_.fail("byte 0xc1 (never used by MessagePack) at offset ", at);
        src_.fail("MessagePack extension type (marker 0x", hex(m), ") at offset ", at,
                  " is not part of a record");
    }
    static std::uint64_t sign_extend(std::uint64_t v, int bits) {
        const std::uint64_t sign = std::uint64_t{1} << (bits - 1);
        return (v ^ sign) - sign;
    }
    static std::string hex(unsigned m) {
        const char* digits = "0123456789abcdef";
        return {digits[(m >> 4) & 0xf], digits[m & 0xf]};
    }
    std::string_view bytes_of(std::uint64_t n, const char* what) {
        need(n, what);
        const auto* p = reinterpret_cast<const char*>(in_.data() + pos_);
        pos_ += static_cast<std::size_t>(n);
        return {p, static_cast<std::size_t>(n)};
    }
    std::string_view str(const char* what) {
        const std::size_t at = pos_;
        const Header h = header();
        if (h.kind != Kind::Str) src_.fail(what, " at offset ", at, " is not a string");
        return bytes_of(h.n, "a string");
    }
    std::int64_t integer(const Header& h, std::size_t at) {
        if (h.kind == Kind::UInt && h.n > static_cast<std::uint64_t>(INT64_MAX))
            src_.fail("integer ", h.n, " at offset ", at, " exceeds int64");
        return static_cast<std::int64_t>(h.n);
    }

    Value value(int depth) {
        const std::size_t at = pos_;
        const Header h = header();
        switch (h.kind) {
            case Kind::Nil:
                return Value();
            case Kind::Bool:
                return Value(h.n != 0);
            case Kind::UInt:
            case Kind::Int:
                return Value(integer(h, at));
            case Kind::Float32:
                return Value(ember::detail::bit_cast<float>(static_cast<std::uint32_t>(h.n)));
            case Kind::Float64:
                return Value(ember::detail::bit_cast<double>(h.n));
            case Kind::Str:
                return Value(std::string(bytes_of(h.n, "a string")));
            case Kind::Bin:
                src_.fail("binary data at offset ", at, " outside a tensor");
            case Kind::Array: {
                if (depth >= kMaxDepth) src_.fail("lists and maps nest deeper than ", kMaxDepth);
                need(h.n, "a list");  // every element takes at least one byte
                List list;
                list.reserve(static_cast<std::size_t>(h.n));
                for (std::uint64_t i = 0; i < h.n; ++i) list.push_back(value(depth + 1));
                return Value(std::move(list));
            }
            case Kind::Map:
                break;
        }
        if (depth >= kMaxDepth) src_.fail("lists and maps nest deeper than ", kMaxDepth);
        if (h.n > left() / 2) need(2 * h.n, "a map");  // a key and a value: two bytes at least
        Map map;
        map.reserve(static_cast<std::size_t>(h.n));
        for (std::uint64_t i = 0; i < h.n; ++i) {
            const std::string_view key = str("a map key");
            if (h.n == 1 && key == kTensorTag) return Value(tensor());
            std::string name = unescape_key(key, src_);
            map.emplace_back(std::move(name), value(depth + 1));
        }
        return Value(std::move(map));
    }

    TensorData tensor() {
        const std::size_t at = pos_;
        const Header h = header();
        if (h.kind != Kind::Map || h.n != 3)
            src_.fail("tensor at offset ", at, " is not a map of dtype, shape and bytes");
        std::optional<DType> dtype;
        std::vector<std::uint64_t> dims;
        bool have_shape = false;
        std::span<const std::byte> data;
        bool have_bytes = false;
        for (int i = 0; i < 3; ++i) {
            const std::string_view key = str("a tensor field");
            if (key == "dtype" && !dtype) {
                const std::string_view name = str("a dtype");
                dtype = dtype_from_name(name);
                if (!dtype) src_.fail("unknown dtype '", printable(name), "'");
            } else if (key == "shape" && !have_shape) {
                const std::size_t shape_at = pos_;
                const Header s = header();
                if (s.kind != Kind::Array || s.n > kMaxRank)
                    src_.fail("tensor shape at offset ", shape_at, " is not a list of at most ",
                              kMaxRank, " dims");
                for (std::uint64_t d = 0; d < s.n; ++d) {
                    const std::size_t dim_at = pos_;
                    const Header dim = header();
                    if (dim.kind != Kind::UInt)
                        src_.fail("tensor dim at offset ", dim_at,
                                  " is not a non-negative integer");
                    dims.push_back(dim.n);
                }
                have_shape = true;
            } else if (key == "bytes" && !have_bytes) {
                const std::size_t bytes_at = pos_;
                const Header b = header();
                if (b.kind != Kind::Bin)
                    src_.fail("tensor bytes at offset ", bytes_at, " are not binary");
                need(b.n, "tensor bytes");
                data = in_.subspan(pos_, static_cast<std::size_t>(b.n));
                pos_ += static_cast<std::size_t>(b.n);
                have_bytes = true;
            } else {
                src_.fail("unexpected tensor field '", printable(key), "' at offset ", at);
            }
        }
        return make_tensor(*dtype, dims, data, src_);
    }

    std::span<const std::byte> in_;
    std::size_t pos_ = 0;
    const Source& src_;
};

}  // namespace

std::vector<std::byte> encode_msgpack(const Value& value, PrecisionSettings precision) {
    return MpkWriter(precision).finish(value);
}

Value decode_msgpack(std::span<const std::byte> bytes, const Source& src) {
    return MpkReader(bytes, src).envelope();
}

}  // namespace ember::record::detail
