#version 450
// Matmul of f16 (or bf16) tensors on tensor cores through workgroup-scope cooperative matrices
// (VK_NV_cooperative_matrix2): the whole workgroup owns a BM x BK piece of A, a BK x BN piece
// of B and the BM x BN accumulator, and the driver stages them through shared memory itself.
// The kernel is only the K loop; how the loads are pipelined and the products split among the
// subgroups is the compiler's. The operands come packed by pack_f16.comp (contiguous
// [batch][rows][columns rounded up to 8] halves, read here as 16-bit words); the host sends
// only problems whose M, N and K are multiples of the tile (matmul.cpp's cm2_fits), so every
// load and store is whole and in bounds.
//
// Written against GL_NV_cooperative_matrix (Debian 12's glslang has neither the KHR nor the
// NV2 GLSL extension) with the workgroup scope in the matrix types. The host moves the module
// to the KHR instructions before creating the pipeline, and each load to a tensor load
// (OpCooperativeMatrixLoadTensorNV) of the rows x columns block the plain load would read
// (spirv_coop.cpp): on an H100 that runs two to three times faster than plain loads.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

// The workgroup size the device lists for the matrices. The host specialises it to the same
// 256: the driver sizes its staging from the declared size, and another size (128) gave wrong
// products.
layout(local_size_x = 256, local_size_x_id = 0) in;
layout(constant_id = 1) const int BM = 128;
layout(constant_id = 2) const int BN = 128;
layout(constant_id = 3) const int BK = 32;
layout(constant_id = 4) const int GM = 0;  // tile order (common.glsl's tile_of)
layout(constant_id = 5) const int U = 1;   // steps a loop iteration (the host ensures U * BK | K)

layout(std430, binding = 0) readonly buffer Params { int p[]; };
layout(std430, binding = 1) buffer Out { float c[]; };
// 16-bit words, not float16_t: the same module serves bf16, whose halves are only moved.
layout(std430, binding = 2) readonly buffer A16 { uint16_t a16[]; };
layout(std430, binding = 3) readonly buffer B16 { uint16_t b16[]; };

void main() {
    // Parameters as matmul.comp's; only M, N, K and the batch count are read (the packed
    // operands are contiguous per batch entry).
    const uint M = uint(p[0]), N = uint(p[1]), K = uint(p[2]), batch = uint(p[3]);
    const uint tiles_m = M / uint(BM), tiles_n = N / uint(BN);
    const uint g = group_id();
    if (g >= batch * tiles_m * tiles_n) return;
    const uint bi = g / (tiles_m * tiles_n);
    uint tile_m, tile_n;
    tile_of(g % (tiles_m * tiles_n), tiles_m, tiles_n, GM, tile_m, tile_n);
    const uint m0 = tile_m * uint(BM), n0 = tile_n * uint(BN);
    // K and N are multiples of the tile, hence of 8: the packed rows are K and N halves.

    fcoopmatNV<32, gl_ScopeWorkgroup, BM, BN> acc = fcoopmatNV<32, gl_ScopeWorkgroup, BM, BN>(0.0);
    const uint ra = bi * M + m0;
    for (uint k = 0u; k < K; k += uint(U * BK)) {
        [[unroll]] for (int u = 0; u < U; ++u) {
            const uint k0 = k + uint(u * BK);
            fcoopmatNV<16, gl_ScopeWorkgroup, BM, BK> ma;
            fcoopmatNV<16, gl_ScopeWorkgroup, BK, BN> mb;
            coopMatLoadNV(ma, a16, ra * K + k0, K, false);
            coopMatLoadNV(mb, b16, (bi * K + k0) * N + n0, N, false);
            acc = coopMatMulAddNV(ma, mb, acc);
        }
    }
    coopMatStoreNV(acc, c, bi * M * N + m0 * N + n0, N, false);
}
