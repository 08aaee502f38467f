// NamedMpk: MessagePack (https://github.com/msgpack/msgpack/blob/master/spec.md) through
// msgpack-cxx (Debian: libmsgpack-cxx-dev), header-only and used only here: no public header
// names it, and the freestanding build (the Bin codec only) does not compile this file.
//
// Writing: msgpack-cxx's packer, which picks the smallest form of every integer and length as
// ember's files always had them (tests/test_record_mpk.cpp checks the bytes against the spec and
// against Python's msgpack); doubles and the checksum's fixed form are written here (see below).
//
// Reading a hostile file takes two passes. The first runs msgpack-cxx's parser with a visitor
// that builds nothing: it finds truncation, bytes MessagePack never uses, extension types and
// nesting beyond ember's depth (with their offsets) before anything is allocated, so every
// length the second pass trusts is backed by bytes of the file. The second unpacks with
// msgpack-cxx's limits set from the file's size and depth (no string or binary copied: they
// point into the file's bytes) and turns the objects into a Value, checking what MessagePack
// cannot: keys are strings, integers fit int64, binary data only inside tensors, tensors well
// formed, ember's depth limit, the envelope and its checksum.
#define MSGPACK_NO_BOOST 1
#include <msgpack.hpp>

#include "codec.hpp"
#include <ember/detail/bit.hpp>

namespace ember::record::detail {
namespace {

// The packer's buffer: appends to the record's bytes.
struct ByteSink {
    std::vector<std::byte>* out;
    void write(const char* p, std::size_t n) {
        const auto* b = reinterpret_cast<const std::byte*>(p);
        out->insert(out->end(), b, b + n);
    }
};

class MpkWriter {
  public:
    explicit MpkWriter(PrecisionSettings precision) : precision_(precision) {}

    std::vector<std::byte> finish(const Value& item) {
        pk_.pack_map(5);
        str(kVersionKey);
        pk_.pack_int64(kVersion);
        str("float");
        str(dtype_name(precision_.float_dtype));
        str("int");
        str(dtype_name(precision_.int_dtype));
        str(kItemKey);
        value(item, 0);
        // The checksum entry comes last, a uint32 in its fixed 5-byte form; the CRC covers every
        // byte before its own four. Readers that predate it see one more envelope field.
        // The marker is written first, since the CRC covers it (the packer would write it
        // with the value); the value is then big-endian, as MessagePack's are.
        str(kChecksumKey);
        out_.push_back(std::byte{0xce});
        const std::uint32_t crc = crc32(out_);
        for (int shift = 24; shift >= 0; shift -= 8)
            out_.push_back(static_cast<std::byte>((crc >> shift) & 0xffu));
        return std::move(out_);
    }

  private:
    // MessagePack's lengths are 32-bit: a longer string, tensor, list or map has no encoding.
    static std::uint32_t length(std::size_t n, const char* what) {
        EMBER_CHECK(n <= 0xffffffffu, Argument, "NamedMpk: ", what, " of ", n,
                    " exceeds MessagePack's 32-bit lengths");
        return static_cast<std::uint32_t>(n);
    }
    void str(std::string_view s) {
        pk_.pack_str(length(s.size(), "string"));
        pk_.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
    }
    // Every double as float64 (0xcb, then its bits big-endian). msgpack-cxx 4's pack_double
    // writes a double with an integral value as an integer (2.0 as 2, -0.0 as 0), which would
    // read back as another type, and lose the sign of zero.
    void float64(double x) {
        const auto bits = ember::detail::bit_cast<std::uint64_t>(x);
        out_.push_back(std::byte{0xcb});
        for (int shift = 56; shift >= 0; shift -= 8)
            out_.push_back(static_cast<std::byte>((bits >> shift) & 0xffu));
    }
    void tensor(const TensorData& t) {
        pk_.pack_map(1);
        str(kTensorTag);
        pk_.pack_map(3);
        str("dtype");
        str(dtype_name(t.dtype()));
        str("shape");
        pk_.pack_array(static_cast<std::uint32_t>(t.shape().rank()));
        for (std::size_t d : t.shape()) pk_.pack_uint64(d);
        str("bytes");
        const auto bytes = t.bytes();
        pk_.pack_bin(length(bytes.size(), "tensor"));
        pk_.pack_bin_body(reinterpret_cast<const char*>(bytes.data()),
                          static_cast<std::uint32_t>(bytes.size()));
    }
    void value(const Value& v, int depth) {
        std::visit(
            [&]<typename T>(const T& x) {
                if constexpr (std::is_same_v<T, std::monostate>) {
                    pk_.pack_nil();
                } else if constexpr (std::is_same_v<T, bool>) {
                    x ? pk_.pack_true() : pk_.pack_false();
                } else if constexpr (std::is_same_v<T, std::int64_t>) {
                    pk_.pack_int64(x);
                } else if constexpr (std::is_same_v<T, double>) {
                    float64(x);
                } else if constexpr (std::is_same_v<T, std::string>) {
                    str(x);
                } else if constexpr (std::is_same_v<T, TensorData>) {
                    with_stored(x, precision_, [&](const TensorData& t) { tensor(t); });
                } else if constexpr (std::is_same_v<T, List>) {
                    check_encode_depth(depth + 1);
                    pk_.pack_array(length(x.size(), "list"));
                    for (const Value& e : x) value(e, depth + 1);
                } else {
                    check_encode_depth(depth + 1);
                    pk_.pack_map(length(x.size(), "map"));
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
    ByteSink sink_{&out_};
    msgpack::packer<ByteSink> pk_{sink_};
};

// The deepest nesting of MessagePack containers a record may hold: the envelope, ember's
// kMaxDepth levels of lists and maps in the item, and a tensor's inner map and shape below the
// deepest. ember's exact rule is checked in the second pass.
constexpr std::size_t kMaxMsgpackDepth = 1 + kMaxDepth + 2;

// The first pass: msgpack-cxx's parser over the whole file, building nothing.
struct Scan : msgpack::null_visitor {
    enum class Stop { None, TooDeep, Extension, Invalid, Truncated } stop = Stop::None;
    std::size_t depth = 0;
    std::size_t offset = 0;  // of the invalid byte, or where the data ran out

    bool enter() {
        if (++depth <= kMaxMsgpackDepth) return true;
        stop = Stop::TooDeep;
        return false;
    }
    bool start_array(std::uint32_t) { return enter(); }
    bool end_array() { return --depth, true; }
    bool start_map(std::uint32_t) { return enter(); }
    bool end_map() { return --depth, true; }
    bool visit_ext(const char*, std::uint32_t) {
        stop = Stop::Extension;
        return false;
    }
    void parse_error(std::size_t, std::size_t at) { stop = Stop::Invalid, offset = at; }
    void insufficient_bytes(std::size_t, std::size_t at) { stop = Stop::Truncated, offset = at; }
};

bool refer_to_input(msgpack::type::object_type, std::size_t, void*) {
    return true;
}

class MpkReader {
  public:
    MpkReader(std::span<const std::byte> in, const Source& src) : in_(in), src_(src) {}

    Value envelope() {
        if (in_.empty()) src_.fail("the file is empty");
        const unsigned first = std::to_integer<unsigned>(in_[0]);
        const bool is_map = (first & 0xf0u) == 0x80u || first == 0xde || first == 0xdf;
        if (!is_map) src_.fail("it does not start with a MessagePack map (another format?)");
        scan();
        const char* data = reinterpret_cast<const char*>(in_.data());
        std::size_t end = 0;
        // Limits from the file: no container holds more entries, and no string or binary is
        // longer, than it has bytes; no extension types; no deeper than the scan allowed.
        const msgpack::unpack_limit limits(in_.size(), in_.size() / 2, in_.size(), in_.size(), 0,
                                           kMaxMsgpackDepth + 1);
        msgpack::object_handle handle;
        try {
            handle = msgpack::unpack(data, in_.size(), end, refer_to_input, nullptr, limits);
        } catch (const msgpack::unpack_error& e) {  // the scan found the file sound
            src_.fail("MessagePack: ", e.what());
        }
        if (end != in_.size())
            src_.fail("trailing bytes after the record (", in_.size() - end, " bytes at offset ",
                      end, ")");
        const msgpack::object& root = handle.get();
        const auto& m = root.via.map;
        Map fields;
        for (std::uint32_t i = 0; i < m.size; ++i) {
            const std::string_view key = str(m.ptr[i].key, "a map key");
            if (m.size == 1 && key == kTensorTag)
                src_.fail("its top level is a tensor, not ember's record header");
            if (key == kChecksumKey) verify_checksum(m.ptr[i].val, i + 1 == m.size);
            std::string name = unescape_key(key, src_);
            fields.emplace_back(std::move(name), value(m.ptr[i].val, 0));
        }
        Value header(std::move(fields));
        const Value* version = header.find(kVersionKey);
        if (!version || !version->is<std::int64_t>())
            src_.fail("no '", kVersionKey, "' header: not written by ember");
        const std::int64_t v = version->as<std::int64_t>();
        if (v < 1 || v > kVersion)
            src_.fail("record format version ", v, " (this ember reads version ", kVersion, ")");
        for (auto& [k, item] : header.as_mut<Map>())
            if (k == kItemKey) return std::move(item);  // moved: tensors are not copied
        src_.fail("no '", kItemKey, "' field");
    }

  private:
    void scan() const {
        Scan s;
        std::size_t end = 0;
        msgpack::parse(reinterpret_cast<const char*>(in_.data()), in_.size(), end, s);
        switch (s.stop) {
            case Scan::Stop::None:
                return;
            case Scan::Stop::TooDeep:
                src_.fail("lists and maps nest deeper than ", kMaxDepth);
            case Scan::Stop::Extension:
                src_.fail("a MessagePack extension type is not part of a record");
            case Scan::Stop::Invalid:
                if (s.offset < in_.size() && std::to_integer<unsigned>(in_[s.offset]) == 0xc1)
                    src_.fail("byte 0xc1 (never used by MessagePack) at offset ", s.offset);
                src_.fail("not MessagePack at offset ", s.offset);
            case Scan::Stop::Truncated:
                break;
        }
        src_.fail("truncated: the data ends inside a value (at offset ", s.offset, " of ",
                  in_.size(), " bytes)");
    }

    // The checksum entry is the envelope's last, a uint32 in its 5-byte form (0xce and four
    // big-endian bytes) ending the file; its CRC-32 covers every byte before those four.
    // Records written before it existed have no such entry and load unchecked. The value ends
    // the file, so its form is the file's last five bytes (no shorter form of the same value
    // can end with 0xce and four bytes, the key "crc32" before it holding no zero byte).
    void verify_checksum(const msgpack::object& v, bool last) const {
        const std::size_t n = in_.size();
        std::uint32_t stored = 0;
        for (std::size_t i = n - 4; i < n; ++i)
            stored = (stored << 8) | std::to_integer<std::uint32_t>(in_[i]);
        if (!last || v.type != msgpack::type::POSITIVE_INTEGER || n < 5 ||
            std::to_integer<unsigned>(in_[n - 5]) != 0xce || v.via.u64 != stored)
            src_.fail("the '", kChecksumKey,
                      "' entry is not the envelope's last, a 32-bit unsigned integer");
        if (!read_limits().verify_checksums) return;
        if (stored != crc32(in_.first(n - 4)))
            src_.fail("checksum mismatch: the data is truncated or corrupted");
    }

    std::string_view str(const msgpack::object& o, const char* what) const {
        if (o.type != msgpack::type::STR) src_.fail(what, " is not a string");
        return {o.via.str.ptr, o.via.str.size};
    }

    Value value(const msgpack::object& o, int depth) const {
        using msgpack::type::object_type;
        switch (o.type) {
            case object_type::NIL:
                return Value();
            case object_type::BOOLEAN:
                return Value(o.via.boolean);
            case object_type::POSITIVE_INTEGER:
                if (o.via.u64 > static_cast<std::uint64_t>(INT64_MAX))
                    src_.fail("integer ", o.via.u64, " exceeds int64");
                return Value(static_cast<std::int64_t>(o.via.u64));
            case object_type::NEGATIVE_INTEGER:
                return Value(o.via.i64);
            case object_type::FLOAT32:
            case object_type::FLOAT64:
                return Value(o.via.f64);  // a float32 widened exactly
            case object_type::STR:
                return Value(std::string(o.via.str.ptr, o.via.str.size));
            case object_type::BIN:
                src_.fail("binary data outside a tensor");
            case object_type::ARRAY: {
                if (depth >= kMaxDepth) src_.fail("lists and maps nest deeper than ", kMaxDepth);
                List list;
                list.reserve(o.via.array.size);
                for (std::uint32_t i = 0; i < o.via.array.size; ++i)
                    list.push_back(value(o.via.array.ptr[i], depth + 1));
                return Value(std::move(list));
            }
            case object_type::MAP:
                break;
            default:
                src_.fail("a MessagePack extension type is not part of a record");
        }
        if (depth >= kMaxDepth) src_.fail("lists and maps nest deeper than ", kMaxDepth);
        const auto& m = o.via.map;
        Map map;
        map.reserve(m.size);
        for (std::uint32_t i = 0; i < m.size; ++i) {
            const std::string_view key = str(m.ptr[i].key, "a map key");
            if (m.size == 1 && key == kTensorTag) return Value(tensor(m.ptr[i].val));
            std::string name = unescape_key(key, src_);
            map.emplace_back(std::move(name), value(m.ptr[i].val, depth + 1));
        }
        return Value(std::move(map));
    }

    TensorData tensor(const msgpack::object& t) const {
        if (t.type != msgpack::type::MAP || t.via.map.size != 3)
            src_.fail("a tensor is not a map of dtype, shape and bytes");
        std::optional<DType> dtype;
        std::vector<std::uint64_t> dims;
        bool have_shape = false;
        std::span<const std::byte> data;
        bool have_bytes = false;
        for (std::uint32_t i = 0; i < 3; ++i) {
            const std::string_view key = str(t.via.map.ptr[i].key, "a tensor field");
            const msgpack::object& v = t.via.map.ptr[i].val;
            if (key == "dtype" && !dtype) {
                const std::string_view name = str(v, "a dtype");
                dtype = dtype_from_name(name);
                if (!dtype) src_.fail("unknown dtype '", printable(name), "'");
            } else if (key == "shape" && !have_shape) {
                if (v.type != msgpack::type::ARRAY || v.via.array.size > kMaxRank)
                    src_.fail("a tensor shape is not a list of at most ", kMaxRank, " dims");
                for (std::uint32_t d = 0; d < v.via.array.size; ++d) {
                    const msgpack::object& dim = v.via.array.ptr[d];
                    if (dim.type != msgpack::type::POSITIVE_INTEGER)
                        src_.fail("a tensor dim is not a non-negative integer");
                    dims.push_back(dim.via.u64);
                }
                have_shape = true;
            } else if (key == "bytes" && !have_bytes) {
                if (v.type != msgpack::type::BIN) src_.fail("tensor bytes are not binary");
                data = std::as_bytes(std::span(v.via.bin.ptr, v.via.bin.size));
                have_bytes = true;
            } else {
                src_.fail("unexpected tensor field '", printable(key), "'");
            }
        }
        return make_tensor(*dtype, dims, data, src_);
    }

    std::span<const std::byte> in_;
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
