#version 450
// Matmul of f16 tensors on tensor cores: cooperative matrices (M x N x K = 16 x 8 x 16, f16
// inputs, f32 accumulation: the shape NVIDIA's drivers offer at subgroup scope).
//
// A workgroup of 8 subgroups computes a 128 x 128 tile of C. The subgroups sit on a 2 x 4 grid,
// each owning a 64 x 32 piece: 4 x 4 accumulator fragments of 16 x 8. K advances 32 at a time:
// the workgroup stages a 128 x 32 slice of A and a 32 x 128 slice of B in shared memory (the
// operands are f32 words holding f16-rounded values, as ember stores f16 tensors; they convert
// exactly), then every subgroup multiplies its fragments out of shared memory. Loads are
// bounds-checked and zero-padded, so any M, N, K and strides work; the loop over a slice reads
// along whichever of the operand's dims is contiguous, so that a subgroup's loads coalesce.
//
// Written against GL_NV_cooperative_matrix: the glslang of Debian 12 (11.13) has no
// GL_KHR_cooperative_matrix yet; NVIDIA drivers expose both, with the same hardware path.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"

layout(local_size_x_id = 0) in;  // 8 subgroups of 32 (WG_SIZE = 256)

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer Out { float c[]; };
layout(std430, binding = 2) readonly buffer A { uint a[]; };
layout(std430, binding = 3) readonly buffer B { uint b[]; };

// Parameters as matmul.comp.
const int P_BR = 4, P_BS = 5, P_AB = 11, P_BB = 17, P_AO = 23, P_BO = 24, P_ARS = 25, P_ACS = 26,
          P_BRS = 27, P_BCS = 28;
const int BM = 128, BN = 128, BK = 32;
const int FM = 16, FN = 8, FK = 16;     // the fragment shape
const int SM = 64, SN = 32;             // a subgroup's piece of the tile
const int TM = SM / FM, TN = SN / FN;   // fragments per subgroup: 4 x 4
// Shared rows are padded by 8 halves so that fragment loads spread over the banks.
const int AS = BK + 8, BS = BN + 8;

shared float16_t As[BM * AS];  // row-major BM x BK (stride AS)
shared float16_t Bs[BK * BS];  // row-major BK x BN (stride BS)
shared float Cs[8 * FM * FN];  // a fragment per subgroup, for edge tiles

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
    int sg = tid / 32, lane = tid % 32;
    int sm0 = (sg / 4) * SM, sn0 = (sg % 4) * SN;  // this subgroup's piece within the tile

    fcoopmatNV<32, gl_ScopeSubgroup, FM, FN> acc[TM * TN];
    for (int i = 0; i < TM * TN; ++i) acc[i] = fcoopmatNV<32, gl_ScopeSubgroup, FM, FN>(0.0);

    for (int k0 = 0; k0 < K; k0 += BK) {
        if (acs == 1) {  // rows of A contiguous: consecutive threads read consecutive k
            for (int e = tid; e < BM * BK; e += nt) {
                int m = e / BK, k = e % BK, gm = m0 + m, gk = k0 + k;
                As[m * AS + k] =
                    float16_t((gm < M && gk < K) ? LOAD_F(a, ao + gm * ars + gk) : 0.0);
            }
        } else {
            for (int e = tid; e < BM * BK; e += nt) {
                int k = e / BM, m = e % BM, gm = m0 + m, gk = k0 + k;
                As[m * AS + k] =
                    float16_t((gm < M && gk < K) ? LOAD_F(a, ao + gm * ars + gk * acs) : 0.0);
            }
        }
        if (bcs == 1) {  // rows of B contiguous: consecutive threads read consecutive n
            for (int e = tid; e < BK * BN; e += nt) {
                int k = e / BN, n = e % BN, gk = k0 + k, gn = n0 + n;
                Bs[k * BS + n] =
                    float16_t((gk < K && gn < N) ? LOAD_F(b, bo + gk * brs + gn) : 0.0);
            }
        } else {
            for (int e = tid; e < BK * BN; e += nt) {
                int n = e / BK, k = e % BK, gk = k0 + k, gn = n0 + n;
                Bs[k * BS + n] =
                    float16_t((gk < K && gn < N) ? LOAD_F(b, bo + gk * brs + gn * bcs) : 0.0);
            }
        }
        barrier();
        for (int kk = 0; kk < BK; kk += FK) {
            fcoopmatNV<16, gl_ScopeSubgroup, FM, FK> ma[TM];
            for (int i = 0; i < TM; ++i)
                coopMatLoadNV(ma[i], As, uint((sm0 + i * FM) * AS + kk), uint(AS), false);
            for (int j = 0; j < TN; ++j) {
                fcoopmatNV<16, gl_ScopeSubgroup, FK, FN> mb;
                coopMatLoadNV(mb, Bs, uint(kk * BS + sn0 + j * FN), uint(BS), false);
                for (int i = 0; i < TM; ++i)
                    acc[i * TN + j] = coopMatMulAddNV(ma[i], mb, acc[i * TN + j]);
            }
        }
        barrier();
    }

    uint cb = bi * uint(M) * uint(N);
    if (m0 + BM <= M && n0 + BN <= N) {  // the whole tile is inside C: store in place
        for (int i = 0; i < TM; ++i)
            for (int j = 0; j < TN; ++j) {
                uint at = cb + uint(m0 + sm0 + i * FM) * uint(N) + uint(n0 + sn0 + j * FN);
                coopMatStoreNV(acc[i * TN + j], c, at, uint(N), false);
            }
        return;
    }
    // An edge tile: each fragment goes through shared memory, and only its elements inside C
    // are written.
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) {
            coopMatStoreNV(acc[i * TN + j], Cs, uint(sg * FM * FN), uint(FN), false);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            for (int e = lane; e < FM * FN; e += 32) {
                int gm = m0 + sm0 + i * FM + e / FN, gn = n0 + sn0 + j * FN + e % FN;
                if (gm < M && gn < N) c[cb + uint(gm) * uint(N) + uint(gn)] = Cs[sg * FM * FN + e];
            }
            subgroupBarrier();
        }
}
