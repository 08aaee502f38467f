// Fashion-MNIST inference on a Cortex-M: the tiny MLP that `mnist train --model tiny` trained
// on the host, exported by `mnist export` in ember's Bin format and compiled into the image,
// classifies test images compiled in beside it. Tensors live in a fixed arena; a failed check
// reaches the panic handler (no exceptions here). The run prints each prediction and exits
// with status 0 only when every one equals the host's prediction for the same image.
#include <ember/backend/arena.hpp>
#include <ember/ember.hpp>
#include <ember/record/recorder.hpp>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <span>
#include <vector>

#include "../mnist/common.hpp"

// The embedded files (ember_embed_bytes in CMakeLists.txt).
extern const unsigned char model_bin[], images_bin[], labels_bin[], expected_bin[];
extern const std::size_t model_bin_size, images_bin_size, labels_bin_size, expected_bin_size;

namespace {

constexpr const char* kClasses[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
constexpr std::size_t kPixels = 28 * 28;

// Tensor buffers: the weights (199 KiB) and a few activations.
alignas(64) std::byte g_arena_memory[256 * 1024];

[[noreturn]] void panic(ember::ErrorKind kind, const char* message) {
    std::printf("ember error (kind %d): %s\n", static_cast<int>(kind), message);
    std::exit(2);
}

std::span<const std::byte> bytes(const unsigned char* p, std::size_t n) {
    return {reinterpret_cast<const std::byte*>(p), n};
}

}  // namespace

int main() {
    using B = ember::Cpu;
    ember::set_panic_handler(panic);
    static ember::cpu::Arena arena(g_arena_memory);
    ember::cpu::set_buffer_source(&arena.source());

    const auto record = ember::record::BinBytesRecorder<>{}.load(bytes(model_bin, model_bin_size));
    const auto model = mnist::TinyMlp<B>::init().load_record(record);
    const std::size_t weights = arena.bytes_in_use();

    const std::size_t n = labels_bin_size;
    if (images_bin_size != n * kPixels || expected_bin_size != n) {
        std::printf("embedded data is inconsistent: %u images, %u labels, %u predictions\n",
                    unsigned(images_bin_size / kPixels), unsigned(n), unsigned(expected_bin_size));
        return 1;
    }
    std::size_t agree = 0, correct = 0;
    const std::clock_t start = std::clock();
    for (std::size_t i = 0; i < n; ++i) {
        std::vector<float> pixels(kPixels);
        for (std::size_t k = 0; k < kPixels; ++k)
            pixels[k] = mnist::normalise_pixel(float(images_bin[i * kPixels + k]));
        auto x = ember::Tensor<B, 3>::from_data(ember::TensorData(std::move(pixels), {1, 28, 28}));
        const auto predicted = static_cast<unsigned>(model.forward(x).argmax(1).into_scalar());
        agree += predicted == expected_bin[i];
        correct += predicted == labels_bin[i];
        std::printf("image %3u: predicted %-11s host %-11s label %-11s%s\n", unsigned(i),
                    kClasses[predicted], kClasses[expected_bin[i]], kClasses[labels_bin[i]],
                    predicted == expected_bin[i] ? "" : "  MISMATCH");
    }
    const double seconds = double(std::clock() - start) / CLOCKS_PER_SEC;
    std::printf("%u of %u predictions equal the host's; accuracy %.1f %%\n", unsigned(agree),
                unsigned(n), 100.0 * double(correct) / double(n));
    std::printf("arena: %u bytes for the weights, %u at most in use, of %u\n", unsigned(weights),
                unsigned(arena.peak_bytes_in_use()), unsigned(arena.capacity()));
    std::printf("time: %.2f ms per inference (qemu, host clock)\n", 1000.0 * seconds / double(n));
    return agree == n ? 0 : 1;
}
