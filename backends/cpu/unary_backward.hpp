#pragma once
// The one-pass unary gradients of unary_backward.cpp (a header of their own rather than a section
// of kernels.hpp, which every kernel file includes).
#include <optional>

#include "kernels.hpp"

namespace ember::detail::cpu {

/// dL/dx of Relu, Tanh, Sigmoid (v: the op's output) or Gelu, Erf (v: its input) in one pass;
/// nothing for other ops or operands that are not dense, alike and f32/f64.
std::optional<CpuTensor> unary_backward(UnaryOp op, const CpuTensor& grad, const CpuTensor& v);

}  // namespace ember::detail::cpu
