// The WebAssembly module the page loads (web/app.js): C functions over the wasm heap. The page
// copies the model's bytes in and calls ember_load once, then ember_classify per image.
// A failed check (a corrupt model file, say) reaches the panic handler: the builds for the
// browser have no exceptions, so the message goes to the console and the module aborts, which
// the page reports.
#include <emscripten/emscripten.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "classifier.hpp"

namespace {

std::unique_ptr<web::Classifier> g_classifier;

[[noreturn]] void panic(ember::ErrorKind kind, const char* message) {
    std::fprintf(stderr, "ember error (kind %d): %s\n", static_cast<int>(kind), message);
    std::abort();
}

}  // namespace

extern "C" {

/// Loads the model from `size` bytes of a Bin record at `bytes`; returns 1.
EMSCRIPTEN_KEEPALIVE int ember_load(const std::uint8_t* bytes, std::size_t size) {
    ember::set_panic_handler(panic);
    g_classifier = std::make_unique<web::Classifier>(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes), size));
    return 1;
}

/// Classifies the 784 raw pixels at `pixels`, writes the 10 probabilities to `probs` and
/// returns the predicted class, or -1 when no model is loaded.
EMSCRIPTEN_KEEPALIVE int ember_classify(const std::uint8_t* pixels, float* probs) {
    if (!g_classifier) return -1;
    const auto p = g_classifier->classify(std::span<const std::uint8_t, web::kPixels>(pixels, web::kPixels));
    for (std::size_t c = 0; c < web::kClasses; ++c) probs[c] = p[c];
    return static_cast<int>(web::argmax(p));
}

}  // extern "C"
