#version 450
// One Adam update over contiguous f32 words (VulkanBackend::float_adam_step):
//   m' = β₁·m + (1 − β₁)·g,  v' = β₂·v + (1 − β₂)·g²,  p' = p − step·m' / (√v'·c + ε)
// with step = lr / correction_1 and c = 1 / √correction_2 computed on the host. The outputs
// may be the inputs' own buffers (in place: each element is read before it is written by the
// same thread), as in a captured step, whose replays rewrite `step` and `c` (graph.cpp).
#include "common.glsl"

layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer PO { float po[]; };
layout(std430, binding = 2) buffer MO { float mo[]; };
layout(std430, binding = 3) buffer VO { float vo[]; };
layout(std430, binding = 4) buffer PI { float pi[]; };
layout(std430, binding = 5) buffer GI { float gi[]; };
layout(std430, binding = 6) buffer MI { float mi[]; };
layout(std430, binding = 7) buffer VI { float vi[]; };

// Parameters: n, β₁, β₂, ε, step, c (floats as their bits).
void main() {
    uint i = global_id();
    if (i >= uint(p[0])) return;
    float b1 = intBitsToFloat(p[1]), b2 = intBitsToFloat(p[2]), eps = intBitsToFloat(p[3]);
    float step = intBitsToFloat(p[4]), c = intBitsToFloat(p[5]);
    float g = gi[i];
    precise float mk = b1 * mi[i] + (1.0 - b1) * g;
    precise float vk = b2 * vi[i] + (1.0 - b2) * g * g;
    precise float denom = sqrt(vk) * c + eps;
    precise float pk = pi[i] - step * mk / denom;
    po[i] = pk;
    mo[i] = mk;
    vo[i] = vk;
}
