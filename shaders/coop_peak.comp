#version 450
// The tensor-core ceiling through cooperative matrices (ember::vulkan::cooperative_matrix_peak):
// each subgroup loads TM fragments of A (16 x 16) and TN of B (16 x FN) once, then multiplies
// them into TM x TN accumulators ITERS times, from registers only, and stores the
// accumulators so that nothing is optimised away. No memory traffic in the loop: its rate is
// what the matmul kernel (matmul_coop.comp) could reach if loads cost nothing. With SHARED 1
// the fragments are loaded again from shared memory before every round of multiply-adds, as
// the matmul's inner loop does (TM A and TN B fragments per TM x TN products): the ceiling of a
// kernel whose global loads and barriers cost nothing. Rewritten to VK_KHR_cooperative_matrix
// (and bf16) by the host as matmul_coop.comp is.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x_id = 0) in;  // subgroups of 32
layout(constant_id = 1) const int FN = 8;
layout(constant_id = 2) const int ITERS = 1024;
layout(constant_id = 3) const int TM = 4;
layout(constant_id = 4) const int TN = 4;
layout(constant_id = 5) const int SHARED = 0;

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer Out { float c[]; };
layout(std430, binding = 2) readonly buffer In { uvec4 h[]; };  // 16-bit values, eight a uvec4

// The fragments' halves, as in matmul_coop.comp's shared slices (16-byte elements, rows padded
// by 8 halves): TM A fragments of 16 x 16, then TN B fragments of 16 x FN; two copies, read in
// turn, so that the loads cannot be hoisted out of the loop.
const int AS = 16 + 8, BS = FN + 8;
const int SET = (TM * 16 * AS + TN * 16 * BS) / 8;
shared uvec4 S[2 * SET];

void main() {
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a[TM];
    fcoopmatNV<16, gl_ScopeSubgroup, 16, FN> b[TN];
    fcoopmatNV<32, gl_ScopeSubgroup, 16, FN> acc[TM * TN];
    for (uint e = gl_LocalInvocationID.x; e < uint(S.length()); e += gl_WorkGroupSize.x)
        S[e] = h[e % 64u];
    barrier();
    const uint b0 = uint(TM * 16 * AS / 8);
    [[unroll]] for (int i = 0; i < TM; ++i)
        coopMatLoadNV(a[i], S, uint(i * 16 * AS / 8), uint(AS / 8), false);
    [[unroll]] for (int j = 0; j < TN; ++j)
        coopMatLoadNV(b[j], S, b0 + uint(j * 16 * BS / 8), uint(BS / 8), false);
    [[unroll]] for (int i = 0; i < TM * TN; ++i)
        acc[i] = fcoopmatNV<32, gl_ScopeSubgroup, 16, FN>(0.0);
    for (int it = 0; it < ITERS; ++it) {
        if (SHARED != 0) {
            uint o = uint(it & 1) * uint(SET);
            [[unroll]] for (int i = 0; i < TM; ++i)
                coopMatLoadNV(a[i], S, o + uint(i * 16 * AS / 8), uint(AS / 8), false);
            [[unroll]] for (int j = 0; j < TN; ++j)
                coopMatLoadNV(b[j], S, o + b0 + uint(j * 16 * BS / 8), uint(BS / 8), false);
        }
        [[unroll]] for (int i = 0; i < TM; ++i)
            [[unroll]] for (int j = 0; j < TN; ++j)
                acc[i * TN + j] = coopMatMulAddNV(a[i], b[j], acc[i * TN + j]);
    }
    uint sg = group_id() * (gl_WorkGroupSize.x / 32u) + gl_LocalInvocationID.x / 32u;
    [[unroll]] for (int i = 0; i < TM * TN; ++i)
        coopMatStoreNV(acc[i], c, (sg * uint(TM * TN) + uint(i)) * uint(16 * FN), uint(FN), false);
}
