// NamedMpk records (src/record/msgpack.cpp): the MessagePack envelope and tree, the tensor
// maps, the escaped keys, the checksum. Each input is decoded as it is (so the checksum's own
// checks are fuzzed) and, when it ends with a checksum entry, again with that checksum made
// right (so mutations of the tree reach the decoder behind it).
#include "gzip.hpp"
#include "record.hpp"

EMBER_FUZZ_TARGET(record_mpk) {
    using namespace ember;
    fuzz::decode_record(input, record::detail::Format::NamedMpk);
    const auto fixed = fuzz::with_mpk_checksum(input);
    if (!std::equal(fixed.begin(), fixed.end(), input.begin(), input.end()))
        fuzz::decode_record(fixed, record::detail::Format::NamedMpk);
}
