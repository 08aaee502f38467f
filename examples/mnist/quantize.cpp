// Post-training quantization of a trained guide model (issue 11's acceptance):
//
//   mnist-quantize [--artifact-dir DIR] [--data-dir DIR] [--calibration N] [--json FILE]
//                  [--export DIR [--count N]]
//
// Loads DIR/model.mpk (the model kind from DIR/config.json, as `mnist infer`), measures its test
// accuracy in f32, quantizes its weights to int8 (per-channel symmetric), measures the accuracy
// with dynamic activations and with static ones calibrated on N training images, saves the
// static model as DIR/model-int8.mpk, loads it back into a fresh model and checks that it
// predicts the same, and prints accuracies, times and file sizes (and writes them as JSON).
// --export writes what examples/firmware embeds, as `mnist export` does, for the int8 model:
// model.bin (Bin format), the first N test images, their labels and this host's predictions.
#include <ember/data/vision.hpp>
#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/record.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "../cli.hpp"
#include "data.hpp"
#include "model.hpp"

namespace fs = std::filesystem;
using B = ember::Cpu;
using Recorder = ember::record::NamedMpkFileRecorder<ember::record::FullPrecisionSettings>;

namespace {

struct Options {
    fs::path artifact_dir = "artifacts/mnist";
    std::optional<fs::path> data_dir;
    std::size_t calibration = 1024;
    std::optional<fs::path> json;
    std::optional<fs::path> export_dir;
    std::size_t count = 100;
};

// Writes `bytes` to `file` through a temporary name (a failed write leaves nothing).
void write_bytes(const fs::path& file, const std::vector<std::uint8_t>& bytes) {
    const fs::path tmp = file.string() + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary);
        out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
        if (!out) throw ember::ArgumentError("mnist-quantize: cannot write '" + tmp.string() + "'");
    }
    fs::rename(tmp, file);
}

// The firmware's files for `model` (see the file comment).
template <typename Model>
void export_firmware(const Model& model, const ember::data::MnistDataset& test, const Options& o) {
    using BinRecorder = ember::record::BinFileRecorder<ember::record::FullPrecisionSettings>;
    fs::create_directories(*o.export_dir);
    model.save_file(*o.export_dir / "model", BinRecorder{});
    const auto loaded =
        Model::init().load_file(*o.export_dir / "model", BinRecorder{}, ember::Device<B>{});
    const mnist::FirmwareImages images = mnist::firmware_images(test, o.count);
    std::vector<std::uint8_t> expected;
    auto batch = mnist::MnistBatcher<B>{}.batch(images.items, {});
    auto p = loaded.forward(batch.images).argmax(1).template flatten<1>(0, 1);
    for (auto c : p.to_data().template to_vec<std::int64_t>())
        expected.push_back(static_cast<std::uint8_t>(c));
    write_bytes(*o.export_dir / "images.bin", images.pixels);
    write_bytes(*o.export_dir / "labels.bin", images.labels);
    write_bytes(*o.export_dir / "expected.bin", expected);
    std::cout << "exported the int8 model (" << fs::file_size(*o.export_dir / "model.bin")
              << " bytes) and " << images.items.size() << " test images to "
              << o.export_dir->string() << '\n';
}

struct Eval {
    double accuracy = 0;  // percent
    double seconds = 0;   // the whole test set, batches of 500
    std::vector<std::int64_t> predictions;
};

template <typename M>
Eval evaluate(const M& model, const ember::data::MnistDataset& test) {
    Eval e;
    std::size_t correct = 0;
    const std::size_t n = test.len();
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t s = 0; s < n; s += 500) {
        std::vector<ember::data::MnistItem> items;
        for (std::size_t i = s; i < std::min(n, s + 500); ++i) items.push_back(*test.get(i));
        auto batch = mnist::MnistBatcher<B>{}.batch(items, {});
        auto p = model.forward(batch.images).argmax(1).template flatten<1>(0, 1);
        for (auto v : p.to_data().template to_vec<std::int64_t>()) e.predictions.push_back(v);
        for (std::size_t i = 0; i < items.size(); ++i)
            correct += e.predictions[s + i] == items[i].label;
    }
    e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (n == 0)
        throw ember::ArgumentError(
            "mnist quantize: the test set holds no images: there is no "
            "accuracy to compare");
    e.accuracy = 100.0 * double(correct) / double(n);
    return e;
}

std::string model_kind(const fs::path& dir) {
    std::ifstream in(dir / "config.json");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string s = ss.str();
    for (const char* kind : {"mlp", "tiny", "cnn"})
        if (s.find(std::string("\"model\": \"") + kind + "\"") != std::string::npos) return kind;
    throw ember::FormatError("mnist-quantize: no model kind in " + (dir / "config.json").string());
}

template <typename Model>
int run(const Options& o, const std::string& kind) {
    const auto dev = ember::Device<B>{};
    auto model = Model::init().load_file(o.artifact_dir / "model", Recorder{}, dev);
    const auto test = o.data_dir ? ember::data::MnistDataset::test(*o.data_dir)
                                 : ember::data::MnistDataset::test();
    const auto train = o.data_dir ? ember::data::MnistDataset::train(*o.data_dir)
                                  : ember::data::MnistDataset::train();
    const Eval f32 = evaluate(model, test);

    ember::quant::Quantizer<> quantizer{ember::quant::MinMaxCalibration{},
                                        ember::quant::QuantizationScheme::per_channel_symmetric()};
    auto dynamic = model.quantize_weights(quantizer);
    const Eval dyn = evaluate(dynamic, test);

    // Static activations: input ranges recorded on the first N training images.
    auto observed = ember::quant::observe_activations(dynamic);
    for (std::size_t s = 0; s < std::min(o.calibration, train.len()); s += 256) {
        std::vector<ember::data::MnistItem> items;
        for (std::size_t i = s; i < std::min(o.calibration, s + 256); ++i)
            items.push_back(*train.get(i));
        (void)observed.forward(mnist::MnistBatcher<B>{}.batch(items, dev).images);
    }
    auto fixed = ember::quant::freeze_activations(observed);
    const Eval st = evaluate(fixed, test);

    fixed.save_file(o.artifact_dir / "model-int8", Recorder{});
    auto loaded = Model::init().load_file(o.artifact_dir / "model-int8", Recorder{}, dev);
    const Eval back = evaluate(loaded, test);
    const bool same = back.predictions == st.predictions;

    const auto f32_bytes = fs::file_size(o.artifact_dir / "model.mpk");
    const auto int8_bytes = fs::file_size(o.artifact_dir / "model-int8.mpk");
    const double ratio = double(f32_bytes) / double(int8_bytes);
    std::cout << std::fixed << std::setprecision(2) << kind << " (" << model.num_params()
              << " parameters), " << test.len() << " test images:\n"
              << "  f32:                      " << f32.accuracy << " %  (" << f32.seconds << " s)\n"
              << "  int8, dynamic activations: " << dyn.accuracy << " %  (" << dyn.seconds
              << " s), loss " << f32.accuracy - dyn.accuracy << " points\n"
              << "  int8, static activations:  " << st.accuracy << " %  (" << st.seconds
              << " s), loss " << f32.accuracy - st.accuracy << " points (" << o.calibration
              << " calibration images)\n"
              << "  files: model.mpk " << f32_bytes << " B, model-int8.mpk " << int8_bytes
              << " B: " << ratio << "x smaller\n"
              << "  model-int8.mpk loaded back: " << back.accuracy << " %, "
              << (same ? "the same predictions" : "DIFFERENT predictions") << '\n';
    if (o.export_dir) export_firmware(fixed, test, o);
    if (o.json) {
        std::ofstream out(*o.json);
        out << std::setprecision(6) << "{\"model\": \"" << kind
            << "\", \"params\": " << model.num_params() << ", \"f32_accuracy\": " << f32.accuracy
            << ", \"dynamic_accuracy\": " << dyn.accuracy
            << ", \"static_accuracy\": " << st.accuracy << ", \"f32_seconds\": " << f32.seconds
            << ", \"dynamic_seconds\": " << dyn.seconds << ", \"static_seconds\": " << st.seconds
            << ", \"f32_bytes\": " << f32_bytes << ", \"int8_bytes\": " << int8_bytes
            << ", \"calibration\": " << o.calibration
            << ", \"reloaded_same\": " << (same ? "true" : "false") << "}\n";
    }
    return same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) try {
    Options o;
    CLI::App app{"Quantizes a trained mnist model to int8 (calibrated on training images), "
                 "compares it with the float model, and exports it for the firmware.",
                 "mnist-quantize"};
    ember_examples::setup(app);
    app.add_option("--artifact-dir", o.artifact_dir, "the trained model's artifact directory");
    app.add_option("--data-dir", o.data_dir, "where the Fashion-MNIST IDX files are");
    app.add_option("--calibration", o.calibration, "training images to calibrate on")
        ->check(ember_examples::positive);
    app.add_option("--json", o.json, "write the figures as JSON to this file");
    auto* export_opt = app.add_option("--export", o.export_dir, "export the int8 model to DIR");
    app.add_option("--count", o.count, "test images exported with the model")
        ->check(ember_examples::positive)
        ->needs(export_opt);
    ember_examples::parse_or_exit(app, argc, argv);
    const std::string kind = model_kind(o.artifact_dir);
    if (kind == "mlp") return run<mnist::Mlp<B>>(o, kind);
    if (kind == "tiny") return run<mnist::TinyMlp<B>>(o, kind);
    return run<mnist::Cnn<B>>(o, kind);
} catch (const std::exception& e) {
    std::cerr << "mnist-quantize: " << e.what() << '\n';
    return 1;
}
