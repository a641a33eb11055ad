# zcode_add_plugin(NAME SOURCES src... [LIBRARIES lib...])
#
# Builds one ZCode plugin: a MODULE library named libzcode_<NAME>.so with
# hidden visibility and a version script that exports exactly the one
# negotiation symbol (zcode_plugin_negotiate). Used in-tree and, through the
# installed ZCodeSDKConfig.cmake, by third parties.
#
# After linking, the plugin's manifest is dumped into the sidecar index
# libzcode_<NAME>.zcode.json next to it (and installed with it), so that the
# host can tell which file provides a component without loading every plugin
# (core/README.md). The dumper, zcode_plugin_index, is built once per project
# from the SDK's own source with the project's compiler and flags.
include_guard(GLOBAL)
set(_ZCODE_PLUGIN_CMAKE_DIR ${CMAKE_CURRENT_LIST_DIR})

function(_zcode_plugin_index_tool)
  if(TARGET zcode_plugin_index)
    return()
  endif()
  add_executable(zcode_plugin_index ${_ZCODE_PLUGIN_CMAKE_DIR}/zcode_plugin_index.cpp)
  # The SDK's headers (json.h, file.h) write the index: ZCode::sdk is the
  # in-tree alias and the installed name alike.
  target_link_libraries(zcode_plugin_index PRIVATE ZCode::sdk ${CMAKE_DL_LIBS})
  target_compile_features(zcode_plugin_index PRIVATE cxx_std_20)
  set_target_properties(zcode_plugin_index PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/zcode-sdk-tools)
endfunction()

function(zcode_add_plugin NAME)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "zcode_add_plugin(${NAME}): SOURCES is required")
  endif()
  set(target zcode_plugin_${NAME})
  add_library(${target} MODULE ${ARG_SOURCES})
  # In-tree builds collect every bundled plugin under one target, so the
  # quickstart can build the host and the plugins without the test suite.
  if(TARGET zcode_plugins)
    add_dependencies(zcode_plugins ${target})
  endif()
  if(TARGET ZCode::sdk)
    target_link_libraries(${target} PRIVATE ZCode::sdk)
  else()
    target_link_libraries(${target} PRIVATE zcode_sdk)
  endif()
  if(ARG_LIBRARIES)
    target_link_libraries(${target} PRIVATE ${ARG_LIBRARIES})
  endif()
  if(TARGET zcode_warnings)
    target_link_libraries(${target} PRIVATE zcode_warnings)
  endif()
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME zcode_${NAME}
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_link_options(${target} PRIVATE
    "LINKER:--version-script=${_ZCODE_PLUGIN_CMAKE_DIR}/zcode_plugin.map"
    "LINKER:--no-undefined")
  if(DEFINED ZCODE_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ZCODE_PLUGIN_OUTPUT_DIR})
  endif()
  _zcode_plugin_index_tool()
  set(_index $<TARGET_FILE_DIR:${target}>/libzcode_${NAME}.zcode.json)
  # detect_leaks=0: in sanitizer builds the dumper exits with the plugin still
  # loaded on purpose (plugins are never unloaded).
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=0
            $<TARGET_FILE:zcode_plugin_index> $<TARGET_FILE:${target}> ${_index}
    COMMENT "Indexing plugin ${NAME}"
    VERBATIM)
  if(DEFINED ZCODE_PLUGIN_INSTALL_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION ${ZCODE_PLUGIN_INSTALL_DIR})
    install(FILES ${_index} DESTINATION ${ZCODE_PLUGIN_INSTALL_DIR})
  endif()
endfunction()
