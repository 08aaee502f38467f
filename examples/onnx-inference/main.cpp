// A Fashion-MNIST classifier trained in PyTorch and exported as ONNX (train_export.py), turned
// into C++ at build time by ember_import_onnx (CMakeLists.txt: fashion_cnn.hpp, with the weights
// compiled in), run on the 10,000 test images and checked against PyTorch's predictions.
//
//   onnx-inference [--from-file RECORD]    (default: the embedded weights)
#include <cstring>

#include "../cli.hpp"
#include "../import_common.hpp"
#include "fashion_cnn.hpp"

int main(int argc, char** argv) try {
    using Model = fashion_cnn::Model<ember::Cpu>;
    CLI::App app{"Runs the Fashion-MNIST CNN imported from ONNX at build time on the test set.",
                 "onnx-inference"};
    ember_examples::setup(app);
    std::string record;
    app.add_option("--from-file", record,
                   "load the weights from this record instead of the embedded ones")
        ->check(CLI::ExistingFile);
    ember_examples::parse_or_exit(app, argc, argv);
    const Model model = record.empty() ? Model::from_embedded() : Model::from_file(record);
    std::printf("imported model: %zu parameters\n", model.num_params());
    return import_example::evaluate([&](const auto& images) { return model.forward(images); },
                                    EMBER_EXAMPLE_DIR "/expected.bin");
} catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
