#version 450
// Indexed reads and writes along one dim (indices are int64, checked in range on the host's
// request before the launch):
//   MODE 0 gather:      out[c] = t[c with c[dim] = idx[c]]   (select is gather with an index
//                        view that varies along dim only)
//   MODE 1 scatter-add: one thread per line (all coordinates but dim); it walks the line in
//                        order, so repeated indices add up deterministically without atomics
//                        (select_assign is scatter-add with a broadcast index view).
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int MODE = 0;
layout(constant_id = 2) const int CT = 0;  // class of the data

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer Out { uint o[]; };
layout(std430, binding = 2) readonly buffer T { uint t[]; };
layout(std430, binding = 3) readonly buffer Idx { uint ix[]; };

// Parameters: n, rank, shape[8], out (strides[8], offset), t (strides[8], offset),
// idx (strides[8], offset), dim, L (line length, scatter), out/t stride along dim.
const int P_SHAPE = 2, P_OUT = 10, P_T = 19, P_I = 28, P_DIM = 37, P_L = 38, P_SD = 39;

void main() {
    uint li = global_id();
    if (li >= uint(p[0])) return;
    int rank = p[1];
    int oo = p[P_OUT + 8], ot = p[P_T + 8], oi = p[P_I + 8];
    uint rem = li;
    for (int d = rank - 1; d >= 0; --d) {
        uint s = uint(p[P_SHAPE + d]);
        int c = int(rem % s);
        rem /= s;
        oo += c * p[P_OUT + d];
        ot += c * p[P_T + d];
        oi += c * p[P_I + d];
    }
    int sd = p[P_SD];
    if (MODE == 0) {
        int src = ot + int(LOAD_I(ix, oi)) * sd;
        if (CT == CLASS_I64) {
            o[2 * oo] = t[2 * src];
            o[2 * oo + 1] = t[2 * src + 1];
        } else {
            o[oo] = t[src];
        }
        return;
    }
    // Scatter-add along the line: out and values (bound as t) and indices step along dim.
    int dim = p[P_DIM];
    int L = p[P_L];
    int os = p[P_OUT + dim], ts = p[P_T + dim], is_ = p[P_I + dim];
    for (int r = 0; r < L; ++r) {
        int dst = oo + int(LOAD_I(ix, oi + r * is_)) * sd;
        int src = ot + r * ts;
        if (CT == CLASS_F32) {
            STORE_F(o, dst, LOAD_F(o, dst) + LOAD_F(t, src));
        } else if (CT == CLASS_I64) {
            STORE_I(o, dst, LOAD_I(o, dst) + LOAD_I(t, src));
        } else {
            o[dst] = (o[dst] != 0u || t[src] != 0u) ? 1u : 0u;
        }
    }
}
