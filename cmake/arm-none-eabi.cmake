# Toolchain file for Cortex-M firmware (Debian: gcc-arm-none-eabi, libnewlib-arm-none-eabi,
# libstdc++-arm-none-eabi-newlib). Pick the core with -DEMBER_ARM_CPU=cortex-m4 (hard-float,
# FPv4: qemu's mps2-an386), cortex-m33 (FPv5: mps2-an505) or cortex-m3 (soft-float: mps2-an385).
#
#   cmake -S examples/firmware -B build-fw -DCMAKE_TOOLCHAIN_FILE=cmake/arm-none-eabi.cmake \
#         -DEMBER_ARM_CPU=cortex-m4
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_CXX_COMPILER arm-none-eabi-g++)
set(CMAKE_ASM_COMPILER arm-none-eabi-gcc)
# No OS to link a test executable against while CMake probes the compiler.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

set(EMBER_ARM_CPU cortex-m4 CACHE STRING "Cortex-M core: cortex-m4, cortex-m33 or cortex-m3")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES EMBER_ARM_CPU)
if(EMBER_ARM_CPU STREQUAL "cortex-m4")
  set(_ember_arm_flags "-mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=hard")
elseif(EMBER_ARM_CPU STREQUAL "cortex-m33")
  set(_ember_arm_flags "-mcpu=cortex-m33 -mthumb -mfpu=fpv5-sp-d16 -mfloat-abi=hard")
elseif(EMBER_ARM_CPU STREQUAL "cortex-m3")
  set(_ember_arm_flags "-mcpu=cortex-m3 -mthumb -mfloat-abi=soft")
else()
  message(FATAL_ERROR "EMBER_ARM_CPU must be cortex-m4, cortex-m33 or cortex-m3, got '${EMBER_ARM_CPU}'")
endif()
set(CMAKE_C_FLAGS_INIT "${_ember_arm_flags} -ffunction-sections -fdata-sections")
set(CMAKE_ASM_FLAGS_INIT "${_ember_arm_flags}")
set(CMAKE_CXX_FLAGS_INIT
    "${_ember_arm_flags} -ffunction-sections -fdata-sections -fno-exceptions -fno-rtti -fno-threadsafe-statics -Wno-psabi")
# newlib-nano with semihosting (printf, exit and clock through the debugger, here qemu).
set(CMAKE_EXE_LINKER_FLAGS_INIT
    "${_ember_arm_flags} -specs=nano.specs -specs=rdimon.specs -u _printf_float -Wl,--gc-sections")

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
