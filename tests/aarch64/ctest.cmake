# CTest entries for 64-bit Arm (included by tests/CMakeLists.txt), where the cross compiler
# (g++-aarch64-linux-gnu) and qemu-aarch64 (qemu-user) are installed:
#   aarch64.neon_kernels  the NEON kernels on their own (neon_kernels.cpp), under qemu
# and, with -DEMBER_TEST_AARCH64=ON and the target's zlib and SQLite installed (multiarch arm64
# packages; scripts/test.sh, which CI runs, sets both), the cross build of tests/aarch64 and its
# programs under qemu (docs/platforms.md):
#   aarch64.build      the cross build (ember's libraries, the CPU suites, the mnist example)
#   aarch64.ops        the CPU op, module-op, loss and kernel suites (NEON kernels)
#   aarch64.autodiff   the autodiff suites (test_autodiff, test_autodiff_ops)
#   aarch64.portable   GEMM, kernels, unary ops, sums, activations, convolutions with
#                      EMBER_CPU_NEON=0
#   aarch64.mnist      the mnist example's inference, against the build machine's
find_program(EMBER_AARCH64_GXX aarch64-linux-gnu-g++)
find_program(EMBER_QEMU_AARCH64 qemu-aarch64)
if(CMAKE_CROSSCOMPILING OR NOT EMBER_AARCH64_GXX OR NOT EMBER_QEMU_AARCH64)
  message(STATUS "aarch64 tests: off (need aarch64-linux-gnu-g++ and qemu-aarch64)")
  return()
endif()
set(_a64_run ${CMAKE_CURRENT_LIST_DIR}/run.sh)
# Where the cross build and the programs' outputs go (another build folder's can be shared).
set(EMBER_AARCH64_WORK ${CMAKE_BINARY_DIR}/aarch64 CACHE PATH
    "Folder of the AArch64 cross build (tests/aarch64/run.sh)")
set(_a64_work ${EMBER_AARCH64_WORK})
add_test(NAME aarch64.neon_kernels COMMAND bash ${_a64_run} kernels ${_a64_work}/kernels)
set_tests_properties(aarch64.neon_kernels PROPERTIES TIMEOUT 600 LABELS aarch64)

option(EMBER_TEST_AARCH64 "Register the AArch64 cross build's suites (qemu-aarch64)" OFF)
find_file(EMBER_AARCH64_ZLIB libz.so PATHS /usr/lib/aarch64-linux-gnu NO_DEFAULT_PATH)
find_file(EMBER_AARCH64_SQLITE libsqlite3.so PATHS /usr/lib/aarch64-linux-gnu NO_DEFAULT_PATH)
if(NOT EMBER_TEST_AARCH64)
  return()
endif()
if(NOT EMBER_AARCH64_ZLIB OR NOT EMBER_AARCH64_SQLITE)
  message(STATUS "aarch64 suites: off (need the arm64 zlib1g-dev and libsqlite3-dev)")
  return()
endif()
add_test(NAME aarch64.build COMMAND bash ${_a64_run} build ${_a64_work})
set_tests_properties(aarch64.build PROPERTIES FIXTURES_SETUP aarch64_build TIMEOUT 2400
                     PROCESSORS 2 LABELS aarch64)
set(_a64_suites
    "ops|~[autodiff]"
    "autodiff|[autodiff]"
    "portable|[gemm],[cpu_kernels],[float][unary],[numeric][sum],[activation],[module][conv]")
foreach(entry IN LISTS _a64_suites)
  string(REPLACE "|" ";" entry "${entry}")
  list(GET entry 0 name)
  list(GET entry 1 filter)
  add_test(NAME aarch64.${name} COMMAND bash ${_a64_run} suite ${_a64_work} "${filter}")
  set_tests_properties(aarch64.${name} PROPERTIES FIXTURES_REQUIRED aarch64_build TIMEOUT 1200
                       LABELS aarch64)
endforeach()
set_tests_properties(aarch64.portable PROPERTIES ENVIRONMENT EMBER_CPU_NEON=0)
if(EMBER_BUILD_EXAMPLES AND TARGET ember_train)  # the build machine's mnist example
  add_test(NAME aarch64.mnist COMMAND bash ${_a64_run} mnist ${_a64_work} $<TARGET_FILE:mnist>)
  set_tests_properties(aarch64.mnist PROPERTIES FIXTURES_REQUIRED aarch64_build TIMEOUT 900
                       LABELS aarch64)
endif()
