# Cross build for 64-bit ARM Linux (AArch64) on an x86-64 Debian 12 machine: Debian's cross
# compiler (g++-aarch64-linux-gnu), its arm64 libraries installed side by side (multiarch:
# libopenblas-dev:arm64, libstdc++6:arm64), and the programs run under qemu-user, which ctest
# uses through CMAKE_CROSSCOMPILING_EMULATOR. `make test-arm64` installs all of it and runs the
# native test suite this way. By hand:
#   cmake -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DASYNCND_WITH_CUDA=OFF \
#         -S . -B build-arm64
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Libraries and packages from the arm64 side only; programs (pkg-config, node) from the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
# "-L /": the dynamic loader and libraries of the multiarch packages (/lib/ld-linux-aarch64.so.1,
# /usr/lib/aarch64-linux-gnu). Not the cross compiler's /usr/aarch64-linux-gnu: its loader is
# another build of glibc than the multiarch libc.so.6 that the search finds, and with the pair
# mismatched the first pthread_create loops for ever (in glibc's stack cache).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/)
