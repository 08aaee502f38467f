# Per-backend switches: on when the toolchain is found, off otherwise. Configure never fails
# because one is absent.
find_package(Vulkan QUIET COMPONENTS glslc)
if(Vulkan_FOUND AND Vulkan_glslc_FOUND)
  set(_ember_vulkan_default ON)
else()
  set(_ember_vulkan_default OFF)
endif()
option(EMBER_VULKAN "Build the Vulkan backend" ${_ember_vulkan_default})

include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  set(_ember_cuda_default ON)
else()
  set(_ember_cuda_default OFF)
endif()
option(EMBER_CUDA "Build the CUDA backend" ${_ember_cuda_default})
message(STATUS "ember backends: cpu=ON vulkan=${EMBER_VULKAN} cuda=${EMBER_CUDA}")
