// IDX files, plain (src/data/mnist.cpp): the magic number, the dims, the body and what follows
// it, then MnistDataset's checks (28x28 images, as many labels as images, labels 0..9). The input
// is a little-endian u16 n, then n bytes of the labels file, then the images file.
#include "idx.hpp"

EMBER_FUZZ_TARGET(idx) {
    using namespace ember;
    fuzz::Reader in(input);
    const std::uint16_t n = in.u16();
    const auto dir = fuzz::scratch_dir() / "idx";
    std::filesystem::create_directories(dir);
    fuzz::write_file(dir / "train-labels-idx1-ubyte", in.take(n));
    fuzz::write_file(dir / "train-images-idx3-ubyte", in.rest());
    fuzz::load_mnist(dir);
}
