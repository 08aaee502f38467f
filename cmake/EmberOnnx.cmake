# ember_import_onnx(<target> <model.onnx> [OUT_DIR dir] [RECORD_TYPE type] [HALF_PRECISION]
#                   [EMBED_STATES] [NAME name] [INPUT_SHAPES name=d0,d1,...])
#
# Runs ember-onnx on <model.onnx> at build time, as Burn's ModelGen does from build.rs: it writes
# <OUT_DIR>/<name>.hpp (namespace <name>, struct Model<B>) and the weights record
# <OUT_DIR>/<name>.<ext> (RECORD_TYPE: NamedMpk (default), NamedMpkGz, Bin, BinGz, JsonGz or
# PrettyJson; HALF_PRECISION stores f16), and adds OUT_DIR to <target>'s include path, so that
# `#include "<name>.hpp"` works. EMBED_STATES also compiles the weights into <target>, for
# Model<B>::from_embedded(). <name> defaults to the model file's stem as a C identifier; OUT_DIR
# to ${CMAKE_CURRENT_BINARY_DIR}/onnx. The header and record are regenerated when the model or
# ember-onnx changes. The variable EMBER_ONNX_RECORD_<name> holds the record's path.
include(${CMAKE_CURRENT_LIST_DIR}/EmberEmbed.cmake)

function(ember_import_onnx target model)
  cmake_parse_arguments(ARG "HALF_PRECISION;EMBED_STATES" "OUT_DIR;RECORD_TYPE;NAME" "INPUT_SHAPES"
                        ${ARGN})
  get_filename_component(model "${model}" ABSOLUTE)
  if(NOT ARG_NAME)
    get_filename_component(ARG_NAME "${model}" NAME_WE)
    string(MAKE_C_IDENTIFIER "${ARG_NAME}" ARG_NAME)
  endif()
  if(NOT ARG_OUT_DIR)
    set(ARG_OUT_DIR "${CMAKE_CURRENT_BINARY_DIR}/onnx")
  endif()
  if(NOT ARG_RECORD_TYPE)
    set(ARG_RECORD_TYPE NamedMpk)
  endif()
  set(_ext_NamedMpk mpk)
  set(_ext_NamedMpkGz mpk.gz)
  set(_ext_Bin bin)
  set(_ext_BinGz bin.gz)
  set(_ext_JsonGz json.gz)
  set(_ext_PrettyJson json)
  if(NOT DEFINED _ext_${ARG_RECORD_TYPE})
    message(FATAL_ERROR "ember_import_onnx: unknown RECORD_TYPE '${ARG_RECORD_TYPE}'")
  endif()
  set(header "${ARG_OUT_DIR}/${ARG_NAME}.hpp")
  set(record "${ARG_OUT_DIR}/${ARG_NAME}.${_ext_${ARG_RECORD_TYPE}}")
  set(args "${model}" --out "${ARG_OUT_DIR}" --name ${ARG_NAME} --record-type ${ARG_RECORD_TYPE})
  set(outputs "${header}" "${record}")
  if(ARG_HALF_PRECISION)
    list(APPEND args --half)
  endif()
  if(ARG_EMBED_STATES)
    list(APPEND args --embed)
    list(APPEND outputs "${ARG_OUT_DIR}/${ARG_NAME}.embed.bin")
  endif()
  foreach(shape ${ARG_INPUT_SHAPES})
    list(APPEND args --input-shape ${shape})
  endforeach()
  if(TARGET ember-onnx)  # ember's own build, or add_subdirectory(ember)
    set(tool $<TARGET_FILE:ember-onnx>)
    set(tool_dep ember-onnx)
  elseif(TARGET ember::onnx)  # find_package(Ember): the installed tool
    set(tool $<TARGET_FILE:ember::onnx>)
    set(tool_dep $<TARGET_FILE:ember::onnx>)
  else()
    find_program(EMBER_ONNX_EXECUTABLE ember-onnx REQUIRED)
    set(tool ${EMBER_ONNX_EXECUTABLE})
    set(tool_dep ${EMBER_ONNX_EXECUTABLE})
  endif()
  add_custom_command(OUTPUT ${outputs}
                     COMMAND ${tool} ${args}
                     DEPENDS "${model}" ${tool_dep}
                     COMMENT "ember-onnx: importing ${model}"
                     VERBATIM)
  target_sources(${target} PRIVATE "${header}")
  target_include_directories(${target} PRIVATE "${ARG_OUT_DIR}")
  if(ARG_EMBED_STATES)
    string(MAKE_C_IDENTIFIER "ember_onnx_${ARG_NAME}_record" symbol)
    ember_embed_bytes(${target} ${symbol} "${ARG_OUT_DIR}/${ARG_NAME}.embed.bin")
  endif()
  set(EMBER_ONNX_RECORD_${ARG_NAME} "${record}" PARENT_SCOPE)
endfunction()
