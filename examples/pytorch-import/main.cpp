// PyTorch weights into an ember model: the Fashion-MNIST CNN that
// ../onnx-inference/train_export.py trained, written as ember modules, its state_dict
// (fashion_cnn.pt) loaded with PyTorchFileRecorder, and its predictions on the 10,000 test
// images checked against PyTorch's.
//
// PyTorch's module is two nn.Sequential (features.0, features.3, classifier.0, classifier.2:
// the gaps are the activations and pools); ember's struct names its layers, and LoadArgs'
// key remapping maps one onto the other.
//
//   pytorch-import [--debug]      --debug prints every key, shape and dtype while loading
#include <ember/nn.hpp>
#include <ember/record/pytorch.hpp>

#include <cstring>

#include "../cli.hpp"
#include "../import_common.hpp"

template <ember::Backend B>
struct FashionCnn {
    ember::nn::Conv2d<B> conv1;
    ember::nn::Conv2d<B> conv2;
    ember::nn::Linear<B> linear1;
    ember::nn::Linear<B> linear2;
    EMBER_MODULE(FashionCnn, conv1, conv2, linear1, linear2)

    static FashionCnn init(const ember::Device<B>& device = {}) {
        return {ember::nn::Conv2dConfig{{1, 8}, {3, 3}}.init<B>(device),
                ember::nn::Conv2dConfig{{8, 16}, {3, 3}}.init<B>(device),
                ember::nn::LinearConfig{400, 64}.init<B>(device),
                ember::nn::LinearConfig{64, 10}.init<B>(device)};
    }

    ember::Tensor<B, 2> forward(const ember::Tensor<B, 4>& x) const {
        using ember::activation::relu;
        auto y = ember::module::max_pool2d(relu(conv1.forward(x)), {2, 2}, {2, 2});
        y = ember::module::max_pool2d(relu(conv2.forward(y)), {2, 2}, {2, 2});
        return linear2.forward(relu(linear1.forward(y.template flatten<2>(1, 3))));
    }
};

int main(int argc, char** argv) try {
    namespace rec = ember::record;
    auto args = rec::LoadArgs(EMBER_EXAMPLE_DIR "/fashion_cnn.pt")
                    .with_key_remap(R"(^features\.0\.)", "conv1.")
                    .with_key_remap(R"(^features\.3\.)", "conv2.")
                    .with_key_remap(R"(^classifier\.0\.)", "linear1.")
                    .with_key_remap(R"(^classifier\.2\.)", "linear2.");
    CLI::App app{"Loads a Fashion-MNIST CNN trained in PyTorch (fashion_cnn.pt) into an ember "
                 "module and runs it on the test set.",
                 "pytorch-import"};
    ember_examples::setup(app);
    bool debug = false;
    app.add_flag("--debug", debug, "print how every key of the file was mapped");
    ember_examples::parse_or_exit(app, argc, argv);
    if (debug) args = args.with_debug_print();
    const auto model = rec::PyTorchFileRecorder<rec::FullPrecisionSettings>{}.load_into(
        FashionCnn<ember::Cpu>::init(), args);
    std::printf("loaded %zu parameters from fashion_cnn.pt\n", model.num_params());
    return import_example::evaluate([&](const auto& images) { return model.forward(images); },
                                    EMBER_EXAMPLE_DIR "/expected.bin");
} catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
