# The Lite XL plugin's native build and install (integrations/lite-xl/),
# included by CMakeLists.txt after the libraries for C hosts.
#
# <build>/lite-xl/perfmon.so: the sources of perfmon.core, compiled with
# src/xl/include/ first on the include path: its lua.h and lauxlib.h are
# Lua's, then src/xl/api.h, which makes every Lua API call go through the
# table Lite XL's native-plugin loader fills (luaopen_lite_xl_perfmon).
# It loads in every Lite XL 2.1, also in the release builds, which link Lua
# statically and export none of it.  -z defs: a Lua function missing from
# api.h's list is a link error here; the version script exports the entry
# point alone.

add_library(perfmon_lite_xl_objects OBJECT ${PERFMON_SOURCES})
target_include_directories(perfmon_lite_xl_objects PRIVATE
  ${CMAKE_SOURCE_DIR}/src/xl/include ${CMAKE_SOURCE_DIR}/src ${LUA_INCLUDE_DIRS})
target_compile_options(perfmon_lite_xl_objects PRIVATE ${LUA_CFLAGS_OTHER}
  -Wall -Wextra)
target_compile_definitions(perfmon_lite_xl_objects PRIVATE
  _POSIX_C_SOURCE=200809L)
set_target_properties(perfmon_lite_xl_objects PROPERTIES
  C_VISIBILITY_PRESET hidden POSITION_INDEPENDENT_CODE ON)

add_library(perfmon_lite_xl MODULE ${CMAKE_SOURCE_DIR}/src/xl/api.c
  $<TARGET_OBJECTS:perfmon_lite_xl_objects>)
target_include_directories(perfmon_lite_xl PRIVATE
  ${CMAKE_SOURCE_DIR}/src ${LUA_INCLUDE_DIRS})
target_compile_options(perfmon_lite_xl PRIVATE ${LUA_CFLAGS_OTHER} -Wall -Wextra)
target_link_libraries(perfmon_lite_xl PRIVATE Threads::Threads m ${CMAKE_DL_LIBS})
target_link_options(perfmon_lite_xl PRIVATE -Wl,-z,defs
  -Wl,--version-script=${CMAKE_SOURCE_DIR}/src/xl/exports.map)
set_target_properties(perfmon_lite_xl PROPERTIES
  C_VISIBILITY_PRESET hidden
  LINK_DEPENDS ${CMAKE_SOURCE_DIR}/src/xl/exports.map
  PREFIX ""
  OUTPUT_NAME perfmon
  SUFFIX ".so"
  LIBRARY_OUTPUT_DIRECTORY "$<1:${CMAKE_BINARY_DIR}/lite-xl>")

# cmake --install <build> --component lite-xl --prefix <Lite XL user dir>:
# the plugin folder, plugins/perfmon/, with the native build (perfmon.so)
# and perfmon's Lua modules (lua/perfmon/) inside it, so that copying that
# one folder installs it too.  Not part of a plain cmake --install.
set(PERFMON_LITE_XL_PLUGIN plugins/perfmon)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/integrations/lite-xl/perfmon/
  DESTINATION ${PERFMON_LITE_XL_PLUGIN}
  COMPONENT lite-xl EXCLUDE_FROM_ALL)
install(TARGETS perfmon_lite_xl
  LIBRARY DESTINATION ${PERFMON_LITE_XL_PLUGIN}
  COMPONENT lite-xl EXCLUDE_FROM_ALL)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/lua/perfmon
  DESTINATION ${PERFMON_LITE_XL_PLUGIN}/lua
  COMPONENT lite-xl EXCLUDE_FROM_ALL
  PATTERN "busted*" EXCLUDE) # the test runner's output handler
