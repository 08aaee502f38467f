// Shared helpers of ember's compute shaders.
//
// Conventions (backends/vulkan/kernels.hpp builds the parameters):
// - binding 0 is an int32 parameter block `p[]` (shapes, strides, offsets, scalars);
// - data buffers are arrays of 32-bit words: a float element is one f32 word, an int element
//   is an int64 (two words, little-endian), a bool element one u32 word (0 or 1);
// - workgroups are laid out on a 2-d grid when there are more than maxComputeWorkGroupCount.x;
//   group_id() linearises it.
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

#define CLASS_F32 0
#define CLASS_I64 1
#define CLASS_BOOL 2

// Threads per workgroup: specialization constant 0, which is also each shader's
// local_size_x_id. Read through this constant, not gl_WorkGroupSize: spirv-opt folds
// gl_WorkGroupSize to the unspecialised default (1) before the pipeline specialises it.
layout(constant_id = 0) const uint WG_SIZE = 1u;

uint group_id() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }
uint global_id() { return group_id() * WG_SIZE + gl_LocalInvocationID.x; }

int64_t join64(uint lo, uint hi) { return int64_t(packUint2x32(uvec2(lo, hi))); }
uvec2 split64(int64_t v) { return unpackUint2x32(uint64_t(v)); }

// Loads/stores of element i of a word buffer, by class.
#define LOAD_F(buf, i) uintBitsToFloat(buf[(i)])
#define LOAD_I(buf, i) join64(buf[2 * (i)], buf[2 * (i) + 1])
#define LOAD_B(buf, i) (buf[(i)] != 0u)
#define STORE_F(buf, i, v) buf[(i)] = floatBitsToUint(v)
#define STORE_I(buf, i, v)            \
    {                                 \
        uvec2 w_ = split64(v);        \
        buf[2 * (i)] = w_.x;          \
        buf[2 * (i) + 1] = w_.y;      \
    }
#define STORE_B(buf, i, v) buf[(i)] = (v) ? 1u : 0u

// A value of any class: loaded into both forms so that casts are plain reads.
struct Val {
    float f;
    int64_t i;
};
Val val_f(float x) { return Val(x, int64_t(x)); }
Val val_i(int64_t x) { return Val(float(x), x); }
Val val_b(bool x) { return Val(x ? 1.0 : 0.0, x ? 1l : 0l); }

bool nan_f(float x) { return isnan(x); }

// Accurate transcendental helpers (GLSL has no erf/log1p; driver tanh may overflow).
float erf_f(float x) {
    // Abramowitz & Stegun 7.1.26 refined: |error| < 1.5e-7.
    float s = sign(x);
    float a = abs(x);
    float t = 1.0 / (1.0 + 0.3275911 * a);
    float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t +
                     0.254829592) * t * exp(-a * a);
    return s * y;
}
float log1p_f(float x) {
    float u = 1.0 + x;
    if (u == 1.0) return x;
    return log(u) * x / (u - 1.0);
}
float tanh_f(float x) {
    float a = abs(x);
    if (a < 0.004) return x - x * x * x / 3.0;
    if (a > 9.0) return x > 0.0 ? 1.0 : -1.0;
    float e = exp(-2.0 * a);
    float t = (1.0 - e) / (1.0 + e);
    return x < 0.0 ? -t : t;
}
float sign_f(float x) { return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0); }
// PyTorch's pow for real results: negative bases only with integer exponents.
float pow_f(float a, float b) {
    if (b == 0.0) return 1.0;
    if (b == 1.0) return a;
    if (b == 2.0) return a * a;
    if (b == 0.5) return sqrt(a);
    if (isnan(a) || isnan(b)) return a + b;
    if (a == 0.0) return b > 0.0 ? 0.0 : uintBitsToFloat(0x7f800000u);
    bool integral = floor(b) == b;
    if (a < 0.0 && !integral) return uintBitsToFloat(0x7fc00000u);
    float r = exp2(b * log2(abs(a)));
    if (a < 0.0 && integral && mod(b, 2.0) != 0.0) r = -r;
    return r;
}
float nan_max(float a, float b) { return isnan(a) ? a : (isnan(b) ? b : max(a, b)); }
float nan_min(float a, float b) { return isnan(a) ? a : (isnan(b) ? b : min(a, b)); }
float py_rem_f(float a, float b) {
    float r = a - b * trunc(a / b);
    if (r != 0.0 && ((r < 0.0) != (b < 0.0))) r += b;
    return r;
}
// Integer division and remainder through the magnitudes: GLSL leaves / and % of negative
// integers undefined (NVIDIA's drivers and lavapipe disagree on them), unsigned division is not.
uint64_t mag_i(int64_t v) { return v < 0l ? uint64_t(-(v + 1l)) + 1ul : uint64_t(v); }
int64_t floor_div_i(int64_t a, int64_t b) {
    if (b == 0l) return 0l;
    uint64_t ua = mag_i(a), ub = mag_i(b), uq = ua / ub;
    if ((a < 0l) == (b < 0l)) return int64_t(uq);
    return -int64_t(uq) - (ua - uq * ub != 0ul ? 1l : 0l);  // toward -inf
}
int64_t py_rem_i(int64_t a, int64_t b) {
    if (b == 0l) return 0l;
    uint64_t ua = mag_i(a), ub = mag_i(b);
    int64_t r = int64_t(ua - (ua / ub) * ub);
    if (a < 0l) r = -r;                                // truncated: the dividend's sign
    if (r != 0l && ((r < 0l) != (b < 0l))) r += b;  // Python's: the divisor's sign
    return r;
}
int64_t pow_i(int64_t base, int64_t e) {
    if (e < 0l) return base == 1l ? 1l : (base == -1l ? ((e & 1l) != 0l ? -1l : 1l) : 0l);
    int64_t r = 1l;
    for (int k = 0; k < 64 && e != 0l; ++k) {
        if ((e & 1l) != 0l) r *= base;
        base *= base;
        e >>= 1;
    }
    return r;
}
// Rounds an f32 to bf16 (nearest even; NaN stays NaN).
float round_bf16(float f) {
    uint u = floatBitsToUint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uintBitsToFloat((u | 0x00400000u) & 0xffff0000u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return uintBitsToFloat(u & 0xffff0000u);
}
// Rounds an f32 to f16 (nearest even; overflow gives infinity, NaN stays NaN), through the bits:
// NVIDIA's compiler folds unpackHalf2x16(packHalf2x16(x)) to x, which left values unrounded.
float round_f16(float f) {
    uint u = floatBitsToUint(f);
    uint a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) return f;
    if (a >= 0x477ff000u) return uintBitsToFloat((u & 0x80000000u) | 0x7f800000u);  // >= 65520
    // Below 2^-14: f16 subnormals, steps of 2^-24 (the scalings by powers of 2 are exact).
    if (a < 0x38800000u) return roundEven(f * 16777216.0) * (1.0 / 16777216.0);
    return uintBitsToFloat((u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u);
}

// Tile t of a tiles_m x tiles_n grid of output tiles, visited gm tile rows at a time, column by
// column (0: row by row), so that workgroups running at the same time share rows of A and
// columns of B in L2 (matmul_large.comp, matmul_coop.comp).
void tile_of(uint t, uint tiles_m, uint tiles_n, int gm, out uint tile_m, out uint tile_n) {
    tile_m = t / tiles_n;
    tile_n = t % tiles_n;
    if (gm > 0) {
        uint span = uint(gm) * tiles_n;  // tiles of one group of gm tile rows
        uint first = (t / span) * uint(gm);
        uint rows = min(tiles_m - first, uint(gm));
        tile_m = first + (t % span) % rows;
        tile_n = (t % span) / rows;
    }
}

// Shifts of int64 by any amount (GLSL leaves a shift by a negative amount or by 64 or more
// undefined): 0 for a left shift, the sign fill (0 or -1) for the arithmetic right shift, as
// the CPU and CUDA backends (PyTorch 2's results).
int64_t shl_i(int64_t u, int64_t w) { return (w < 0l || w > 63l) ? 0l : (u << int(w)); }
int64_t shr_i(int64_t u, int64_t w) { return u >> int((w < 0l || w > 63l) ? 63l : w); }
