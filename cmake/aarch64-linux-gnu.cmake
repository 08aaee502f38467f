# Toolchain file for 64-bit Arm Linux (AArch64) with Debian's cross compiler
# (g++-aarch64-linux-gnu). Libraries of the target come from Debian's multiarch packages
# (`dpkg --add-architecture arm64`, then e.g. zlib1g-dev:arm64 libsqlite3-dev:arm64, and
# libopenblas-dev:arm64 for EMBER_CPU_BLAS), installed under /usr/lib/aarch64-linux-gnu.
# Programs and tests run under qemu-aarch64 (Debian: qemu-user) where it is installed.
#
#   cmake -S . -B build-arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#         -DEMBER_VULKAN=OFF -DEMBER_CUDA=OFF -DEMBER_CPU_BLAS=OFF
#
# See docs/platforms.md.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(EMBER_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${EMBER_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${EMBER_CROSS_TRIPLE}-g++)

# Search the target's libraries and headers: multiarch puts them under /usr/lib/<triple> and
# /usr/include, the cross compiler's own under /usr/<triple>. Programs (code generators, pkg-config)
# are the build machine's.
set(CMAKE_FIND_ROOT_PATH /usr/${EMBER_CROSS_TRIPLE} /)
set(CMAKE_LIBRARY_ARCHITECTURE ${EMBER_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config (OpenBLAS) reads the target's .pc files only.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${EMBER_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig)

# add_test() and the tests' discovery run target programs through qemu, pointed at the target's
# dynamic loader and libraries. LD_LIBRARY_PATH makes the loader take the C and C++ runtime of the
# cross toolchain (its own glibc build) before an arm64 multiarch libc6 in /lib/<triple>, which
# does not match that loader (threads hang: docs/platforms.md).
find_program(EMBER_QEMU_AARCH64 qemu-aarch64)
if(EMBER_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${EMBER_QEMU_AARCH64} -L /usr/${EMBER_CROSS_TRIPLE}
                                    -E LD_LIBRARY_PATH=/usr/${EMBER_CROSS_TRIPLE}/lib)
endif()

# msgpack-cxx (NamedMpk records) is header-only, but Debian files its CMake package under the
# build machine's multiarch directory, and its arm64 package would pull in Boost's: take the
# build machine's package (its headers are the same).
set(_ember_host_msgpack /usr/lib/${CMAKE_HOST_SYSTEM_PROCESSOR}-linux-gnu/cmake/msgpackc-cxx)
if(NOT msgpack_DIR AND EXISTS ${_ember_host_msgpack}/msgpack-config.cmake)
  set(msgpack_DIR ${_ember_host_msgpack})
endif()
