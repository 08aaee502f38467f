// Catch2 main for the cross-built test program (tests/aarch64/CMakeLists.txt).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
