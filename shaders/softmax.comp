#version 450
// Softmax and log-softmax along one dim, one workgroup per row: the maximum, then the sum of
// exp(x - max), then the result. The composed form (max, sub, exp, sum, div kernels) reads and
// writes the tensor five times; this reads it once and writes it once where it can:
//  - rows along a contiguous dim of up to 4096 elements, a multiple of 4 long, are loaded as
//    16-byte words into registers and stay there between the three steps;
//  - any other row (strided, odd-sized or longer) is read three times, element by element.
// The reductions run within each subgroup first (subgroupMax/subgroupAdd), then across the
// subgroups' partial results in shared memory.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int LOG = 0;  // 1: log-softmax

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer Out { uint o[]; };
layout(std430, binding = 2) readonly buffer In { uint x[]; };
layout(std430, binding = 1) buffer Out4 { uvec4 o4[]; };  // the same buffers, 16 bytes at a
layout(std430, binding = 2) readonly buffer In4 { uvec4 x4[]; };  // time

// Parameters: rows, rank, shape[8] (dim set to 1), in strides[8], in offset, R, in dim stride,
// out dim stride, out strides[8] (contiguous, dim's entry unused).
const int P_SHAPE = 2, P_STR = 10, P_OFF = 18, P_R = 19, P_RS = 20, P_OS = 21, P_OSTR = 22;
const int WG = 256;
const int VC = 4;  // 16-byte words a thread keeps in registers: rows of up to 4 * 4 * WG
shared float part[WG];  // one partial result per subgroup

#define NEG_INF uintBitsToFloat(0xff800000u)
#define QNAN uintBitsToFloat(0x7fc00000u)

// The maximum over the workgroup; NaN if any thread holds NaN (subgroupMax need not
// propagate it).
float wg_max(float v) {
    bool nan = subgroupAny(isnan(v));
    float s = nan ? QNAN : subgroupMax(v);
    if (subgroupElect()) part[gl_SubgroupID] = s;
    barrier();
    float m = part[0];
    for (uint i = 1; i < gl_NumSubgroups; ++i) m = nan_max(m, part[i]);
    barrier();  // part[] is reused by the next reduction
    return m;
}

float wg_sum(float v) {
    float s = subgroupAdd(v);
    if (subgroupElect()) part[gl_SubgroupID] = s;
    barrier();
    float t = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; ++i) t += part[i];
    barrier();
    return t;
}

float max4(vec4 v) { return nan_max(nan_max(v.x, v.y), nan_max(v.z, v.w)); }

void main() {
    uint row = group_id();
    if (row >= uint(p[0])) return;
    int tid = int(gl_LocalInvocationID.x);
    int rank = p[1];
    int ib = p[P_OFF], ob = 0;
    uint rem = row;
    for (int d = rank - 1; d >= 0; --d) {
        uint s = uint(p[P_SHAPE + d]);
        int c = int(rem % s);
        rem /= s;
        ib += c * p[P_STR + d];
        ob += c * p[P_OSTR + d];
    }
    int R = p[P_R], rs = p[P_RS], os = p[P_OS];
    if (rs == 1 && os == 1 && R % 4 == 0 && R <= 4 * VC * WG && ib % 4 == 0 && ob % 4 == 0) {
        int R4 = R / 4, ib4 = ib / 4, ob4 = ob / 4;
        vec4 v[VC];
        float m = NEG_INF;
        [[unroll]] for (int i = 0; i < VC; ++i) {
            int q = tid + i * WG;
            v[i] = q < R4 ? uintBitsToFloat(x4[ib4 + q]) : vec4(0.0);
            if (q < R4) m = nan_max(m, max4(v[i]));
        }
        m = wg_max(m);
        float acc = 0.0;
        [[unroll]] for (int i = 0; i < VC; ++i) {
            if (tid + i * WG < R4) {
                vec4 e = exp(v[i] - m);
                acc += (e.x + e.y) + (e.z + e.w);
            }
        }
        float sum = wg_sum(acc);
        float lse = log(sum);
        [[unroll]] for (int i = 0; i < VC; ++i) {
            int q = tid + i * WG;
            if (q < R4) {
                vec4 d = v[i] - m;
                o4[ob4 + q] = floatBitsToUint(LOG == 1 ? d - lse : exp(d) / sum);
            }
        }
        return;
    }
    float m = NEG_INF;
    for (int r = tid; r < R; r += WG) m = nan_max(m, LOAD_F(x, ib + r * rs));
    m = wg_max(m);
    float acc = 0.0;
    for (int r = tid; r < R; r += WG) acc += exp(LOAD_F(x, ib + r * rs) - m);
    float sum = wg_sum(acc);
    float lse = log(sum);
    for (int r = tid; r < R; r += WG) {
        float d = LOAD_F(x, ib + r * rs) - m;
        STORE_F(o, ob + r * os, LOG == 1 ? d - lse : exp(d) / sum);
    }
}
