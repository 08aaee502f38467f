#pragma once
// The structural check every FusionBackend runs on a program before compiling it (tensor layer,
// beside the program IR, so that backends can call it).
#include <cstddef>

#include "../export.hpp"
#include "fusion_program.hpp"
#include "shape.hpp"

namespace ember::fusion {

/// Checks a program's structure before a backend compiles it: instructions and outputs present,
/// rank at most `max_rank`, registers of f32, f64, i64 or bool, every operand written before it
/// is read, where/mask_fill masks bool, outputs naming instructions' registers. Throws an
/// ember::Error naming the fault.
EMBER_API void check_program(const Program& p, std::size_t max_rank);

/// The shape of the reduction that ends a program launched over `shape`: `shape` with its last
/// dim 1. ShapeError unless `shape` has a rank of 1 or more and elements.
EMBER_API Shape reduced_shape(const Shape& shape);

}  // namespace ember::fusion
