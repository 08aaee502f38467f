// make_default_renderer's one-argument form: the dashboard on a terminal, PlainRenderer on
// standard output otherwise. In a file of its own so that the dashboard links without it.
#include <memory>

#include "ember/train/dashboard.hpp"
#include "ember/train/plain_renderer.hpp"

namespace ember::train {

std::unique_ptr<MetricsRenderer> make_default_renderer(const Interrupter& interrupter) {
    return make_default_renderer(interrupter, [] { return std::make_unique<PlainRenderer>(); });
}

}  // namespace ember::train
