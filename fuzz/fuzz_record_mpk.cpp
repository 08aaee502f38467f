// NamedMpk records (src/record/msgpack.cpp): the MessagePack envelope and tree, the tensor
// maps, the escaped keys.
#include "record.hpp"

EMBER_FUZZ_TARGET(record_mpk) {
    ember::fuzz::decode_record(input, ember::record::detail::Format::NamedMpk);
}
