// safetensors bytes (src/record/safetensors.cpp): the header's length, its JSON, the tensors'
// dtypes, shapes and offsets.
#include <ember/record/safetensors.hpp>

#include "fuzz.hpp"

EMBER_FUZZ_TARGET(safetensors) {
    ember::fuzz::refused_or_fine(
        [&] { (void)ember::record::decode_safetensors(input, "fuzz.safetensors"); });
}
