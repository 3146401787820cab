# tests/asan-build.cmake -- the test asan.build: configures and builds the
# source tree again, in its own build directory, with PERFMON_SANITIZE=ON
# (AddressSanitizer and UndefinedBehaviorSanitizer), for the asan.* tests
# to run.  Run as:
#   cmake -DSOURCE=<repo> -DBINARY=<build>/asan -DC_COMPILER=<cc> -P asan-build.cmake
foreach(v SOURCE BINARY C_COMPILER)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "asan-build.cmake: -D${v}=... is required")
  endif()
endforeach()

execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${BINARY}
    -DPERFMON_TESTS=ON -DPERFMON_SANITIZE=ON -DPERFMON_EXAMPLES=OFF
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=${C_COMPILER}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "asan.build: configuring ${BINARY} failed")
endif()
# Only what the asan.* tests run: the module (and its copy for rel-copies),
# the spec's allocation counter, the engine's tests and the drivers.
execute_process(
  COMMAND ${CMAKE_COMMAND} --build ${BINARY} --parallel 2 --target
    perfmon_core rel-twin allocount engine-test records-test
    rel-alloc rel-close rel-threads rel-profiler rel-copies
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "asan.build: building ${BINARY} failed; if the "
    "compiler could not find the sanitizer runtimes: "
    "apt-get install -y libasan8 libubsan1")
endif()
