#!/usr/bin/env bash
# The whole check of the CUDA backend on a machine with an NVIDIA GPU, in one command:
#   tools/gpu-check.sh [OUTDIR]
# builds the project with the CUDA backend (build-gpu/, for the GPU's own architecture), then runs
#   1. the [gpu] tests alone (quick: they must run, not skip), then again with every call
#      launched on its own (ASYNCND_CUDA_BATCH=0; by default small calls may be held and started
#      in batches),
#   2. bench_gpu: OUTDIR/gpu.json and OUTDIR/gpu_trace.json (copy bench/results/ from there),
#   3. the [gpu] tests under compute-sanitizer's memcheck, where it runs (all but the one that
#      makes CUDA calls fail on purpose, [api_errors], which the tool would report),
#   4. the whole ctest suite (the gpu_* entries must pass, not skip),
#   5. make demo's program (examples/cpp/chapter.cpp), E7 included,
#   6. bench_e1_threads (E1 against the engine's and BLAS's thread counts: this is the many-core
#      machine we have; OUTDIR/e1_threads.json and its trace), then again with the CPU workers
#      taking ops one by one (ASYNCND_CPU_PACING=ops: OUTDIR/e1_threads_ops.json),
#   7. bench_native --only=overhead, the per-op costs of the CPU device against this machine's
#      hand-off floor and PyTorch's CPU step (E5), with the default workers (one per hardware
#      thread but one), 1, 2 and 8, each taking runs (the default) and, but for 1, ops one by one:
#      OUTDIR/native_overhead.json, native_overhead_wN.json, native_overhead_ops.json, ...;
#      then bench_handoff, the wait round trip beside hand-offs that use no engine (7b),
#   8. bench_native --only=gemm, the CPU GEMMs on every core: OpenBLAS's kernels, our AVX-512 and
#      AVX2 GEMMs and the engine's nd::dot, side by side in rounds (OUTDIR/native_gemm.json),
#   9. bench_native --only=e6, the chapter's MLP on every core, with the CPU workers taking runs and
#      taking ops (OUTDIR/native_e6.json, native_e6_ops.json),
#  10. a table in the summary, [runs_vs_ops]: steps 7 and 9 side by side (push and wait against
#      the floor, push_only_ns, the burst's runs / ops, E6's times), from their JSON files,
#  11. the [gpu] tests under compute-sanitizer's racecheck, last: it took 99 s of a 15-minute lease
#      on an H100 (2026-11-27) and checks our CUDA kernels, which change far less than the rest,
# each with a time limit, in that order (most telling first). OUTDIR (default $OUT, else
# build-gpu/check) gets one log per step and summary.log, which starts with the machine (GPU,
# driver, nvcc, CPU) and ends with one line per step. Exit status: 0 when every step passed.
#
#   tools/gpu-check.sh --pack
# run on a machine with the project's usual packages, copies what the build needs and a bare GPU
# machine may lack (Catch2's header and CMake files) into .gpu-deps/ (ignored by git), so that
# the working tree carries it there. The build uses OpenBLAS where pkg-config finds it, else the
# portable GEMM (ASYNCND_WITH_OPENBLAS=OFF), and says which in summary.log.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if [ "${1:-}" = "--pack" ]; then
  rm -rf .gpu-deps && mkdir -p .gpu-deps/catch2
  # Debian's catch2 package, as installed: headers, CMake files and the library they name.
  files=$(dpkg -L catch2 2>/dev/null | grep -E '^/usr/(include|lib)/') || {
    echo "gpu-check: --pack needs Debian's catch2 package (make setup installs it)" >&2
    exit 1
  }
  for f in $files; do
    [ -f "$f" ] && install -D -m 644 "$f" ".gpu-deps/catch2/${f#/usr/}"
  done
  echo "gpu-check: packed $(du -sh .gpu-deps | cut -f1) into .gpu-deps/"
  exit 0
fi

out=${1:-${OUT:-build-gpu/check}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
bld=$root/build-gpu
jobs=$(nproc)
summary=$out/summary.log
: >"$summary"
status=0
say() { echo "$*" | tee -a "$summary"; }

# step NAME LIMIT_S COMMAND...: runs it with its output in OUTDIR/NAME.log, then one line in
# summary.log. A step's own check may follow (see check_no_skip).
step() {
  local name=$1 limit=$2
  shift 2
  local t0 rc
  t0=$(date +%s)
  echo "== $name: $* (limit ${limit}s)"
  timeout --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1
  rc=$?
  [ $rc -eq 124 ] && echo "gpu-check: $name stopped at its limit of ${limit}s" >>"$out/$name.log"
  [ $rc -ne 0 ] && status=1
  say "step $name: rc=$rc, $(($(date +%s) - t0)) s"
  tail -n 4 "$out/$name.log"
  return $rc
}

{
  # (The device tool sends the working tree; its .git may be older than the files.)
  echo "gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')" \
    "with $(git status --short 2>/dev/null | wc -l) files changed or new beside it"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1
  command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
  nvcc --version 2>&1 | tail -n 2
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $jobs threads"
  echo "cmake: $(cmake --version | head -n 1); c++: $(c++ --version | head -n 1)"
  echo "compute-sanitizer: $(compute-sanitizer --version 2>&1 | tail -n 1)"
  echo "python3: $(python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -n 1)"
} 2>&1 | tee -a "$summary"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH

# The GPU's architecture (sm_90 on a Hopper GPU), else the build's default list.
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
opts=(-DCMAKE_BUILD_TYPE=Release -DASYNCND_WITH_CUDA=ON)
[ -n "$arch" ] && opts+=("-DCMAKE_CUDA_ARCHITECTURES=$arch")
command -v ninja >/dev/null && opts+=(-G Ninja)
[ -d .gpu-deps/catch2 ] && opts+=("-DCatch2_DIR=$root/.gpu-deps/catch2/lib/cmake/Catch2")
if pkg-config --exists openblas 2>/dev/null; then
  say "openblas: $(pkg-config --modversion openblas) (the CPU GEMM)"
else
  opts+=(-DASYNCND_WITH_OPENBLAS=OFF)
  say "openblas: not found by pkg-config: the CPU GEMM is the portable one (ASYNCND_WITH_OPENBLAS=OFF)"
fi
# MPI, where found, runs as root in these containers (Open MPI refuses root without these).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

step configure 120 cmake -S . -B "$bld" "${opts[@]}" || { say "gpu-check: configure failed"; exit 1; }
step build 400 cmake --build "$bld" -j"$jobs" || { say "gpu-check: build failed"; exit 1; }

# 1. The [gpu] tests: every one must run. A "SKIPPED:" line means no GPU was used, except for a
# test that needs more GPUs than this machine has ("needs 2 GPUs, found 1").
step gpu_tests 120 "$bld/asyncnd_tests" "[gpu]" --durations yes
skipped=$(grep "SKIPPED:" "$out/gpu_tests.log" | grep -v -E "needs [0-9]+ GPUs, found [1-9]")
if [ -n "$skipped" ]; then
  say "gpu-check: [gpu] tests were skipped: $(echo "$skipped" | head -n 1)"
  status=1
fi

# 1b. The same with every call launched on its own (ASYNCND_CUDA_BATCH=0), the other mode.
step gpu_tests_unheld 120 env ASYNCND_CUDA_BATCH=0 "$bld/asyncnd_tests" "[gpu]" --durations yes

# 2. The figures; E5's (held calls, the default, and each call launched) into the summary.
step bench 300 "$bld/bench_gpu" "$out/gpu.json"
grep -E "^ +(gpu_e5|gpu_launch|gpu_batch|torch_cuda_e5)" "$out/bench.log" | tee -a "$summary"

# sanitizer TOOL: the [gpu] tests under compute-sanitizer's TOOL, but [api_errors], the test that
# makes CUDA calls fail on purpose, which the tool reports.
sanitizer() {
  step "sanitizer_$1" 240 compute-sanitizer --tool "$1" --error-exitcode 99 \
    "$bld/asyncnd_tests" "[gpu]~[api_errors]"
}

# 3. compute-sanitizer's memcheck, where this machine supports it (racecheck is step 11).
if command -v compute-sanitizer >/dev/null; then
  sanitizer memcheck
else
  say "step sanitizer: not run (no compute-sanitizer on this machine)"
fi

# 4. The whole suite; the gpu_* entries must pass, not be skipped.
step ctest 400 ctest --test-dir "$bld" -j"$((jobs > 8 ? 8 : jobs))" --output-on-failure --timeout 300
if grep -E "gpu_[a-z]+ .*(Skipped|Not Run)" "$out/ctest.log" | grep -v multigpu >/dev/null; then
  say "gpu-check: a gpu_* ctest entry did not run: $(grep -E 'gpu_[a-z]+ .*Skipped' "$out/ctest.log" | head -n 3)"
  status=1
fi

# 5. make demo's program, E7 (CPU vs GPU) included.
step demo 240 "$bld/example_chapter"

# 6. The CPU side of this many-core machine: E1 against the thread counts (bench/e1_threads.cpp).
# With ops taken one by one, the workers' pacing before runs could pass between workers.
step cpu_e1_threads 120 "$bld/bench_e1_threads" "$out/e1_threads.json"
grep -v -E "^$|^wrote" "$out/cpu_e1_threads.log" | tee -a "$summary"
step cpu_e1_threads_ops 120 env ASYNCND_CPU_PACING=ops "$bld/bench_e1_threads" "$out/e1_threads_ops.json"
grep -E "^  [0-9]+ " "$out/cpu_e1_threads_ops.log" | sed "s/^/[cpu_e1_threads_ops] /" | tee -a "$summary"

# 7. The per-op costs on this many-core CPU (the CPU goals of bench/README.md, "The figures"), with
# the default workers, with one, 2 and 8, taking runs and ops (on a 16-thread Xeon, 2026-11-27,
# 15 workers taking ops one by one missed the per-op goals that one worker taking runs met:
# bench/notes/gpu.md, "`tools/gpu-check.sh` on an H100 again"); E5's peer is this machine's PyTorch
# (python3 here has it). Each entry is WORKERS:PACING, an empty WORKERS the default. Each also
# times a burst of 4000 short ops on an engine of max(2, WORKERS) workers taking runs, then ops
# (the split of long runs: bench/notes/per-op.md, "Splitting long runs").
for config in :runs :ops 1:runs 2:runs 2:ops 8:runs 8:ops; do
  workers=${config%%:*} pacing=${config#*:}
  tag=${workers:+_w$workers}$([ "$pacing" = ops ] && echo _ops)
  name=cpu_overhead$tag
  step "$name" 120 env ASYNCND_PYTHON=python3 ASYNCND_CPU_PACING=$pacing \
    ${workers:+ASYNCND_CPU_WORKERS=$workers} \
    "$bld/bench_native" --only=overhead "$out/native_overhead$tag.json"
  grep -E "^bench_native|^ +(spin_roundtrip_ns|push_overhead_ns|push_only_ns|wait_roundtrip_us|e5_async_step_us|torch_e5_step_us|burst_[a-z_]+) " \
    "$out/$name.log" | sed "s/^/[$name] /" | tee -a "$summary"
done

# 7b. The wait round trip beside hand-offs that use no engine, as multiples of the spin floor
# (bench/notes/per-op.md, "The wait round trip against hand-offs without an engine"): whether the
# floor's phases on our 2-vCPU VMs are theirs alone.
step cpu_handoff 60 "$bld/bench_handoff"
grep -E "^bench_handoff|^  (round|median|[0-9])" "$out/cpu_handoff.log" | sed "s/^/[cpu_handoff] /" |
  tee -a "$summary"

# 8. The CPU GEMMs on every core of this machine: auto runs our AVX-512 GEMM on a CPU with AVX-512
# since it ran 1.2-2.3x OpenBLAS 0.3.26 on this machine's 16 vCPUs (bench/notes/gemm.md, "Our GEMM
# on 16 cores"); OpenBLAS's kernels beside it, in rounds. Our AVX2 GEMM beside OpenBLAS's Haswell
# kernel in the sweep says whether it should also replace that kernel on many-core CPUs with AVX2
# alone (it was level on 2 vCPUs: bench/notes/gemm.md, "Our own AVX2 GEMM").
step cpu_gemm 180 "$bld/bench_native" --only=gemm "$out/native_gemm.json"
grep -E "^bench_native|^  (openblas |asyncnd |engine |cblas_|Haswell|SkylakeX|Cooperlake)|^ +(avx512_sgemm1000_gflops|avx2_sgemm1000_gflops|sgemm1000_engine_gflops|sgemm1000_best_kernel_gflops) " \
  "$out/cpu_gemm.log" | cut -c1-200 | sed "s/^/[cpu_gemm] /" | tee -a "$summary"

# 9. The chapter's MLP on every core, its ops taken in runs and one by one: a run passes to other
# workers when it stalls on an op or is split, and E6's layers have independent GEMMs side by side.
for pacing in runs ops; do
  tag=$([ "$pacing" = ops ] && echo _ops)
  step "cpu_e6$tag" 150 env ASYNCND_CPU_PACING=$pacing "$bld/bench_native" --only=e6 \
    "$out/native_e6$tag.json"
  grep -E "^bench_native|^ +e6_(sync|nosync|bounded|default)_s " "$out/cpu_e6$tag.log" |
    sed "s/^/[cpu_e6$tag] /" | tee -a "$summary"
done

# 10. Runs against ops, side by side, from the JSON files of steps 7 and 9: what decides whether
# several native workers keep taking runs (paced_pool in core/src/engine/worker_pool.cpp).
python3 - "$out" <<'PY' 2>&1 | tee -a "$summary" || true
import json, os, sys
out = sys.argv[1]
def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}
def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"
print("[runs_vs_ops] workers  pacing  push/floor  push_only_ns  wait/floor  burst runs/ops (workers)")
for tag in ("", "_w1", "_w2", "_w8"):
    for pacing, suffix in (("runs", ""), ("ops", "_ops")):
        j = load("native_overhead%s%s.json" % (tag, suffix))
        floor = j.get("spin_roundtrip_ns")
        push = j["push_overhead_ns"] / floor if floor and "push_overhead_ns" in j else None
        wait = j["wait_roundtrip_us"] * 1e3 / floor if floor and "wait_roundtrip_us" in j else None
        print("[runs_vs_ops] %7s  %6s  %10s  %12s  %10s  %s (%s)" % (
            tag[2:] or "default", pacing, fmt(push, ".2f"), fmt(j.get("push_only_ns"), ".0f"),
            fmt(wait, ".2f"), fmt(j.get("burst_runs_over_ops"), ".2f"),
            fmt(j.get("burst_workers"), ".0f")))
for pacing, suffix in (("runs", ""), ("ops", "_ops")):
    j = load("native_e6%s.json" % suffix)
    print("[runs_vs_ops] E6 %-4s  " % pacing + "  ".join(
        "%s %s s" % (k, fmt(j.get("e6_%s_s" % k), ".2f")) for k in ("sync", "default", "bounded")))
PY

# 11. compute-sanitizer's racecheck, last (see the list at the top).
command -v compute-sanitizer >/dev/null && sanitizer racecheck

say "gpu-check: $([ $status -eq 0 ] && echo 'all steps passed' || echo 'FAILED (see the logs)'); logs in $out"
exit $status
