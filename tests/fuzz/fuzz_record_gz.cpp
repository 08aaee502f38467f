// The gzip layer of the NamedMpkGz, BinGz and JsonGz records (src/record/gzip.cpp) and the
// decoders behind it. The first byte picks the format (its value mod 3) and the mode: with bit 2
// clear, the rest is the plain record, gzipped by the harness (a Bin record gets its CRC-32
// appended first, a NamedMpk record's checksum is made right), so mutations reach the decoder
// inside; with bit 2 set, the rest is the gzip stream itself (truncated members, bad trailers,
// concatenated members, bombs).
#include "gzip.hpp"
#include "record.hpp"

EMBER_FUZZ_TARGET(record_gz) {
    using namespace ember;
    using record::detail::Format;
    fuzz::Reader in(input);
    const std::uint8_t mode = in.byte();
    constexpr Format formats[] = {Format::NamedMpkGz, Format::BinGz, Format::JsonGz};
    const Format format = formats[mode % 3];
    if (mode & 4) {
        fuzz::decode_record(in.rest(), format);
    } else if (format == Format::BinGz) {
        fuzz::decode_record(fuzz::gzip(fuzz::with_crc32(in.rest())), format);
    } else if (format == Format::NamedMpkGz) {
        fuzz::decode_record(fuzz::gzip(fuzz::with_mpk_checksum(in.rest())), format);
    } else {
        fuzz::decode_record(fuzz::gzip(in.rest()), format);
    }
}
