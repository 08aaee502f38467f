#pragma once
// The structural check every FusionBackend runs on a program before compiling it.
#include <cstddef>

#include "program.hpp"

namespace ember::fusion {

/// Checks a program's structure before a backend compiles it: instructions and outputs present,
/// rank at most `max_rank`, registers of f32, f64, i64 or bool, every operand written before it
/// is read, where/mask_fill masks bool, outputs naming instructions' registers. Throws an
/// ember::Error naming the fault.
void check_program(const Program& p, std::size_t max_rank);

}  // namespace ember::fusion
