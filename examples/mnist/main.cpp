// The guide: train a Fashion-MNIST classifier with the Learner (live dashboard on a terminal),
// save it, then load it again for inference. Everything runs on ember::Dispatch, on the device
// --backend names (default: EMBER_BACKEND, else the CPU), so this file instantiates no backend.
// This file holds the models and what each of them needs of the Learner and the recorders; what
// the commands do whatever the model (the loaders, the Learner's options, inference's and
// export's loops) is compiled once in commands.cpp.
//
//   mnist train [--model cnn|mlp] [--epochs N] [--backend cpu|vulkan|cuda[:i][+fusion]]
//               [--devices N|I,J] ...                                     (see --help)
//   mnist infer [--artifact-dir DIR] [--count N] [--backend ...]
//   mnist export [--artifact-dir DIR] [--out DIR] [--count N]   (for examples/firmware)
// Dispatch's headers of the modules, the loss, the optimizer and the Learner the models use,
// each declaring their Dispatch instances (compiled in ember_dispatch) extern; the command line
// is parsed in options.cpp, so this file does not compile CLI11.
#include <ember/backend/cpu.hpp>  // cpu::set_num_threads
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

#if defined(EMBER_CUDA)
/// `mnist train` on the concrete Autodiff<Cuda> stack (train_cuda_stack.cpp): what --capture
/// (CUDA graphs) and NCCL between GPUs need, which Dispatch's tensors do not offer.
int train_on_cuda_stack(const Options& o);
#endif

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
    export_test_images(o, [&](const std::vector<ember::data::MnistItem>& items) {
        return predict(forward_of(model), items, ember::DispatchDevice::cpu());
    });
}

template <typename Model>
void infer_model(const Options& o) {
    const auto device = ember::DispatchDevice::parse(o.backend);
    const auto model = Model::init(device).load_file(o.artifact_dir / "model", Recorder{}, device);
    infer_test_set(o, [&](const std::vector<ember::data::MnistItem>& items) {
        return predict(forward_of(model), items, device);
    });
}

int run(int argc, char** argv) {
    Options o = parse(argc, argv);
    if (o.threads) ember::cpu::set_num_threads(*o.threads);
    using B = ember::Dispatch;
    if (o.command == "infer" || o.command == "export") {
        // The model kind comes from the run's config, whatever the command line says.
        o.config = load_config(o.artifact_dir / "config.json");
        const bool infer = o.command == "infer";
        if (o.config.model == "mlp")
            infer ? infer_model<Mlp<B>>(o) : export_model<Mlp<B>>(o);
        else if (o.config.model == "tiny")
            infer ? infer_model<TinyMlp<B>>(o) : export_model<TinyMlp<B>>(o);
        else
            infer ? infer_model<Cnn<B>>(o) : export_model<Cnn<B>>(o);
        return 0;
    }
#if defined(EMBER_CUDA)
    // CUDA graphs capture the concrete stack's kernels, and NCCL reduces its device memory.
    const bool nccl_run =
        ember::DispatchDevice::parse(o.backend).kind() == ember::DispatchKind::Cuda &&
        o.devices.size() > 1;
    if (o.capture || nccl_run) return train_on_cuda_stack(o);
#endif
    const auto devices = training_devices(o);
    const auto valid_device = devices.front().autodiff(false);
    if (o.config.model == "mlp") return train_model<Mlp<B>, B>(o, devices, valid_device);
    if (o.config.model == "tiny") return train_model<TinyMlp<B>, B>(o, devices, valid_device);
    return train_model<Cnn<B>, B>(o, devices, valid_device);
}

}  // namespace mnist

int main(int argc, char** argv) {
    try {
        return mnist::run(argc, argv);
    } catch (const ember::Error& e) {
        mnist::report_error(e.what());
        return 1;
    }
}
