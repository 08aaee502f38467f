// PyTorch torch.save bytes (src/record/pytorch): the zip reader, the pickle machine and the
// rebuild of tensors from storages, both as the record tree and as the flat list of tensors.
#include <ember/record/pytorch.hpp>

#include "fuzz.hpp"

EMBER_FUZZ_TARGET(pytorch) {
    using namespace ember;
    fuzz::refused_or_fine([&] { (void)record::decode_pytorch_value(input, "fuzz.pt"); });
    fuzz::refused_or_fine([&] { (void)record::decode_pytorch_tensors(input, "fuzz.pt"); });
}
