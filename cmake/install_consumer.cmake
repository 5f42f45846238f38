# ctest install_consumer: install this build into a fresh prefix, then configure, build and run
# tests/consumer against it with find_package(asyncnd), as an outside project would.
# Inputs (-D): BUILD_DIR WORK_DIR SOURCE_DIR GENERATOR CXX_COMPILER BUILD_TYPE; in a cross build
# TOOLCHAIN_FILE (the consumer is built with it too) and EMULATOR (runs the consumer), else empty.
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_consumer: failed (${rc}): ${ARGV}")
  endif()
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --config ${BUILD_TYPE})
run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
    -D CMAKE_CXX_COMPILER=${CXX_COMPILER} -D CMAKE_BUILD_TYPE=${BUILD_TYPE}
    -D CMAKE_PREFIX_PATH=${prefix} "-DCMAKE_TOOLCHAIN_FILE=${TOOLCHAIN_FILE}")
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build --config ${BUILD_TYPE})
run(${EMULATOR} ${WORK_DIR}/build/consumer)
if(EXISTS ${WORK_DIR}/build/consumer_dist)  # built when the installed asyncnd has asyncnd::dist
  run(${EMULATOR} ${WORK_DIR}/build/consumer_dist)
  # A machine without MPI builds a consumer of asyncnd::asyncnd alike (the package used to
  # require MPI of every consumer); asyncnd::dist is then not defined.
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build-nompi -G ${GENERATOR}
      -D CMAKE_CXX_COMPILER=${CXX_COMPILER} -D CMAKE_BUILD_TYPE=${BUILD_TYPE}
      -D CMAKE_PREFIX_PATH=${prefix} -D CMAKE_DISABLE_FIND_PACKAGE_MPI=TRUE
      "-DCMAKE_TOOLCHAIN_FILE=${TOOLCHAIN_FILE}")
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/build-nompi --config ${BUILD_TYPE})
  run(${EMULATOR} ${WORK_DIR}/build-nompi/consumer)
  if(EXISTS ${WORK_DIR}/build-nompi/consumer_dist)
    message(FATAL_ERROR "install_consumer: asyncnd::dist was defined without MPI")
  endif()
endif()
