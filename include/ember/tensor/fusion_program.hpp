#pragma once
// The fused program: what Fusion<B> hands to a backend to compile and launch. Backend-neutral
// data — registers, instructions over them and the outputs — so that each backend turns it into
// its own kernel (a tiled loop on the CPU, SPIR-V on Vulkan, PTX on CUDA). It lives in the tensor
// layer (as Burn's burn-ir beside burn-tensor) because backends, below the Fusion decorator, must
// know it.
//
// Registers 0..inputs.size()-1 hold the inputs; instruction i writes register
// inputs.size() + i. Every register spans the program's iteration shape (inputs are expanded to
// it, as strided views). Scalar operands are not part of the program: instructions name a slot
// of the scalar array passed at launch, so programs that differ only in their scalars share one
// compiled kernel.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../export.hpp"
#include "dtype.hpp"
#include "ops.hpp"

namespace ember::fusion {

/// The kind of an instruction.
enum class OpKind : std::uint8_t {
    Unary,          ///< code: UnaryOp; a
    Binary,         ///< code: BinaryOp; a, b
    BinaryScalar,   ///< code: BinaryOp; a, scalar s0 (RSub/RDiv/... put the scalar left)
    Compare,        ///< code: CompareOp; a, b → bool
    CompareScalar,  ///< code: CompareOp; a, scalar s0 → bool
    Where,          ///< mask a ? b : c
    MaskFill,       ///< mask b ? scalar s0 : a
    Clamp,          ///< min(max(a, s0), s1)
    Cast,           ///< a converted to the instruction's dtype (float → int truncates)
};

/// One instruction: `dtype` is its result's element type, operands are registers.
struct Instr {
    OpKind kind = OpKind::Unary;  ///< what it computes
    std::uint8_t code = 0;        ///< the UnaryOp / BinaryOp / CompareOp, by kind
    DType dtype = DType::F32;     ///< element type of the result
    std::uint16_t a = 0;          ///< first operand register
    std::uint16_t b = 0;          ///< second operand register (Binary, Compare, Where, MaskFill)
    std::uint16_t c = 0;          ///< third operand register (Where)
    std::uint16_t s0 = 0;  ///< first scalar slot (BinaryScalar, CompareScalar, MaskFill, Clamp)
    std::uint16_t s1 = 0;  ///< second scalar slot (Clamp)
};

/// How many operand registers an instruction of kind `k` reads (a; a, b; or a, b, c).
constexpr int operand_count(OpKind k) {
    if (k == OpKind::Where) return 3;
    return k == OpKind::Binary || k == OpKind::Compare || k == OpKind::MaskFill ? 2 : 1;
}

/// An input of the program: its element type and whether it is laid out densely over the
/// iteration shape (contiguous, no broadcast), which lets kernels load it with vector loads.
struct InputDesc {
    DType dtype = DType::F32;  ///< element type
    bool dense = true;         ///< contiguous over the iteration shape
};

/// A reduction that ends a program: register `reg` reduced along the last dim of the iteration
/// shape, written as one more output of that shape with the last dim 1 (after `outputs`).
/// Kernels that compute it never write `reg` itself unless it is also among `outputs`.
struct RowReduce {
    ReduceOp op = ReduceOp::Sum;  ///< Sum, Mean, Max or Min (NaN-propagating, as unfused)
    std::uint16_t reg = 0;        ///< the float register reduced
};

/// A fused elementwise program, optionally ending in a reduction along the last dim.
struct EMBER_API Program {
    std::vector<InputDesc> inputs;       ///< registers 0..n-1
    std::vector<Instr> instrs;           ///< in order; instruction i writes register n + i
    std::vector<std::uint16_t> outputs;  ///< registers written to output tensors
    std::size_t rank = 1;                ///< rank of the iteration shape (strided kernels)
    std::optional<RowReduce> reduce;     ///< the reduction that ends it, if any

    /// The element type of register `r`.
    DType reg_dtype(std::size_t r) const {
        return r < inputs.size() ? inputs[r].dtype : instrs[r - inputs.size()].dtype;
    }
    /// The structure as text: equal keys mean the same compiled kernel (scalar values, shapes
    /// and data never appear in it).
    std::string key() const;
    /// A readable listing, one instruction a line (for debugging and the docs).
    std::string to_string() const;
};

/// What a backend applies inside its matmul when Fusion<B> hands it the ops that follow one (an
/// epilogue): the bias row (when given) added, then relu when `relu`.
struct MatmulEpilogue {
    bool relu = false;  ///< relu after the bias
};

/// A backend that applies a bias row and relu inside its 2-D matmul: `fused_matmul_epilogue`
/// returns the result, or nothing for operands it does not take that way (the caller then runs
/// the matmul and the ops after it). Fusion<B> hands it a recorded matmul's epilogue;
/// Autodiff<B> offers it too where B has it, differentiated, and module::linear uses it.
template <typename B>
concept MatmulEpilogueBackend = requires(const typename B::FloatTensorPrimitive& t,
                                         std::optional<typename B::FloatTensorPrimitive> bias) {
    { B::fused_matmul_epilogue(t, t, bias, MatmulEpilogue{}) } ->
        std::same_as<std::optional<typename B::FloatTensorPrimitive>>;
};

/// Whether B's `fused_matmul_epilogue` can ever return a result: false where a decorator
/// declares it for every inner backend but B's inner one has none (`B::kMatmulEpilogue`), so
/// callers skip preparing operands (module::linear's 2-D view) for a call that always declines.
template <typename B>
inline constexpr bool may_fuse_matmul_epilogue = [] {
    if constexpr (!MatmulEpilogueBackend<B>) return false;
    else if constexpr (requires { B::kMatmulEpilogue; }) return bool(B::kMatmulEpilogue);
    else return true;
}();

/// Whether Fusion<B> runs a matmul followed by a bias add and/or relu as one call to a backend
/// that takes epilogues (`B::fused_matmul_epilogue`). On by default; EMBER_FUSION_EPILOGUE=0
/// turns it off at start-up.
EMBER_API bool matmul_epilogues();
/// Turns matmul epilogues on or off (for measuring one against the other).
EMBER_API void set_matmul_epilogues(bool on);

/// Counters of the fusion machinery, process-wide.
struct Stats {
    std::uint64_t kernels_launched =
        0;                             ///< fused kernels plus ops run unfused on the inner backend
    std::uint64_t fused_launches = 0;  ///< fused kernels launched
    std::uint64_t programs_compiled = 0;  ///< fused programs compiled (cache misses)
    std::uint64_t cache_hits = 0;         ///< fused launches that found their kernel compiled
    std::uint64_t ops_fused = 0;          ///< elementwise ops that ran inside fused kernels
    std::uint64_t epilogues = 0;  ///< matmuls that ran with their bias/relu inside (one launch)
};
/// The counters now.
EMBER_API Stats stats();
/// Sets every counter to zero.
EMBER_API void reset_stats();

namespace detail {
/// Counter updates (used by Fusion<B>).
EMBER_API void count_launch(bool fused, std::size_t ops);
EMBER_API void count_compile();
EMBER_API void count_cache_hit();
EMBER_API void count_epilogue();
}  // namespace detail

}  // namespace ember::fusion
