#pragma once
// Internal to the record layer: the encoders and decoders behind detail::encode/decode, and the
// rules every format shares (precision, tensor checks, the reserved keys, nesting limits).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ember/record/recorder.hpp"
#include "ember/record/untrusted.hpp"

namespace ember::record::detail {

/// What is being decoded, so that every error names it: "<name>: not a <format> record: <why>".
struct Source {
    std::string_view name;    ///< the file, or the recorder for bytes in memory
    std::string_view format;  ///< format_name() of the format being read

    /// Throws FormatError with the reason built from `why`.
    template <typename... Args>
    [[noreturn]] void fail(const Args&... why) const {
        EMBER_FAIL(Format, printable(name, 4096), ": not a ", format, " record: ", why...);
    }
};

/// Deepest nesting of lists and maps a record may have. Decoders recurse once per level, so a
/// bound keeps a hostile file from overflowing the stack; encoders check it too, so that every
/// file written can be read back.
inline constexpr int kMaxDepth = 256;
/// The envelope of the text and msgpack formats: {"ember_record": 1, ..., "item": tree}.
inline constexpr std::string_view kVersionKey = "ember_record";
/// The key of the tree inside the envelope.
inline constexpr std::string_view kItemKey = "item";
/// The format version written (and the newest read).
inline constexpr std::int64_t kVersion = 1;
/// The one-entry map that marks a tensor in msgpack and JSON.
inline constexpr std::string_view kTensorTag = "$tensor";
/// The one-entry map that marks a non-finite double in JSON.
inline constexpr std::string_view kFloatTag = "$float";

/// The CRC-32 of `bytes` (the polynomial of zlib and gzip), as the Bin and NamedMpk records
/// carry it.
std::uint32_t crc32(std::span<const std::byte> bytes);
/// The key of NamedMpk's checksum entry, the last of its envelope.
inline constexpr std::string_view kChecksumKey = "crc32";

/// Throws ArgumentError unless the settings name a float dtype and a signed integer dtype.
void check_precision(PrecisionSettings precision);
/// The dtype a tensor of dtype `d` is written in under `precision`.
DType stored_dtype(DType d, PrecisionSettings precision);
/// Calls `write(t)` with `t` converted to its stored dtype (no copy when it already is).
template <typename F>
void with_stored(const TensorData& t, PrecisionSettings precision, F&& write) {
    const DType to = stored_dtype(t.dtype(), precision);
    if (to == t.dtype()) {
        write(t);
    } else {
        write(t.convert(to));
    }
}
/// Throws ArgumentError naming the nesting limit when `depth` exceeds it (encoders).
void check_encode_depth(int depth);

/// The dtype named `name` ("f32", "bool", ...), if any.
std::optional<DType> dtype_from_name(std::string_view name);
/// Builds a tensor from decoded parts; fails on a bad rank, an element count that overflows,
/// a byte count that does not match, or bool bytes other than 0 and 1.
TensorData make_tensor(DType dtype, std::span<const std::uint64_t> dims,
                       std::span<const std::byte> bytes, const Source& src);
/// The byte size of a tensor of `dims` and `dtype`; fails when it does not fit in size_t.
std::size_t tensor_bytes(DType dtype, std::span<const std::uint64_t> dims, const Source& src);

/// A map key of the tree as written: one more '$' in front of keys that start with '$'.
std::string escape_key(std::string_view key);
/// A key as read back: "$$x" → "$x"; fails on "$x" (reserved for tags) where the caller has not
/// handled it.
std::string unescape_key(std::string_view key, const Source& src);

/// NamedMpk: the envelope map with the tree inside.
std::vector<std::byte> encode_msgpack(const Value& value, PrecisionSettings precision);
/// Reads a NamedMpk envelope.
Value decode_msgpack(std::span<const std::byte> bytes, const Source& src);
/// Bin: header, tagged tree, CRC-32.
std::vector<std::byte> encode_bin(const Value& value, PrecisionSettings precision);
/// Reads a Bin record.
Value decode_bin(std::span<const std::byte> bytes, const Source& src);
/// JSON: the envelope object with the tree inside, compact or indented by two spaces.
std::vector<std::byte> encode_json(const Value& value, PrecisionSettings precision, bool pretty);
/// Reads a JSON envelope.
Value decode_json(std::span<const std::byte> bytes, const Source& src);
/// A gzip stream (one member) of `bytes`.
std::vector<std::byte> gzip(std::span<const std::byte> bytes);
/// The bytes inside a gzip stream; fails on anything but exactly one complete, valid member.
std::vector<std::byte> gunzip(std::span<const std::byte> bytes, const Source& src);

}  // namespace ember::record::detail
