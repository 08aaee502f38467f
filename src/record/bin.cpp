// Bin: ember's own binary record format (docs/records.md has the layout).
//
//   "EMBR" | version u16 | float dtype u8 | int dtype u8 | value | CRC-32 u32 of all before it
//
// Little-endian throughout. Lengths and ints are LEB128 varints (ints zigzag-encoded), so a
// record of small scalars stays small; tensor elements are the TensorData bytes as they are.
// The checksum turns a flipped bit anywhere into an error instead of a silently different model.

#include <array>
#include <bit>
#include <cstring>
#include <limits>

#include "codec.hpp"
#include <ember/detail/bit.hpp>

namespace ember::record::detail {
namespace {

// TensorData holds its elements little-endian in host order; a big-endian host would need to
// swap them here.
static_assert(std::endian::native == std::endian::little,
              "Bin records assume a little-endian host");

constexpr char kMagic[4] = {'E', 'M', 'B', 'R'};
constexpr std::uint16_t kBinVersion = 1;
constexpr std::size_t kHeaderSize = 8;
constexpr std::size_t kTrailerSize = 4;

enum Tag : std::uint8_t { kNull, kFalse, kTrue, kInt, kFloat, kString, kTensor, kList, kMap };

// Fixed codes, independent of the DType enumerators' order, so that reordering DType cannot
// change what old files mean.
constexpr DType kDTypeCodes[] = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64,
                                 DType::I32, DType::I16, DType::I8,  DType::U8,   DType::Bool};

unsigned dtype_code(DType d) {
    for (unsigned i = 0; i < std::size(kDTypeCodes); ++i)
        if (kDTypeCodes[i] == d) return i;
    EMBER_FAIL(Argument, "Bin: dtype ", dtype_name(d), " has no code");
}

class BinWriter {
  public:
    explicit BinWriter(PrecisionSettings precision) : precision_(precision) {}

    std::vector<std::byte> finish(const Value& item) {
        for (char c : kMagic) byte(static_cast<unsigned char>(c));
        le(kBinVersion, 2);
        byte(dtype_code(precision_.float_dtype));
        byte(dtype_code(precision_.int_dtype));
        value(item, 0);
        le(crc32(out_), 4);
        return std::move(out_);
    }

  private:
    void byte(unsigned b) { out_.push_back(static_cast<std::byte>(b)); }
    void le(std::uint64_t v, int n) {
        for (int i = 0; i < n; ++i) byte(static_cast<unsigned>((v >> (8 * i)) & 0xffu));
    }
    void raw(const void* p, std::size_t n) {
        const auto* b = static_cast<const std::byte*>(p);
        out_.insert(out_.end(), b, b + n);
    }
    void varint(std::uint64_t v) {
        while (v >= 0x80) {
            byte(static_cast<unsigned>(v & 0x7f) | 0x80u);
            v >>= 7;
        }
        byte(static_cast<unsigned>(v));
    }
    void str(std::string_view s) {
        varint(s.size());
        raw(s.data(), s.size());
    }
    void tensor(const TensorData& t) {
        byte(kTensor);
        byte(dtype_code(t.dtype()));
        byte(static_cast<unsigned>(t.shape().rank()));
        for (std::size_t d : t.shape()) varint(d);
        raw(t.bytes().data(), t.bytes().size());
    }
    void value(const Value& v, int depth) {
        std::visit(
            [&]<typename T>(const T& x) {
                if constexpr (std::is_same_v<T, std::monostate>) {
                    byte(kNull);
                } else if constexpr (std::is_same_v<T, bool>) {
                    byte(x ? kTrue : kFalse);
                } else if constexpr (std::is_same_v<T, std::int64_t>) {
                    byte(kInt);
                    // Zigzag: small negative numbers stay short too.
                    const auto u = static_cast<std::uint64_t>(x);
                    varint((u << 1) ^ (x < 0 ? ~std::uint64_t{0} : 0));
                } else if constexpr (std::is_same_v<T, double>) {
                    byte(kFloat);
                    le(ember::detail::bit_cast<std::uint64_t>(x), 8);
                } else if constexpr (std::is_same_v<T, std::string>) {
                    byte(kString);
                    str(x);
                } else if constexpr (std::is_same_v<T, TensorData>) {
                    with_stored(x, precision_, [&](const TensorData& t) { tensor(t); });
                } else if constexpr (std::is_same_v<T, List>) {
                    check_encode_depth(depth + 1);
                    byte(kList);
                    varint(x.size());
                    for (const Value& e : x) value(e, depth + 1);
                } else {
                    check_encode_depth(depth + 1);
                    byte(kMap);
                    varint(x.size());
                    for (const auto& [k, e] : x) {
                        str(k);
                        value(e, depth + 1);
                    }
                }
            },
            v.variant());
    }

    PrecisionSettings precision_;
    std::vector<std::byte> out_;
};

class BinReader {
  public:
    BinReader(std::span<const std::byte> body, std::size_t offset, const Source& src)
        : in_(body), base_(offset), src_(src) {}

    Value read() {
        Value v = value(0);
        if (pos_ != in_.size())
            src_.fail("trailing bytes after the record at offset ", base_ + pos_);
        return v;
    }

  private:
    std::size_t left() const { return in_.size() - pos_; }
    void need(std::uint64_t n, const char* what) {
        if (n > left())
            src_.fail("truncated: ", what, " at offset ", base_ + pos_, " needs ", n, " bytes, ",
                      left(), " left");
    }
    unsigned byte(const char* what) {
        need(1, what);
        return std::to_integer<unsigned>(in_[pos_++]);
    }
    std::uint64_t varint(const char* what) {
        const std::size_t at = pos_;
        std::uint64_t v = 0;
        for (int shift = 0;; shift += 7) {
            const unsigned b = byte(what);
            if (shift == 63 && b > 1)
                src_.fail(what, " at offset ", base_ + at, " overflows 64 bits");
            v |= static_cast<std::uint64_t>(b & 0x7fu) << shift;
            if (!(b & 0x80u)) return v;
        }
    }
    std::span<const std::byte> bytes(std::uint64_t n, const char* what) {
        need(n, what);
        auto s = in_.subspan(pos_, static_cast<std::size_t>(n));
        pos_ += static_cast<std::size_t>(n);
        return s;
    }
    std::string str(const char* what) {
        const auto b = bytes(varint(what), what);
        return {reinterpret_cast<const char*>(b.data()), b.size()};
    }
    TensorData tensor() {
        const std::size_t at = pos_;
        const unsigned code = byte("a tensor dtype");
        if (code >= std::size(kDTypeCodes))
            src_.fail("unknown dtype code ", code, " at offset ", base_ + at);
        const DType dtype = kDTypeCodes[code];
        const unsigned rank = byte("a tensor rank");
        if (rank > kMaxRank) src_.fail("tensor of rank ", rank, " at offset ", base_ + at);
        std::uint64_t dims[kMaxRank];
        for (unsigned i = 0; i < rank; ++i) dims[i] = varint("a tensor dim");
        const std::span<const std::uint64_t> shape(dims, rank);
        return make_tensor(dtype, shape, bytes(tensor_bytes(dtype, shape, src_), "tensor bytes"),
                           src_);
    }
    Value value(int depth) {
        const std::size_t at = pos_;
        const unsigned tag = byte("a value");
        switch (tag) {
            case kNull:
                return Value();
            case kFalse:
                return Value(false);
            case kTrue:
                return Value(true);
            case kInt: {
                const std::uint64_t z = varint("an integer");
                return Value(static_cast<std::int64_t>((z >> 1) ^ (~(z & 1) + 1)));
            }
            case kFloat: {
                const auto b = bytes(8, "a float");
                std::uint64_t u = 0;
                for (int i = 7; i >= 0; --i) u = (u << 8) | std::to_integer<std::uint64_t>(b[i]);
                return Value(ember::detail::bit_cast<double>(u));
            }
            case kString:
                return Value(str("a string"));
            case kTensor:
                return Value(tensor());
            case kList: {
                if (depth >= kMaxDepth) src_.fail("lists and maps nest deeper than ", kMaxDepth);
                const std::uint64_t n = varint("a list length");
                need(n, "a list");  // every element takes at least one byte
                List list;
                list.reserve(static_cast<std::size_t>(n));
                for (std::uint64_t i = 0; i < n; ++i) list.push_back(value(depth + 1));
                return Value(std::move(list));
            }
            case kMap: {
                if (depth >= kMaxDepth) src_.fail("lists and maps nest deeper than ", kMaxDepth);
                const std::uint64_t n = varint("a map length");
                if (n > left() / 2) need(2 * n, "a map");  // a key length and a value at least
                Map map;
                map.reserve(static_cast<std::size_t>(n));
                for (std::uint64_t i = 0; i < n; ++i) {
                    std::string key = str("a map key");
                    map.emplace_back(std::move(key), value(depth + 1));
                }
                return Value(std::move(map));
            }
            default:
                src_.fail("unknown value tag ", tag, " at offset ", base_ + at);
        }
    }

    std::span<const std::byte> in_;
    std::size_t base_;  // offset of in_ in the record, for messages
    std::size_t pos_ = 0;
    const Source& src_;
};

}  // namespace

std::vector<std::byte> encode_bin(const Value& value, PrecisionSettings precision) {
    return BinWriter(precision).finish(value);
}

Value decode_bin(std::span<const std::byte> bytes, const Source& src) {
    if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
        src.fail("it does not start with \"EMBR\" (another format?)");
    if (bytes.size() < kHeaderSize + 1 + kTrailerSize)
        src.fail("truncated: ", bytes.size(), " bytes are too few for a record");
    const std::size_t body_end = bytes.size() - kTrailerSize;
    std::uint32_t stored = 0;
    for (int i = 3; i >= 0; --i)
        stored = (stored << 8) | std::to_integer<std::uint32_t>(bytes[body_end + i]);
    // Skipped only when asked (ReadLimits::verify_checksums, EMBER_VERIFY_CHECKSUMS=0).
    if (read_limits().verify_checksums && stored != crc32(bytes.first(body_end)))
        src.fail("checksum mismatch: the data is truncated or corrupted");
    const unsigned version =
        std::to_integer<unsigned>(bytes[4]) | (std::to_integer<unsigned>(bytes[5]) << 8);
    if (version < 1 || version > kBinVersion)
        src.fail("format version ", version, " (this ember reads version ", kBinVersion, ")");
    // Bytes 6 and 7 (the precision written) are informative: tensors carry their own dtypes.
    return BinReader(bytes.subspan(kHeaderSize, body_end - kHeaderSize), kHeaderSize, src).read();
}

}  // namespace ember::record::detail
