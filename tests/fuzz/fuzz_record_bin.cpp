// Bin records (src/record/bin.cpp): the header, the tagged tree with its LEB128 lengths and
// zigzag integers, and the CRC-32. The first byte picks the mode: even, the rest is a record
// without its CRC-32, which the harness appends (so mutations reach the tree); odd, the rest is
// decoded as it is (so the checksum's own checks are fuzzed too).
#include "gzip.hpp"
#include "record.hpp"

EMBER_FUZZ_TARGET(record_bin) {
    using namespace ember;
    fuzz::Reader in(input);
    const bool raw = in.byte() & 1;
    if (raw) {
        fuzz::decode_record(in.rest(), record::detail::Format::Bin);
    } else {
        fuzz::decode_record(fuzz::with_crc32(in.rest()), record::detail::Format::Bin);
    }
}
