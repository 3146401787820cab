# tests/sanitize.cmake -- what -DPERFMON_SANITIZE=ON needs besides the flags
# (included by the top-level CMakeLists.txt, before it looks for lua5.4).
#
# perfmon_core is a Lua C module: lua5.4 dlopens it.  Debian's lua5.4 is not
# built with AddressSanitizer, and ASan's runtime must be the first library
# of the process (it replaces malloc), so the specs run under lua5.4 through
# a wrapper, <build>/lua5.4-asan, that preloads the runtime.  The wrapper
# becomes LUA54_EXECUTABLE, the interpreter every spec.* test runs: in a
# sanitized build `ctest -L spec` is the whole spec suite under ASan and
# UBSan.  A plain build runs such a build under ctest as asan.* (see
# tests/CMakeLists.txt).
#
# Sets PERFMON_SANITIZE_FLAGS (compile and link flags), PERFMON_SANITIZE_MODULE_FLAGS
# (what a Lua C module adds to them) and, when the runtime is found,
# PERFMON_ASAN_RUNTIME.

set(PERFMON_LUA_WRAPPER ${CMAKE_BINARY_DIR}/lua5.4-asan)

if(NOT PERFMON_SANITIZE)
  # Turned off again: forget the wrapper.
  if(LUA54_EXECUTABLE STREQUAL PERFMON_LUA_WRAPPER)
    unset(LUA54_EXECUTABLE CACHE)
  endif()
  return()
endif()

# -fno-sanitize-recover: an undefined behaviour ends the run, so that a
# report can never scroll by in a test that passes.
set(PERFMON_SANITIZE_FLAGS
  -fsanitize=address,undefined -fno-sanitize-recover=undefined
  -fno-omit-frame-pointer)
set(PERFMON_SANITIZE_MODULE_FLAGS)

if(CMAKE_C_COMPILER_ID MATCHES "Clang")
  # clang's module must use the shared runtime the wrapper preloads (its
  # programs link a static one)
  set(PERFMON_SANITIZE_MODULE_FLAGS -shared-libasan)
  set(asan_name libclang_rt.asan-${CMAKE_SYSTEM_PROCESSOR}.so)
  set(asan_package "libclang-rt-dev")
else()
  set(asan_name libasan.so)
  set(asan_package "libasan8 (the libasan of your gcc)")
endif()
execute_process(
  COMMAND ${CMAKE_C_COMPILER} -print-file-name=${asan_name}
  OUTPUT_VARIABLE PERFMON_ASAN_RUNTIME OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT IS_ABSOLUTE "${PERFMON_ASAN_RUNTIME}" OR
   NOT EXISTS "${PERFMON_ASAN_RUNTIME}")
  # The wrapper then fails every spec loudly, with the line to run.
  set(PERFMON_ASAN_RUNTIME "")
  message(WARNING "PERFMON_SANITIZE: ${CMAKE_C_COMPILER} has no ${asan_name}: "
    "apt-get install -y ${asan_package}")
endif()
get_filename_component(PERFMON_ASAN_RUNTIME "${PERFMON_ASAN_RUNTIME}" REALPATH)

find_program(PERFMON_LUA54_REAL lua5.4)
if(NOT PERFMON_LUA54_REAL)
  return() # the spec tests then say that lua5.4 is missing
endif()

# Leak checking is on (LeakSanitizer runs at exit): busted ends with
# os.exit(code, true), which closes the Lua state, so whatever perfmon
# allocated and did not free is reported.  No suppression is needed.
set(PERFMON_ASAN_OPTIONS
  "detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1")
set(PERFMON_UBSAN_OPTIONS "print_stacktrace=1:halt_on_error=1")
# (configure_file, then a copy: configure_file sets permissions only from
# CMake 3.19 on)
configure_file(${CMAKE_SOURCE_DIR}/tests/lua5.4-asan.in
  ${CMAKE_BINARY_DIR}/CMakeFiles/lua5.4-asan @ONLY)
file(COPY ${CMAKE_BINARY_DIR}/CMakeFiles/lua5.4-asan
  DESTINATION ${CMAKE_BINARY_DIR}
  FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
  GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
set(LUA54_EXECUTABLE ${PERFMON_LUA_WRAPPER} CACHE FILEPATH
  "lua5.4 (PERFMON_SANITIZE: the wrapper that preloads ASan)" FORCE)
