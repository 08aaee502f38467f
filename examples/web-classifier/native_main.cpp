// The native build of the web classifier's inference path (classifier.hpp): classifies the
// images `mnist export` wrote, checks each prediction against the host's (expected.bin) and
// prints the time per inference, the figure the page's is set beside.
//
//   web-classifier-native DIR [--repeat N]    DIR holds model.bin, images.bin, expected.bin
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../cli.hpp"
#include "classifier.hpp"

namespace {

std::vector<std::uint8_t> read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ember::ArgumentError("web-classifier-native: cannot read '" + path.string() + "'");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) try {
    std::filesystem::path dir;
    std::size_t repeat = 20;
    CLI::App app{
        "Classifies the images `mnist export` wrote with the web classifier's inference "
        "code built natively, checks each prediction against the host's and times it.",
        "web-classifier-native"};
    ember_examples::setup(app);
    app.add_option("DIR", dir, "holds model.bin, images.bin and expected.bin")
        ->required()
        ->check(CLI::ExistingDirectory);
    app.add_option("--repeat", repeat, "timed passes over the images")
        ->check(ember_examples::positive);
    ember_examples::parse_or_exit(app, argc, argv);
    const auto model = read_file(dir / "model.bin");
    const auto images = read_file(dir / "images.bin");
    const auto expected = read_file(dir / "expected.bin");
    const std::size_t n = expected.size();
    if (images.size() != n * web::kPixels) {
        std::fprintf(stderr, "images.bin holds %zu bytes for %zu images\n", images.size(), n);
        return 1;
    }
    const web::Classifier classifier(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(model.data()), model.size()));
    auto image = [&](std::size_t i) {
        return std::span<const std::uint8_t, web::kPixels>(images.data() + i * web::kPixels,
                                                           web::kPixels);
    };
    std::size_t agree = 0;
    for (std::size_t i = 0; i < n; ++i) agree += web::argmax(classifier.classify(image(i))) == expected[i];
    // Timing: every image `repeat` times, after the pass above warmed the caches and the pool.
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t r = 0; r < repeat; ++r)
        for (std::size_t i = 0; i < n; ++i) (void)classifier.classify(image(i));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
                      double(repeat * n);
    std::printf("%zu of %zu predictions equal the host's\n", agree, n);
    std::printf("native: %.3f ms per inference (batch 1, mean of %zu)\n", ms, repeat * n);
    return agree == n ? 0 : 1;
} catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
