// JSON records (src/record/json.cpp), as PrettyJson and JsonGz files hold them: the envelope,
// base64 tensor bytes, the $float tags of non-finite numbers.
#include "record.hpp"

EMBER_FUZZ_TARGET(record_json) {
    ember::fuzz::decode_record(input, ember::record::detail::Format::PrettyJson);
}
