# Toolchain file for WebAssembly with Emscripten (Debian: emscripten): Emscripten's own
# toolchain, plus what ember's browser build wants. The WebAssembly build is ember's
# freestanding configuration (EMBER_FREESTANDING: one thread, no BLAS, records from bytes, no
# exceptions), with 128-bit SIMD, which every current browser runs.
#
#   cmake -S examples/web-classifier -B build-wasm -DCMAKE_TOOLCHAIN_FILE=cmake/emscripten.cmake
#
# Emscripten's location: EMSCRIPTEN_ROOT (cache or environment), else Debian's.
if(NOT EMSCRIPTEN_ROOT)
  if(DEFINED ENV{EMSCRIPTEN_ROOT})
    set(EMSCRIPTEN_ROOT "$ENV{EMSCRIPTEN_ROOT}")
  else()
    set(EMSCRIPTEN_ROOT /usr/share/emscripten)
  endif()
endif()
set(EMSCRIPTEN_ROOT "${EMSCRIPTEN_ROOT}" CACHE PATH "Emscripten's root (holding emcc)")
if(NOT EXISTS "${EMSCRIPTEN_ROOT}/cmake/Modules/Platform/Emscripten.cmake")
  message(FATAL_ERROR "no Emscripten under '${EMSCRIPTEN_ROOT}': install it (Debian: emscripten) "
                      "or set EMSCRIPTEN_ROOT")
endif()
include("${EMSCRIPTEN_ROOT}/cmake/Modules/Platform/Emscripten.cmake")

set(CMAKE_CXX_FLAGS_INIT "-msimd128 -fno-exceptions -fno-rtti")
set(CMAKE_C_FLAGS_INIT "-msimd128")

# emcc's JavaScript optimiser needs the acorn parser. Debian installs it in /usr/share/nodejs,
# where its own Node.js looks but a Node.js from elsewhere does not: say where it is.
if(EXISTS /usr/share/nodejs/acorn)
  set(CMAKE_CXX_LINKER_LAUNCHER env NODE_PATH=/usr/share/nodejs)
endif()
