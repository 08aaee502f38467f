#pragma once
// A reader of protobuf's wire format, enough for ONNX files: varints, fixed 32/64-bit values,
// length-delimited fields (strings, bytes, sub-messages, packed arrays). ONNX files come from
// anywhere, so every read is bounds-checked, varints are at most 10 bytes, sub-messages nest at
// most kMaxDepth deep, and a failure is a FormatError naming the source, the message and the
// byte offset. ember-onnx reads ONNX with this rather than libprotobuf: no generated code, no
// dependency, and limits of its own on hostile input.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ember::onnx::pb {

/// Protobuf wire types (groups, 3 and 4, are obsolete and rejected).
enum class WireType : std::uint8_t { Varint = 0, Fixed64 = 1, Bytes = 2, Fixed32 = 5 };

/// How deep sub-messages may nest (a graph in an attribute of a node of a graph...).
inline constexpr int kMaxDepth = 64;

/// A cursor over one message's bytes.
class Reader {
  public:
    /// Reads `bytes`, the message `message` of `source` (both named in errors), which starts at
    /// byte `base` of the source.
    Reader(std::span<const std::byte> bytes, std::string_view source, std::string_view message,
           std::size_t base = 0, int depth = 0);

    /// Moves to the next field; false at the end of the message.
    bool next();
    /// The current field's number.
    std::uint32_t field() const { return field_; }
    /// The current field's wire type.
    WireType wire_type() const { return type_; }

    /// The current field as an unsigned varint.
    std::uint64_t varint();
    /// The current field as a signed int64 (two's complement varint).
    std::int64_t int64() { return static_cast<std::int64_t>(varint()); }
    /// The current field as a float (fixed32).
    float f32();
    /// The current field as a double (fixed64).
    double f64();
    /// The current field's bytes (length-delimited).
    std::span<const std::byte> bytes();
    /// The current field as a string (length-delimited).
    std::string string();
    /// The current field as a sub-message named `message`.
    Reader message(std::string_view message);
    /// Skips the current field.
    void skip();

    /// Appends the current field to `out`: one varint, or a packed run of them.
    void append_varints(std::vector<std::int64_t>& out);
    /// Appends the current field to `out`: one float, or a packed run of them.
    void append_floats(std::vector<float>& out);
    /// Appends the current field to `out`: one double, or a packed run of them.
    void append_doubles(std::vector<double>& out);

    /// Throws FormatError: `what`, with the source, the message and the offset.
    [[noreturn]] void fail(std::string_view what) const;

  private:
    std::uint64_t raw_varint();
    void expect(WireType t, std::string_view what) const;

    std::span<const std::byte> bytes_;
    std::string_view source_, message_;
    std::size_t base_ = 0, pos_ = 0, field_start_ = 0;
    int depth_ = 0;
    std::uint32_t field_ = 0;
    WireType type_ = WireType::Varint;
    bool consumed_ = true;
};

}  // namespace ember::onnx::pb
