#pragma once
// What the Vulkan backend's ops need to know about a step being captured for resubmission
// (graph.cpp; the public API is include/ember/stacks/vulkan_graph.hpp): whether this thread is
// capturing, the random draws and optimizer updates whose parameter words each replay rewrites,
// and the guard that turns a host synchronisation inside a capture into an ember::Error naming
// the op.
#include <cstddef>
#include <cstdint>

#include "context.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::detail::vk {

/// Whether this thread is capturing a step on `device`.
bool capturing(std::uint32_t device);
/// Throws ember::DeviceError when this thread is capturing a step: `op` waits for the device or
/// reads host memory, which a resubmitted command buffer cannot do.
void forbid_in_capture(const char* op);
/// Inside a capture: the last dispatch on `cx` was a random draw with generator counter
/// `counter`, its 64-bit key at parameter word `word` (a replay writes the key of its own draw).
void note_draw(Context& cx, std::uint64_t counter, std::size_t word);
/// Inside a capture: the last dispatch on `cx` was an Adam update with scalars `s`, whose
/// {step, 1/sqrt(correction_2)} words start at parameter word `word`.
void note_adam(Context& cx, const AdamStepScalars& s, std::size_t word);

/// The generator (elementwise.cpp): the key of draw `counter` under the current seed, and
/// `n` draws taken from the counter (returns the first).
std::uint64_t draw_key(std::uint64_t counter);
std::uint64_t take_draws(std::uint64_t n);
/// The counter now (the next draw's).
std::uint64_t draw_counter();
/// Sets the counter back (a capture abandoned: nothing was drawn).
void set_draw_counter(std::uint64_t c);

/// The two float words of Adam's per-step scalars: lr / correction_1 and 1 / √correction_2.
void adam_words(double lr, double c1, double c2, float out[2]);

}  // namespace ember::detail::vk
