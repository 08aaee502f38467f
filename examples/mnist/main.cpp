// The guide: train a Fashion-MNIST classifier with the Learner (live dashboard on a terminal),
// save it, then load it again for inference. Everything runs on ember::Dispatch, on the device
// --backend names (default: EMBER_BACKEND, else the CPU), so this file instantiates no backend.
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

#include <fstream>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

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

// A model's class scores [N, 10] for images [N, 28, 28].
using Forward = std::function<ember::Tensor<ember::Dispatch, 2>(ember::Tensor<ember::Dispatch, 3>)>;

// The class `forward` predicts for each of `items` (compiled once, whatever the model).
std::vector<std::int64_t> predict(const Forward& forward,
                                  const std::vector<ember::data::MnistItem>& items,
                                  const ember::DispatchDevice& device) {
    auto batch = MnistBatcher<ember::Dispatch>{}.batch(items, device);
    auto predicted = forward(batch.images).argmax(1).flatten<1>(0, 1);
    return predicted.to_data().to_vec<std::int64_t>();
}

// `model`'s forward as a Forward.
template <typename Model>
Forward forward_of(const Model& model) {
    return [&model](ember::Tensor<ember::Dispatch, 3> images) { return model.forward(images); };
}

// A loaded model's predictions for a batch of items (what infer and export ask of the model, so
// that they are compiled once, not once a model type).
using Predictor =
    std::function<std::vector<std::int64_t>(const std::vector<ember::data::MnistItem>&)>;

// Writes `bytes` to `file` (through a temporary name, so a failed write leaves nothing).
void write_bytes(const fs::path& file, const std::vector<std::uint8_t>& bytes) {
    const fs::path tmp = file.string() + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary);
        out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
        if (!out) throw ember::ArgumentError("mnist export: cannot write '" + tmp.string() + "'");
    }
    fs::rename(tmp, file);
}

// What examples/firmware embeds besides the model (export_model writes it): the first `count`
// test images (raw pixels), their labels, and the classes `predict` (the model loaded from the
// Bin file itself) gives them, which the firmware must reproduce.
void export_test_images(const Options& o, const Predictor& predict) {
    auto test = load_split(o, false);
    std::vector<ember::data::MnistItem> items;
    std::vector<std::uint8_t> pixels, labels, expected;
    for (std::size_t i = 0; i < std::min(o.count, test.len()); ++i) {
        items.push_back(*test.get(i));
        for (float p : items.back().image) pixels.push_back(static_cast<std::uint8_t>(p));
        labels.push_back(static_cast<std::uint8_t>(items.back().label));
    }
    for (auto c : predict(items)) expected.push_back(static_cast<std::uint8_t>(c));
    write_bytes(o.out_dir / "images.bin", pixels);
    write_bytes(o.out_dir / "labels.bin", labels);
    write_bytes(o.out_dir / "expected.bin", expected);
    std::cout << "exported " << o.config.model << " (" << fs::file_size(o.out_dir / "model.bin")
              << " bytes) and " << items.size() << " test images to " << o.out_dir.string() << '\n';
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

// `mnist infer` with `predict` (the loaded model on `device`): the accuracy on the test set,
// and the first --count predictions.
void infer_test_set(const Options& o, const Predictor& predict) {
    auto test = load_split(o, false);
    std::size_t correct = 0;
    const std::size_t n = test.len();
    // An accuracy over no images is undefined: say so rather than print "nan %".
    if (n == 0)
        throw ember::ArgumentError("mnist infer: the test set in " + test.images_path().string() +
                                   " holds no images: there is no accuracy to report");
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t s = 0; s < n; s += 500) {
        std::vector<ember::data::MnistItem> items;
        for (std::size_t i = s; i < std::min(n, s + 500); ++i) items.push_back(*test.get(i));
        const auto labels = predict(items);
        for (std::size_t i = 0; i < labels.size(); ++i) {
            const auto truth = items[i].label;
            correct += labels[i] == truth;
            if (s + i < o.count)
                std::cout << "image " << std::setw(4) << s + i << ": predicted " << std::setw(11)
                          << std::left << kClasses[labels[i]] << std::right << "  actual "
                          << std::setw(11) << std::left << kClasses[truth] << std::right
                          << (labels[i] == truth ? "" : "  (wrong)") << '\n';
        }
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::cout << std::fixed << std::setprecision(2) << "accuracy on the " << n
              << " test images: " << 100.0 * double(correct) / double(n) << " % (" << ms / 1000
              << " s)\n";
}

template <typename Model>
void infer_model(const Options& o) {
    const auto device = ember::DispatchDevice::parse(o.backend);
    const auto model = Model::init(device).load_file(o.artifact_dir / "model", Recorder{}, device);
    infer_test_set(o, [&](const std::vector<ember::data::MnistItem>& items) {
        return predict(forward_of(model), items, device);
    });
}

// The devices to train on: --backend with autodiff, once per replica of --devices (N copies
// of the CPU; the GPUs by index).
std::vector<ember::DispatchDevice> training_devices(const Options& o) {
    const auto device = ember::DispatchDevice::parse(o.backend).autodiff(true);
    std::vector<ember::DispatchDevice> out;
    if (device.kind() == ember::DispatchKind::Cpu) {
        out.assign(o.devices.empty() ? 1 : o.devices[0], device);
        return out;
    }
    for (std::size_t i : o.devices) {
        auto d = device.kind() == ember::DispatchKind::Cuda
                     ? ember::DispatchDevice::cuda(std::uint32_t(i))
                     : ember::DispatchDevice::vulkan(std::uint32_t(i));
        out.push_back(d.fusion(device.has_fusion()).autodiff(true));
    }
    if (out.empty()) out.push_back(device);
    return out;
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
        std::cerr << "mnist: " << e.what() << '\n';
        return 1;
    }
}
