#pragma once
// Arithmetic rounded once per operation, never contracted into a fused multiply-add: the fused
// optimizer kernels (adam_multi.cu, SGD's step in elementwise.cu) give the bits of the composed
// tensor ops, which run one kernel per operation and so round each result on its own. For
// float and double.
#include <type_traits>

namespace ember::detail::cuda {

/// a·b, a + b or a − b (Op '*', '+' or '-') rounded to nearest once, in T.
template <char Op, typename T>
__device__ __forceinline__ T rn(T a, T b) {
    constexpr bool f = std::is_same_v<T, float>;
    if constexpr (Op == '*') return f ? __fmul_rn(a, b) : __dmul_rn(a, b);
    if constexpr (Op == '+') return f ? __fadd_rn(a, b) : __dadd_rn(a, b);
    return f ? __fsub_rn(a, b) : __dsub_rn(a, b);
}
template <typename T>
__device__ __forceinline__ T mul_rn(T a, T b) {
    return rn<'*'>(a, b);
}
template <typename T>
__device__ __forceinline__ T add_rn(T a, T b) {
    return rn<'+'>(a, b);
}
template <typename T>
__device__ __forceinline__ T sub_rn(T a, T b) {
    return rn<'-'>(a, b);
}

}  // namespace ember::detail::cuda
