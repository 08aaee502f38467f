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
# One export set per component (EmberTargets.cmake: the tensor layer; Ember<Component>Targets.cmake:
# Cpu, Vulkan, Cuda, Data, Collective, Nccl, Train; EmberToolsTargets.cmake: ember-onnx), each
# with its own Ember<Component>Dependencies.cmake, so that find_package(Ember COMPONENTS Cpu)
# searches only for what ember::cpu needs, whatever else the installation was built with.
# The dependencies are discovered from each exported target's link interface: every imported
# target it links (Threads::Threads, PkgConfig::OPENBLAS for a static ember_cpu, ...) becomes a
# find_dependency() call in that component's file. A dependency this file does not know is
# reported at configure time; map it in _ember_dependency_code() below, or append CMake code to
# EMBER_PACKAGE_DEPENDENCIES (loaded with the tensor layer) before this file is included.

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
                             Nccl ember_nccl Train ember_train Dispatch ember_dispatch)
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

# ---- headers and libraries: one export set per component -------------------------------------
# The export set of each installed target: its component, Core for the tensor layer. Set <set>
# becomes Ember<set>Targets.cmake and Ember<set>Dependencies.cmake, the tensor layer's
# EmberTargets.cmake and EmberDependencies.cmake.
set(_ember_export_sets "")
foreach(_tgt IN LISTS _ember_install_targets)
  if(_tgt STREQUAL "ember")
    set(_set Core)
  else()
    list(FIND _ember_component_targets ${_tgt} _at)
    math(EXPR _at "${_at} - 1")
    list(GET _ember_component_targets ${_at} _set)
  endif()
  list(APPEND _ember_export_sets "${_set}")
  string(REGEX REPLACE "^Core$" "" _set "${_set}")
  install(TARGETS ${_tgt}
    EXPORT Ember${_set}Targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ember_development
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ember_runtime
            NAMELINK_COMPONENT ember_development
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ember_runtime
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()

# The ONNX importer and the CMake functions that drive it (ember_import_onnx, ember_embed_bytes):
# ember::onnx, an imported executable, loaded with every component.
set(EMBER_PACKAGE_HAS_TOOLS OFF)
if(TARGET ember-onnx)
  set(EMBER_PACKAGE_HAS_TOOLS ON)
  # With shared libraries, the installed tool finds them beside it, wherever the prefix is.
  set_target_properties(ember-onnx PROPERTIES EXPORT_NAME onnx
                        INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  install(TARGETS ember-onnx EXPORT EmberToolsTargets
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ember_development)
endif()
install(FILES ${PROJECT_SOURCE_DIR}/cmake/EmberOnnx.cmake ${PROJECT_SOURCE_DIR}/cmake/EmberEmbed.cmake
  DESTINATION ${EMBER_INSTALL_CMAKEDIR}
  COMPONENT ember_development)

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

# The find_dependency() code of one build target's imported link dependencies.
function(_ember_target_dependency_code tgt out_code out_deps)
  set(deps "")
  get_target_property(links ${tgt} INTERFACE_LINK_LIBRARIES)
  if(links)
    # Build-only entries never reach the export; LINK_ONLY/INSTALL_INTERFACE entries do.
    string(REGEX REPLACE "\\$<BUILD_INTERFACE:[^>]*>" "" links "${links}")
    string(REGEX REPLACE "\\$<(LINK_ONLY|INSTALL_INTERFACE):([^>]*)>" "\\2" links "${links}")
    foreach(dep IN LISTS links)
      if(NOT TARGET "${dep}" OR dep MATCHES "^ember::")
        continue()
      endif()
      get_target_property(imported ${dep} IMPORTED)
      if(NOT imported)
        continue()  # one of ours: must be in an export set (CMake checks that)
      endif()
      list(APPEND deps "${dep}")
    endforeach()
  endif()
  list(REMOVE_DUPLICATES deps)
  set(code "")
  foreach(dep IN LISTS deps)
    _ember_dependency_code("${dep}" c)
    if(c STREQUAL "")
      message(WARNING "EmberInstall: the exported target ${tgt} links the imported target "
                      "'${dep}', and EmberConfig.cmake does not know how to find it. "
                      "Add it to _ember_dependency_code() in cmake/EmberInstall.cmake.")
      continue()
    endif()
    string(FIND "${code}" "${c}" seen)
    if(seen EQUAL -1)
      string(APPEND code "${c}\n")
    endif()
  endforeach()
  set(${out_code} "${code}" PARENT_SCOPE)
  set(${out_deps} "${deps}" PARENT_SCOPE)
endfunction()

set(_ember_pkg_dir "${PROJECT_BINARY_DIR}/ember-package")
set(_ember_deps_summary "")
foreach(_tgt _set IN ZIP_LISTS _ember_install_targets _ember_export_sets)
  string(REGEX REPLACE "^Core$" "" _set "${_set}")
  _ember_target_dependency_code(${_tgt} _code _deps)
  if(_set STREQUAL "" AND DEFINED EMBER_PACKAGE_DEPENDENCIES)
    string(APPEND _code "${EMBER_PACKAGE_DEPENDENCIES}\n")
  endif()
  file(CONFIGURE OUTPUT ${_ember_pkg_dir}/Ember${_set}Dependencies.cmake
       CONTENT "# The packages ${_tgt}'s users need (generated by EmberInstall.cmake).\n${_code}"
       @ONLY)
  install(FILES ${_ember_pkg_dir}/Ember${_set}Dependencies.cmake
          DESTINATION ${EMBER_INSTALL_CMAKEDIR} COMPONENT ember_development)
  list(JOIN _deps " " _deps)
  list(APPEND _ember_deps_summary "${_tgt}: ${_deps}")
endforeach()

# Users of a sanitized static build must link the sanitizer runtimes too.
if(EMBER_SANITIZE)
  set(EMBER_CONFIG_LINK_OPTIONS "-fsanitize=address,undefined")
else()
  set(EMBER_CONFIG_LINK_OPTIONS "")
endif()

# ---- the package files ------------------------------------------------------------------------

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/EmberConfig.cmake.in
  ${_ember_pkg_dir}/EmberConfig.cmake
  INSTALL_DESTINATION ${EMBER_INSTALL_CMAKEDIR}
  NO_SET_AND_CHECK_MACRO)

write_basic_package_version_file(
  ${_ember_pkg_dir}/EmberConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  # 0.x: every minor release may break the API (a request for 0.1 accepts 0.1.z, never 0.2).
  COMPATIBILITY SameMinorVersion)

list(REMOVE_DUPLICATES _ember_export_sets)
if(EMBER_PACKAGE_HAS_TOOLS)
  list(APPEND _ember_export_sets Tools)
endif()
foreach(_set IN LISTS _ember_export_sets)
  string(REGEX REPLACE "^Core$" "" _set "${_set}")
  install(EXPORT Ember${_set}Targets
    NAMESPACE ember::
    FILE Ember${_set}Targets.cmake
    DESTINATION ${EMBER_INSTALL_CMAKEDIR}
    COMPONENT ember_development)
  # The same package, usable straight from this build tree: -DEmber_DIR=<build>/ember-package.
  export(EXPORT Ember${_set}Targets
    NAMESPACE ember::
    FILE ${_ember_pkg_dir}/Ember${_set}Targets.cmake)
endforeach()
# The build-tree package includes the CMake functions from the source tree.
foreach(_f EmberOnnx EmberEmbed)
  file(CONFIGURE OUTPUT ${_ember_pkg_dir}/${_f}.cmake
       CONTENT "include(\"${PROJECT_SOURCE_DIR}/cmake/${_f}.cmake\")\n")
endforeach()

install(FILES
  ${_ember_pkg_dir}/EmberConfig.cmake
  ${_ember_pkg_dir}/EmberConfigVersion.cmake
  DESTINATION ${EMBER_INSTALL_CMAKEDIR}
  COMPONENT ember_development)

include(EmberPkgConfig)

list(JOIN _ember_deps_summary "; " _ember_deps_summary)
message(STATUS "ember package: components ${EMBER_PACKAGE_COMPONENTS}; "
               "dependencies: ${_ember_deps_summary}")
