# Driver of the consumer tests (cmake -P). Variables (-D):
#   MODE                find_package | add_subdirectory
#   EMBER_SOURCE_DIR    ember's source tree
#   EMBER_BINARY_DIR    ember's build tree (find_package: installed from here)
#   EMBER_VERSION       the version the consumer asks find_package for
#   CONSUMER_SOURCE_DIR tests/consumer/project
#   WORK_DIR            scratch folder (the install prefix and the consumer's build)
#   GENERATOR MAKE_PROGRAM CXX_COMPILER CXX_LAUNCHER ("|"-separated) CXX_FLAGS BUILD_TYPE
#   SANITIZE            ON when ember was built with -DEMBER_SANITIZE=ON
#   JOBS                parallel build jobs (default 2)
#   STRICT              ON: the consumer also compiles headers.cpp, with -Wall -Wextra -Werror
#   CXX_CONFIG_FLAGS    the main build's CMAKE_CXX_FLAGS_<CONFIG> (SHARED: see below)
#   SHARED              ON (add_subdirectory): ember built with BUILD_SHARED_LIBS=ON and no build
#                       type, and consumer_shared (the Learner and Dispatch) linked against its
#                       shared libraries; checks that ember leaves the consumer's CMAKE_BUILD_TYPE
#                       alone, that its libraries carry their SONAME, that they export only
#                       ember's symbols, no ember::detail symbol but the listed exceptions, and
#                       the symbols a program needs
cmake_minimum_required(VERSION 3.25)

foreach(var MODE EMBER_SOURCE_DIR EMBER_BINARY_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT JOBS)
  set(JOBS 2)
endif()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()

# Runs one step, streaming its output; stops the test when it fails.
function(step what)
  string(TIMESTAMP t0 "%s")
  message(STATUS "consumer[${MODE}]: ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc COMMAND_ECHO STDOUT)
  string(TIMESTAMP t1 "%s")
  math(EXPR dt "${t1} - ${t0}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer[${MODE}]: ${what} failed (${rc}) after ${dt} s")
  endif()
  message(STATUS "consumer[${MODE}]: ${what} done in ${dt} s")
endfunction()

# Arguments every configure of the consumer project gets: the main build's toolchain.
set(configure_args -G "${GENERATOR}" "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}"
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
if(MAKE_PROGRAM)
  list(APPEND configure_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(CXX_COMPILER)
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(CXX_LAUNCHER)
  # Only the launcher program itself travels (arguments would split through execute_process).
  string(REPLACE "|" ";" launcher "${CXX_LAUNCHER}")
  list(GET launcher 0 launcher)
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER_LAUNCHER=${launcher}")
endif()
if(CXX_FLAGS)
  list(APPEND configure_args "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}")
endif()
if(STRICT)
  list(APPEND configure_args -DCONSUMER_STRICT=ON)
endif()
if(MODE STREQUAL "find_package")
  # The consumer's own files at -O0: these tests check what compiles, links and runs against
  # the installed package, which the compiler decides before it optimises, and the consumer's
  # programs are small (the work is in ember's libraries, built with the package's flags):
  # consumer_clang14 takes 41 CPU-s instead of 99, consumer_find_package 35 instead of 46
  # (measured without ccache). NDEBUG stays as the package was built. Not for add_subdirectory,
  # where these flags would reach ember's own sources and miss the main build's compiler cache.
  string(TOUPPER "${BUILD_TYPE}" consumer_config)
  list(APPEND configure_args "-DCMAKE_CXX_FLAGS_${consumer_config}=-O0 -DNDEBUG")
endif()

# The consumer's executable lands in <build>/bin for every generator ($<0:> in the project).
function(run_consumer build_dir)
  if(CMAKE_HOST_WIN32)
    set(exe "${build_dir}/bin/consumer.exe")
  else()
    set(exe "${build_dir}/bin/consumer")
  endif()
  step("run the consumer" "${exe}")
endfunction()

if(MODE STREQUAL "find_package")
  set(prefix "${WORK_DIR}/prefix")
  file(REMOVE_RECURSE "${WORK_DIR}")
  file(MAKE_DIRECTORY "${WORK_DIR}")

  step("install ember into ${prefix}"
       "${CMAKE_COMMAND}" --install "${EMBER_BINARY_DIR}" --prefix "${prefix}"
       --config "${BUILD_TYPE}")
  file(GLOB_RECURSE config_files "${prefix}/*/EmberConfig.cmake")
  file(GLOB_RECURSE version_files "${prefix}/*/EmberConfigVersion.cmake")
  file(GLOB_RECURSE target_files "${prefix}/*/EmberTargets.cmake")
  if(NOT config_files OR NOT version_files OR NOT target_files)
    message(FATAL_ERROR "consumer[find_package]: the install lacks EmberConfig.cmake, "
                        "EmberConfigVersion.cmake or EmberTargets.cmake")
  endif()
  if(NOT EXISTS "${prefix}/include/ember/ember.hpp")
    message(FATAL_ERROR "consumer[find_package]: the install lacks include/ember/ember.hpp")
  endif()

  # The version file: while 0.x, compatible within a minor version only. Evaluated as
  # find_package does, on this installation's file and on a copy claiming 0.9.0.
  file(READ "${version_files}" version_code)
  string(REPLACE "\"${EMBER_VERSION}\"" "\"0.9.0\"" version_code_09 "${version_code}")
  if(version_code_09 STREQUAL version_code)
    message(FATAL_ERROR "consumer[find_package]: no PACKAGE_VERSION in ${version_files}")
  endif()
  file(WRITE "${WORK_DIR}/version-0.9/EmberConfigVersion.cmake" "${version_code_09}")
  function(check_version file request want)
    string(REPLACE "." ";" parts "${request}")
    list(GET parts 0 PACKAGE_FIND_VERSION_MAJOR)
    list(GET parts 1 PACKAGE_FIND_VERSION_MINOR)
    set(PACKAGE_FIND_VERSION "${request}")
    set(PACKAGE_FIND_VERSION_PATCH 0)
    set(PACKAGE_FIND_VERSION_COUNT 2)
    set(CMAKE_SIZEOF_VOID_P 8)
    include("${file}")
    if(NOT PACKAGE_VERSION_COMPATIBLE STREQUAL want)
      message(FATAL_ERROR "consumer[find_package]: ember ${PACKAGE_VERSION} answers a request "
                          "for ${request} with compatible=${PACKAGE_VERSION_COMPATIBLE}")
    endif()
    message(STATUS "consumer[find_package]: ember ${PACKAGE_VERSION} for ${request}: ${want}")
  endfunction()
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" this_minor "${EMBER_VERSION}")
  check_version("${version_files}" "${this_minor}" TRUE)
  check_version("${WORK_DIR}/version-0.9/EmberConfigVersion.cmake" 0.1 FALSE)
  check_version("${WORK_DIR}/version-0.9/EmberConfigVersion.cmake" 0.9 TRUE)
  check_version("${WORK_DIR}/version-0.9/EmberConfigVersion.cmake" 0.10 FALSE)

  # pkg-config: a CPU-only program compiled and linked with nothing but
  # `pkg-config --cflags --libs ember` against this installation.
  find_program(PKG_CONFIG_EXECUTABLE pkg-config)
  file(GLOB_RECURSE pc_files "${prefix}/*/ember.pc")
  if(NOT pc_files)
    message(FATAL_ERROR "consumer[find_package]: the install lacks ember.pc")
  endif()
  if(PKG_CONFIG_EXECUTABLE AND CXX_COMPILER)
    get_filename_component(pc_dir "${pc_files}" DIRECTORY)
    set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
    execute_process(COMMAND "${PKG_CONFIG_EXECUTABLE}" --cflags --libs ember
                    OUTPUT_VARIABLE pc_flags OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "consumer[find_package]: pkg-config --cflags --libs ember failed")
    endif()
    message(STATUS "consumer[find_package]: pkg-config --cflags --libs ember: ${pc_flags}")
    separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
    set(pc_exe "${WORK_DIR}/pkgconfig/consumer_pc")
    file(MAKE_DIRECTORY "${WORK_DIR}/pkgconfig")
    set(pc_launcher "")
    if(CXX_LAUNCHER)
      string(REPLACE "|" ";" pc_launcher "${CXX_LAUNCHER}")
    endif()
    step("compile a program with pkg-config's flags"
         ${pc_launcher} "${CXX_COMPILER}" -O1 "${CONSUMER_SOURCE_DIR}/../pkgconfig.cpp"
         -o "${pc_exe}" ${pc_flags})
    step("run the pkg-config program" "${pc_exe}")
  else()
    message(STATUS "consumer[find_package]: no pkg-config or compiler: ember.pc not exercised")
  endif()

  # Asking for a component this installation lacks, REQUIRED, must fail at configure time.
  message(STATUS "consumer[find_package]: a REQUIRED missing component must fail")
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/build-missing"
            ${configure_args} "-DCMAKE_PREFIX_PATH=${prefix}"
            -DCONSUMER_MODE=require_missing
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0)
    message(FATAL_ERROR "consumer[find_package]: find_package(Ember REQUIRED COMPONENTS "
                        "NoSuchBackend) succeeded:\n${out}")
  endif()
  if(NOT out MATCHES "NoSuchBackend")
    message(FATAL_ERROR "consumer[find_package]: the failure does not name the missing "
                        "component:\n${out}")
  endif()

  set(build "${WORK_DIR}/build")
  step("configure the consumer"
       "${CMAKE_COMMAND}" -S "${CONSUMER_SOURCE_DIR}" -B "${build}" ${configure_args}
       "-DCMAKE_PREFIX_PATH=${prefix}" -DCONSUMER_MODE=find_package
       "-DCONSUMER_EXPECT_PREFIX=${prefix}" "-DCONSUMER_EMBER_VERSION=${EMBER_VERSION}")
  step("build the consumer"
       "${CMAKE_COMMAND}" --build "${build}" --config "${BUILD_TYPE}" --parallel ${JOBS})
  run_consumer("${build}")
  step("run consumer_train (ember::data, ember::train, ember_import_onnx)"
       "${build}/bin/consumer_train${CMAKE_EXECUTABLE_SUFFIX}")
  step("run consumer_dispatch (ember::dispatch, the device from a string)"
       "${build}/bin/consumer_dispatch${CMAKE_EXECUTABLE_SUFFIX}" "cpu+autodiff")

elseif(MODE STREQUAL "add_subdirectory")
  # The build folder is kept between runs: ember's libraries then rebuild incrementally.
  set(build "${WORK_DIR}/build")
  set(extra "")
  if(SANITIZE)
    list(APPEND extra -DEMBER_SANITIZE=ON
         "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined")
  endif()
  set(targets consumer)
  if(SHARED)
    # No build type: ember, a subproject here, must not put Release into the consumer's cache.
    # The main build's flags for its configuration come through CMAKE_CXX_FLAGS instead: the
    # libraries' compile lines are then the main build's (static and shared objects are the
    # same, CMakeLists.txt), and the compiler cache the main build filled serves this one.
    # Without CUDA: nvcc's objects would not come from that cache (the main build compiles them
    # with its build type's CUDA flags), and the main build compiles them already.
    list(FILTER configure_args EXCLUDE REGEX "^-DCMAKE_(BUILD_TYPE|CXX_FLAGS)=")
    string(STRIP "${CXX_FLAGS} ${CXX_CONFIG_FLAGS}" shared_flags)
    list(APPEND configure_args "-DCMAKE_BUILD_TYPE=" "-DCMAKE_CXX_FLAGS=${shared_flags}"
         -DBUILD_SHARED_LIBS=ON -DCONSUMER_SHARED=ON -DEMBER_CUDA=OFF)
    list(APPEND targets consumer_shared)
  endif()
  step("configure the consumer"
       "${CMAKE_COMMAND}" -S "${CONSUMER_SOURCE_DIR}" -B "${build}" ${configure_args}
       -DCONSUMER_MODE=add_subdirectory "-DCONSUMER_EMBER_SOURCE_DIR=${EMBER_SOURCE_DIR}"
       ${extra})
  if(SHARED)
    file(STRINGS "${build}/CMakeCache.txt" build_type REGEX "^CMAKE_BUILD_TYPE:")
    if(NOT build_type MATCHES "=$")
      message(FATAL_ERROR "consumer[add_subdirectory]: ember, a subproject, changed the "
                          "consumer's cache: ${build_type}")
    endif()
  endif()
  # Only the consumers and what they link: ember is EXCLUDE_FROM_ALL there.
  step("build ${targets} (and ember's libraries they link)"
       "${CMAKE_COMMAND}" --build "${build}" --config "${BUILD_TYPE}" --target ${targets}
       --parallel ${JOBS})
  run_consumer("${build}")
  if(SHARED)
    step("run consumer_shared (the Learner and Dispatch through the shared libraries)"
         "${build}/bin/consumer_shared${CMAKE_EXECUTABLE_SUFFIX}")
    include("${CMAKE_CURRENT_LIST_DIR}/exports.cmake")
    check_exports("${build}/ember")
  endif()

else()
  message(FATAL_ERROR "run.cmake: unknown MODE '${MODE}'")
endif()
