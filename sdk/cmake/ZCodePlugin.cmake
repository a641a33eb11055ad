# zcode_add_plugin(NAME SOURCES src... [LIBRARIES lib...])
#
# Builds one ZCode plugin: a MODULE library named libzcode_<NAME>.so with
# hidden visibility and a version script that exports exactly the one
# negotiation symbol (zcode_plugin_negotiate). Used in-tree and, through the
# installed ZCodeSDKConfig.cmake, by third parties.
include_guard(GLOBAL)
set(_ZCODE_PLUGIN_CMAKE_DIR ${CMAKE_CURRENT_LIST_DIR})

function(zcode_add_plugin NAME)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "zcode_add_plugin(${NAME}): SOURCES is required")
  endif()
  set(target zcode_plugin_${NAME})
  add_library(${target} MODULE ${ARG_SOURCES})
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
  if(DEFINED ZCODE_PLUGIN_INSTALL_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION ${ZCODE_PLUGIN_INSTALL_DIR})
  endif()
endfunction()
