#version 450
// Column kernels over the 3-d form of 1-, 2- and 3-d problems (leading unit dims); the direct
// convolution kernels are conv_direct.comp's:
//   MODE 0 im2col: cols[n, (c, kd, kh, kw), (od, oh, ow)] from a strided input; a matmul with
//          the weight then makes the convolution (backends/vulkan/conv.cpp).
//   MODE 2 deformable im2col (torchvision's deform_conv2d): bilinear samples at offset
//          positions, times the mask.
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int MODE = 0;

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer Out { uint o[]; };
layout(std430, binding = 2) readonly buffer X { uint x[]; };
layout(std430, binding = 3) readonly buffer W { uint w[]; };  // weight / offsets
layout(std430, binding = 4) readonly buffer Bz { uint bz[]; };  // bias / mask

// Parameters: total, N, C, in[3], k[3], out[3], stride[3], pad[3], dil[3], x strides[5] (n, c,
// d, h, w), x offset, two unused words, has mask, offsets' offset, mask offset, offset groups
// (MODE 2).
const int P_N = 1, P_C = 2, P_IN = 3, P_K = 6, P_OUT = 9, P_S = 12, P_PAD = 15, P_DIL = 18,
          P_XS = 21, P_XO = 26, P_HB = 29, P_WO = 30, P_BO = 31, P_OG = 32;

float xat(int n, int c, int d, int h, int wv) {
    return LOAD_F(x, p[P_XO] + n * p[P_XS] + c * p[P_XS + 1] + d * p[P_XS + 2] +
                         h * p[P_XS + 3] + wv * p[P_XS + 4]);
}

// Bilinear sample of plane (n, c) at (h, w); zero outside, as torchvision.
float bilinear(int n, int c, float h, float wv) {
    int H = p[P_IN + 1], Wd = p[P_IN + 2];
    if (!(h > -1.0 && h < float(H) && wv > -1.0 && wv < float(Wd))) return 0.0;  // NaN too
    int h0 = int(floor(h)), w0 = int(floor(wv));
    float lh = h - float(h0), lw = wv - float(w0);
    float r = 0.0;
    if (h0 >= 0 && w0 >= 0) r += (1.0 - lh) * (1.0 - lw) * xat(n, c, 0, h0, w0);
    if (h0 >= 0 && w0 + 1 < Wd) r += (1.0 - lh) * lw * xat(n, c, 0, h0, w0 + 1);
    if (h0 + 1 < H && w0 >= 0) r += lh * (1.0 - lw) * xat(n, c, 0, h0 + 1, w0);
    if (h0 + 1 < H && w0 + 1 < Wd) r += lh * lw * xat(n, c, 0, h0 + 1, w0 + 1);
    return r;
}

void main() {
    uint li = global_id();
    if (li >= uint(p[0])) return;
    int C = p[P_C];
    ivec3 inn = ivec3(p[P_IN], p[P_IN + 1], p[P_IN + 2]);
    ivec3 k = ivec3(p[P_K], p[P_K + 1], p[P_K + 2]);
    ivec3 outn = ivec3(p[P_OUT], p[P_OUT + 1], p[P_OUT + 2]);
    ivec3 st = ivec3(p[P_S], p[P_S + 1], p[P_S + 2]);
    ivec3 pad = ivec3(p[P_PAD], p[P_PAD + 1], p[P_PAD + 2]);
    ivec3 dil = ivec3(p[P_DIL], p[P_DIL + 1], p[P_DIL + 2]);
    int K = k.x * k.y * k.z;
    int P = outn.x * outn.y * outn.z;
    if (MODE == 0 || MODE == 2) {
        int pi = int(li % uint(P));
        int r = int(li / uint(P));
        int ck = r % (C * K);
        int n = r / (C * K);
        int c = ck / K, kk = ck % K;
        int kd = kk / (k.y * k.z), kh = (kk / k.z) % k.y, kw = kk % k.z;
        int od = pi / (outn.y * outn.z), oh = (pi / outn.z) % outn.y, ow = pi % outn.z;
        if (MODE == 2) {
            // Offsets [N, 2 * OG * K, OH, OW] and mask [N, OG * K, OH, OW], contiguous.
            int og = c / (C / p[P_OG]);
            int OG = p[P_OG];
            int plane = outn.y * outn.z;
            int ob = p[P_WO] + (n * 2 * OG * K + 2 * (og * K + kk)) * plane + oh * outn.z + ow;
            float dh = LOAD_F(w, ob), dw = LOAD_F(w, ob + plane);
            float h = float(oh * st.y - pad.y + kh * dil.y) + dh;
            float wv = float(ow * st.z - pad.z + kw * dil.z) + dw;
            float v = bilinear(n, c, h, wv);
            if (p[P_HB] != 0)
                v *= LOAD_F(bz, p[P_BO] + (n * OG * K + og * K + kk) * plane + oh * outn.z + ow);
            STORE_F(o, li, v);
            return;
        }
        int id = od * st.x - pad.x + kd * dil.x;
        int ih = oh * st.y - pad.y + kh * dil.y;
        int iw = ow * st.z - pad.z + kw * dil.z;
        bool inside = id >= 0 && id < inn.x && ih >= 0 && ih < inn.y && iw >= 0 && iw < inn.z;
        STORE_F(o, li, inside ? xat(n, c, id, ih, iw) : 0.0);
        return;
    }
}
