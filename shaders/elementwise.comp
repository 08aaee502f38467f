#version 450
// Every elementwise op of the backend in one strided, broadcasting kernel; the op family, op
// code and operand classes are specialization constants, so each variant compiles to only
// its own arithmetic. Output and inputs are strided views (rank <= 8): slices, permutes,
// broadcasts (stride 0) and flips (negative strides) are read and written in place, and
// copies (contiguous(), slice_assign, cat) are the COPY family with a strided output.
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int KIND = 0;   // see the K_* list
layout(constant_id = 2) const int OP = 0;     // UnaryOp / BinaryOp / CompareOp / distribution
layout(constant_id = 3) const int CA = 0;     // class of input a (CLASS_*)
layout(constant_id = 4) const int CB = 0;     // class of input b
layout(constant_id = 5) const int CC = 0;     // class of input c
layout(constant_id = 6) const int CO = 0;     // class of the output
layout(constant_id = 7) const int CONV = 0;   // output rounding: 1 f16, 2 bf16, 3 i32, 4 i16, 5 i8, 6 u8
layout(constant_id = 8) const int FLAT = 0;   // 1: every operand contiguous, same shape

#define K_UNARY 0
#define K_BINARY 1
#define K_BINARY_SCALAR 2
#define K_COMPARE 3
#define K_COMPARE_SCALAR 4
#define K_WHERE 5
#define K_MASK_FILL 6
#define K_CLAMP 7
#define K_COPY 8
#define K_FILL 9
#define K_ARANGE 10
#define K_RANDOM 11

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer Out { uint o[]; };
layout(std430, binding = 2) readonly buffer InA { uint a[]; };
layout(std430, binding = 3) readonly buffer InB { uint b[]; };
layout(std430, binding = 4) readonly buffer InC { uint c[]; };

// Parameter layout: n, rank, shape[8], then (strides[8], offset) for out, a, b, c, then the
// scalars: two floats and two int64.
const int P_SHAPE = 2, P_OUT = 10, P_A = 19, P_B = 28, P_C = 37, P_SF = 46, P_SI = 48;

Val load(int cls, uint idx, int which) {
    if (which == 0) {
        if (cls == CLASS_F32) return val_f(LOAD_F(a, idx));
        if (cls == CLASS_I64) return val_i(LOAD_I(a, idx));
        return val_b(LOAD_B(a, idx));
    } else if (which == 1) {
        if (cls == CLASS_F32) return val_f(LOAD_F(b, idx));
        if (cls == CLASS_I64) return val_i(LOAD_I(b, idx));
        return val_b(LOAD_B(b, idx));
    }
    if (cls == CLASS_F32) return val_f(LOAD_F(c, idx));
    if (cls == CLASS_I64) return val_i(LOAD_I(c, idx));
    return val_b(LOAD_B(c, idx));
}

Val scalar(int k) {
    return Val(intBitsToFloat(p[P_SF + k]), join64(uint(p[P_SI + 2 * k]), uint(p[P_SI + 2 * k + 1])));
}

Val unary(Val x) {
    if (CA == CLASS_BOOL) return val_b(x.i == 0l);  // Not
    if (CA == CLASS_I64) {
        int64_t v = x.i;
        if (OP == 0) return val_i(-v);
        if (OP == 1) return val_i(v < 0l ? -v : v);
        if (OP == 14) return val_i(v > 0l ? 1l : (v < 0l ? -1l : 0l));
        if (OP == 16) return val_i(v > 0l ? v : 0l);
        if (OP == 19) return val_i(~v);  // Not: bitwise on ints
        return val_i(v);
    }
    float v = x.f;
    float r = v;
    switch (OP) {
        case 0: r = -v; break;
        case 1: r = abs(v); break;
        case 2: r = exp(v); break;
        case 3: r = log(v); break;
        case 4: r = log1p_f(v); break;
        case 5: r = sqrt(v); break;
        case 6: r = sin(v); break;
        case 7: r = cos(v); break;
        case 8: r = tanh_f(v); break;
        case 9: r = erf_f(v); break;
        case 10: r = 1.0 / v; break;
        case 11: r = floor(v); break;
        case 12: r = ceil(v); break;
        case 13: r = roundEven(v); break;
        case 14: r = sign_f(v); break;
        case 15: {
            if (v >= 0.0) {
                r = 1.0 / (1.0 + exp(-v));
            } else {
                float e = exp(v);
                r = e / (1.0 + e);
            }
            break;
        }
        case 16: r = v > 0.0 ? v : (isnan(v) ? v : 0.0); break;
        case 17: r = v * 0.5 * (1.0 + erf_f(v * 0.70710678118654752)); break;
        case 18: return val_b(isnan(v));
    }
    return val_f(r);
}

Val binary(Val x, Val y) {
    int op = OP;
    if (op >= 11 && op <= 14) {  // RSub, RDiv, RPow, RRem: the scalar on the left
        Val t = x;
        x = y;
        y = t;
        op = op == 11 ? 1 : (op == 12 ? 3 : (op == 13 ? 5 : 4));
    }
    if (CA == CLASS_BOOL) {
        bool u = x.i != 0l, w = y.i != 0l;
        if (op == 8 || op == 2 || op == 7) return val_b(u && w);  // And, Mul, Min
        if (op == 10) return val_b(u != w);                         // Xor
        return val_b(u || w);                                       // Or, Add, Max
    }
    if (CA == CLASS_I64) {
        int64_t u = x.i, w = y.i;
        switch (op) {
            case 0: return val_i(u + w);
            case 1: return val_i(u - w);
            case 2: return val_i(u * w);
            case 3: return val_i(floor_div_i(u, w));
            case 4: return val_i(py_rem_i(u, w));
            case 5: return val_i(pow_i(u, w));
            case 6: return val_i(u > w ? u : w);
            case 7: return val_i(u < w ? u : w);
            case 8: return val_i(u & w);
            case 9: return val_i(u | w);
            case 10: return val_i(u ^ w);
            case 15: return val_i(shl_i(u, w));
            case 16: return val_i(shr_i(u, w));
        }
        return val_i(u);
    }
    float u = x.f, w = y.f;
    switch (op) {
        case 0: return val_f(u + w);
        case 1: return val_f(u - w);
        case 2: return val_f(u * w);
        case 3: return val_f(u / w);
        case 4: return val_f(py_rem_f(u, w));
        case 5: return val_f(pow_f(u, w));
        case 6: return val_f(nan_max(u, w));
        case 7: return val_f(nan_min(u, w));
    }
    return val_f(u);
}

bool compare(Val x, Val y) {
    if (CA == CLASS_F32) {
        float u = x.f, w = y.f;
        switch (OP) {
            case 0: return u == w;
            case 1: return u != w;
            case 2: return u > w;
            case 3: return u >= w;
            case 4: return u < w;
            case 5: return u <= w;
        }
    }
    int64_t u = x.i, w = y.i;
    switch (OP) {
        case 0: return u == w;
        case 1: return u != w;
        case 2: return u > w;
        case 3: return u >= w;
        case 4: return u < w;
    }
    return u <= w;
}

// Counter-based random numbers: a 64-bit seed and the element index through a
// SplitMix/murmur-style finaliser (stateless, so any thread draws any element).
uint hash32(uint x, uint k0, uint k1) {
    uint h = x * 0x9E3779B9u ^ k0;
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13 ^ k1;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    h ^= k1 * 0x27D4EB2Fu;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    return h;
}
float uniform01(uint idx, uint stream) {
    uint k0 = uint(p[P_SI]), k1 = uint(p[P_SI + 1]) ^ (stream * 0x632BE5ABu);
    return float(hash32(idx, k0, k1) >> 8) * (1.0 / 16777216.0);  // [0, 1), 24 bits
}

Val random_value(uint li) {
    float lo = intBitsToFloat(p[P_SF]), hi = intBitsToFloat(p[P_SF + 1]);
    if (OP == 0 || OP == 1) {  // Default / Uniform: lo + (hi - lo) * u
        float v = lo + (hi - lo) * uniform01(li, 0u);
        // Integers in [floor(lo), ceil(hi) - 1] even where f32 rounding reaches hi: the host
        // then knows their range (index checks against it need no readback).
        return CO == CLASS_I64 ? val_i(int64_t(max(floor(lo), min(floor(v), ceil(hi) - 1.0))))
                               : val_f(v);
    }
    if (OP == 2) {  // Normal (Box-Muller)
        float u1 = 1.0 - uniform01(li, 1u), u2 = uniform01(li, 2u);
        return val_f(lo + hi * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
    return val_b(uniform01(li, 3u) < lo);  // Bernoulli(p = lo)
}

int offset_of(int base, int co[8], int rank) {
    int off = p[base + 8];
    for (int d = 0; d < rank; ++d) off += co[d] * p[base + d];
    return off;
}

void main() {
    uint li = global_id();
    uint n = uint(p[0]);
    if (li >= n) return;
    int oo, oa, ob, oc;
    if (FLAT == 1) {
        oo = p[P_OUT + 8] + int(li);
        oa = p[P_A + 8] + int(li);
        ob = p[P_B + 8] + int(li);
        oc = p[P_C + 8] + int(li);
    } else {
        int rank = p[1];
        int co[8];
        uint rem = li;
        for (int d = 7; d >= 0; --d) {
            if (d >= rank) {
                co[d] = 0;
                continue;
            }
            uint s = uint(p[P_SHAPE + d]);
            co[d] = int(rem % s);
            rem /= s;
        }
        oo = offset_of(P_OUT, co, rank);
        oa = offset_of(P_A, co, rank);
        ob = offset_of(P_B, co, rank);
        oc = offset_of(P_C, co, rank);
    }
    Val r;
    if (KIND == K_UNARY) {
        r = unary(load(CA, oa, 0));
    } else if (KIND == K_BINARY) {
        r = binary(load(CA, oa, 0), load(CB, ob, 1));
    } else if (KIND == K_BINARY_SCALAR) {
        r = binary(load(CA, oa, 0), scalar(0));
    } else if (KIND == K_COMPARE) {
        r = val_b(compare(load(CA, oa, 0), load(CB, ob, 1)));
    } else if (KIND == K_COMPARE_SCALAR) {
        r = val_b(compare(load(CA, oa, 0), scalar(0)));
    } else if (KIND == K_WHERE) {
        r = load(CA, oa, 0).i != 0l ? load(CB, ob, 1) : load(CC, oc, 2);
    } else if (KIND == K_MASK_FILL) {
        r = load(CB, ob, 1).i != 0l ? scalar(0) : load(CA, oa, 0);
    } else if (KIND == K_CLAMP) {
        Val x = load(CA, oa, 0);
        Val lo = scalar(0), hi = scalar(1);
        if (CA == CLASS_F32)
            r = isnan(x.f) ? x : val_f(min(max(x.f, lo.f), hi.f));
        else
            r = val_i(min(max(x.i, lo.i), hi.i));
    } else if (KIND == K_COPY) {
        r = load(CA, oa, 0);
    } else if (KIND == K_FILL) {
        r = scalar(0);
    } else if (KIND == K_ARANGE) {
        r = val_i(scalar(0).i + int64_t(li) * scalar(1).i);
    } else {
        r = random_value(li);
    }
    if (CO == CLASS_F32) {
        float f = r.f;
        if (CONV == 1) f = round_f16(f);
        if (CONV == 2) f = round_bf16(f);
        STORE_F(o, oo, f);
    } else if (CO == CLASS_I64) {
        int64_t v = r.i;
        if (CONV == 3) v = int64_t(int(v));
        if (CONV == 4) v = int64_t((int(v) << 16) >> 16);
        if (CONV == 5) v = int64_t((int(v) << 24) >> 24);
        if (CONV == 6) v = int64_t(int(v) & 255);
        STORE_I(o, oo, v);
    } else {
        // A float cast to bool is "non-zero" (0.5 is true), not its truncation.
        STORE_B(o, oo, (KIND == K_COPY && CA == CLASS_F32) ? r.f != 0.0 : r.i != 0l);
    }
}
