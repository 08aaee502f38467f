#pragma once
// The GPT example's model (model.hpp) with the weights of benchmarks/gpt_torch.py's PyTorch
// state dict: apart from the model, so that a file that only builds and trains the model does
// not parse the PyTorch importer (<ember/record/pytorch.hpp>, with <filesystem> and <map>).
#include <ember/record/pytorch.hpp>

#include <filesystem>
#include <string>

#include "model.hpp"

namespace gpt {

/// `model` with the weights of the state dict benchmarks/gpt_torch.py's Gpt saves
/// (torch.save(model.state_dict(), file)): its names (wte, wpe, blocks.<i>.{ln1, q, k, v, o,
/// ln2, fc1, fc2}, ln_f) remapped to the paths above; the importer transposes the Linear
/// weights and reads LayerNorm weight/bias as gamma/beta. Throws what
/// PyTorchFileRecorder::load_into throws (FormatError for a file that is not such a state dict,
/// ShapeError for a model of another size).
template <Backend B>
Gpt<B> load_pytorch(const Gpt<B>& model, const std::filesystem::path& file,
                    const ember::Device<B>& device = {}) {
    namespace rec = ember::record;
    const std::string layer = "transformer.layers.$1.";
    auto args = rec::LoadArgs(file)
                    .with_key_remap(R"(^wte\.)", "token_embedding.")
                    .with_key_remap(R"(^wpe\.)", "position_embedding.")
                    .with_key_remap(R"(^ln_f\.)", "norm.")
                    // ln1 is before attention: ember's pre-norm layer calls it norm_2.
                    .with_key_remap(R"(^blocks\.(\d+)\.ln1\.)", layer + "norm_2.")
                    .with_key_remap(R"(^blocks\.(\d+)\.ln2\.)", layer + "norm_1.")
                    .with_key_remap(R"(^blocks\.(\d+)\.q\.)", layer + "mha.query.")
                    .with_key_remap(R"(^blocks\.(\d+)\.k\.)", layer + "mha.key.")
                    .with_key_remap(R"(^blocks\.(\d+)\.v\.)", layer + "mha.value.")
                    .with_key_remap(R"(^blocks\.(\d+)\.o\.)", layer + "mha.output.")
                    .with_key_remap(R"(^blocks\.(\d+)\.fc1\.)", layer + "pwff.linear_inner.")
                    .with_key_remap(R"(^blocks\.(\d+)\.fc2\.)", layer + "pwff.linear_outer.");
    return rec::PyTorchFileRecorder<rec::FullPrecisionSettings>{}.load_into(model, args, device);
}

}  // namespace gpt
