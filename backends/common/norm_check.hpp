#pragma once
// The argument checks of layer_norm, shared by every backend's kernel so that all of them
// refuse the same inputs with the same messages (ember::module::layer_norm checks before any
// backend is reached; these guard direct calls of B::float_layer_norm).
#include <cstddef>
#include <optional>

#include "ember/tensor/dtype.hpp"
#include "ember/tensor/error.hpp"
#include "ember/tensor/shape.hpp"

namespace ember::detail::norm {

/// Checks x (a float tensor with a last dim) and gamma and beta (1-d over that dim) of any
/// backend's tensor type (with `shape` and `dtype` members); returns the last dim's length.
template <typename T>
std::size_t check_layer_norm(const T& x, const std::optional<T>& gamma,
                             const std::optional<T>& beta) {
    EMBER_CHECK(x.shape.rank() >= 1, Shape, "layer_norm: the input of shape ", x.shape.to_string(),
                " has no last dim to normalise");
    EMBER_CHECK(is_float(x.dtype), DType, "layer_norm: needs a float tensor, got ",
                dtype_name(x.dtype));
    const std::size_t c = x.shape[x.shape.rank() - 1];
    for (const auto* p : {&gamma, &beta})
        if (*p)
            EMBER_CHECK((*p)->shape.rank() == 1 && (*p)->shape[0] == c, Shape, "layer_norm: ",
                        p == &gamma ? "gamma" : "beta", " of shape ", (*p)->shape.to_string(),
                        " does not match the last dim of the input of shape ",
                        x.shape.to_string());
    return c;
}

}  // namespace ember::detail::norm
