# EmberPkgConfig.cmake — ember.pc, for build systems other than CMake:
#
#   c++ app.cpp $(pkg-config --cflags --libs ember)
#
# It covers the tensor layer and the CPU backend (ember::ember + ember::cpu). The prefix is
# computed from the file's own place (${pcfiledir}), so that an installation moved elsewhere, or
# installed with `cmake --install --prefix`, still works. A static ember lists what it links
# itself (OpenBLAS, zlib, threads) in Libs; a shared one keeps them private.
include_guard(GLOBAL)
include(GNUInstallDirs)

set(EMBER_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig"
    CACHE STRING "Where ember.pc is installed (relative to the prefix)")
mark_as_advanced(EMBER_INSTALL_PKGCONFIGDIR)

# Paths relative to ${pcfiledir} where the install directories are relative to the prefix.
if(IS_ABSOLUTE "${EMBER_INSTALL_PKGCONFIGDIR}")
  set(EMBER_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(_ember_pc_dir "${EMBER_INSTALL_PKGCONFIGDIR}")
else()
  set(_ember_pc_dir "/prefix/${EMBER_INSTALL_PKGCONFIGDIR}")
  file(RELATIVE_PATH _ember_up "${_ember_pc_dir}" "/prefix")
  string(REGEX REPLACE "/$" "" _ember_up "${_ember_up}")
  set(EMBER_PC_PREFIX "\${pcfiledir}/${_ember_up}")
endif()
foreach(_kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_kind}}")
    set(EMBER_PC_${_kind} "${CMAKE_INSTALL_${_kind}}")
  else()
    set(EMBER_PC_${_kind} "\${prefix}/${CMAKE_INSTALL_${_kind}}")
  endif()
endforeach()

set(_ember_pc_deps "")
if(NOT EMBER_FREESTANDING)
  list(APPEND _ember_pc_deps zlib)
endif()
if(EMBER_CPU_BLAS)
  list(APPEND _ember_pc_deps openblas)
endif()
list(JOIN _ember_pc_deps " " _ember_pc_deps)
set(EMBER_PC_CFLAGS "")
set(EMBER_PC_LIBS "")
if(EMBER_CPU_THREADS)
  string(APPEND EMBER_PC_CFLAGS " -pthread")
  string(APPEND EMBER_PC_LIBS " -pthread")
endif()
if(EMBER_SANITIZE)
  string(APPEND EMBER_PC_LIBS " -fsanitize=address,undefined")
endif()
set(EMBER_PC_REQUIRES_LINES "")
if(_ember_pc_deps AND BUILD_SHARED_LIBS)
  set(EMBER_PC_REQUIRES_LINES "Requires.private: ${_ember_pc_deps}\n")
elseif(_ember_pc_deps)
  set(EMBER_PC_REQUIRES_LINES "Requires: ${_ember_pc_deps}\n")
endif()

configure_file(${CMAKE_CURRENT_LIST_DIR}/ember.pc.in ${PROJECT_BINARY_DIR}/ember-package/ember.pc
               @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ember-package/ember.pc
        DESTINATION ${EMBER_INSTALL_PKGCONFIGDIR}
        COMPONENT ember_development)
