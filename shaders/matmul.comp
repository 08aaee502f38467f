#version 450
// Batched matmul C[b] = A[b] @ B[b] over strided operands (broadcast batch dims have stride
// 0), written contiguous [batch, M, N].
//   MODE 0: shared-memory tiles BM x BN (BK deep), each thread a TM x TN register block;
//           tile sizes are specialization constants, so the autotuner's candidates are one
//           source (backends/vulkan/matmul.cpp).
//   MODE 1: one thread per output element, no shared memory: small or odd problems and int64.
//   MODE 2: MODE 0 with 16-byte (vec4) global loads, for row-major operands whose rows, K, N
//           and offsets are multiples of 4 elements (the host checks).
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int MODE = 0;
layout(constant_id = 2) const int BM = 64;
layout(constant_id = 3) const int BN = 64;
layout(constant_id = 4) const int BK = 16;
layout(constant_id = 5) const int TM = 4;
layout(constant_id = 6) const int TN = 4;
layout(constant_id = 7) const int CT = 0;  // F32 or I64 (MODE 1 only)

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer Out { uint c[]; };
layout(std430, binding = 2) readonly buffer A { uint a[]; };
layout(std430, binding = 3) readonly buffer B { uint b[]; };
layout(std430, binding = 2) readonly buffer A4 { uvec4 a4[]; };  // the same buffers, 16 bytes
layout(std430, binding = 3) readonly buffer B4 { uvec4 b4[]; };  // at a time (MODE 2)

// Parameters: M, N, K, batch, batch rank, batch shape[6], A batch strides[6], B batch
// strides[6], A offset, B offset, A row stride, A col stride, B row stride, B col stride.
const int P_BR = 4, P_BS = 5, P_AB = 11, P_BB = 17, P_AO = 23, P_BO = 24, P_ARS = 25, P_ACS = 26,
          P_BRS = 27, P_BCS = 28;

shared float As[BK * BM];
shared float Bs[BK * BN];

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
    int ars = p[P_ARS], acs = p[P_ACS], brs = p[P_BRS], bcs = p[P_BCS];
    if (MODE == 1) {
        uint li = global_id();
        if (li >= batch * uint(M) * uint(N)) return;
        uint bi = li / uint(M * N);
        int r = int(li % uint(M * N));
        int m = r / N, n = r % N;
        int ao, bo;
        batch_offsets(bi, ao, bo);
        if (CT == CLASS_F32) {
            float acc = 0.0;
            for (int k = 0; k < K; ++k)
                acc += LOAD_F(a, ao + m * ars + k * acs) * LOAD_F(b, bo + k * brs + n * bcs);
            STORE_F(c, li, acc);
        } else {
            int64_t acc = 0l;
            for (int k = 0; k < K; ++k)
                acc += LOAD_I(a, ao + m * ars + k * acs) * LOAD_I(b, bo + k * brs + n * bcs);
            STORE_I(c, li, acc);
        }
        return;
    }
    uint tiles_m = uint((M + BM - 1) / BM), tiles_n = uint((N + BN - 1) / BN);
    uint g = group_id();
    if (g >= batch * tiles_m * tiles_n) return;
    uint bi = g / (tiles_m * tiles_n);
    uint t = g % (tiles_m * tiles_n);
    int m0 = int(t / tiles_n) * BM, n0 = int(t % tiles_n) * BN;
    int ao, bo;
    batch_offsets(bi, ao, bo);
    const int NT = (BM / TM) * (BN / TN);
    int tid = int(gl_LocalInvocationID.x);
    int tr = tid / (BN / TN), tc = tid % (BN / TN);
    float acc[TM * TN];
    for (int i = 0; i < TM * TN; ++i) acc[i] = 0.0;
    for (int k0 = 0; k0 < K; k0 += BK) {
        // Consecutive threads take consecutive k of A and n of B: coalesced when the
        // operands are row-major.
        if (MODE == 2) {
            for (int e = tid; e < BM * BK / 4; e += NT) {
                int m = e / (BK / 4), k = (e % (BK / 4)) * 4;
                int gm = m0 + m, gk = k0 + k;
                vec4 v = vec4(0.0);
                if (gm < M && gk < K) v = uintBitsToFloat(a4[(ao + gm * ars + gk) / 4]);
                As[k * BM + m] = v.x;
                As[(k + 1) * BM + m] = v.y;
                As[(k + 2) * BM + m] = v.z;
                As[(k + 3) * BM + m] = v.w;
            }
            for (int e = tid; e < BK * BN / 4; e += NT) {
                int k = e / (BN / 4), n = (e % (BN / 4)) * 4;
                int gk = k0 + k, gn = n0 + n;
                vec4 v = vec4(0.0);
                if (gk < K && gn < N) v = uintBitsToFloat(b4[(bo + gk * brs + gn) / 4]);
                Bs[k * BN + n] = v.x;
                Bs[k * BN + n + 1] = v.y;
                Bs[k * BN + n + 2] = v.z;
                Bs[k * BN + n + 3] = v.w;
            }
        } else {
            for (int e = tid; e < BM * BK; e += NT) {
                int m = e / BK, k = e % BK;
                int gm = m0 + m, gk = k0 + k;
                As[k * BM + m] = (gm < M && gk < K) ? LOAD_F(a, ao + gm * ars + gk * acs) : 0.0;
            }
            for (int e = tid; e < BK * BN; e += NT) {
                int k = e / BN, n = e % BN;
                int gk = k0 + k, gn = n0 + n;
                Bs[k * BN + n] = (gk < K && gn < N) ? LOAD_F(b, bo + gk * brs + gn * bcs) : 0.0;
            }
        }
        barrier();
        for (int k = 0; k < BK; ++k) {
            float ar[TM], br[TN];
            for (int i = 0; i < TM; ++i) ar[i] = As[k * BM + tr * TM + i];
            for (int j = 0; j < TN; ++j) br[j] = Bs[k * BN + tc * TN + j];
            for (int i = 0; i < TM; ++i)
                for (int j = 0; j < TN; ++j) acc[i * TN + j] += ar[i] * br[j];
        }
        barrier();
    }
    uint cb = bi * uint(M) * uint(N);
    for (int i = 0; i < TM; ++i) {
        int gm = m0 + tr * TM + i;
        if (gm >= M) continue;
        for (int j = 0; j < TN; ++j) {
            int gn = n0 + tc * TN + j;
            if (gn < N) STORE_F(c, cb + uint(gm * N + gn), acc[i * TN + j]);
        }
    }
}
