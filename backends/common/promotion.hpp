#pragma once
// The result dtype of a binary op on two dtypes, as every backend computes it: the wider of the
// two in the order bool < u8 < i8 < i16 < i32 < i64 < bf16 < f16 < f32 < f64 (PyTorch's result
// types for same-category operands; an int with a float gives the float).
#include "ember/tensor/dtype.hpp"

namespace ember::detail {

/// The position of `d` in the promotion order.
constexpr int promotion_rank(DType d) {
    switch (d) {
        case DType::Bool:
            return 0;
        case DType::U8:
            return 1;
        case DType::I8:
            return 2;
        case DType::I16:
            return 3;
        case DType::I32:
            return 4;
        case DType::I64:
            return 5;
        case DType::BF16:
            return 6;
        case DType::F16:
            return 7;
        case DType::F32:
            return 8;
        default:
            return 9;
    }
}

/// The result dtype of a binary op on `a` and `b`.
constexpr DType promote(DType a, DType b) {
    return promotion_rank(a) >= promotion_rank(b) ? a : b;
}

}  // namespace ember::detail
