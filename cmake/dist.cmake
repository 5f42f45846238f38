# asyncnd::dist (native/dist/): data-parallel collectives over MPI, included by CMakeLists.txt
# after the asyncnd library. ASYNCND_WITH_MPI: AUTO builds it when find_package(MPI COMPONENTS
# CXX) succeeds (and says what it found), ON fails if it does not, OFF skips it. Sets
# ASYNCND_BUILD_MPI for the package config.
set(ASYNCND_WITH_MPI AUTO CACHE STRING "asyncnd::dist over MPI: AUTO, ON or OFF")
set_property(CACHE ASYNCND_WITH_MPI PROPERTY STRINGS AUTO ON OFF)
set(ASYNCND_BUILD_MPI OFF)
if(NOT ASYNCND_WITH_MPI MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "ASYNCND_WITH_MPI must be AUTO, ON or OFF; got '${ASYNCND_WITH_MPI}'")
elseif(ASYNCND_WITH_MPI STREQUAL "OFF")
  message(STATUS "asyncnd: dist (MPI): not built (ASYNCND_WITH_MPI=OFF)")
elseif(ASYNCND_WITH_MPI STREQUAL "AUTO" AND ASYNCND_SANITIZE)
  # Open MPI's own threads and allocations are not instrumented: TSan reports races inside it and
  # ASan its one-time allocations as leaks. The sanitizer trees check the engine without it.
  message(STATUS "asyncnd: dist (MPI): skipped in the ${ASYNCND_SANITIZE}-sanitizer build "
                 "(ASYNCND_WITH_MPI=ON forces it)")
else()
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND)
    set(ASYNCND_BUILD_MPI ON)
    message(STATUS "asyncnd: dist (MPI): building it (MPI ${MPI_CXX_VERSION}, "
                   "${MPIEXEC_EXECUTABLE})")
  elseif(ASYNCND_WITH_MPI STREQUAL "ON")
    message(FATAL_ERROR "ASYNCND_WITH_MPI=ON, but find_package(MPI COMPONENTS CXX) found no MPI "
                        "(Debian: apt-get install libopenmpi-dev openmpi-bin)")
  else()
    message(STATUS "asyncnd: dist (MPI): not built (no MPI found; Debian: libopenmpi-dev)")
  endif()
endif()

if(NOT ASYNCND_BUILD_MPI)
  return()
endif()

add_library(asyncnd_dist native/dist/comm.cpp native/dist/dist.cpp native/dist/trainer.cpp)
add_library(asyncnd::dist ALIAS asyncnd_dist)
set_target_properties(asyncnd_dist PROPERTIES EXPORT_NAME dist VERSION ${PROJECT_VERSION}
                      SOVERSION ${PROJECT_VERSION_MAJOR})
asyncnd_target_defaults(asyncnd_dist)
# The trainer uses two in-place helpers of core (detail::assign, detail::sgd_update).
target_include_directories(asyncnd_dist PRIVATE ${PROJECT_SOURCE_DIR}/core/src)
# dist.h includes no MPI header: MPI is a link dependency only (a static asyncnd_dist exports it
# as $<LINK_ONLY:MPI::MPI_CXX>, which asyncndConfig.cmake finds again).
target_link_libraries(asyncnd_dist PUBLIC asyncnd PRIVATE MPI::MPI_CXX)
# An export set of its own, which asyncndConfig.cmake loads only where MPI is found (or asked for
# as the component `dist`): a consumer of asyncnd::asyncnd alone needs no MPI, whatever machine
# the package was built on.
install(TARGETS asyncnd_dist EXPORT asyncndDistTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT asyncndDistTargets NAMESPACE asyncnd:: DESTINATION ${ASYNCND_CMAKE_DIR})
install(FILES ${PROJECT_SOURCE_DIR}/core/include/asyncnd/dist.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/asyncnd)

# How the tests start ranks here: as root in containers, on 2 cores (native/dist/README.md,
# "Running MPI here"; make demo-dist and bench-dist use the Makefile's MPIRUN). Harmless for a
# normal user.
set(ASYNCND_MPIEXEC_FLAGS "--oversubscribe;--bind-to;none" CACHE STRING
    "mpiexec flags for the dist tests (a ;-list)")
set(ASYNCND_MPI_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    OMPI_MCA_btl_vader_single_copy_mechanism=none)

if(ASYNCND_BUILD_TESTS)
  find_package(Catch2 REQUIRED)
  enable_testing()
  add_executable(asyncnd_dist_tests tests/dist/test_dist.cpp)
  asyncnd_target_defaults(asyncnd_dist_tests)
  # native/dist: comm.h; tests/ and core/src: the emulated GPU (tests/emulated_device.h), which
  # runs the trainer's path for device parameters (through host memory) on machines without one.
  target_include_directories(asyncnd_dist_tests PRIVATE ${PROJECT_SOURCE_DIR}/native/dist
                             ${PROJECT_SOURCE_DIR}/tests ${PROJECT_SOURCE_DIR}/core/src)
  target_link_libraries(asyncnd_dist_tests PRIVATE asyncnd_dist MPI::MPI_CXX Catch2::Catch2)
  add_executable(asyncnd_dist_fail tests/dist/dist_fail.cpp)
  asyncnd_target_defaults(asyncnd_dist_fail)
  target_link_libraries(asyncnd_dist_fail PRIVATE asyncnd_dist)

  # Every rank runs the whole Catch2 suite, in the same order (the collectives must match).
  foreach(_np 1 2 3)
    add_test(NAME dist_np${_np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${_np} ${ASYNCND_MPIEXEC_FLAGS}
                     ${MPIEXEC_PREFLAGS} $<TARGET_FILE:asyncnd_dist_tests> ${MPIEXEC_POSTFLAGS})
    set_tests_properties(dist_np${_np} PROPERTIES TIMEOUT 600 ENVIRONMENT "${ASYNCND_MPI_ENV}")
  endforeach()
  # The other way of running collectives (nonblocking, driven by MPI_Test: what an MPI without
  # MPI_THREAD_MULTIPLE gets), with 2 ranks.
  add_test(NAME dist_np2_test_progress
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${ASYNCND_MPIEXEC_FLAGS}
                   ${MPIEXEC_PREFLAGS} $<TARGET_FILE:asyncnd_dist_tests> ${MPIEXEC_POSTFLAGS})
  set_tests_properties(dist_np2_test_progress PROPERTIES TIMEOUT 600
                       ENVIRONMENT "${ASYNCND_MPI_ENV};ASYNCND_DIST_PROGRESS=test")
  # The naive engine (every op inline at push: a collective blocks the pushing thread), without
  # the overlap test, which it cannot pass by design.
  add_test(NAME dist_np2_naive_engine
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${ASYNCND_MPIEXEC_FLAGS}
                   ${MPIEXEC_PREFLAGS} $<TARGET_FILE:asyncnd_dist_tests> ${MPIEXEC_POSTFLAGS}
                   "~*overlap*")
  set_tests_properties(dist_np2_naive_engine PROPERTIES TIMEOUT 600
                       ENVIRONMENT "${ASYNCND_MPI_ENV};ASYNCND_ENGINE=naive")

  # Failures must end the job, non-zero and soon, with a message that names the cause.
  # cmake/mpi_expect_failure.cmake runs mpiexec and checks exit status, time and output.
  # test: the ctest name's end; mode: dist_fail's argument; extra: more environment (a ;-list);
  # an optional last argument: a second regex the output must match too.
  function(asyncnd_dist_failure_test test mode seconds regex extra)
    set(_regex2)
    if(ARGC GREATER 5)
      set(_regex2 "-DREGEX2=${ARGV5}")
    endif()
    add_test(NAME dist_fail_${test}
             COMMAND ${CMAKE_COMMAND}
                     "-DCOMMAND=${MPIEXEC_EXECUTABLE};${MPIEXEC_NUMPROC_FLAG};2;${ASYNCND_MPIEXEC_FLAGS};$<TARGET_FILE:asyncnd_dist_fail>;${mode}"
                     -DSECONDS=${seconds} "-DREGEX=${regex}" ${_regex2}
                     -P ${PROJECT_SOURCE_DIR}/cmake/mpi_expect_failure.cmake)
    set_tests_properties(dist_fail_${test} PROPERTIES TIMEOUT 120
                         ENVIRONMENT "${ASYNCND_MPI_ENV};ASYNCND_DIST_TIMEOUT_S=3;${extra}")
  endfunction()
  set(_watchdog "collective #1 allreduce\\(sum\\) of \\[1000\\] float32 did not complete within 3 s")
  asyncnd_dist_failure_test(throw throw 30 "dist_fail: rank 1 throws" "")
  asyncnd_dist_failure_test(guard guard 30 "exception is unwinding past dist::Guard" ""
                            "rank 1: dist_fail: rank 1 throws")
  # MPI_ERR_TRUNCATE, or with test progress at times MPI_ERR_OTHER (Open MPI's libnbc).
  set(_truncate "rank 0 caught: dist_allreduce failed on cpu\\(0\\): collective #0 allreduce\\(sum\\) of \\[5\\] float32: MPI_ERR_")
  asyncnd_dist_failure_test(mismatch mismatch 30 "${_truncate}" "")
  asyncnd_dist_failure_test(mismatch_test_progress mismatch 30 "${_truncate}" "ASYNCND_DIST_PROGRESS=test")
  asyncnd_dist_failure_test(skip skip 30 "${_watchdog}" "")
  asyncnd_dist_failure_test(skip_test_progress skip 30 "${_watchdog}" "ASYNCND_DIST_PROGRESS=test")
  asyncnd_dist_failure_test(reinit reinit 30
                            "caught: dist::init: MPI was finalized already in this process" "")
endif()

# The example (make demo-dist) and the benchmark (make bench-dist), which need asyncnd::dist: the
# examples/cpp/*.cpp glob leaves dist_mlp.cpp out, and bench/dist/ is outside bench/*.cpp.
if(ASYNCND_BUILD_EXAMPLES)
  add_executable(example_dist_mlp examples/cpp/dist_mlp.cpp)
  asyncnd_target_defaults(example_dist_mlp)
  target_link_libraries(example_dist_mlp PRIVATE asyncnd_dist)
  if(ASYNCND_BUILD_TESTS)
    # The example as make demo-dist runs it, shortened: two ranks, two timed batches, its report.
    add_test(NAME example_dist_mlp
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${ASYNCND_MPIEXEC_FLAGS}
                     ${MPIEXEC_PREFLAGS} $<TARGET_FILE:example_dist_mlp> ${MPIEXEC_POSTFLAGS}
                     --batches 2 --warmup 1)
    # Judged by its exit status (a PASS_REGULAR_EXPRESSION would override that), and by no error
    # in its output.
    set_tests_properties(example_dist_mlp PROPERTIES TIMEOUT 120 ENVIRONMENT "${ASYNCND_MPI_ENV}"
                         FAIL_REGULAR_EXPRESSION "[Ee]rror|abort|terminate")
  endif()
endif()
if(ASYNCND_BUILD_BENCH)
  add_executable(bench_dist bench/dist/dist.cpp)
  asyncnd_target_defaults(bench_dist)
  target_compile_definitions(bench_dist PRIVATE ASYNCND_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  target_link_libraries(bench_dist PRIVATE asyncnd_dist MPI::MPI_CXX)
endif()
