// libFuzzer target: safetensors bytes (src/record/safetensors.cpp). Any input must either
// parse or give an ember::Error; a crash, a sanitizer report or a leak is a bug.
#include <ember/record/safetensors.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        (void)ember::record::decode_safetensors(std::as_bytes(std::span(data, size)), "fuzz");
    } catch (const ember::Error&) {
    }
    return 0;
}
