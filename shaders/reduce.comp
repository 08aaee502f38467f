#version 450
// Reductions along one dim of a strided tensor: one workgroup per output element; each thread
// folds a strided subset of the row, then a shared-memory tree folds the threads' results.
// Arg reductions keep the first extreme (lowest index), NaN winning as in PyTorch.
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int OP = 0;  // Sum, Mean, Prod, Max, Min, Any, All, ArgMax, ArgMin
layout(constant_id = 2) const int CI = 0;  // input class
layout(constant_id = 3) const int CO = 0;  // output class

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer Out { uint o[]; };
layout(std430, binding = 2) readonly buffer In { uint x[]; };

// Parameters: n_out, rank, shape[8] (the input's, reduced dim set to 1), in strides[8],
// in offset, R (reduced length), reduced stride, parts, chunk. With parts > 1 each row is
// split into `parts` chunks of `chunk` elements, one workgroup each (output [rows, parts]):
// long rows use many workgroups, and a second pass folds the partial results.
const int P_SHAPE = 2, P_STR = 10, P_OFF = 18, P_R = 19, P_RS = 20, P_PARTS = 21, P_CHUNK = 22;
const int WG = 64;

shared float sf[WG];
shared int64_t si[WG];
shared uint sx[WG];

const bool ARG = OP >= 7;
const bool IS_MAX = OP == 3 || OP == 7;

// Does (v, i) beat (w, j) for an arg/extreme reduction? NaN first, then the extreme, then the
// lower index.
bool beats_f(float v, uint i, float w, uint j) {
    bool nv = isnan(v), nw = isnan(w);
    if (nv || nw) return nv && (!nw || i < j);
    if (v == w) return i < j;
    return IS_MAX ? v > w : v < w;
}
bool beats_i(int64_t v, uint i, int64_t w, uint j) {
    if (v == w) return i < j;
    return IS_MAX ? v > w : v < w;
}

void main() {
    uint g = group_id();
    uint n_out = uint(p[0]);
    if (g >= n_out) return;
    uint tid = gl_LocalInvocationID.x;
    int rank = p[1];
    int base = p[P_OFF];
    uint parts = uint(p[P_PARTS]), chunk = uint(p[P_CHUNK]);
    uint part = g % parts;
    uint rem = g / parts;
    for (int d = rank - 1; d >= 0; --d) {
        uint s = uint(p[P_SHAPE + d]);
        base += int(rem % s) * p[P_STR + d];
        rem /= s;
    }
    uint R = uint(p[P_R]);
    int rs = p[P_RS];
    uint r0 = part * chunk, r1 = min(R, r0 + chunk);

    float af = (OP == 2) ? 1.0 : 0.0;
    int64_t ai = (OP == 2 || OP == 6) ? 1l : 0l;
    uint ax = 0xffffffffu;
    bool first = true;
    for (uint r = r0 + tid; r < r1; r += WG) {
        int at = base + int(r) * rs;
        if (CI == CLASS_F32) {
            float v = LOAD_F(x, at);
            if (OP == 0 || OP == 1) af += v;
            else if (OP == 2) af *= v;
            else if (OP == 5) ai = (ai != 0l || v != 0.0) ? 1l : 0l;
            else if (OP == 6) ai = (ai != 0l && v != 0.0) ? 1l : 0l;
            else if (first || beats_f(v, r, af, ax)) {
                af = v;
                ax = r;
            }
        } else {
            int64_t v = CI == CLASS_I64 ? LOAD_I(x, at) : int64_t(x[at]);
            if (OP == 0 || OP == 1) ai += v;
            else if (OP == 2) ai *= v;
            else if (OP == 5) ai = (ai != 0l || v != 0l) ? 1l : 0l;
            else if (OP == 6) ai = (ai != 0l && v != 0l) ? 1l : 0l;
            else if (first || beats_i(v, r, ai, ax)) {
                ai = v;
                ax = r;
            }
        }
        first = false;
    }
    sf[tid] = af;
    si[tid] = ai;
    sx[tid] = ax;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (tid < s) {
            uint u = tid + s;
            if (OP >= 3 && OP <= 4 || ARG) {
                // An empty thread (index ~0) never beats a filled one.
                if (sx[u] != 0xffffffffu) {
                    bool take = sx[tid] == 0xffffffffu ||
                                (CI == CLASS_F32 ? beats_f(sf[u], sx[u], sf[tid], sx[tid])
                                                 : beats_i(si[u], sx[u], si[tid], sx[tid]));
                    if (take) {
                        sf[tid] = sf[u];
                        si[tid] = si[u];
                        sx[tid] = sx[u];
                    }
                }
            } else if (OP == 0 || OP == 1) {
                sf[tid] += sf[u];
                si[tid] += si[u];
            } else if (OP == 2) {
                sf[tid] *= sf[u];
                si[tid] *= si[u];
            } else if (OP == 5) {
                si[tid] = (si[tid] != 0l || si[u] != 0l) ? 1l : 0l;
            } else {
                si[tid] = (si[tid] != 0l && si[u] != 0l) ? 1l : 0l;
            }
        }
        barrier();
    }
    if (tid != 0) return;
    if (ARG) {
        STORE_I(o, g, int64_t(sx[0] == 0xffffffffu ? 0u : sx[0]));
        return;
    }
    if (CO == CLASS_BOOL) {
        STORE_B(o, g, si[0] != 0l);
    } else if (CO == CLASS_F32) {
        float r = CI == CLASS_F32 ? sf[0] : float(si[0]);
        if (OP == 1) r /= float(R);
        STORE_F(o, g, r);
    } else {
        STORE_I(o, g, si[0]);
    }
}
