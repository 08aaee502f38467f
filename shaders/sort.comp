#version 450
// Sort along one dim with indices: a bitonic network over (key, original index) pairs, which
// makes it stable (ties keep their order) as PyTorch's stable sort; NaN sorts as the largest
// value. Rows up to 1024 sort in shared memory, one workgroup per row (MODE 0); longer rows
// sort in a global scratch buffer: MODE 2 loads (padding with sentinels), MODE 1 runs one
// (k, j) stage of the network per dispatch, MODE 3 writes the results.
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int MODE = 0;
layout(constant_id = 2) const int CT = 0;  // key class (F32 or I64; bools come as I64)

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer OutV { uint ov[]; };
layout(std430, binding = 2) buffer OutI { uint oi[]; };
layout(std430, binding = 3) readonly buffer In { uint x[]; };
layout(std430, binding = 4) buffer ScratchK { uint sk[]; };
layout(std430, binding = 5) buffer ScratchI { uint si_[]; };

// Parameters: rows, rank, shape[8] (dim set to 1), in strides[8], in offset, L, in dim
// stride, P (L padded to a power of two), descending, k, j, out dim stride (contiguous out).
const int P_SHAPE = 2, P_STR = 10, P_OFF = 18, P_L = 19, P_DS = 20, P_P = 21, P_DESC = 22,
          P_K = 23, P_J = 24;
const uint SENTINEL = 0xffffffffu;
const int SH = 1024;

shared float kf[SH];
shared int64_t kl[SH];
shared uint kx[SH];

// Input offset of `row` (rows enumerate the input's shape with dim set to 1).
void row_bases(uint row, out int in_base, out uint unused) {
    int rank = p[1];
    in_base = p[P_OFF];
    unused = 0u;
    uint rem = row;
    for (int d = rank - 1; d >= 0; --d) {
        uint s = uint(p[P_SHAPE + d]);
        uint c = rem % s;
        rem /= s;
        in_base += int(c) * p[P_STR + d];
    }
}

// Does (va, ia) come before (vb, ib)?
bool before_f(float va, uint ia, float vb, uint ib, bool desc) {
    if (ia == SENTINEL) return false;
    if (ib == SENTINEL) return true;
    bool na = isnan(va), nb = isnan(vb);
    if (na || nb) {
        if (na && nb) return ia < ib;
        return desc ? na : nb;  // NaN is the largest value
    }
    if (va == vb) return ia < ib;
    return desc ? va > vb : va < vb;
}
bool before_i(int64_t va, uint ia, int64_t vb, uint ib, bool desc) {
    if (ia == SENTINEL) return false;
    if (ib == SENTINEL) return true;
    if (va == vb) return ia < ib;
    return desc ? va > vb : va < vb;
}

int64_t load_key_i(int at) { return CT == CLASS_I64 ? LOAD_I(x, at) : int64_t(x[at]); }

void main() {
    bool desc = p[P_DESC] != 0;
    uint L = uint(p[P_L]);
    uint P = uint(p[P_P]);
    int ds = p[P_DS];
    if (MODE == 0) {
        uint row = group_id();
        if (row >= uint(p[0])) return;
        int in_base;
        uint ob;
        row_bases(row, in_base, ob);
        uint tid = gl_LocalInvocationID.x, wg = WG_SIZE;
        for (uint i = tid; i < P; i += wg) {
            if (i < L) {
                int at = in_base + int(i) * ds;
                if (CT == CLASS_F32) kf[i] = LOAD_F(x, at);
                else kl[i] = load_key_i(at);
                kx[i] = i;
            } else {
                kx[i] = SENTINEL;
            }
        }
        barrier();
        for (uint k = 2u; k <= P; k <<= 1) {
            for (uint j = k >> 1; j > 0u; j >>= 1) {
                for (uint i = tid; i < P; i += wg) {
                    uint l = i ^ j;
                    if (l > i) {
                        bool up = (i & k) == 0u;
                        bool sw = CT == CLASS_F32
                                      ? (up ? before_f(kf[l], kx[l], kf[i], kx[i], desc)
                                            : before_f(kf[i], kx[i], kf[l], kx[l], desc))
                                      : (up ? before_i(kl[l], kx[l], kl[i], kx[i], desc)
                                            : before_i(kl[i], kx[i], kl[l], kx[l], desc));
                        if (sw) {
                            float tf = kf[i]; kf[i] = kf[l]; kf[l] = tf;
                            int64_t tl = kl[i]; kl[i] = kl[l]; kl[l] = tl;
                            uint tx = kx[i]; kx[i] = kx[l]; kx[l] = tx;
                        }
                    }
                }
                barrier();
            }
        }
        for (uint i = tid; i < L; i += wg) {
            uint o = row * L + i;  // rows are laid out [outer..., L] by the host (see sort.cpp)
            if (CT == CLASS_F32) STORE_F(ov, o, kf[i]);
            else STORE_I(ov, o, kl[i]);
            STORE_I(oi, o, int64_t(kx[i]));
        }
        return;
    }
    uint gi = global_id();
    uint rows = uint(p[0]);
    if (gi >= rows * P) return;
    uint row = gi / P, i = gi % P;
    uint s = row * P + i;
    if (MODE == 2) {
        if (i < L) {
            int in_base;
            uint ob;
            row_bases(row, in_base, ob);
            int at = in_base + int(i) * ds;
            if (CT == CLASS_F32) sk[2 * s] = x[at];
            else STORE_I(sk, s, load_key_i(at));
            si_[s] = i;
        } else {
            si_[s] = SENTINEL;
        }
    } else if (MODE == 1) {
        uint k = uint(p[P_K]), j = uint(p[P_J]);
        uint l = i ^ j;
        if (l <= i) return;
        uint t = row * P + l;
        bool up = (i & k) == 0u;
        bool sw;
        if (CT == CLASS_F32) {
            float a = uintBitsToFloat(sk[2 * s]), b = uintBitsToFloat(sk[2 * t]);
            sw = up ? before_f(b, si_[t], a, si_[s], desc) : before_f(a, si_[s], b, si_[t], desc);
        } else {
            int64_t a = LOAD_I(sk, s), b = LOAD_I(sk, t);
            sw = up ? before_i(b, si_[t], a, si_[s], desc) : before_i(a, si_[s], b, si_[t], desc);
        }
        if (sw) {
            uint a0 = sk[2 * s], a1 = sk[2 * s + 1];
            sk[2 * s] = sk[2 * t];
            sk[2 * s + 1] = sk[2 * t + 1];
            sk[2 * t] = a0;
            sk[2 * t + 1] = a1;
            uint ti = si_[s];
            si_[s] = si_[t];
            si_[t] = ti;
        }
    } else {
        if (i >= L) return;
        uint o = row * L + i;
        if (CT == CLASS_F32) ov[o] = sk[2 * s];
        else STORE_I(ov, o, LOAD_I(sk, s));
        STORE_I(oi, o, int64_t(si_[s]));
    }
}
