// The guide: train a Fashion-MNIST classifier with the Learner (live dashboard on a terminal),
// save it, then load it again for inference. Everything runs on ember::Dispatch, on the device
// --backend names (default: EMBER_BACKEND, else the CPU), so this file instantiates no backend.
// This file holds the models and what each of them needs of the Learner and the recorders (its
// ModelCommands); what the commands do whatever the model (the command line's dispatch, the
// loaders, the Learner's options, inference's and export's loops) is compiled once in
// commands.cpp.
//
//   mnist train [--model cnn|mlp] [--epochs N] [--backend cpu|vulkan|cuda[:i][+fusion]]
//               [--devices N|I,J] ...                                     (see --help)
//   mnist infer [--artifact-dir DIR] [--count N] [--backend ...]
//   mnist export [--artifact-dir DIR] [--out DIR] [--count N]   (for examples/firmware)
// Dispatch's headers of the modules, the loss, the optimizer and the Learner the models use,
// each declaring their Dispatch instances (compiled in ember_dispatch) extern; the command line
// is parsed in options.cpp, so this file does not compile CLI11.
#include <ember/dispatch/nn/conv.hpp>
#include <ember/dispatch/nn/dropout.hpp>
#include <ember/dispatch/nn/linear.hpp>
#include <ember/dispatch/nn/loss.hpp>
#include <ember/dispatch/nn/pool.hpp>
#include <ember/dispatch/optim/adam.hpp>
#include <ember/dispatch/train.hpp>
#include <ember/record.hpp>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "data.hpp"
#include "model.hpp"
#include "options.hpp"
#include "train.hpp"

namespace mnist {

// `model`'s forward as a Forward.
template <typename Model>
Forward forward_of(const Model& model) {
    return [&model](ember::Tensor<ember::Dispatch, 3> images) { return model.forward(images); };
}

// `mnist export`: the model in the Bin format, and the test images (export_test_images).
template <typename Model>
void export_model(const Options& o) {
    using B = ember::Dispatch;  // on the CPU: the firmware's expected classes come from it
    using BinRecorder = ember::record::BinFileRecorder<ember::record::FullPrecisionSettings>;
    fs::create_directories(o.out_dir);
    Model::init()
        .load_file(o.artifact_dir / "model", Recorder{}, ember::Device<B>{})
        .save_file(o.out_dir / "model", BinRecorder{});
    const auto model =
        Model::init().load_file(o.out_dir / "model", BinRecorder{}, ember::Device<B>{});
    export_test_images(o, forward_of(model));
}

template <typename Model>
void infer_model(const Options& o) {
    const auto device = ember::DispatchDevice::parse(o.backend);
    const auto model = Model::init(device).load_file(o.artifact_dir / "model", Recorder{}, device);
    infer_test_set(o, forward_of(model), device);
}

// `mnist train` of `Model` on Dispatch's `devices`.
template <typename Model>
int train_on(const Options& o, const std::vector<ember::DispatchDevice>& devices,
             const ember::DispatchDevice& valid_device) {
    return train_model<Model, ember::Dispatch>(o, devices, valid_device);
}

// The commands of the model named `model` (commands.cpp's run calls them).
ModelCommands commands_of(const std::string& model) {
    using B = ember::Dispatch;
    if (model == "mlp") return {&train_on<Mlp<B>>, &infer_model<Mlp<B>>, &export_model<Mlp<B>>};
    if (model == "tiny")
        return {&train_on<TinyMlp<B>>, &infer_model<TinyMlp<B>>, &export_model<TinyMlp<B>>};
    return {&train_on<Cnn<B>>, &infer_model<Cnn<B>>, &export_model<Cnn<B>>};
}

}  // namespace mnist

int main(int argc, char** argv) {
    return mnist::run(argc, argv, &mnist::commands_of);
}
