#pragma once
// What the CUDA-only test files share: REQUIRE_GPU() ends a case with a warning where this machine
// has no CUDA device (CI never has one), so those files compile and pass everywhere.
#include <ember/backend/cuda.hpp>

#include "harness.hpp"

/// Skips the rest of a test case, saying so, when no CUDA device is present.
#define REQUIRE_GPU()                        \
    do {                                     \
        if (!ember::cuda::is_available()) {  \
            WARN("skipped: no CUDA device"); \
            return;                          \
        }                                    \
    } while (0)
