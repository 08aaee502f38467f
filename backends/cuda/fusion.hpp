#pragma once
// Fusion<Cuda> inside the backend: the generator of a fused program's CUDA C++
// (fusion_codegen.cpp) and the module a program compiles to (fusion.cpp). Kept apart so that
// the generator is plain host code, testable on a machine without a GPU.
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ember/tensor/fusion_program.hpp"

namespace ember::detail::cuda {

/// How a scalar slot reaches the kernel: as a double (float registers) or an int64.
enum class ScalarParam : std::uint8_t { F64, I64 };

/// The generated source of a program and what its kernels take.
struct FusedSource {
    std::string name;                  ///< base name of the kernels ("ember_fused_<hash>")
    std::string code;                  ///< CUDA C++ for NVRTC (no #include)
    bool dense = false;                ///< every input dense: <name>_vec4 and <name>_dense;
                                       ///< otherwise <name>_strided
    std::vector<ScalarParam> scalars;  ///< the kernel's scalar parameters, by slot
    bool rows = false;                 ///< a reduction ends it: <name>_rows alone (rows, cols,
                                       ///< the geometry when strided, ..., the reduced output)
};

/// Checks a program as fused_compile must (register types, operand order, outputs): throws
/// ember::Error naming what is wrong.
void check_program(const fusion::Program& p);
/// The kernels of a checked program. Their parameters, in order: n (int64); for strided
/// kernels a geometry struct (shape and each input's strides, the program's rank wide); input
/// pointers; output pointers; scalar slots.
FusedSource generate_fused_source(const fusion::Program& p);

/// The functions of one program loaded into one device.
struct FusedFunctions {
    void* vec4 = nullptr;     ///< CUfunction: four elements a thread, vector loads
    void* dense = nullptr;    ///< CUfunction: one element a thread, dense inputs
    void* strided = nullptr;  ///< CUfunction: per-input strides
    void* rows = nullptr;     ///< CUfunction: a block a row, ending in the row's reduction
};

/// A compiled fused program: its source, and its module on each device that launched it
/// (compiled for that device's architecture on first use).
struct FusedModule {
    FusedSource source;                              ///< what NVRTC compiles
    std::string key;                                 ///< the program's structure key
    std::mutex mu;                                   ///< guards `loaded`
    std::unordered_map<int, FusedFunctions> loaded;  ///< by device index
};

}  // namespace ember::detail::cuda
