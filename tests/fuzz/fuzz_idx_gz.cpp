// IDX files, gzipped (src/data/mnist.cpp through zlib's gz reader). The input is a mode byte, a
// little-endian u16 n, then n bytes for the labels file and the rest for the images file. Bit 0
// of the mode set: the labels bytes are the .gz file itself (hostile gzip streams: truncated,
// bad trailers, several members); clear: the harness gzips them (so mutations reach the IDX
// reader behind the CRC). Bit 1 does the same for the images.
#include "gzip.hpp"
#include "idx.hpp"

EMBER_FUZZ_TARGET(idx_gz) {
    using namespace ember;
    fuzz::Reader in(input);
    const std::uint8_t mode = in.byte();
    const std::uint16_t n = in.u16();
    const fuzz::Input labels = in.take(n), images = in.rest();
    const auto dir = fuzz::scratch_dir() / "idx_gz";
    std::filesystem::create_directories(dir);
    fuzz::write_file(dir / "train-labels-idx1-ubyte.gz",
                     (mode & 1) ? labels : fuzz::Input(fuzz::gzip(labels)));
    fuzz::write_file(dir / "train-images-idx3-ubyte.gz",
                     (mode & 2) ? images : fuzz::Input(fuzz::gzip(images)));
    fuzz::load_mnist(dir);
}
