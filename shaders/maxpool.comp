#version 450
// Max pooling with indices over the 3-d form (leading unit dims for 1-d and 2-d): one thread
// per output; indices are flat positions within each input plane, the first maximum wins and
// NaN propagates, as PyTorch.
#include "common.glsl"

layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer OutV { uint ov[]; };
layout(std430, binding = 2) buffer OutI { uint oi[]; };
layout(std430, binding = 3) readonly buffer X { uint x[]; };

// Parameters: total, planes (N*C), in[3], out[3], k[3], stride[3], pad[3], dil[3], x strides
// (n, c, d, h, w), x offset, C.
const int P_IN = 2, P_OUT = 5, P_K = 8, P_S = 11, P_PAD = 14, P_DIL = 17, P_XS = 20, P_XO = 25,
          P_C = 26;

void main() {
    uint li = global_id();
    if (li >= uint(p[0])) return;
    ivec3 inn = ivec3(p[P_IN], p[P_IN + 1], p[P_IN + 2]);
    ivec3 outn = ivec3(p[P_OUT], p[P_OUT + 1], p[P_OUT + 2]);
    int P = outn.x * outn.y * outn.z;
    int pi = int(li % uint(P));
    int plane = int(li / uint(P));
    int C = p[P_C];
    int n = plane / C, c = plane % C;
    int od = pi / (outn.y * outn.z), oh = (pi / outn.z) % outn.y, ow = pi % outn.z;
    int base = p[P_XO] + n * p[P_XS] + c * p[P_XS + 1];
    float best = 0.0;
    int bi = -1;
    for (int kd = 0; kd < p[P_K]; ++kd) {
        int id = od * p[P_S] - p[P_PAD] + kd * p[P_DIL];
        if (id < 0 || id >= inn.x) continue;
        for (int kh = 0; kh < p[P_K + 1]; ++kh) {
            int ih = oh * p[P_S + 1] - p[P_PAD + 1] + kh * p[P_DIL + 1];
            if (ih < 0 || ih >= inn.y) continue;
            for (int kw = 0; kw < p[P_K + 2]; ++kw) {
                int iw = ow * p[P_S + 2] - p[P_PAD + 2] + kw * p[P_DIL + 2];
                if (iw < 0 || iw >= inn.z) continue;
                float v = LOAD_F(x, base + id * p[P_XS + 2] + ih * p[P_XS + 3] + iw * p[P_XS + 4]);
                int fl = (id * inn.y + ih) * inn.z + iw;
                if (bi < 0 || (!isnan(best) && (v > best || isnan(v)))) {
                    best = v;
                    bi = fl;
                }
            }
        }
    }
    STORE_F(ov, li, best);
    STORE_I(oi, li, int64_t(max(bi, 0)));
}
