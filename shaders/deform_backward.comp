#version 450
// Gradients of torchvision's deform_conv2d from the gradient of its columns gcol
// [N, C * K, P] (the weight's transpose times the output gradient, computed by matmul):
//   MODE 0: dL/dx — each column entry spreads into the four corners of its bilinear sample;
//           several entries share a corner, so adds are atomic (a compare-and-swap loop on the
//           f32 bits: no float-atomics extension needed).
//   MODE 1: dL/doffset and dL/dmask — one thread per (n, offset group, tap, position) sums over
//           the group's channels (no atomics).
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int MODE = 0;

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer Out { uint o[]; };     // dx (MODE 0) or doffset (MODE 1)
layout(std430, binding = 2) buffer Out2 { uint o2[]; };   // dmask (MODE 1)
layout(std430, binding = 3) readonly buffer X { uint x[]; };
layout(std430, binding = 4) readonly buffer Off { uint off[]; };
layout(std430, binding = 5) readonly buffer Mask { uint msk[]; };
layout(std430, binding = 6) readonly buffer GCol { uint gc[]; };

// Parameters as conv.comp: total, N, C, in[3], k[3], out[3], stride[3], pad[3], dil[3],
// x strides[5], x offset, (unused), (unused), has mask, offset offset, mask offset, offset groups.
const int P_N = 1, P_C = 2, P_IN = 3, P_K = 6, P_OUT = 9, P_S = 12, P_PAD = 15, P_DIL = 18,
          P_XS = 21, P_XO = 26, P_HM = 29, P_OO = 30, P_MO = 31, P_OG = 32;

float xat(int n, int c, int h, int w) {
    return LOAD_F(x, p[P_XO] + n * p[P_XS] + c * p[P_XS + 1] + h * p[P_XS + 3] + w * p[P_XS + 4]);
}

void atomic_add(uint idx, float v) {
    uint old = o[idx];
    for (int guard = 0; guard < 1000000; ++guard) {
        uint prev = atomicCompSwap(o[idx], old, floatBitsToUint(uintBitsToFloat(old) + v));
        if (prev == old) return;
        old = prev;
    }
}

void main() {
    uint li = global_id();
    if (li >= uint(p[0])) return;
    int C = p[P_C];
    int H = p[P_IN + 1], Wd = p[P_IN + 2];
    int kh_n = p[P_K + 1], kw_n = p[P_K + 2];
    int K = kh_n * kw_n;
    int OH = p[P_OUT + 1], OW = p[P_OUT + 2];
    int P = OH * OW;
    int OG = p[P_OG];
    int cpg = C / OG;
    int pi = int(li % uint(P));
    int oh = pi / OW, ow = pi % OW;
    int r = int(li / uint(P));
    int kk, n, og, c0, c1;
    if (MODE == 0) {
        int ck = r % (C * K);
        n = r / (C * K);
        int c = ck / K;
        kk = ck % K;
        og = c / cpg;
        c0 = c;
        c1 = c + 1;
    } else {
        kk = r % K;
        og = (r / K) % OG;
        n = r / (K * OG);
        c0 = og * cpg;
        c1 = c0 + cpg;
    }
    int kh = kk / kw_n, kw = kk % kw_n;
    int ob = p[P_OO] + (n * 2 * OG * K + 2 * (og * K + kk)) * P + pi;
    float dh = LOAD_F(off, ob), dw = LOAD_F(off, ob + P);
    float m = p[P_HM] != 0 ? LOAD_F(msk, p[P_MO] + (n * OG * K + og * K + kk) * P + pi) : 1.0;
    float h = float(oh * p[P_S + 1] - p[P_PAD + 1] + kh * p[P_DIL + 1]) + dh;
    float w = float(ow * p[P_S + 2] - p[P_PAD + 2] + kw * p[P_DIL + 2]) + dw;
    bool inside = h > -1.0 && h < float(H) && w > -1.0 && w < float(Wd);
    int h0 = inside ? int(floor(h)) : 0, w0 = inside ? int(floor(w)) : 0;
    float lh = h - float(h0), lw = w - float(w0);
    bool top = h0 >= 0, bottom = h0 + 1 <= H - 1, left = w0 >= 0, right = w0 + 1 <= Wd - 1;
    if (MODE == 0) {
        if (!inside) return;
        float g = LOAD_F(gc, (n * C * K + c0 * K + kk) * P + pi) * m;
        uint base = uint((n * C + c0) * H * Wd);
        if (top && left) atomic_add(base + uint(h0 * Wd + w0), g * (1.0 - lh) * (1.0 - lw));
        if (top && right) atomic_add(base + uint(h0 * Wd + w0 + 1), g * (1.0 - lh) * lw);
        if (bottom && left) atomic_add(base + uint((h0 + 1) * Wd + w0), g * lh * (1.0 - lw));
        if (bottom && right) atomic_add(base + uint((h0 + 1) * Wd + w0 + 1), g * lh * lw);
        return;
    }
    float gdh = 0.0, gdw = 0.0, gm = 0.0;
    if (inside) {
        for (int c = c0; c < c1; ++c) {
            float g = LOAD_F(gc, (n * C * K + c * K + kk) * P + pi);
            float v00 = top && left ? xat(n, c, h0, w0) : 0.0;
            float v01 = top && right ? xat(n, c, h0, w0 + 1) : 0.0;
            float v10 = bottom && left ? xat(n, c, h0 + 1, w0) : 0.0;
            float v11 = bottom && right ? xat(n, c, h0 + 1, w0 + 1) : 0.0;
            float v = (1.0 - lh) * (1.0 - lw) * v00 + (1.0 - lh) * lw * v01 +
                      lh * (1.0 - lw) * v10 + lh * lw * v11;
            gdh += g * m * ((1.0 - lw) * (v10 - v00) + lw * (v11 - v01));
            gdw += g * m * ((1.0 - lh) * (v01 - v00) + lh * (v11 - v10));
            gm += g * v;
        }
    }
    int go = (n * 2 * OG * K + 2 * (og * K + kk)) * P + pi;
    STORE_F(o, go, gdh);
    STORE_F(o, go + P, gdw);
    if (p[P_HM] != 0) STORE_F(o2, (n * OG * K + og * K + kk) * P + pi, gm);
}
