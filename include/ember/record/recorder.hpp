#pragma once
// Recorders: write a record tree (ember::record::Value) to a file or a byte buffer and read it
// back, as Burn's recorders do. Each recorder is a format (named MessagePack, ember's binary
// format, JSON), an optional gzip layer, and precision settings that decide the dtype of the
// tensors it writes.
//
// Formats (docs/records.md has the full layouts):
//
// - NamedMpk: one MessagePack map {"ember_record": 1, "float": "f32", "int": "i32", "item": tree,
//   "crc32": CRC-32 of every byte before its own four} (files without "crc32", written before
//   it existed, load unchecked).
//   Maps are msgpack maps keyed by field name, lists arrays, ints the smallest msgpack int,
//   doubles float64. A tensor is the one-entry map
//   {"$tensor": {"dtype": "f32", "shape": [2, 3], "bytes": <bin: the elements, little-endian>}};
//   a map key of the tree that starts with '$' is written with one more '$' ("$x" → "$$x"), so a
//   tensor never reads back as a map or the reverse.
// - Json / PrettyJson: the same tree as JSON. Tensor bytes are base64 strings; doubles that JSON
//   cannot spell are {"$float": "inf"}, "-inf", "NaN" or "NaN(0x<16 hex digits>)" (a NaN other
//   than the default quiet NaN keeps its bits); finite doubles are written with enough digits
//   to read back bit-exact.
// - Bin: "EMBR", format version (u16 LE), float and int dtype codes (u8 each), the tree as tagged
//   values (LEB128 lengths, zigzag ints, IEEE doubles), then a CRC-32 of everything before it.
//
// Files are written atomically (temporary file in the same directory, flush, rename, directory
// synced); loading a missing, foreign, truncated or corrupted file, or one that is not a regular
// file or is beyond the read limits (untrusted.hpp), throws FormatError naming the file.
#include <concepts>
#include <cstddef>
#include <cstdint>
#if !EMBER_FREESTANDING  // firmware reads records from bytes only
#include <filesystem>
#endif
#include <span>
#include <string_view>
#include <vector>

#include "../export.hpp"
#include "value.hpp"

namespace ember::record {

/// True for the integer dtypes a precision setting may write integer tensors in.
constexpr bool is_signed_int(DType d) {
    return d == DType::I64 || d == DType::I32 || d == DType::I16 || d == DType::I8;
}

/// A precision settings type: `S::value` is a PrecisionSettings with a float dtype for floats
/// and a signed integer dtype for integers.
template <class S>
concept PrecisionSettingsType = requires {
    { S::value } -> std::convertible_to<PrecisionSettings>;
}
&&is_float(S::value.float_dtype) && is_signed_int(S::value.int_dtype);

namespace detail {

/// The file formats (the in-memory recorder uses Bin).
enum class Format : std::uint8_t { NamedMpk, NamedMpkGz, Bin, BinGz, JsonGz, PrettyJson };

/// The name error messages use ("NamedMpk", "BinGz", ...).
constexpr std::string_view format_name(Format f) {
    constexpr std::string_view names[] = {"NamedMpk", "NamedMpkGz", "Bin",
                                          "BinGz",    "JsonGz",     "PrettyJson"};
    return names[static_cast<int>(f)];
}
/// The file extension, without the leading dot.
constexpr std::string_view format_extension(Format f) {
    constexpr std::string_view exts[] = {"mpk", "mpk.gz", "bin", "bin.gz", "json.gz", "json"};
    return exts[static_cast<int>(f)];
}

/// The bytes of `value` in `format` (gzip included), tensors converted to `precision`.
/// Throws ArgumentError for trees the format cannot hold (see docs/records.md).
EMBER_API std::vector<std::byte> encode(const Value& value, Format format,
                                        PrecisionSettings precision);
/// The tree in `bytes`; throws FormatError "<source>: not a <format> record: <why>".
EMBER_API Value decode(std::span<const std::byte> bytes, Format format, std::string_view source);
#if !EMBER_FREESTANDING
/// `path` with ".<ext>" appended, unless its file name already ends with it.
EMBER_API std::filesystem::path with_extension(const std::filesystem::path& path,
                                               std::string_view ext);
/// Encodes `value` and writes it to `file` atomically; throws ArgumentError when the file
/// cannot be written (nothing is left behind).
EMBER_API void write_file(const Value& value, const std::filesystem::path& file, Format format,
                          PrecisionSettings precision);
/// Reads and decodes `file`; throws FormatError naming it.
EMBER_API Value read_file(const std::filesystem::path& file, Format format);
/// Writes `bytes` to `file` atomically (a temporary file in the same directory, flushed, then
/// renamed over it); throws ArgumentError naming `what` and the file when it cannot.
EMBER_API void write_bytes_atomic(const std::filesystem::path& file,
                                  std::span<const std::byte> bytes, std::string_view what);
/// The bytes of `file`; throws FormatError naming it (and `what` it should hold) when missing.
std::vector<std::byte> read_bytes(const std::filesystem::path& file, std::string_view what);

/// What every file recorder does; the named recorders below only pick the format.
template <Format F, PrecisionSettingsType S>
class FileRecorderBase {
  public:
    /// The precision settings type.
    using Settings = S;
    /// The file extension (without the dot) appended to paths.
    static constexpr std::string_view extension = format_extension(F);
    /// The dtypes tensors are written in.
    static constexpr PrecisionSettings precision = S::value;

    /// `path` with the extension appended ("model" → "model.mpk"), unless it already ends with it.
    std::filesystem::path file_path(const std::filesystem::path& path) const {
        return with_extension(path, extension);
    }
    /// Writes `value` to `file_path(path)`, replacing any file there, atomically.
    void record(const Value& value, const std::filesystem::path& path) const {
        write_file(value, file_path(path), F, S::value);
    }
    /// Reads the tree at `file_path(path)`; tensors keep the dtype the file holds.
    Value load(const std::filesystem::path& path) const { return read_file(file_path(path), F); }
};
#endif

}  // namespace detail

#if !EMBER_FREESTANDING
/// Named MessagePack files (".mpk"): fields keyed by name; readable by any msgpack library.
template <PrecisionSettingsType S = FullPrecisionSettings>
class NamedMpkFileRecorder : public detail::FileRecorderBase<detail::Format::NamedMpk, S> {};
/// Gzip-compressed named MessagePack files (".mpk.gz").
template <PrecisionSettingsType S = FullPrecisionSettings>
class NamedMpkGzFileRecorder : public detail::FileRecorderBase<detail::Format::NamedMpkGz, S> {};
/// ember's compact binary files (".bin"), with a magic header, a version and a checksum.
template <PrecisionSettingsType S = FullPrecisionSettings>
class BinFileRecorder : public detail::FileRecorderBase<detail::Format::Bin, S> {};
/// Gzip-compressed binary files (".bin.gz").
template <PrecisionSettingsType S = FullPrecisionSettings>
class BinGzFileRecorder : public detail::FileRecorderBase<detail::Format::BinGz, S> {};
/// Gzip-compressed compact JSON files (".json.gz").
template <PrecisionSettingsType S = FullPrecisionSettings>
class JsonGzFileRecorder : public detail::FileRecorderBase<detail::Format::JsonGz, S> {};
/// Pretty-printed, uncompressed JSON files (".json"): for reading records by eye.
template <PrecisionSettingsType S = FullPrecisionSettings>
class PrettyJsonFileRecorder : public detail::FileRecorderBase<detail::Format::PrettyJson, S> {};

/// The recorder modules use when none is named: named MessagePack at full precision.
using DefaultFileRecorder = NamedMpkFileRecorder<FullPrecisionSettings>;
#endif

/// The binary format in memory, for embedding records in other data or in firmware images.
template <PrecisionSettingsType S = FullPrecisionSettings>
class BinBytesRecorder {
  public:
    /// The precision settings type.
    using Settings = S;
    /// The dtypes tensors are written in.
    static constexpr PrecisionSettings precision = S::value;

    /// The Bin bytes of `value`.
    std::vector<std::byte> record(const Value& value) const {
        return detail::encode(value, detail::Format::Bin, S::value);
    }
    /// The tree in `bytes`; throws FormatError when they are not a valid Bin record.
    Value load(std::span<const std::byte> bytes) const {
        return detail::decode(bytes, detail::Format::Bin, "BinBytesRecorder");
    }
};

#if !EMBER_FREESTANDING
/// A recorder that writes files: what `Module::save_file` and `load_file` accept.
template <class R>
concept FileRecorder = requires(const R& r, const Value& v, const std::filesystem::path& p) {
    r.record(v, p);
    { r.load(p) } -> std::same_as<Value>;
    { r.file_path(p) } -> std::same_as<std::filesystem::path>;
    { R::extension } -> std::convertible_to<std::string_view>;
};
#endif

/// A recorder that writes bytes in memory.
template <class R>
concept BytesRecorder = requires(const R& r, const Value& v, std::span<const std::byte> b) {
    { r.record(v) } -> std::same_as<std::vector<std::byte>>;
    { r.load(b) } -> std::same_as<Value>;
};

}  // namespace ember::record
