// What the mnist example's commands do on ember::Dispatch whatever the model (commands.hpp):
// `mnist train`'s loaders, Learner options and report (train_with<Dispatch>, train_with.hpp),
// inference's and export's loops over the test set, and the training devices. main.cpp, the
// models and the Learner, calls them with each model's part as a function.
#include "commands.hpp"

#include <ember/backend/cpu.hpp>  // cpu::set_num_threads
#include <ember/dispatch/train.hpp>

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>

#include "train_with.hpp"

namespace mnist {

#if defined(EMBER_CUDA)
/// `mnist train` on the concrete Autodiff<Cuda> stack (train_cuda_stack.cpp): what --capture
/// (CUDA graphs) and NCCL between GPUs need, which Dispatch's tensors do not offer.
int train_on_cuda_stack(const Options& o);
#endif

template int train_with<ember::Dispatch>(const Options&, const std::vector<ember::DispatchDevice>&,
                                         const ember::DispatchDevice&,
                                         const std::function<void(Builder<ember::Dispatch>&)>&,
                                         const FitModel<ember::Dispatch>&);

// The class `forward` predicts for each of `items`.
static std::vector<std::int64_t> predict(const Forward& forward,
                                         const std::vector<ember::data::MnistItem>& items,
                                         const ember::DispatchDevice& device) {
    auto batch = MnistBatcher<ember::Dispatch>{}.batch(items, device);
    auto predicted = forward(batch.images).argmax(1).flatten<1>(0, 1);
    return predicted.to_data().to_vec<std::int64_t>();
}

// Writes `bytes` to `file` (through a temporary name, so a failed write leaves nothing).
static void write_bytes(const fs::path& file, const std::vector<std::uint8_t>& bytes) {
    const fs::path tmp = file.string() + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary);
        out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
        if (!out) throw ember::ArgumentError("mnist export: cannot write '" + tmp.string() + "'");
    }
    fs::rename(tmp, file);
}

void export_test_images(const Options& o, const Forward& forward) {
    auto test = load_split(o, false);
    const FirmwareImages images = firmware_images(test, o.count);
    std::vector<std::uint8_t> expected;
    for (auto c : predict(forward, images.items, ember::DispatchDevice::cpu()))
        expected.push_back(static_cast<std::uint8_t>(c));
    write_bytes(o.out_dir / "images.bin", images.pixels);
    write_bytes(o.out_dir / "labels.bin", images.labels);
    write_bytes(o.out_dir / "expected.bin", expected);
    std::cout << "exported " << o.config.model << " (" << fs::file_size(o.out_dir / "model.bin")
              << " bytes) and " << images.items.size() << " test images to " << o.out_dir.string()
              << '\n';
}

void infer_test_set(const Options& o, const Forward& forward, const ember::DispatchDevice& device) {
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
        const auto labels = predict(forward, items, device);
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

// The devices to train on: --backend with autodiff, once per replica of --devices (N copies of
// the CPU; the GPUs by index).
static std::vector<ember::DispatchDevice> training_devices(const Options& o) {
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

void save_model(const Options& o, const ember::record::Value& record) {
    Recorder{}.record(record, o.artifact_dir / "model");
}

double valid_accuracy(const train::detail::MetricHistory& history) {
    return history.at(train::Split::Valid).at("Accuracy").back();
}

static int run_command(int argc, char** argv, ModelCommands (*commands)(const std::string&)) {
    Options o = parse(argc, argv);
    if (o.threads) ember::cpu::set_num_threads(*o.threads);
    if (o.command == "infer" || o.command == "export") {
        // The model kind comes from the run's config, whatever the command line says.
        o.config = load_config(o.artifact_dir / "config.json");
        const ModelCommands model = commands(o.config.model);
        o.command == "infer" ? model.infer(o) : model.export_model(o);
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
    return commands(o.config.model).train(o, devices, valid_device);
}

int run(int argc, char** argv, ModelCommands (*commands)(const std::string&)) {
    try {
        return run_command(argc, argv, commands);
    } catch (const ember::Error& e) {
        std::cerr << "mnist: " << e.what() << '\n';
        return 1;
    }
}

}  // namespace mnist
