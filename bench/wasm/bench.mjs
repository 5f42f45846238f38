// bench/wasm/bench.mjs: the WebAssembly engine in Node.js, next to TensorFlow.js on the same data,
// in one run. Writes bench/results/wasm.json (a flat object of named figures plus `machine`).
// Run from the repository root after `make wasm` and `npm ci` here (`make bench` does both):
//   node --experimental-wasm-relaxed-simd bench/wasm/bench.mjs [--only=e6] [out.json]
// (without the flag, Node 20 cannot run the relaxed-SIMD module and its figures are left out).
// --only=e6 runs E6 alone and writes its figures into the existing file, keeping the other keys
// and `machine` (the figures' machine and conditions are in bench/notes/wasm.md). E5 and E6 are the
// chapter's experiments as experiments/chapter.cjs writes them (the playground and
// examples/node/chapter.mjs run the same code); E6 runs each mode in a child process of this
// script (--e6-child=<mode>, which prints that run's figures as one JSON line).
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { conditionsBefore, cpuModel, parseBenchArgs, writeResults } from '../machine.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.join(here, '..', '..');
const require = createRequire(import.meta.url);
const asyncnd = require(path.join(root, 'wasm', 'index.cjs'));
const chapter = require(path.join(root, 'experiments', 'chapter.cjs'));
// --e6-child=<mode>: one E6 run in a child process of this script, not for users.
const args = parseBenchArgs(process.argv,
  'node --experimental-wasm-relaxed-simd bench/wasm/bench.mjs [--only=e6] [OUT.json]  ' +
  '(default OUT: bench/results/wasm.json; --only=e6 updates those figures in OUT)',
  ['--only=', '--e6-child=']);

const E6_BATCHES = 100, E6_THREADS = 2;
const e6Child = args.options['--e6-child='] || '';
if (e6Child) {
  const nd = await asyncnd.load({ threads: E6_THREADS, simd: 'simd128' });
  console.log(JSON.stringify(chapter.e6Run(nd, e6Child, { batches: E6_BATCHES })));
  process.exit(0);
}
const only = args.options['--only='];
if (only !== undefined && only !== 'e6') throw new Error(`bench.mjs: --only takes e6, got '${only}'`);
const out = args.out || path.join(root, 'bench', 'results', 'wasm.json');

const figures = {};
const notes = {};
function record(key, value, note) {
  figures[key] = Number(value.toPrecision(6));
  notes[key] = note;
  console.log(`  ${key.padEnd(34)} ${String(figures[key]).padStart(12)}   ${note}`);
}
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]; };
const nowS = () => performance.now() / 1000;
// CPU seconds of this process, all threads (the engine's workers are threads of it).
const cpuS = () => { const u = process.cpuUsage(); return (u.user + u.system) * 1e-6; };
const heading = (t) => console.log(`\n== ${t}`);

const before = conditionsBefore();  // before anything of ours starts

// ---- E6 -------------------------------------------------------------------------------------
function benchE6() {
  heading('E6  the chapter\'s MLP, 100 batches of 1024x512, 2 workers: read each batch / never (bound off) / never + small bound / never, default engine');
  // Each mode in a fresh process (this script with --e6-child): the wasm heap never shrinks, so a
  // mode run after the unbounded one would show that run's RSS.
  const runMode = (mode) => JSON.parse(execFileSync(process.execPath,
    [fileURLToPath(import.meta.url), `--e6-child=${mode}`],
    { encoding: 'utf8', maxBuffer: 1 << 24 }).trim().split('\n').pop());
  for (const mode of chapter.E6_MODES) {
    const r = runMode(mode);
    const what = { sync: 'l.mean().item() each batch', nosync: 'no read, byte bound off', bounded: `no read, setMaxInflight({ bytes: ${r.boundBytes} })`,
      default: `no read, default engine (byte bound ${r.boundBytes}, from ${r.boundSource})` }[mode];
    if (r.error) console.log(`  ${mode}: stopped after ${r.batchesDone} of ${r.batches} batches: ${r.error}`);
    const done = r.error ? `; STOPPED after ${r.batchesDone}/100 batches: ${r.error}` : '';
    record(`wasm_e6_${mode}_peak_mb`, r.peakBytes / 1e6, `${what}: engine peak bytes (resetPeak before the run; parameters and gradients included)${done}`);
    record(`wasm_e6_${mode}_s`, r.totalS, `${what}: first batch handed out to waitAll, one run${done}`);
    record(`wasm_e6_${mode}_rss_peak_mb`, r.rssPeakBytes / 1e6, `${what}: process.memoryUsage().rss, largest sample (after each batch and at the end)`);
    record(`wasm_e6_${mode}_heap_mb`, r.heapPeakBytes / 1e6, `${what}: the wasm memory's size at the end (it grows, never shrinks)`);
    record(`wasm_e6_${mode}_batch_ms`, r.batchS * 1e3, `${what}: mean time between two batches handed out`);
    record(`wasm_e6_${mode}_batches_done`, r.batchesDone, `${what}: batches queued before the run ended${done}`);
    if (mode === 'default') record('wasm_e6_default_push_waits', r.pushWaits, `${what}: pushes that waited on the bound`);
  }
}

if (only === 'e6') {
  benchE6();
  const prev = JSON.parse(fs.readFileSync(out, 'utf8'));
  const { machine, ...rest } = prev;
  fs.writeFileSync(out, JSON.stringify({ ...rest, ...figures, machine }, null, 2) + '\n');
  console.log(`\nupdated ${out}`);
  process.exit(0);
}

// One worker: the build tree's hooks module (make wasm), the package's objects linked with the
// benchmark's hooks (nd._bench: bench/wasm/glue_bench.cpp); two workers: the package's dist/.
const hooksModule = path.join(root, 'build-wasm', 'hooks', 'asyncnd.js');
if (!fs.existsSync(hooksModule)) throw new Error(`bench.mjs: ${hooksModule} is missing: run make wasm`);
const nd1 = await asyncnd.load({ threads: 1, moduleUrl: hooksModule, simd: 'simd128' });
const nd2 = await asyncnd.load({ threads: 2, simd: 'simd128' });
// The module load() picks (simd: 'auto', as a user gets it) for the main GEMM keys: the
// relaxed-SIMD one (dist/asyncnd-relaxed.*) where this Node runs relaxed SIMD (Node 22 and later
// by default; Node 20 with --experimental-wasm-relaxed-simd, which make bench-wasm passes), else
// the SIMD128 one, measured anyway as nd1 / nd2 (the wasm_simd128_* keys).
const picked = asyncnd.supportsRelaxedSimd() ? 'relaxed' : 'simd128';
const relaxed = picked === 'relaxed';
const nd1r = relaxed ? await asyncnd.load({ threads: 1 }) : null;
const nd2r = relaxed ? await asyncnd.load({ threads: 2 }) : null;
if (relaxed && (nd1r.simd !== 'relaxed' || nd2r.simd !== 'relaxed')) {
  throw new Error(`bench.mjs: load() picked ${nd1r.simd} / ${nd2r.simd} where relaxed SIMD validates`);
}

// ---- GEMM -----------------------------------------------------------------------------------
heading('SGEMM 1000x1000x1000: asyncnd (1 and 2 worker threads) vs TensorFlow.js, same matrices');
const n = 1000, flop = 2 * n * n * n, reps = 9;
nd1.seed(1);
const hostA = nd1.tidy(() => nd1.random.normal([n, n]).dataSync());
const hostB = nd1.tidy(() => nd1.random.normal([n, n]).dataSync());

const tf = require('@tensorflow/tfjs-core');
require('@tensorflow/tfjs-backend-cpu');
const tfwasm = require('@tensorflow/tfjs-backend-wasm');
// A directory prefix: the backend picks its SIMD (or threaded SIMD) binary by feature detection.
tfwasm.setWasmPaths(path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm')) + path.sep);

// Each run also notes GFLOP per CPU-second (cpu): time-slicing by other processes lowers the
// wall-clock figure, not that one, so on a busy machine it tells what the code itself does.
// Ours reads the product back (dataSync), as TF.js's run must to wait for it: the same work on
// both sides (until 2026-12-07 ours stopped at waitToRead, without the 4 MB copy).
function ourGemm(nd) {
  const a = nd.fromArray(hostA, [n, n]), b = nd.fromArray(hostB, [n, n]);
  const cpu = [];
  const run = () => {
    const c0 = cpuS(), t0 = nowS();
    const c = nd.dot(a, b);
    c.dataSync();
    const dt = nowS() - t0;
    cpu.push(flop / (cpuS() - c0) * 1e-9);
    c.delete();
    return flop / dt * 1e-9;
  };
  return { run, cpu, free: () => { a.delete(); b.delete(); } };
}
async function tfGemm(backend) {
  await tf.setBackend(backend);
  const a = tf.tensor2d(hostA, [n, n]), b = tf.tensor2d(hostB, [n, n]);
  const cpu = [];
  const run = () => {
    const c0 = cpuS(), t0 = nowS();
    const c = tf.matMul(a, b);
    c.dataSync();
    const dt = nowS() - t0;
    cpu.push(flop / (cpuS() - c0) * 1e-9);
    c.dispose();
    return flop / dt * 1e-9;
  };
  return { run, cpu, free: () => { a.dispose(); b.dispose(); } };
}

const g1 = ourGemm(nd1), g2 = ourGemm(nd2);
const g1r = relaxed ? ourGemm(nd1r) : null, g2r = relaxed ? ourGemm(nd2r) : null;
const tw = await tfGemm('wasm');
const tfThreads = tfwasm.getThreadsCount ? tfwasm.getThreadsCount() : 1;
// Check the three agree on the product before timing them.
{
  const ours = nd2.tidy(() => nd2.dot(nd2.fromArray(hostA, [n, n]), nd2.fromArray(hostB, [n, n])).dataSync());
  const theirs = tf.tidy(() => tf.matMul(tf.tensor2d(hostA, [n, n]), tf.tensor2d(hostB, [n, n])).dataSync());
  let maxDiff = 0;
  for (let i = 0; i < ours.length; ++i) maxDiff = Math.max(maxDiff, Math.abs(ours[i] - theirs[i]));
  console.log(`  max |asyncnd - tfjs| over C: ${maxDiff.toExponential(2)}`);
  if (maxDiff > 1e-2) throw new Error(`GEMM results differ: ${maxDiff}`);
}
// Warm-up: V8 compiles each Web Worker's copy of the module separately (Liftoff first, TurboFan
// once hot), so the second worker of a 2-thread module reaches full speed a few products later
// than the first: measured per product, the 2-thread GEMM ran 75-83 GFLOP/s in products 2-5 and
// 96-101 from then on. Six rounds (about 0.6 s) reach the steady state on every side.
for (let i = 0; i < 6; ++i) { g1.run(); g2.run(); tw.run(); if (relaxed) { g1r.run(); g2r.run(); } }
// A pause before each timed product: a module's idle workers spin for 2 ms after a product
// (kAfterJobSpin), which would take a core from the next library's run (the browser bench
// pauses 200 ms for the same reason).
const pause = () => new Promise((resolve) => setTimeout(resolve, 50));
const r1 = [], r2 = [], rt = [], r1r = [], r2r = [];
for (let r = 0; r < reps; ++r) {
  await pause(); r1.push(g1.run());
  await pause(); r2.push(g2.run());
  await pause(); rt.push(tw.run());
  if (relaxed) { await pause(); r1r.push(g1r.run()); await pause(); r2r.push(g2r.run()); }
}
tw.free();
// The main keys: the module load() picked (the relaxed runs where it picked relaxed).
const [p1, p2, gp1, gp2] = relaxed ? [r1r, r2r, g1r, g2r] : [r1, r2, g1, g2];
const kernel = relaxed ? 'relaxed-SIMD module, 6x8 f32x4.relaxed_madd micro-kernel' : 'SIMD128 module, 4x8 micro-kernel';
record('wasm_sgemm1000_1t_gflops', median(p1), `nd.dot + dataSync, 1 worker, the module load() picks here (${kernel}), median of ${reps}`);
record('wasm_sgemm1000_2t_gflops', median(p2), `the same, 2 workers, median of ${reps}`);
record('wasm_sgemm1000_1t_best_gflops', Math.max(...p1), 'best of the same runs');
record('wasm_sgemm1000_2t_best_gflops', Math.max(...p2), 'best of the same runs');
record('tfjs_wasm_sgemm1000_gflops', median(rt), `tf.matMul + dataSync, tfjs-backend-wasm 4.22 (${tfThreads} thread), median of ${reps}, interleaved`);
record('wasm_sgemm1000_1t_cpu_gflops', median(gp1.cpu.slice(-reps)), 'the same 1-worker runs, GFLOP per CPU-second of the process');
record('wasm_sgemm1000_2t_cpu_gflops', median(gp2.cpu.slice(-reps)), 'the same 2-worker runs, GFLOP per CPU-second of the process (both workers)');
record('tfjs_wasm_sgemm1000_cpu_gflops', median(tw.cpu.slice(-reps)), 'the same TF.js runs, GFLOP per CPU-second of the process');
// The SIMD128 module, forced (what Node 20 runs without the flag, and browsers without relaxed SIMD).
record('wasm_simd128_sgemm1000_1t_gflops', median(r1), `the same on the SIMD128 module (load({ simd: 'simd128' }), 4x8 micro-kernel), 1 worker, median of ${reps}, interleaved`);
record('wasm_simd128_sgemm1000_2t_gflops', median(r2), `the same, 2 workers, median of ${reps}`);
record('wasm_simd128_sgemm1000_1t_cpu_gflops', median(g1.cpu.slice(-reps)), 'the same 1-worker runs, GFLOP per CPU-second of the process');
record('wasm_simd128_sgemm1000_2t_cpu_gflops', median(g2.cpu.slice(-reps)), 'the same 2-worker runs, GFLOP per CPU-second of the process (both workers)');
if (relaxed) {
  g1r.free(); g2r.free();
} else {
  console.log('  (this Node does not run relaxed SIMD: the main keys are the SIMD128 module; Node 20 runs it with --experimental-wasm-relaxed-simd)');
}
const tc = await tfGemm('cpu');
tc.run();
const rc = [tc.run(), tc.run(), tc.run()];
tc.free();
record('tfjs_cpu_sgemm1000_gflops', median(rc), 'tf.matMul + dataSync, tfjs-backend-cpu 4.22 (pure JS), median of 3');
g1.free(); g2.free();

// ---- overhead -------------------------------------------------------------------------------
heading('Per-op overhead through Embind (default worker count for this machine: 1)');
const nd = nd1;
{
  nd._bench.benchVars(256);
  const push = nd._bench.pushEmptyUnchecked;  // the bound Embind function itself
  const N = 200000, warmups = 3, all = [], pushOnly = [];  // warm-up: as for the tiny op below
  for (let r = 0; r < warmups + 5; ++r) {
    const t0 = nowS();
    for (let i = 0; i < N; ++i) push(i & 255, (i * 7 + 3) & 255);
    const t1 = nowS();
    nd.waitAll();
    if (r >= warmups) { all.push((nowS() - t0) / N * 1e9); pushOnly.push((t1 - t0) / N * 1e9); }
  }
  nd._bench.benchVarsFree();
  nd.waitAll();
  record('wasm_push_overhead_ns', median(all), 'empty op (reads 1, writes 1 of 256 vars) pushed from JS through Embind, incl. waitAll, N=200k, median of 5 after 3 warm-up rounds');
  record('wasm_push_only_ns', median(pushOnly), 'the same runs, the push calls alone');
}
{
  // V8 runs new wasm code in its baseline compiler and tiers hot functions up to TurboFan in the
  // background, so the first 20 000-op rounds of a module's push path cost 2-3x the steady state
  // (4.1-5.4 us against 1.6 us per op in the C++ loop on AMD EPYC Zen 4, 2026-11-25). Both
  // libraries get the same warm-up, then their rounds alternate, so that a busy moment of the
  // machine falls on both.
  const x = nd.ones([1, 2]);
  await tf.setBackend('wasm');
  const tx = tf.ones([1, 2]);
  const N = 20000, warmups = 4, rounds = 9, ours = [], core = [], theirs = [];
  const perOp = (fn) => { const t0 = nowS(); fn(); return (nowS() - t0) / N * 1e9; };
  const oursRound = () => perOp(() => { for (let i = 0; i < N; ++i) x.add(1).delete(); nd.waitAll(); });
  const coreRound = () => perOp(() => { nd._bench.coreAdds(x, N); nd.waitAll(); });
  const theirRound = () => perOp(() => { for (let i = 0; i < N; ++i) tf.add(tx, 1).dispose(); });
  for (let r = 0; r < warmups + rounds; ++r) {
    const o = oursRound(), c = coreRound(), t = theirRound();
    if (r >= warmups) { ours.push(o); core.push(c); theirs.push(t); }
  }
  x.delete();
  tx.dispose();
  record('wasm_tiny_op_ns', median(ours), `x.add(1).delete() on a [1,2] array through the JS API, incl. waitAll, per op, median of ${rounds} after ${warmups} warm-up rounds of ${N}`);
  record('wasm_tiny_op_core_ns', median(core), 'the same loop inside C++ (no JS wrapper, no Embind), per op, same rounds');
  record('tfjs_wasm_tiny_op_ns', median(theirs), 'tf.add(x, 1).dispose() on tfjs-backend-wasm, per op (synchronous backend), rounds alternating with ours');
}
{
  const x = nd.ones([1, 2]);
  const us = [];
  for (let i = 0; i < 22000; ++i) {
    const t0 = nowS();
    const y = x.add(1);
    y.waitToRead();
    if (i >= 2000) us.push((nowS() - t0) * 1e6);
    y.delete();
  }
  x.delete();
  us.sort((a, b) => a - b);
  record('wasm_wait_roundtrip_us', us[us.length >> 1], 'x.add(1) then waitToRead, median of 20k after 2k warm-up');
  record('wasm_wait_roundtrip_p90_us', us[Math.floor(us.length * 0.9)], '90th percentile (a sleeping hand-off shows here)');
}

// ---- E5 -------------------------------------------------------------------------------------
heading('E5: 10000 x (y = x + 1) on a [1,2] array, waitToRead each time vs waitAll once');
{
  // The chapter's E5, five times: each run times the synchronous loop, then the asynchronous one
  // (interleaved, so drift affects both alike), then its t1/t2 estimates (not recorded here).
  const sync = [], async = [];
  for (let r = 0; r < 5; ++r) {
    const res = chapter.e5(nd, { params: { N: 10000, warmup: 2000 } });
    sync.push(res.syncS);
    async.push(res.asyncS);
  }
  record('wasm_e5_sync_s', median(sync), 'waitToRead after each of the 10000 adds, median of 5');
  record('wasm_e5_async_s', median(async), 'waitAll once at the end, median of 5');
  record('wasm_e5_speedup', median(sync) / median(async), 'wasm_e5_sync_s / wasm_e5_async_s');
  record('wasm_e5_sync_min_s', Math.min(...sync), 'fastest synchronous repeat');
}

benchE6();

nd1.waitAll();
nd2.waitAll();
if (relaxed) { nd1r.waitAll(); nd2r.waitAll(); }
writeResults(out, figures, {
  cpu_model: cpuModel(),
  cores: os.cpus().length,
  node: process.version,
  backend: nd.backend,
  emscripten: '3.1.6 (Debian), -O2 -pthread -msimd128 -fexceptions (relaxed module: + -mrelaxed-simd, opcode rewritten)',
  node_relaxed_simd: relaxed,
  asyncnd_simd: picked,  // the module behind the wasm_sgemm1000_* keys
  tfjs: '4.22.0',
  ...before,
});
