#pragma once
// EMBER_API marks what ember's compiled libraries export: the classes, functions and template
// instantiations a program (or another ember library) links against. The libraries are compiled
// with hidden visibility by default (-fvisibility=hidden -fvisibility-inlines-hidden, see
// CMakeLists.txt), so everything else stays inside the library that defines it: internal helpers,
// the implicit instantiations of ember's templates, and the third-party code compiled in.
//
// On ELF and Mach-O hosts the mark is the same whether ember is built static or shared: the
// objects of both builds are then identical (one compile serves both), and a static ember linked
// into a user's own shared library keeps its internals hidden there too. Where visibility does not
// apply it is empty: firmware (EMBER_FREESTANDING), WebAssembly (Emscripten links statically) and
// Windows (ember builds no DLLs).
#if defined(EMBER_FREESTANDING) && EMBER_FREESTANDING
#define EMBER_API
#elif defined(__EMSCRIPTEN__) || defined(_WIN32) || defined(__CYGWIN__)
#define EMBER_API
#elif defined(__GNUC__) || defined(__clang__)
#define EMBER_API __attribute__((visibility("default")))
#else
#define EMBER_API
#endif
