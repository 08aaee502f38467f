#version 450
// Batched f32 matmul for large problems (the autotuner's MODE 3 candidates,
// backends/vulkan/matmul.cpp): C[b] = A[b] @ B[b], written contiguous [batch, M, N]. The host
// sends only row-major operands whose rows, K, N and offsets are multiples of 4 elements (its
// vec4_ok), so that every global load and store moves 16 bytes; M, N and K are otherwise free.
//
// A workgroup of 256 threads owns a 128 x 128 tile of C; each thread holds 8 x 8 of it in
// registers as 2 x 2 blocks of 4 x 4, rows {4 tr.., 64 + 4 tr..} by columns {4 tc..,
// 64 + 4 tc..}. A warp's 32 threads sit on a 4 (tr) x 8 (tc) grid, so that every shared-memory
// read of a k step is a 16-byte broadcast without bank conflicts. A is stored transposed in
// shared memory (As[k][m]) so that a thread's A fragment is one vec4 read like B's; the vec4
// slots of its rows are permuted (XOR by swz(k)), so that the scalar stores of a warp's
// transposed loads fall in distinct banks without padding (with padding, BK 16 would not fit
// 32 KiB of shared memory, lavapipe's limit). K advances BK (8 or 16, a specialization constant) at a time with two shared buffers:
// the next slice is read from global memory into registers while the current one is multiplied,
// then stored to the other buffer, with one barrier a step.
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x_id = 0) in;  // 256 threads
// The same constant ids as matmul.comp (the host passes one table); only BK is read here.
layout(constant_id = 4) const int BK = 8;

const int BM = 128, BN = 128, NT = 256;
const int LDA4 = BM / 4;   // a k row of As, in vec4s
const int LDB4 = BN / 4;   // a k row of Bs, in vec4s
const int LOADS = BK / 8;  // vec4 loads of each operand per thread and k slice

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) writeonly buffer Out { vec4 c4[]; };
layout(std430, binding = 2) readonly buffer A4 { vec4 a4[]; };
layout(std430, binding = 3) readonly buffer B4 { vec4 b4[]; };

// Parameters as matmul.comp.
const int P_BR = 4, P_BS = 5, P_AB = 11, P_BB = 17, P_AO = 23, P_BO = 24, P_ARS = 25,
          P_BRS = 27;

shared vec4 As[2 * BK * LDA4];
shared vec4 Bs[2 * BK * LDB4];

// The slot permutation of As's row k. A warp's stores of one component cover 32 / BK slots of
// each of BK / 4 rows (one row per k quad): XOR by a multiple of 32 / BK below 8 moves the
// quads' slots apart within 8 slots (32 banks). Reads stay 16-byte slots, distinct per thread.
int swz(int k) { return ((k / 4) * (32 / BK)) & 7; }

void batch_offsets(uint bi, out int ao, out int bo) {
    ao = p[P_AO];
    bo = p[P_BO];
    int br = p[P_BR];
    for (int d = br - 1; d >= 0; --d) {
        uint s = uint(p[P_BS + d]);
        int i = int(bi % s);
        bi /= s;
        ao += i * p[P_AB + d];
        bo += i * p[P_BB + d];
    }
}

void main() {
    int M = p[0], N = p[1], K = p[2];
    uint batch = uint(p[3]);
    int ars = p[P_ARS], brs = p[P_BRS];
    uint tiles_m = uint((M + BM - 1) / BM), tiles_n = uint((N + BN - 1) / BN);
    uint g = group_id();
    if (g >= batch * tiles_m * tiles_n) return;
    uint bi = g / (tiles_m * tiles_n);
    uint t = g % (tiles_m * tiles_n);
    int m0 = int(t / tiles_n) * BM, n0 = int(t % tiles_n) * BN;
    int ao, bo;
    batch_offsets(bi, ao, bo);

    int tid = int(gl_LocalInvocationID.x);
    int warp = tid / 32, lane = tid % 32;
    int tr = (warp / 2) * 4 + lane / 8;  // 0..15: rows 4 tr.. and 64 + 4 tr..
    int tc = (warp % 2) * 8 + lane % 8;  // 0..15: columns 4 tc.. and 64 + 4 tc..

    // Global reads of a slice: load i of a thread is element e = tid + i * NT. For A, e runs
    // along k first (a row's BK floats are contiguous), for B along n.
    vec4 pa[LOADS], pb[LOADS];
    vec4 acc[16];  // acc[2 i + h]: row i of the thread's 8, column half h
    [[unroll]] for (int i = 0; i < 16; ++i) acc[i] = vec4(0.0);

    int nk = (K + BK - 1) / BK;
    // Slice 0 into buffer 0.
    [[unroll]] for (int i = 0; i < LOADS; ++i) {
        int e = tid + i * NT;
        int m = e / (BK / 4), k = (e % (BK / 4)) * 4;
        int gm = m0 + m;
        pa[i] = gm < M && k < K ? a4[(ao + gm * ars + k) >> 2] : vec4(0.0);
        int kb = e / LDB4, n = (e % LDB4) * 4;
        int gn = n0 + n;
        pb[i] = kb < K && gn < N ? b4[(bo + kb * brs + gn) >> 2] : vec4(0.0);
    }
    [[unroll]] for (int i = 0; i < LOADS; ++i) {
        int e = tid + i * NT;
        int m = e / (BK / 4), k = (e % (BK / 4)) * 4;
        [[unroll]] for (int j = 0; j < 4; ++j)
            As[(k + j) * LDA4 + ((m / 4) ^ swz(k))][m % 4] = pa[i][j];
        Bs[e] = pb[i];  // k row e / LDB4, quad e % LDB4
    }
    barrier();

    for (int s = 0; s < nk; ++s) {
        int cur = s & 1;
        bool more = s + 1 < nk;
        if (more) {
            int k0 = (s + 1) * BK;
            [[unroll]] for (int i = 0; i < LOADS; ++i) {
                int e = tid + i * NT;
                int m = e / (BK / 4), gk = k0 + (e % (BK / 4)) * 4;
                int gm = m0 + m;
                pa[i] = gm < M && gk < K ? a4[(ao + gm * ars + gk) >> 2] : vec4(0.0);
                int kb = k0 + e / LDB4, gn = n0 + (e % LDB4) * 4;
                pb[i] = kb < K && gn < N ? b4[(bo + kb * brs + gn) >> 2] : vec4(0.0);
            }
        }
        int abase = cur * BK * LDA4, bbase = cur * BK * LDB4;
        [[unroll]] for (int k = 0; k < BK; ++k) {
            int ta = tr ^ swz(k);  // below 16: the XOR touches bits 0-2 only
            vec4 a_lo = As[abase + k * LDA4 + ta], a_hi = As[abase + k * LDA4 + 16 + ta];
            vec4 b_lo = Bs[bbase + k * LDB4 + tc], b_hi = Bs[bbase + k * LDB4 + 16 + tc];
            [[unroll]] for (int i = 0; i < 4; ++i) {
                acc[2 * i] = fma(vec4(a_lo[i]), b_lo, acc[2 * i]);
                acc[2 * i + 1] = fma(vec4(a_lo[i]), b_hi, acc[2 * i + 1]);
                acc[8 + 2 * i] = fma(vec4(a_hi[i]), b_lo, acc[8 + 2 * i]);
                acc[8 + 2 * i + 1] = fma(vec4(a_hi[i]), b_hi, acc[8 + 2 * i + 1]);
            }
        }
        if (more) {
            // The other buffer was last read before the previous barrier: free to overwrite.
            int nxt = 1 - cur;
            [[unroll]] for (int i = 0; i < LOADS; ++i) {
                int e = tid + i * NT;
                int m = e / (BK / 4), k = (e % (BK / 4)) * 4;
                [[unroll]] for (int j = 0; j < 4; ++j)
                    As[(nxt * BK + k + j) * LDA4 + ((m / 4) ^ swz(k))][m % 4] = pa[i][j];
                Bs[nxt * BK * LDB4 + e] = pb[i];
            }
        }
        barrier();
    }

    // N is a multiple of 4, so a column quad is wholly inside C or wholly outside.
    uint cb = bi * uint(M) * uint(N);
    [[unroll]] for (int i = 0; i < 8; ++i) {
        int gm = m0 + (i < 4 ? 4 * tr + i : 64 + 4 * tr + i - 4);
        if (gm >= M) continue;
        [[unroll]] for (int h = 0; h < 2; ++h) {
            int gn = n0 + h * 64 + 4 * tc;
            if (gn < N) c4[(cb + uint(gm * N + gn)) / 4] = acc[2 * i + h];
        }
    }
}
