#pragma once
// Display of tensors through operator<<, in Burn's format (data, shape, device, backend, kind,
// dtype). Kept out of the core headers so that freestanding builds never see <ostream>.
#include <optional>
#include <ostream>
#include <string>

#include "../export.hpp"
#include "tensor.hpp"

namespace ember {

/// How tensors print.
struct PrintOptions {
    std::optional<int> precision;  ///< digits after the point; unset: shortest exact form
    std::size_t threshold = 1000;  ///< more elements than this print summarised
    std::size_t edge_items = 3;    ///< items kept at each edge of a summarised dim
};
/// Sets the options every later print uses.
EMBER_API void set_print_options(const PrintOptions& options);
/// The options in force.
EMBER_API PrintOptions print_options();

namespace detail {
/// The nested-bracket rendering of the data.
std::string format_data(const TensorData& data, const PrintOptions& options);
/// The full Burn-style block.
EMBER_API std::string format_tensor(const TensorData& data, const std::string& device,
                                    const std::string& backend, const char* kind,
                                    const PrintOptions& options);
}  // namespace detail

/// The tensor as Burn prints it, with the given options.
template <Backend B, std::size_t D, TensorKind K>
std::string to_string(const Tensor<B, D, K>& t, const PrintOptions& options = print_options()) {
    return detail::format_tensor(t.to_data(), t.device().to_string(), B::name(), K::name, options);
}

/// Prints the tensor in Burn's format.
template <Backend B, std::size_t D, TensorKind K>
std::ostream& operator<<(std::ostream& os, const Tensor<B, D, K>& t) {
    return os << to_string(t);
}

}  // namespace ember
