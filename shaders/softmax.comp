#version 450
// Softmax and log-softmax along one dim in one pass over memory per row: one workgroup per
// row folds the maximum, then the sum of exp(x - max) (shared-memory trees), then writes the
// result, keeping the row in registers in between; the composed form (max, sub, exp, sum, div kernels) reads and writes the tensor five
// times. Strided input, contiguous output of the same shape.
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int LOG = 0;  // 1: log-softmax

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer Out { uint o[]; };
layout(std430, binding = 2) readonly buffer In { uint x[]; };

// Parameters: rows, rank, shape[8] (dim set to 1), in strides[8], in offset, R, in dim stride,
// out dim stride, out strides[8] (contiguous, dim's entry unused).
const int P_SHAPE = 2, P_STR = 10, P_OFF = 18, P_R = 19, P_RS = 20, P_OS = 21, P_OSTR = 22;
const int WG = 256;
const int CACHE = 16;  // elements a thread keeps in registers: rows up to 4096 read once
shared float red[WG];

void main() {
    uint row = group_id();
    if (row >= uint(p[0])) return;
    uint tid = gl_LocalInvocationID.x;
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
    // The first WG * CACHE elements of the row stay in registers between the three steps, so
    // that rows up to that length are read from memory once; longer rows re-read the rest.
    float v[CACHE];
    float m = uintBitsToFloat(0xff800000u);  // -inf; the maximum (NaN propagates)
    for (int i = 0; i < CACHE; ++i) {
        int r = int(tid) + i * WG;
        v[i] = r < R ? LOAD_F(x, ib + r * rs) : 0.0;
        if (r < R) m = nan_max(m, v[i]);
    }
    for (int r = int(tid) + CACHE * WG; r < R; r += WG) m = nan_max(m, LOAD_F(x, ib + r * rs));
    red[tid] = m;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (tid < s) red[tid] = nan_max(red[tid], red[tid + s]);
        barrier();
    }
    m = red[0];
    barrier();
    // Sum of exp(x - max).
    float acc = 0.0;
    for (int i = 0; i < CACHE; ++i)
        if (int(tid) + i * WG < R) acc += exp(v[i] - m);
    for (int r = int(tid) + CACHE * WG; r < R; r += WG) acc += exp(LOAD_F(x, ib + r * rs) - m);
    red[tid] = acc;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        barrier();
    }
    float sum = red[0];
    float lse = log(sum);
    for (int i = 0; i < CACHE; ++i) {
        int r = int(tid) + i * WG;
        if (r < R) STORE_F(o, ob + r * os, LOG == 1 ? v[i] - m - lse : exp(v[i] - m) / sum);
    }
    for (int r = int(tid) + CACHE * WG; r < R; r += WG) {
        float e = LOAD_F(x, ib + r * rs) - m;
        STORE_F(o, ob + r * os, LOG == 1 ? e - lse : exp(e) / sum);
    }
}
