#version 450
// Direct convolution kernels, the geometry (channels, groups, kernel, stride, padding,
// dilation, spatial sizes) fixed by specialization constants so that the tap loops unroll and
// every index division is by a constant; the batch is a parameter. The
// 3-d form of 1-, 2- and 3-d problems (leading unit dims). backends/vulkan/conv.cpp chooses
// them over im2col + matmul where the weight is small (few channels: a matmul whose M is 8 or 16
// wastes its tiles) and always for the transposed convolution.
//   MODE 0 convolution: out[n, co, o] = bias[co] + Σ_{ci in co's group, k} w[co, ci, k] *
//          x[n, ci, o * stride - pad + k * dil]; a thread COB outputs of one position, so each
//          input it loads serves COB channels.
//   MODE 1 transposed convolution (the convolution's input gradient): each output sums the
//          inputs and taps that land on it (a gather, so no atomics); a thread COB outputs.
//   MODE 2 weight gradient, partial sums: workgroup (slice s, co, ci) sums dy[n, co, o] *
//          x[n, ci, o * stride - pad + k * dil] for every tap k over slice s of the (n, o)
//          positions; part[s, co, ci, k]. conv.cpp sums the slices when there are several.
// x and w (dy in MODE 2) are contiguous at their offsets; out is contiguous from 0.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int MODE = 0;
layout(constant_id = 2) const int C = 1;   // input channels (MODE 1: of the transposed input)
layout(constant_id = 3) const int CO = 1;  // output channels
layout(constant_id = 4) const int G = 1;   // groups
layout(constant_id = 5) const int KD = 1;
layout(constant_id = 6) const int KH = 1;
layout(constant_id = 7) const int KW = 1;
layout(constant_id = 8) const int SD = 1;
layout(constant_id = 9) const int SH = 1;
layout(constant_id = 10) const int SW = 1;
layout(constant_id = 11) const int PD = 0;
layout(constant_id = 12) const int PH = 0;
layout(constant_id = 13) const int PW = 0;
layout(constant_id = 14) const int DD = 1;
layout(constant_id = 15) const int DH = 1;
layout(constant_id = 16) const int DW = 1;
layout(constant_id = 17) const int HAS_BIAS = 0;
layout(constant_id = 18) const int COB = 1;  // MODE 0/1: output channels a thread (1, 2 or 4)
// Spatial sizes of the input and output: constants too, so that splitting a position into its
// coordinates divides by constants (runtime divisions dominated the weight gradient's loop).
layout(constant_id = 19) const int ID = 1;
layout(constant_id = 20) const int IH = 1;
layout(constant_id = 21) const int IW = 1;
layout(constant_id = 22) const int OD = 1;
layout(constant_id = 23) const int OH = 1;
layout(constant_id = 24) const int OW = 1;

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer Out { uint o[]; };
layout(std430, binding = 2) readonly buffer X { uint x[]; };
layout(std430, binding = 3) readonly buffer W { uint w[]; };  // weight; dy in MODE 2
layout(std430, binding = 4) readonly buffer Bz { uint bz[]; };

// Parameters: total (MODE 0/1: threads; MODE 2: workgroups), N, in[3], out[3] (the constants'
// values, unused), x offset, w offset, then the bias offset (MODE 0/1) or the positions a slice
// (MODE 2).
const int KT = KD * KH * KW;
const int KT_MAX = 32;  // taps a MODE 2 thread keeps in registers (conv.cpp checks)
const int WG2 = 128;    // MODE 2's threads a workgroup (conv.cpp dispatches it so)
shared float part[KT_MAX * WG2];  // a partial sum a tap and subgroup

void main() {
    const int xo = p[8], wo = p[9];
    const int IP = ID * IH * IW, OP = OD * OH * OW;
    if (MODE == 2) {
        const int CG = C / G;
        const uint wg = group_id();
        if (wg >= uint(p[0])) return;  // uniform across the workgroup
        const int pairs = CO * CG;
        const int s = int(wg) / pairs, q = int(wg) % pairs;
        const int co = q / CG, ci = q % CG;
        const int xc = (co / (CO / G)) * CG + ci;
        const int positions = p[1] * OP;
        const int first = s * p[10];
        const int last = min(positions, first + p[10]);
        // Loops over KT_MAX taps guarded by `k < KT` unroll at compile time, so acc[] has
        // constant indices and lives in registers once the pipeline fixes KT.
        float acc[KT_MAX];
        [[unroll]] for (int k = 0; k < KT_MAX; ++k) acc[k] = 0.0;
        for (int t = first + int(gl_LocalInvocationID.x); t < last; t += WG2) {
            const int n = t / OP, op = t % OP;
            const int ow = op % OW, oh = (op / OW) % OH, od = op / (OW * OH);
            const float dy = LOAD_F(w, wo + (n * CO + co) * OP + op);
            const int xb = xo + (n * C + xc) * IP;
            [[unroll]] for (int k = 0; k < KT_MAX; ++k) {
                if (k < KT) {
                    const int id = od * SD - PD + (k / (KH * KW)) * DD;
                    const int ih = oh * SH - PH + ((k / KW) % KH) * DH;
                    const int iw = ow * SW - PW + (k % KW) * DW;
                    const bool inside = id >= 0 && id < ID && ih >= 0 && ih < IH && iw >= 0 &&
                                        iw < IW;
                    const float xv = inside ? LOAD_F(x, xb + (id * IH + ih) * IW + iw) : 0.0;
                    acc[k] += dy * xv;
                }
            }
        }
        [[unroll]] for (int k = 0; k < KT_MAX; ++k) {
            if (k < KT) {
                const float sum = subgroupAdd(acc[k]);
                if (subgroupElect()) part[k * WG2 + gl_SubgroupID] = sum;
            }
        }
        barrier();
        const int lid = int(gl_LocalInvocationID.x);
        if (lid < KT) {
            float sum = 0.0;
            for (uint j = 0; j < gl_NumSubgroups; ++j) sum += part[lid * WG2 + j];
            STORE_F(o, int(wg) * KT + lid, sum);
        }
        return;
    }
    const uint li = global_id();
    if (li >= uint(p[0])) return;
    const int ow = int(li % uint(OW));
    int r = int(li / uint(OW));
    const int oh = r % OH;
    r /= OH;
    const int od = r % OD;
    r /= OD;
    const int co0 = (r % (CO / COB)) * COB, n = r / (CO / COB);
    const int op = (od * OH + oh) * OW + ow;
    float acc[4];
    [[unroll]] for (int j = 0; j < 4; ++j)
        if (j < COB) acc[j] = HAS_BIAS != 0 ? LOAD_F(bz, p[10] + co0 + j) : 0.0;
    if (MODE == 0) {
        // w [CO, C / G, KT]: the taps of co's group of input channels.
        const int CG = C / G;
        const int xb = xo + (n * C + (co0 / (CO / G)) * CG) * IP;
        const int wb = wo + co0 * CG * KT;
        [[unroll]] for (int kd = 0; kd < KD; ++kd) {
            const int id = od * SD - PD + kd * DD;
            if (id < 0 || id >= ID) continue;
            [[unroll]] for (int kh = 0; kh < KH; ++kh) {
                const int ih = oh * SH - PH + kh * DH;
                if (ih < 0 || ih >= IH) continue;
                [[unroll]] for (int kw = 0; kw < KW; ++kw) {
                    const int iw = ow * SW - PW + kw * DW;
                    if (iw < 0 || iw >= IW) continue;
                    const int xi = xb + (id * IH + ih) * IW + iw;
                    const int wi = wb + (kd * KH + kh) * KW + kw;
                    for (int ci = 0; ci < CG; ++ci) {
                        const float xv = LOAD_F(x, xi + ci * IP);
                        [[unroll]] for (int j = 0; j < 4; ++j)
                            if (j < COB) acc[j] += xv * LOAD_F(w, wi + ci * KT + j * CG * KT);
                    }
                }
            }
        }
    } else {
        // MODE 1: w [C, CO / G, KT]; input (d, h, w) = (o + pad - k * dil) / stride where that
        // divides exactly and lands inside.
        const int COG = CO / G, CG = C / G;
        const int g = co0 / COG, col = co0 % COG;
        const int xb = xo + (n * C + g * CG) * IP;
        const int wb = wo + (g * CG * COG + col) * KT;
        [[unroll]] for (int kd = 0; kd < KD; ++kd) {
            const int td = od + PD - kd * DD;
            if (td < 0 || td % SD != 0 || td / SD >= ID) continue;
            [[unroll]] for (int kh = 0; kh < KH; ++kh) {
                const int th = oh + PH - kh * DH;
                if (th < 0 || th % SH != 0 || th / SH >= IH) continue;
                [[unroll]] for (int kw = 0; kw < KW; ++kw) {
                    const int tw = ow + PW - kw * DW;
                    if (tw < 0 || tw % SW != 0 || tw / SW >= IW) continue;
                    const int xi = xb + ((td / SD) * IH + th / SH) * IW + tw / SW;
                    const int wi = wb + (kd * KH + kh) * KW + kw;
                    for (int ci = 0; ci < CG; ++ci) {
                        const float xv = LOAD_F(x, xi + ci * IP);
                        [[unroll]] for (int j = 0; j < 4; ++j)
                            if (j < COB) acc[j] += xv * LOAD_F(w, wi + ci * COG * KT + j * KT);
                    }
                }
            }
        }
    }
    [[unroll]] for (int j = 0; j < 4; ++j)
        if (j < COB) STORE_F(o, (n * CO + co0 + j) * OP + op, acc[j]);
}
