// libFuzzer target: PyTorch .pt bytes (src/record/pytorch: the zip reader, the pickle VM, the
// tensor rebuild). Any input must either parse or give an ember::Error; a crash, a sanitizer
// report or a leak is a bug.
#include <ember/record/pytorch.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        (void)ember::record::decode_pytorch_value(std::as_bytes(std::span(data, size)), "fuzz.pt");
    } catch (const ember::Error&) {
    }
    return 0;
}
