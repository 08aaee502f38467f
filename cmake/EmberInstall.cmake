# EmberInstall.cmake — install rules and the CMake package of ember.
#
# Included by the top-level CMakeLists.txt (when EMBER_INSTALL is on) after every library target
# exists. It installs the public headers and the libraries, exports them under the namespace
# `ember::` (EmberTargets.cmake) and writes EmberConfig.cmake + EmberConfigVersion.cmake, so that
#
#   find_package(Ember CONFIG REQUIRED COMPONENTS Cpu)
#   target_link_libraries(app PRIVATE ember::cpu)   # ember::cpu brings ember::ember
#
# and, for training programs, COMPONENTS Cpu Data Train with ember::data / ember::train.
#
# works from an install prefix (and, through export(), from this build tree).
#
# The package's dependencies are discovered from the exported targets' link interfaces: every
# imported target they link (Threads::Threads, PkgConfig::OPENBLAS for a static ember_cpu, ...)
# becomes a find_dependency() call in EmberConfig.cmake. A dependency this file does not know is
# reported at configure time; map it in _ember_dependency_code() below, or append CMake code to
# EMBER_PACKAGE_DEPENDENCIES before this file is included.

include_guard(GLOBAL)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(EMBER_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/Ember"
    CACHE STRING "Where EmberConfig.cmake is installed (relative to the prefix)")
mark_as_advanced(EMBER_INSTALL_CMAKEDIR)

# ---- which libraries / components exist in this build ----------------------------------------
# component name (as given to find_package) -> build target; the exported name is ember::<lower>.
set(_ember_component_targets Cpu ember_cpu Vulkan ember_vulkan Cuda ember_cuda
                             Data ember_data Collective ember_collective
                             Nccl ember_nccl Train ember_train)
set(_ember_install_targets ember)
set(EMBER_PACKAGE_COMPONENTS "")
list(LENGTH _ember_component_targets _n)
math(EXPR _n "${_n} - 1")
foreach(_i RANGE 0 ${_n} 2)
  math(EXPR _j "${_i} + 1")
  list(GET _ember_component_targets ${_i} _comp)
  list(GET _ember_component_targets ${_j} _tgt)
  if(TARGET ${_tgt})
    list(APPEND _ember_install_targets ${_tgt})
    list(APPEND EMBER_PACKAGE_COMPONENTS ${_comp})
  endif()
endforeach()

# ---- headers and libraries --------------------------------------------------------------------
install(TARGETS ${_ember_install_targets}
  EXPORT EmberTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ember_development
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ember_runtime
          NAMELINK_COMPONENT ember_development
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ember_runtime
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ember
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT ember_development
  FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h" PATTERN "*.inc" PATTERN "*.inl")

install(FILES ${PROJECT_SOURCE_DIR}/LICENSE-MIT ${PROJECT_SOURCE_DIR}/LICENSE-APACHE
  DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/ember
  COMPONENT ember_development
  OPTIONAL)

# ---- dependencies of the exported targets -----------------------------------------------------
# CMake code for EmberConfig.cmake that makes the imported target `dep` exist; empty when unknown.
function(_ember_dependency_code dep out)
  set(code "")
  if(dep STREQUAL "Threads::Threads")
    set(code "find_dependency(Threads)")
  elseif(dep STREQUAL "PkgConfig::OPENBLAS")
    # A static ember_cpu links OpenBLAS privately; its users still link it. Find it the way the
    # build did (pkg-config), falling back on the library the build used.
    set(hint "")
    foreach(lib IN LISTS OPENBLAS_LINK_LIBRARIES)
      if(IS_ABSOLUTE "${lib}")
        get_filename_component(dir "${lib}" DIRECTORY)
        list(APPEND hint "${dir}")
      endif()
    endforeach()
    list(APPEND hint ${OPENBLAS_LIBRARY_DIRS})
    list(REMOVE_DUPLICATES hint)
    string(CONFIGURE [=[
if(NOT TARGET PkgConfig::OPENBLAS)
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(OPENBLAS QUIET IMPORTED_TARGET openblas)
  endif()
  if(NOT TARGET PkgConfig::OPENBLAS)
    set(_ember_openblas_hints "@hint@")
    find_library(EMBER_OPENBLAS_LIBRARY NAMES openblas HINTS ${_ember_openblas_hints})
    if(NOT EMBER_OPENBLAS_LIBRARY)
      set(Ember_FOUND FALSE)
      set(Ember_NOT_FOUND_MESSAGE
          "ember::cpu needs OpenBLAS: install it (Debian: libopenblas-dev) and pkg-config")
      return()
    endif()
    add_library(PkgConfig::OPENBLAS INTERFACE IMPORTED)
    set_property(TARGET PkgConfig::OPENBLAS PROPERTY
                 INTERFACE_LINK_LIBRARIES "${EMBER_OPENBLAS_LIBRARY}")
  endif()
endif()]=] code @ONLY)
  elseif(dep MATCHES "^nlohmann_json::")
    set(code "find_dependency(nlohmann_json)")
  elseif(dep MATCHES "^msgpack(c)?-cxx$" OR dep MATCHES "^msgpack")
    set(code "find_dependency(msgpack)")
  elseif(dep STREQUAL "ZLIB::ZLIB")
    set(code "find_dependency(ZLIB)")
  elseif(dep MATCHES "^SQLite::")
    set(code "find_dependency(SQLite3)")
  elseif(dep MATCHES "^fmt::")
    set(code "find_dependency(fmt)")
  elseif(dep MATCHES "^CUDA::")
    set(code "find_dependency(CUDAToolkit)")
  elseif(dep STREQUAL "Vulkan::shaderc_combined")
    set(code "find_dependency(Vulkan COMPONENTS shaderc_combined)")
  elseif(dep MATCHES "^Vulkan::")
    set(code "find_dependency(Vulkan)")
  elseif(dep MATCHES "^SPIRV-Tools")
    set(code "find_dependency(SPIRV-Tools-opt)")
  elseif(dep MATCHES "^glslang::")
    set(code "find_dependency(Threads)\nfind_dependency(glslang CONFIG)")
  elseif(dep MATCHES "^protobuf::")
    set(code "find_dependency(Protobuf)")
  endif()
  set(${out} "${code}" PARENT_SCOPE)
endfunction()

set(_ember_deps "")
foreach(_tgt IN LISTS _ember_install_targets)
  get_target_property(_links ${_tgt} INTERFACE_LINK_LIBRARIES)
  if(NOT _links)
    continue()
  endif()
  # Build-only entries never reach the export; LINK_ONLY/INSTALL_INTERFACE entries do.
  string(REGEX REPLACE "\\$<BUILD_INTERFACE:[^>]*>" "" _links "${_links}")
  string(REGEX REPLACE "\\$<(LINK_ONLY|INSTALL_INTERFACE):([^>]*)>" "\\2" _links "${_links}")
  foreach(_dep IN LISTS _links)
    if(NOT TARGET "${_dep}" OR _dep MATCHES "^ember::")
      continue()
    endif()
    get_target_property(_imported ${_dep} IMPORTED)
    if(NOT _imported)
      continue()  # one of ours: must be in the export set (CMake checks that)
    endif()
    list(APPEND _ember_deps "${_dep}")
  endforeach()
endforeach()
list(REMOVE_DUPLICATES _ember_deps)

set(_ember_dep_code "")
foreach(_dep IN LISTS _ember_deps)
  _ember_dependency_code("${_dep}" _code)
  if(_code STREQUAL "")
    message(WARNING "EmberInstall: the exported ember targets link the imported target "
                    "'${_dep}', and EmberConfig.cmake does not know how to find it. "
                    "Add it to _ember_dependency_code() in cmake/EmberInstall.cmake.")
    continue()
  endif()
  string(FIND "${_ember_dep_code}" "${_code}" _seen)
  if(_seen EQUAL -1)
    string(APPEND _ember_dep_code "${_code}\n")
  endif()
endforeach()
if(DEFINED EMBER_PACKAGE_DEPENDENCIES)
  string(APPEND _ember_dep_code "${EMBER_PACKAGE_DEPENDENCIES}\n")
endif()
set(EMBER_CONFIG_DEPENDENCIES "${_ember_dep_code}")

# Users of a sanitized static build must link the sanitizer runtimes too.
if(EMBER_SANITIZE)
  set(EMBER_CONFIG_LINK_OPTIONS "-fsanitize=address,undefined")
else()
  set(EMBER_CONFIG_LINK_OPTIONS "")
endif()

# ---- the package files ------------------------------------------------------------------------
set(_ember_pkg_dir "${PROJECT_BINARY_DIR}/ember-package")

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/EmberConfig.cmake.in
  ${_ember_pkg_dir}/EmberConfig.cmake
  INSTALL_DESTINATION ${EMBER_INSTALL_CMAKEDIR}
  NO_SET_AND_CHECK_MACRO)

write_basic_package_version_file(
  ${_ember_pkg_dir}/EmberConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)

install(EXPORT EmberTargets
  NAMESPACE ember::
  FILE EmberTargets.cmake
  DESTINATION ${EMBER_INSTALL_CMAKEDIR}
  COMPONENT ember_development)

install(FILES
  ${_ember_pkg_dir}/EmberConfig.cmake
  ${_ember_pkg_dir}/EmberConfigVersion.cmake
  DESTINATION ${EMBER_INSTALL_CMAKEDIR}
  COMPONENT ember_development)

# The same package, usable straight from this build tree: -DEmber_DIR=<build>/ember-package.
export(EXPORT EmberTargets
  NAMESPACE ember::
  FILE ${_ember_pkg_dir}/EmberTargets.cmake)

message(STATUS "ember package: components ${EMBER_PACKAGE_COMPONENTS}; "
               "dependencies: ${_ember_deps}")
