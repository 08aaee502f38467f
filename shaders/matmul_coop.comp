#version 450
// Matmul of f16 tensors on tensor cores: cooperative matrices (16x16x16, f16 inputs, f32
// accumulation), one subgroup per workgroup computing a (16*TM) x (16*TN) tile of C. The
// operands are f32 words holding f16-rounded values (how ember stores f16 tensors), converted
// exactly to f16 while staging through shared memory; edges are zero-padded there, so any
// M, N, K and strides work.
//
// Written against GL_NV_cooperative_matrix: the glslang of Debian 12 (11.13) has no
// GL_KHR_cooperative_matrix yet. NVIDIA drivers expose both extensions with the same
// hardware path; moving to KHR is a rename of the types and calls (coopmat<...>,
// coopMatLoad/MulAdd/Store) once the toolchain has it.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"

layout(local_size_x_id = 0) in;  // the subgroup size (32 on NVIDIA)
layout(constant_id = 1) const int TM = 2;
layout(constant_id = 2) const int TN = 2;

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer Out { uint c[]; };
layout(std430, binding = 2) readonly buffer A { uint a[]; };
layout(std430, binding = 3) readonly buffer B { uint b[]; };

// Parameters as matmul.comp.
const int P_BR = 4, P_BS = 5, P_AB = 11, P_BB = 17, P_AO = 23, P_BO = 24, P_ARS = 25, P_ACS = 26,
          P_BRS = 27, P_BCS = 28;
const int BM = 16 * TM, BN = 16 * TN;

shared float16_t As[BM * 16];  // row-major BM x 16
shared float16_t Bs[16 * BN];  // row-major 16 x BN
shared float Cs[BM * BN];

void main() {
    int M = p[0], N = p[1], K = p[2];
    uint batch = uint(p[3]);
    uint tiles_m = uint((M + BM - 1) / BM), tiles_n = uint((N + BN - 1) / BN);
    uint g = group_id();
    if (g >= batch * tiles_m * tiles_n) return;
    uint bi = g / (tiles_m * tiles_n);
    uint t = g % (tiles_m * tiles_n);
    int m0 = int(t / tiles_n) * BM, n0 = int(t % tiles_n) * BN;
    int ao = p[P_AO], bo = p[P_BO];
    uint rem = bi;
    for (int d = p[P_BR] - 1; d >= 0; --d) {
        uint s = uint(p[P_BS + d]);
        int i = int(rem % s);
        rem /= s;
        ao += i * p[P_AB + d];
        bo += i * p[P_BB + d];
    }
    int ars = p[P_ARS], acs = p[P_ACS], brs = p[P_BRS], bcs = p[P_BCS];
    int tid = int(gl_LocalInvocationID.x), nt = int(WG_SIZE);

    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[TM * TN];
    for (int i = 0; i < TM * TN; ++i) acc[i] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
    for (int k0 = 0; k0 < K; k0 += 16) {
        for (int e = tid; e < BM * 16; e += nt) {
            int m = e / 16, k = e % 16;
            int gm = m0 + m, gk = k0 + k;
            As[e] = float16_t((gm < M && gk < K) ? LOAD_F(a, ao + gm * ars + gk * acs) : 0.0);
        }
        for (int e = tid; e < 16 * BN; e += nt) {
            int k = e / BN, n = e % BN;
            int gk = k0 + k, gn = n0 + n;
            Bs[e] = float16_t((gk < K && gn < N) ? LOAD_F(b, bo + gk * brs + gn * bcs) : 0.0);
        }
        barrier();
        fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> ma[TM];
        for (int i = 0; i < TM; ++i) coopMatLoadNV(ma[i], As, uint(i * 16 * 16), 16u, false);
        for (int j = 0; j < TN; ++j) {
            fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> mb;
            coopMatLoadNV(mb, Bs, uint(j * 16), uint(BN), false);
            for (int i = 0; i < TM; ++i) acc[i * TN + j] = coopMatMulAddNV(ma[i], mb, acc[i * TN + j]);
        }
        barrier();
    }
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j)
            coopMatStoreNV(acc[i * TN + j], Cs, uint(i * 16 * BN + j * 16), uint(BN), false);
    barrier();
    uint cb = bi * uint(M) * uint(N);
    for (int e = tid; e < BM * BN; e += nt) {
        int gm = m0 + e / BN, gn = n0 + e % BN;
        if (gm < M && gn < N) STORE_F(c, cb + uint(gm * N + gn), Cs[e]);
    }
}
