// A Fashion-MNIST classifier trained in PyTorch and exported as ONNX (train_export.py), turned
// into C++ at build time by ember_import_onnx (CMakeLists.txt: fashion_cnn.hpp, with the weights
// compiled in), run on the 10,000 test images and checked against PyTorch's predictions.
//
//   onnx-inference [--from-file RECORD]    (default: the embedded weights)
#include <cstring>

#include "../import_common.hpp"
#include "fashion_cnn.hpp"

int main(int argc, char** argv) try {
    using Model = fashion_cnn::Model<ember::Cpu>;
    const Model model = argc == 3 && std::strcmp(argv[1], "--from-file") == 0
                            ? Model::from_file(argv[2])
                            : Model::from_embedded();
    std::printf("imported model: %zu parameters\n", model.num_params());
    return import_example::evaluate([&](const auto& images) { return model.forward(images); },
                                    EMBER_EXAMPLE_DIR "/expected.bin");
} catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
