// Format dispatch: the bytes of a record tree in each format, and back. Firmware builds
// (EMBER_FREESTANDING) carry the Bin codec only: no zlib, MessagePack or JSON.
#include "codec.hpp"

namespace ember::record::detail {

#if EMBER_FREESTANDING
std::vector<std::byte> encode(const Value& value, Format format, PrecisionSettings precision) {
    check_precision(precision);
    EMBER_CHECK(format == Format::Bin, Argument, "record: ", format_name(format),
                " is not available in freestanding builds (Bin is)");
    return encode_bin(value, precision);
}

Value decode(std::span<const std::byte> bytes, Format format, std::string_view source) {
    const Source src{source, format_name(format)};
    EMBER_CHECK(format == Format::Bin, Argument, "record: ", format_name(format),
                " is not available in freestanding builds (Bin is)");
    return decode_bin(bytes, src);
}
#else
std::vector<std::byte> encode(const Value& value, Format format, PrecisionSettings precision) {
    check_precision(precision);
    switch (format) {
        case Format::NamedMpk:
            return encode_msgpack(value, precision);
        case Format::NamedMpkGz:
            return gzip(encode_msgpack(value, precision));
        case Format::Bin:
            return encode_bin(value, precision);
        case Format::BinGz:
            return gzip(encode_bin(value, precision));
        case Format::JsonGz:
            return gzip(encode_json(value, precision, false));
        case Format::PrettyJson:
            return encode_json(value, precision, true);
    }
    EMBER_FAIL(Argument, "record: unknown format ", static_cast<int>(format));
}

Value decode(std::span<const std::byte> bytes, Format format, std::string_view source) {
    const Source src{source, format_name(format)};
    switch (format) {
        case Format::NamedMpk:
            return decode_msgpack(bytes, src);
        case Format::NamedMpkGz:
            return decode_msgpack(gunzip(bytes, src), src);
        case Format::Bin:
            return decode_bin(bytes, src);
        case Format::BinGz:
            return decode_bin(gunzip(bytes, src), src);
        case Format::JsonGz:
            return decode_json(gunzip(bytes, src), src);
        case Format::PrettyJson:
            return decode_json(bytes, src);
    }
    EMBER_FAIL(Argument, "record: unknown format ", static_cast<int>(format));
}

#endif

}  // namespace ember::record::detail
