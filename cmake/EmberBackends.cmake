# Per-backend switches: on when the toolchain is found, off otherwise. Configure never fails
# because one is absent.
# Vulkan needs glslc (build-time shaders) and shaderc with glslang (Fusion<Vulkan>'s run-time
# kernels; Debian: libshaderc-dev glslang-dev spirv-tools).
find_package(Vulkan QUIET COMPONENTS glslc shaderc_combined)
find_package(Threads QUIET)
find_package(glslang CONFIG QUIET)
if(Vulkan_FOUND AND Vulkan_glslc_FOUND AND Vulkan_shaderc_combined_FOUND AND glslang_FOUND)
  set(_ember_vulkan_default ON)
else()
  set(_ember_vulkan_default OFF)
endif()
option(EMBER_VULKAN "Build the Vulkan backend" ${_ember_vulkan_default})

include(CheckLanguage)
# nvcc is often not on PATH: look in the toolkit's usual home before giving up.
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
endif()
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  set(_ember_cuda_default ON)
else()
  set(_ember_cuda_default OFF)
endif()
option(EMBER_CUDA "Build the CUDA backend" ${_ember_cuda_default})
message(STATUS "ember backends: cpu=ON vulkan=${EMBER_VULKAN} cuda=${EMBER_CUDA}")
