#pragma once
// The pixel normalisation, shared by the host's batcher (data.hpp) and the firmware.

namespace mnist {

/// One raw pixel (0..255) scaled to [0, 1], then standardised with the dataset's mean and
/// deviation (those of Burn's guide).
inline float normalise_pixel(float raw) {
    return (raw / 255.0f - 0.1307f) / 0.3081f;
}

}  // namespace mnist
