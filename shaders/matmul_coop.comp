#version 450
// Matmul of f16 (or bf16) tensors on tensor cores: cooperative matrices (M x N x K = 16 x FN x
// 16 with FN 8 or 16, 16-bit inputs, f32 accumulation: the shapes NVIDIA's drivers offer at
// subgroup scope).
//
// A workgroup of SGM x SGN subgroups computes a BM x BN tile of C, each subgroup a
// (BM / SGM) x (BN / SGN) piece held as a grid of 16 x FN accumulator fragments. K advances BK
// at a time: the workgroup stages a BM x BK slice of A and a BK x BN slice of B in shared
// memory as f16, then every subgroup multiplies its fragments out of shared memory. The
// operands are f32 words holding f16-rounded values (ember stores f16 tensors so), which
// convert exactly. Each thread moves quads: four consecutive elements along A's k or B's n,
// read as one 16-byte word where the host allows it (VEC: row-major rows, K, N and offsets
// multiples of 4, as matmul_large.comp), else as four bounds-checked scalars ordered so that
// a subgroup's reads coalesce along whichever dim is contiguous; a quad is stored as four
// packed halves (8 bytes). With VEC 2 the operands come packed by pack_f16.comp instead
// (contiguous [batch][rows][columns rounded up to 8] halves, two a word), so that a 16-byte
// read brings eight halves and the kernel moves half the bytes. The next slice is read from global memory into registers while the
// current one is multiplied, then stored: to the other of two shared buffers when DB is 1
// (one barrier a step), else to the one buffer after a barrier. Tile sizes are specialization
// constants (backends/vulkan/matmul.cpp's coop configurations, bench_vulkan's coop-sweep).
//
// Written against GL_NV_cooperative_matrix: the glslang of Debian 12 has no
// GL_KHR_cooperative_matrix. Where the device offers VK_KHR_cooperative_matrix, the host rewrites
// this module's SPIR-V to the KHR instructions (backends/vulkan/spirv_coop.cpp), and for bf16
// retypes its 16-bit floats as bf16: in the packed mode (VEC 2) the halves are only moved, never
// computed on, so the same code multiplies either type.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x_id = 0) in;  // SGM * SGN subgroups of 32
layout(constant_id = 1) const int BM = 128;
layout(constant_id = 2) const int BN = 128;
layout(constant_id = 3) const int BK = 32;
layout(constant_id = 4) const int SGM = 2;
layout(constant_id = 5) const int SGN = 4;
layout(constant_id = 6) const int DB = 1;   // two shared buffers
// 0: scalar reads; 1: 16-byte reads of f32 words (the host checks they can); 2: packed f16.
layout(constant_id = 7) const int VEC = 0;
// Fragment columns: 8 (NV's and KHR's 16x8x16) or 16 (KHR's 16x16x16, the only bf16 shape).
layout(constant_id = 8) const int FN = 8;
// Tiles are visited GM tile rows at a time (common.glsl's tile_of; 0: row by row).
layout(constant_id = 9) const int GM = 0;
// The output's rounding: 0 none (f32 products), 1 to f16, 2 to bf16 (common.glsl's round_f16 and
// round_bf16, as the cast kernel rounds), so that a 16-bit product needs no cast pass after.
layout(constant_id = 10) const int RND = 0;

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer Out { float c[]; };
layout(std430, binding = 2) readonly buffer A { float a[]; };
layout(std430, binding = 3) readonly buffer B { float b[]; };
layout(std430, binding = 2) readonly buffer A4 { vec4 a4[]; };  // the same buffers, 16 bytes
layout(std430, binding = 3) readonly buffer B4 { vec4 b4[]; };  // at a time (VEC 1)
layout(std430, binding = 2) readonly buffer A8 { uvec4 a8[]; };  // eight packed halves (VEC 2)
layout(std430, binding = 3) readonly buffer B8 { uvec4 b8[]; };

// Parameters as matmul.comp.
const int P_BR = 4, P_BS = 5, P_AB = 11, P_BB = 17, P_AO = 23, P_BO = 24, P_ARS = 25, P_ACS = 26,
          P_BRS = 27, P_BCS = 28;
const int FM = 16, FK = 16;  // the fragment shape, with FN
const int NSG = SGM * SGN, NT = NSG * 32;
const int SM = BM / SGM, SN = BN / SGN;  // a subgroup's piece of the tile
const int TM = SM / FM, TN = SN / FN;    // its fragments
// Shared rows are padded by 8 halves (16 bytes), so that the 16-byte rows of a fragment load
// spread over the banks. Shared arrays hold octets (uvec4: eight halves), so that every
// element starts 16-byte aligned, as the tensor cores' shared-memory loads need; offsets and
// strides below are in halves, divided by 8 at the loads.
const int AS = BK + 8, BS = BN + 8;
const int NBUF = DB != 0 ? 2 : 1;
const int A_HALVES = BM * AS, B_HALVES = BK * BS;
const int QA = BM * BK / 4 / NT, QB = BK * BN / 4 / NT;  // quads of each operand per thread
// Octets of each operand per thread (VEC 2, where the host ensures they divide evenly; at
// least 1 so that the arrays below stay valid in the other modes).
const int OA = BM * BK / 8 / NT > 0 ? BM * BK / 8 / NT : 1;
const int OB = BK * BN / 8 / NT > 0 ? BK * BN / 8 / NT : 1;

shared uvec4 As[NBUF * A_HALVES / 8];  // row-major BM x BK (stride AS)
shared uvec4 Bs[NBUF * B_HALVES / 8];  // row-major BK x BN (stride BS)

int M, N, K, ao, bo, ars, acs, brs, bcs, m0, n0;

// Quad q of A's slice at k0: rows along m, four k each. Consecutive q run along k when A's
// rows are contiguous, else along m.
void quad_a(int q, out int m, out int k) {
    if (VEC != 0 || acs == 1) {
        m = q / (BK / 4);
        k = (q % (BK / 4)) * 4;
    } else {
        m = q % BM;
        k = (q / BM) * 4;
    }
}
// Quad q of B's slice: four n at one k. Consecutive q run along n when B's rows are
// contiguous, else along k.
void quad_b(int q, out int k, out int n) {
    if (VEC != 0 || bcs == 1) {
        k = q / (BN / 4);
        n = (q % (BN / 4)) * 4;
    } else {
        k = q % BK;
        n = (q / BK) * 4;
    }
}

vec4 load_a(int q, int k0) {
    int m, k;
    quad_a(q, m, k);
    int gm = m0 + m, gk = k0 + k;
    if (VEC != 0) return gm < M && gk < K ? a4[(ao + gm * ars + gk) >> 2] : vec4(0.0);
    vec4 v = vec4(0.0);
    if (gm < M)
        [[unroll]] for (int j = 0; j < 4; ++j) if (gk + j < K) v[j] = a[ao + gm * ars + (gk + j) * acs];
    return v;
}

vec4 load_b(int q, int k0) {
    int k, n;
    quad_b(q, k, n);
    int gk = k0 + k, gn = n0 + n;
    if (VEC != 0) return gk < K && gn < N ? b4[(bo + gk * brs + gn) >> 2] : vec4(0.0);
    vec4 v = vec4(0.0);
    if (gk < K)
        [[unroll]] for (int j = 0; j < 4; ++j) if (gn + j < N) v[j] = b[bo + gk * brs + (gn + j) * bcs];
    return v;
}

uvec2 pack4(vec4 v) { return uvec2(packHalf2x16(v.xy), packHalf2x16(v.zw)); }

// Stores a quad (four halves) at `at` halves into A's (or B's) shared slices: one half of an
// octet.
void put4(bool to_a, int at, uvec2 q) {
    if (to_a) {
        if ((at & 4) == 0) As[at / 8].xy = q; else As[at / 8].zw = q;
    } else {
        if ((at & 4) == 0) Bs[at / 8].xy = q; else Bs[at / 8].zw = q;
    }
}

// VEC 2: octet q of a slice at k0, eight k of a row of A or eight n of a row of B, from rows
// of KP or NP halves, and its place (in halves) in the shared slice.
int KP, NP;
uint bi;
uvec4 load_a8(int q, int k0, out int at) {
    int m = q / (BK / 8), k = (q % (BK / 8)) * 8, gm = m0 + m, gk = k0 + k;
    at = m * AS + k;
    return gm < M && gk < KP ? a8[(bi * uint(M) + uint(gm)) * uint(KP / 8) + uint(gk / 8)]
                             : uvec4(0u);
}
uvec4 load_b8(int q, int k0, out int at) {
    int k = q / (BN / 8), n = (q % (BN / 8)) * 8, gk = k0 + k, gn = n0 + n;
    at = k * BS + n;
    return gk < K && gn < NP ? b8[(bi * uint(K) + uint(gk)) * uint(NP / 8) + uint(gn / 8)]
                             : uvec4(0u);
}

// Stores a thread's quads (VEC 0 and 1) or octets (VEC 2) of a slice into shared buffer buf.
void stage4(int buf, int tid, vec4 ra[QA], vec4 rb[QB]) {
    [[unroll]] for (int i = 0; i < QA; ++i) {
        int m, k;
        quad_a(tid + i * NT, m, k);
        put4(true, buf * A_HALVES + m * AS + k, pack4(ra[i]));
    }
    [[unroll]] for (int i = 0; i < QB; ++i) {
        int k, n;
        quad_b(tid + i * NT, k, n);
        put4(false, buf * B_HALVES + k * BS + n, pack4(rb[i]));
    }
}
void stage8(int buf, uvec4 oa[OA], uvec4 ob[OB], int at_a[OA], int at_b[OB]) {
    [[unroll]] for (int i = 0; i < OA; ++i) {
        As[(buf * A_HALVES + at_a[i]) / 8] = oa[i];
    }
    [[unroll]] for (int i = 0; i < OB; ++i) {
        Bs[(buf * B_HALVES + at_b[i]) / 8] = ob[i];
    }
}

void main() {
    M = p[0];
    N = p[1];
    K = p[2];
    uint batch = uint(p[3]);
    uint tiles_m = uint((M + BM - 1) / BM), tiles_n = uint((N + BN - 1) / BN);
    uint g = group_id();
    if (g >= batch * tiles_m * tiles_n) return;
    bi = g / (tiles_m * tiles_n);
    KP = (K + 7) / 8 * 8;
    NP = (N + 7) / 8 * 8;
    uint t = g % (tiles_m * tiles_n);
    uint tile_m, tile_n;
    tile_of(t, tiles_m, tiles_n, GM, tile_m, tile_n);
    m0 = int(tile_m) * BM;
    n0 = int(tile_n) * BN;
    ao = p[P_AO];
    bo = p[P_BO];
    uint rem = bi;
    for (int d = p[P_BR] - 1; d >= 0; --d) {
        uint s = uint(p[P_BS + d]);
        int i = int(rem % s);
        rem /= s;
        ao += i * p[P_AB + d];
        bo += i * p[P_BB + d];
    }
    ars = p[P_ARS];
    acs = p[P_ACS];
    brs = p[P_BRS];
    bcs = p[P_BCS];
    int tid = int(gl_LocalInvocationID.x);
    int sg = tid / 32, lane = tid % 32;
    int sm0 = (sg / SGN) * SM, sn0 = (sg % SGN) * SN;  // this subgroup's piece within the tile

    fcoopmatNV<32, gl_ScopeSubgroup, FM, FN> acc[TM * TN];
    [[unroll]] for (int i = 0; i < TM * TN; ++i)
        acc[i] = fcoopmatNV<32, gl_ScopeSubgroup, FM, FN>(0.0);

    vec4 ra[QA], rb[QB];
    uvec4 oa[OA], ob[OB];
    int at_a[OA], at_b[OB];
    if (VEC == 2) {
        [[unroll]] for (int i = 0; i < OA; ++i) oa[i] = load_a8(tid + i * NT, 0, at_a[i]);
        [[unroll]] for (int i = 0; i < OB; ++i) ob[i] = load_b8(tid + i * NT, 0, at_b[i]);
        stage8(0, oa, ob, at_a, at_b);
    } else {
        [[unroll]] for (int i = 0; i < QA; ++i) ra[i] = load_a(tid + i * NT, 0);
        [[unroll]] for (int i = 0; i < QB; ++i) rb[i] = load_b(tid + i * NT, 0);
        stage4(0, tid, ra, rb);
    }
    barrier();

    int nk = (K + BK - 1) / BK;
    for (int s = 0; s < nk; ++s) {
        int cur = DB != 0 ? (s & 1) : 0;
        bool more = s + 1 < nk;
        if (more) {
            int k0 = (s + 1) * BK;
            if (VEC == 2) {
                [[unroll]] for (int i = 0; i < OA; ++i) oa[i] = load_a8(tid + i * NT, k0, at_a[i]);
                [[unroll]] for (int i = 0; i < OB; ++i) ob[i] = load_b8(tid + i * NT, k0, at_b[i]);
            } else {
                [[unroll]] for (int i = 0; i < QA; ++i) ra[i] = load_a(tid + i * NT, k0);
                [[unroll]] for (int i = 0; i < QB; ++i) rb[i] = load_b(tid + i * NT, k0);
            }
        }
        int abuf = cur * A_HALVES, bbuf = cur * B_HALVES;
        [[unroll]] for (int kk = 0; kk < BK; kk += FK) {
            fcoopmatNV<16, gl_ScopeSubgroup, FM, FK> ma[TM];
            [[unroll]] for (int i = 0; i < TM; ++i)
                coopMatLoadNV(ma[i], As, uint((abuf + (sm0 + i * FM) * AS + kk) / 8), uint(AS / 8),
                              false);
            [[unroll]] for (int j = 0; j < TN; ++j) {
                fcoopmatNV<16, gl_ScopeSubgroup, FK, FN> mb;
                coopMatLoadNV(mb, Bs, uint((bbuf + kk * BS + sn0 + j * FN) / 8), uint(BS / 8),
                              false);
                [[unroll]] for (int i = 0; i < TM; ++i)
                    acc[i * TN + j] = coopMatMulAddNV(ma[i], mb, acc[i * TN + j]);
            }
        }
        if (more) {
            // With two buffers, the other one was last read before the previous barrier; with
            // one, every subgroup must be done with it first.
            if (DB == 0) barrier();
            int nxt = DB != 0 ? 1 - cur : 0;
            if (VEC == 2)
                stage8(nxt, oa, ob, at_a, at_b);
            else
                stage4(nxt, tid, ra, rb);
        }
        barrier();
    }

    uint cb = bi * uint(M) * uint(N);
    if (RND == 0 && m0 + BM <= M && n0 + BN <= N) {  // the whole tile is inside C: store in place
        [[unroll]] for (int i = 0; i < TM; ++i)
            [[unroll]] for (int j = 0; j < TN; ++j) {
                uint at = cb + uint(m0 + sm0 + i * FM) * uint(N) + uint(n0 + sn0 + j * FN);
                coopMatStoreNV(acc[i * TN + j], c, at, uint(N), false);
            }
        return;
    }
    // An edge tile, or a rounded output: each fragment goes through shared memory, and only its
    // elements inside C are written, rounded where RND asks. As is free after the loop's last
    // barrier: each subgroup stages its fragments (f32, four a uvec4) in its own FM x FN piece
    // of it (the host checks it fits), which leaves the whole 48 KiB to the slices.
    const uint cs0 = uint(sg * FM * FN / 4);
    [[unroll]] for (int i = 0; i < TM; ++i)
        [[unroll]] for (int j = 0; j < TN; ++j) {
            coopMatStoreNV(acc[i * TN + j], As, cs0, uint(FN / 4), false);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            for (int e = lane; e < FM * FN; e += 32) {
                int gm = m0 + sm0 + i * FM + e / FN, gn = n0 + sn0 + j * FN + e % FN;
                if (gm < M && gn < N) {
                    float v = uintBitsToFloat(As[cs0 + e / 4][e % 4]);
                    if (RND == 1) v = round_f16(v);
                    if (RND == 2) v = round_bf16(v);
                    c[cb + uint(gm) * uint(N) + uint(gn)] = v;
                }
            }
            subgroupBarrier();
        }
}
