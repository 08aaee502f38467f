#version 450
// Batched f32 matmul for large problems (the autotuner's MODE 3 candidates,
// backends/vulkan/matmul.cpp): C[b] = A[b] @ B[b], written contiguous [batch, M, N]. The host
// sends only row-major operands whose rows, K, N and offsets are multiples of 4 elements (its
// vec4_ok), so that every global load and store moves 16 bytes; M, N and K are otherwise free.
//
// A workgroup of NT = (BM / TM) * (BN / TN) threads owns a BM x BN tile of C; each thread holds
// TM x TN of it in registers as (TM / 4) x (TN / 4) blocks of 4 x 4, the blocks 4 * TR rows and
// 4 * TC columns apart (TR x TC threads). A warp's 32 threads sit on an LR x (32 / LR) grid of
// consecutive (tr, tc), so that every shared-memory read of a k step is a 16-byte broadcast
// without bank conflicts. A is stored transposed in shared memory (As[k][m]) so that a thread's
// A fragment is one vec4 read like B's; the vec4 slots of its rows are permuted (XOR by
// swz(k)), so that the scalar stores of a warp's transposed loads fall in distinct banks
// without padding (with padding, the deeper slices would not fit 32 KiB of shared memory,
// lavapipe's limit). K advances BK at a time through two shared buffers: the next slice is read
// from global memory into registers while the current one is multiplied, then stored to the
// other buffer, with one barrier a step. Every tile size is a specialization constant, so the
// host's candidates (and bench_vulkan's gemm-sweep) are one source.
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x_id = 0) in;  // NT threads
// The same constant ids as matmul.comp (the host passes one table), plus LR and GM.
layout(constant_id = 2) const int BM = 128;
layout(constant_id = 3) const int BN = 128;
layout(constant_id = 4) const int BK = 8;
layout(constant_id = 5) const int TM = 8;
layout(constant_id = 6) const int TN = 8;
layout(constant_id = 8) const int LR = 4;  // a warp's lanes along rows (32 / LR along columns)
// Tiles are visited GM tile rows at a time, column by column, so that concurrently running
// workgroups share A rows and B columns in L2 (0: row by row).
layout(constant_id = 9) const int GM = 0;

const int TR = BM / TM, TC = BN / TN;  // threads along rows and columns
const int NT = TR * TC;
const int LC = 32 / LR;
const int FM = TM / 4, FN = TN / 4;    // 4 x 4 blocks a thread
const int LDA4 = BM / 4;               // a k row of As, in vec4s
const int LDB4 = BN / 4;               // a k row of Bs, in vec4s
const int LOADS_A = BM * BK / 4 / NT;  // vec4 loads of each operand per thread and k slice
const int LOADS_B = BN * BK / 4 / NT;

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
// quads' slots apart within 8 slots (32 banks). Reads stay 16-byte slots, distinct per thread
// and within one aligned group of 8 (a warp reads LR <= 8 consecutive slots).
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
    uint tile_m, tile_n;
    tile_of(t, tiles_m, tiles_n, GM, tile_m, tile_n);
    int m0 = int(tile_m) * BM, n0 = int(tile_n) * BN;
    int ao, bo;
    batch_offsets(bi, ao, bo);

    int tid = int(gl_LocalInvocationID.x);
    int warp = tid / 32, lane = tid % 32;
    int tr = (warp / (TC / LC)) * LR + lane / LC;  // 0 .. TR-1
    int tc = (warp % (TC / LC)) * LC + lane % LC;  // 0 .. TC-1

    // Global reads of a slice: load i of a thread is element e = tid + i * NT. For A, e runs
    // along k first (a row's BK floats are contiguous), for B along n.
    vec4 pa[LOADS_A], pb[LOADS_B];
    vec4 acc[TM * FN];  // acc[r * FN + j]: row r of the thread's TM, column block j
    [[unroll]] for (int i = 0; i < TM * FN; ++i) acc[i] = vec4(0.0);

    int nk = (K + BK - 1) / BK;
    // Slice 0 into buffer 0.
    [[unroll]] for (int i = 0; i < LOADS_A; ++i) {
        int e = tid + i * NT;
        int m = e / (BK / 4), k = (e % (BK / 4)) * 4;
        int gm = m0 + m;
        pa[i] = gm < M && k < K ? a4[(ao + gm * ars + k) >> 2] : vec4(0.0);
    }
    [[unroll]] for (int i = 0; i < LOADS_B; ++i) {
        int e = tid + i * NT;
        int kb = e / LDB4, gn = n0 + (e % LDB4) * 4;
        pb[i] = kb < K && gn < N ? b4[(bo + kb * brs + gn) >> 2] : vec4(0.0);
    }
    [[unroll]] for (int i = 0; i < LOADS_A; ++i) {
        int e = tid + i * NT;
        int m = e / (BK / 4), k = (e % (BK / 4)) * 4;
        [[unroll]] for (int j = 0; j < 4; ++j)
            As[(k + j) * LDA4 + ((m / 4) ^ swz(k))][m % 4] = pa[i][j];
    }
    [[unroll]] for (int i = 0; i < LOADS_B; ++i) Bs[tid + i * NT] = pb[i];
    barrier();

    for (int s = 0; s < nk; ++s) {
        int cur = s & 1;
        bool more = s + 1 < nk;
        if (more) {
            int k0 = (s + 1) * BK;
            [[unroll]] for (int i = 0; i < LOADS_A; ++i) {
                int e = tid + i * NT;
                int m = e / (BK / 4), gk = k0 + (e % (BK / 4)) * 4;
                int gm = m0 + m;
                pa[i] = gm < M && gk < K ? a4[(ao + gm * ars + gk) >> 2] : vec4(0.0);
            }
            [[unroll]] for (int i = 0; i < LOADS_B; ++i) {
                int e = tid + i * NT;
                int kb = k0 + e / LDB4, gn = n0 + (e % LDB4) * 4;
                pb[i] = kb < K && gn < N ? b4[(bo + kb * brs + gn) >> 2] : vec4(0.0);
            }
        }
        int abase = cur * BK * LDA4, bbase = cur * BK * LDB4;
        [[unroll]] for (int k = 0; k < BK; ++k) {
            vec4 af[FM], bf[FN];
            [[unroll]] for (int i = 0; i < FM; ++i)
                af[i] = As[abase + k * LDA4 + ((i * TR + tr) ^ swz(k))];
            [[unroll]] for (int j = 0; j < FN; ++j) bf[j] = Bs[bbase + k * LDB4 + j * TC + tc];
            [[unroll]] for (int i = 0; i < FM; ++i)
                [[unroll]] for (int r = 0; r < 4; ++r)
                    [[unroll]] for (int j = 0; j < FN; ++j)
                        acc[(4 * i + r) * FN + j] =
                            fma(vec4(af[i][r]), bf[j], acc[(4 * i + r) * FN + j]);
        }
        if (more) {
            // The other buffer was last read before the previous barrier: free to overwrite.
            int nxt = 1 - cur;
            [[unroll]] for (int i = 0; i < LOADS_A; ++i) {
                int e = tid + i * NT;
                int m = e / (BK / 4), k = (e % (BK / 4)) * 4;
                [[unroll]] for (int j = 0; j < 4; ++j)
                    As[(nxt * BK + k + j) * LDA4 + ((m / 4) ^ swz(k))][m % 4] = pa[i][j];
            }
            [[unroll]] for (int i = 0; i < LOADS_B; ++i) Bs[nxt * BK * LDB4 + tid + i * NT] = pb[i];
        }
        barrier();
    }

    // N is a multiple of 4, so a column quad is wholly inside C or wholly outside.
    uint cb = bi * uint(M) * uint(N);
    [[unroll]] for (int i = 0; i < FM; ++i)
        [[unroll]] for (int r = 0; r < 4; ++r) {
            int gm = m0 + i * 4 * TR + 4 * tr + r;
            if (gm >= M) continue;
            [[unroll]] for (int j = 0; j < FN; ++j) {
                int gn = n0 + j * 4 * TC + 4 * tc;
                if (gn < N) c4[(cb + uint(gm * N + gn)) / 4] = acc[(4 * i + r) * FN + j];
            }
        }
}
