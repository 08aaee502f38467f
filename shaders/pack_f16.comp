#version 450
// Packs a (batched, strided) operand of the f16 matmul into f16 pairs for matmul_coop.comp:
// ember stores f16 tensors as f32 words holding f16-rounded values, so the cooperative-matrix
// kernel reading them directly moves twice the bytes it multiplies. Out is contiguous
// [batch][R][CP] halves, two a word, CP = C rounded up to 8 and the columns past C zero, so
// that the matmul reads any row in 16-byte words. Each thread writes eight halves of a row.
// With BF16 the operand is a bf16 tensor (f32 words holding bf16-rounded values) and each half
// is the word's upper 16 bits, exactly.
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int BF16 = 0;

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) writeonly buffer Out { uvec4 o[]; };
layout(std430, binding = 2) readonly buffer In { float x[]; };

// Parameters: R, C, batch, batch rank, batch shape[6], batch strides[6], offset, row stride,
// column stride.
const int P_BR = 3, P_BS = 4, P_BST = 10, P_OFF = 16, P_RS = 17, P_CS = 18;

void main() {
    int R = p[0], C = p[1];
    uint batch = uint(p[2]);
    int cp8 = (C + 7) / 8;  // 16-byte words a row
    uint i = global_id();
    if (i >= batch * uint(R) * uint(cp8)) return;
    uint bi = i / (uint(R) * uint(cp8));
    int rem = int(i % (uint(R) * uint(cp8)));
    int r = rem / cp8, c0 = (rem % cp8) * 8;
    int off = p[P_OFF];
    uint b = bi;
    for (int d = p[P_BR] - 1; d >= 0; --d) {
        uint s = uint(p[P_BS + d]);
        off += int(b % s) * p[P_BST + d];
        b /= s;
    }
    int rs = p[P_RS], cs = p[P_CS];
    float v[8];
    for (int j = 0; j < 8; ++j) v[j] = c0 + j < C ? x[off + r * rs + (c0 + j) * cs] : 0.0;
    uvec4 w;
    for (int j = 0; j < 4; ++j)
        w[j] = BF16 != 0 ? (floatBitsToUint(v[2 * j]) >> 16) |
                               (floatBitsToUint(v[2 * j + 1]) & 0xffff0000u)
                         : packHalf2x16(vec2(v[2 * j], v[2 * j + 1]));
    o[i] = w;
}
