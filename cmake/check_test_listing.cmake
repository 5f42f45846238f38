# POST_BUILD guard for asyncnd_tests. Catch2 v2's test discovery ignores a crash while listing
# (its exit code is the test count, so it only checks for 0 or negative), and a crashed listing
# would leave ctest with no unit tests and a green run. Fail the build instead.
# Input (-D): TEST_EXECUTABLE; TEST_EMULATOR, the command that runs it in a cross build (the
# toolchain's CMAKE_CROSSCOMPILING_EMULATOR, e.g. qemu-aarch64), empty otherwise.
execute_process(COMMAND ${TEST_EMULATOR} ${TEST_EXECUTABLE} --list-test-names-only
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc MATCHES "^[0-9]+$" OR out STREQUAL "")
  message(FATAL_ERROR "${TEST_EXECUTABLE} failed to list its tests (result: ${rc})\n${err}")
endif()
# catch_discover_tests splits names at ';' (a CMake list separator): such a test would be
# registered as fragments that match no test case and pass without running anything.
if(out MATCHES ";")
  message(FATAL_ERROR "${TEST_EXECUTABLE}: a test name contains ';', which ctest cannot run; "
                      "use another separator")
endif()
