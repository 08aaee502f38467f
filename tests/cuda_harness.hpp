#pragma once
// What the CUDA-only test files share: REQUIRE_GPU() ends a case with a warning where this machine
// has no CUDA device (CI never has one), so those files compile and pass everywhere; channels-last
// data and a check of a tensor's layout.
#include <cstdint>

#include <ember/backend/cuda.hpp>
#include <ember/stacks.hpp>

#include "harness.hpp"

/// Skips the rest of a test case, saying so, when no CUDA device is present.
#define REQUIRE_GPU()                        \
    do {                                     \
        if (!ember::cuda::is_available()) {  \
            WARN("skipped: no CUDA device"); \
            return;                          \
        }                                    \
    } while (0)

namespace ember::test {

/// x [N, C, H, W] stored channels-last ([N, H, W, C] in memory), as PyTorch's
/// x.to(memory_format=torch.channels_last).
template <typename B>
Tensor<B, 4> channels_last(const Tensor<B, 4>& x) {
    auto nhwc = x.permute({0, 2, 3, 1}).into_data();
    return Tensor<B, 4>::from_data(std::move(nhwc), x.device()).permute({0, 3, 1, 2});
}

/// Whether a 4-d tensor's CUDA data (Cuda, or Autodiff over it) is stored channels-last: C's
/// stride 1, then W's, H's and N's (dims of size 1 may have any stride).
template <typename B>
bool stored_channels_last(const Tensor<B, 4>& t) {
    const auto& p = [&]() -> const auto& {
        if constexpr (requires { t.primitive().primitive; }) return t.primitive().primitive;
        else return t.primitive();
    }();
    const Shape s = p.shape;
    const auto c = static_cast<std::int64_t>(s[1]), h = static_cast<std::int64_t>(s[2]),
               w = static_cast<std::int64_t>(s[3]);
    const std::int64_t want[4] = {h * w * c, 1, w * c, c};
    for (std::size_t d = 0; d < 4; ++d)
        if (s[d] != 1 && p.strides[d] != want[d]) return false;
    return true;
}

}  // namespace ember::test
