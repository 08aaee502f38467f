#version 450
// Layer norm over contiguous rows, one workgroup a row: the mean, the centered mean of squares,
// then (x - mean) * rstd * gamma + beta, with the row's mean and rstd written for the backward
// pass. Rows of up to 4096 elements, a multiple of 4 long and 16-byte aligned, are loaded as
// 16-byte words into registers and stay there between the three steps (one read, one write);
// other rows are read three times, element by element. Sums run within each subgroup first,
// then across the subgroups' partial sums in shared memory.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int AFFINE = 0;  // bit 0: gamma, bit 1: beta

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer Out { uint o[]; };
layout(std430, binding = 2) buffer Mean { uint mo[]; };
layout(std430, binding = 3) buffer Rstd { uint ro[]; };
layout(std430, binding = 4) readonly buffer In { uint x[]; };
layout(std430, binding = 5) readonly buffer Gamma { uint g[]; };
layout(std430, binding = 6) readonly buffer Beta { uint b[]; };
// The same buffers, 16 bytes at a time.
layout(std430, binding = 1) buffer Out4 { uvec4 o4[]; };
layout(std430, binding = 4) readonly buffer In4 { uvec4 x4[]; };
layout(std430, binding = 5) readonly buffer Gamma4 { uvec4 g4[]; };
layout(std430, binding = 6) readonly buffer Beta4 { uvec4 b4[]; };

// Parameters: rows, R (row length), x offset, gamma offset, beta offset, eps (float bits).
const int WG = 256;
const int VC = 4;  // 16-byte words a thread keeps in registers: rows of up to 4 * 4 * WG
shared float part[WG];  // one partial sum per subgroup

float wg_sum(float v) {
    float s = subgroupAdd(v);
    if (subgroupElect()) part[gl_SubgroupID] = s;
    barrier();
    float t = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; ++i) t += part[i];
    barrier();  // part[] is reused by the next sum
    return t;
}

void main() {
    uint row = group_id();
    if (row >= uint(p[0])) return;
    int tid = int(gl_LocalInvocationID.x);
    int R = p[1], xo = p[2], go = p[3], bo = p[4];
    float eps = intBitsToFloat(p[5]);
    int ib = xo + int(row) * R, ob = int(row) * R;
    float n = float(R);
    bool has_g = (AFFINE & 1) != 0, has_b = (AFFINE & 2) != 0;
    if (R % 4 == 0 && R <= 4 * VC * WG && xo % 4 == 0 && go % 4 == 0 && bo % 4 == 0) {
        int R4 = R / 4, ib4 = ib / 4, ob4 = ob / 4;
        vec4 v[VC];
        float s = 0.0;
        [[unroll]] for (int i = 0; i < VC; ++i) {
            int q = tid + i * WG;
            v[i] = q < R4 ? uintBitsToFloat(x4[ib4 + q]) : vec4(0.0);
            s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
        }
        float m = wg_sum(s) / n;
        float acc = 0.0;
        [[unroll]] for (int i = 0; i < VC; ++i) {
            if (tid + i * WG < R4) {
                vec4 d = v[i] - m;
                acc += dot(d, d);
            }
        }
        float r = inversesqrt(wg_sum(acc) / n + eps);
        if (tid == 0) {
            STORE_F(mo, int(row), m);
            STORE_F(ro, int(row), r);
        }
        [[unroll]] for (int i = 0; i < VC; ++i) {
            int q = tid + i * WG;
            if (q < R4) {
                vec4 y = (v[i] - m) * r;
                if (has_g) y *= uintBitsToFloat(g4[go / 4 + q]);
                if (has_b) y += uintBitsToFloat(b4[bo / 4 + q]);
                o4[ob4 + q] = floatBitsToUint(y);
            }
        }
        return;
    }
    float s = 0.0;
    for (int j = tid; j < R; j += WG) s += LOAD_F(x, ib + j);
    float m = wg_sum(s) / n;
    float acc = 0.0;
    for (int j = tid; j < R; j += WG) {
        float d = LOAD_F(x, ib + j) - m;
        acc += d * d;
    }
    float r = inversesqrt(wg_sum(acc) / n + eps);
    if (tid == 0) {
        STORE_F(mo, int(row), m);
        STORE_F(ro, int(row), r);
    }
    for (int j = tid; j < R; j += WG) {
        float y = (LOAD_F(x, ib + j) - m) * r;
        if (has_g) y *= LOAD_F(g, go + j);
        if (has_b) y += LOAD_F(b, bo + j);
        STORE_F(o, ob + j, y);
    }
}
