#version 450
// argwhere: the coordinates of non-zero elements in row-major order. One workgroup walks the
// tensor in chunks of its size; a shared-memory scan of each chunk's flags gives every hit
// its output row.
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int CT = 0;  // class of the input

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer Coords { uint co[]; };
layout(std430, binding = 2) buffer Count { uint cnt[]; };
layout(std430, binding = 3) readonly buffer In { uint x[]; };

// Parameters: n, rank, shape[8], offset.
const int P_SHAPE = 2, P_OFF = 10;
shared uint scan[1024];

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint wg = WG_SIZE;
    uint n = uint(p[0]);
    int rank = p[1];
    int off = p[P_OFF];
    uint base = 0;
    for (uint start = 0; start < n; start += wg) {
        uint i = start + tid;
        uint flag = 0;
        if (i < n) {
            int at = off + int(i);
            if (CT == CLASS_F32) flag = LOAD_F(x, at) != 0.0 ? 1u : 0u;
            else if (CT == CLASS_I64) flag = LOAD_I(x, at) != 0l ? 1u : 0u;
            else flag = x[at] != 0u ? 1u : 0u;
        }
        scan[tid] = flag;
        barrier();
        // Hillis-Steele inclusive scan.
        for (uint s = 1; s < wg; s <<= 1) {
            uint v = tid >= s ? scan[tid - s] : 0u;
            barrier();
            scan[tid] += v;
            barrier();
        }
        if (flag == 1u) {
            uint row = base + scan[tid] - 1u;
            uint rem = i;
            for (int d = rank - 1; d >= 0; --d) {
                uint s = uint(p[P_SHAPE + d]);
                uint c = rem % s;
                rem /= s;
                uint w = 2u * (row * uint(rank) + uint(d));
                co[w] = c;
                co[w + 1u] = 0u;
            }
        }
        base += scan[wg - 1u];
        barrier();
    }
    if (tid == 0) {
        cnt[0] = base;
        cnt[1] = 0u;
    }
}
