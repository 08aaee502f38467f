#pragma once
// Kernel files compiled once per instruction set (EMBER_CPU_ARCH=portable on x86-64, see
// CMakeLists.txt): the build wraps such a file in a generated source that defines
// EMBER_CPU_ISA_BASELINE or EMBER_CPU_ISA_AVX2 and includes it. The file encloses its code in
// EMBER_CPU_ISA_BEGIN / EMBER_CPU_ISA_END, inside namespace ember::detail::cpu: its functions
// then live in isa_baseline or isa_avx2 (no two copies share a symbol), and the AVX2 copy is
// compiled for x86-64-v3's instruction set (AVX2, FMA, F16C, BMI1/2, LZCNT, MOVBE).
// isa_dispatch.cpp defines the entry points that kernels.hpp declares and picks a copy once, at
// the first call, from the processor's features.
//
// EMBER_CPU_ISA_BEGIN comes after the file's #includes: the target is switched after the
// headers, so that the inline functions of the headers (std::, ember's own) keep the baseline
// instruction set wherever the linker takes their one copy from; they are still inlined into
// the AVX2 code, which may call anything compiled for a subset of its target.
// Without either macro (a single build for the compile target) both markers are empty.
// EMBER_CPU_ISA_NS names the namespace of the copy being compiled: a call from one entry point
// to another of the same file qualifies it so (unqualified, argument-dependent lookup would also
// find the dispatching declaration of kernels.hpp, and the call would be ambiguous).

// _Pragma takes one string literal: the lines below stay as written.
// clang-format off
#if defined(EMBER_CPU_ISA_AVX2)
#if defined(__clang__)
#define EMBER_CPU_ISA_BEGIN                                                                 \
    _Pragma("clang attribute push(__attribute__((target(\"avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,popcnt\"))), apply_to = function)") \
    namespace isa_avx2 {
#define EMBER_CPU_ISA_END } _Pragma("clang attribute pop")
#define EMBER_CPU_ISA_NS ::ember::detail::cpu::isa_avx2
#else
#define EMBER_CPU_ISA_BEGIN                                                   \
    _Pragma("GCC push_options")                                               \
    _Pragma("GCC target(\"avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,popcnt\")") \
    namespace isa_avx2 {
#define EMBER_CPU_ISA_END } _Pragma("GCC pop_options")
#define EMBER_CPU_ISA_NS ::ember::detail::cpu::isa_avx2
#endif
#elif defined(EMBER_CPU_ISA_BASELINE)
#define EMBER_CPU_ISA_BEGIN namespace isa_baseline {
#define EMBER_CPU_ISA_END }
#define EMBER_CPU_ISA_NS ::ember::detail::cpu::isa_baseline
#else
#define EMBER_CPU_ISA_BEGIN
#define EMBER_CPU_ISA_END
#define EMBER_CPU_ISA_NS ::ember::detail::cpu
#endif
// clang-format on
