// bench/browser/bench.mjs: the browser benchmark's driver. Serves the repository with COOP/COEP
// (cross-origin isolated: SharedArrayBuffer and wasm threads), opens bench/browser/index.html in
// headless Chromium (main.mjs runs asyncnd, TensorFlow.js's wasm backend and ONNX Runtime Web, each
// in its own Worker, at 1 and 2 threads) and writes bench/results/browser.json. Run from anywhere
// after `make wasm` and `npm ci` here (`make bench-browser` does both):
//   node bench/browser/bench.mjs [out.json]
// Without Chromium it prints SKIPPED and exits 0.
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
const { chromium, skip, inChromium } = require(path.join(root, 'wasm', 'test', 'browser', 'chromium.js'));
const args = parseBenchArgs(process.argv, 'node bench/browser/bench.mjs [OUT.json]  (default: bench/results/browser.json)');
const out = args.out || path.join(root, 'bench', 'results', 'browser.json');

if (skip) {
  console.log(`bench-browser: ${skip}; bench/results/browser.json not written`);
  process.exit(0);
}
for (const [file, fix] of [['wasm/dist/asyncnd.wasm', 'make wasm'],
  ['bench/browser/node_modules/onnxruntime-web/package.json', 'npm ci in bench/browser']]) {
  if (!fs.existsSync(path.join(root, file))) throw new Error(`bench-browser: ${file} is missing: run ${fix}`);
}
const version = (pkg) => require(path.join(here, 'node_modules', pkg, 'package.json')).version;
// Debian's /usr/bin/chromium is a shell wrapper that prints a warning on stderr: keep stdout.
const chromiumVersion = execFileSync(chromium, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();

const before = conditionsBefore();
const t0 = Date.now();
const r = await inChromium(root, 'bench/browser/index.html', {
  timeoutMs: 15 * 60 * 1000,
  onLog: (line) => console.log(`  [${((Date.now() - t0) / 1000).toFixed(0).padStart(3)} s] ${line}`),
});
if (r.error) throw new Error(`bench-browser: the page failed: ${r.error}`);

const figures = {};
function record(key, value, note) {
  figures[key] = Number(value.toPrecision(6));
  console.log(`  ${key.padEnd(40)} ${String(figures[key]).padStart(10)}   ${note}`);
}
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]; };
const runs = `median of ${r.rounds * r.reps} (${r.rounds} rotated rounds of ${r.reps}) after ${r.warmup} warm-up products`;
console.log(`\n== SGEMM ${r.n}x${r.n}x${r.n} float32 in headless Chromium, each library in its own Worker, C read back`);
const peers = { tfjs: 'TensorFlow.js wasm', ort: 'ONNX Runtime Web wasm' };
for (const t of [1, 2]) {
  const ours = r.libs[`asyncnd_${t}t`];
  record(`browser_sgemm1000_${t}t_gflops`, ours.gflops, `asyncnd nd.dot + dataSync, ${ours.info.threads} engine worker(s), ${ours.info.simd} module (as load() picks it), ${runs}`);
  const simd128 = r.libs[`asyncnd_simd128_${t}t`];
  record(`browser_simd128_sgemm1000_${t}t_gflops`, simd128.gflops, `the same with the SIMD128 module forced (load({ simd: 'simd128' })), ${runs}`);
  let best = null;
  for (const lib of Object.keys(peers)) {
    const p = r.libs[`${lib}_${t}t`];
    record(`browser_${lib}_sgemm1000_${t}t_gflops`, p.gflops, `${peers[lib]}, asked for ${t} thread(s), reports ${p.info.threads}; ${runs}`);
    if (!best || p.gflops > best.gflops) best = { lib, gflops: p.gflops };
  }
  record(`browser_best_peer_sgemm1000_${t}t_gflops`, best.gflops, `the faster peer at ${t} thread(s): ${best.lib}`);
  figures[`browser_best_peer_${t}t`] = best.lib;
  record(`browser_sgemm1000_${t}t_over_best_peer`, ours.gflops / best.gflops, 'asyncnd / the faster peer');
}
console.log('\n== Per-step costs: E5 (y = x + 1 on [1,2], 10 000 steps) and TF.js per op, 1 thread each');
const e5Sync = median(r.e5.map((e) => e.syncS)), e5Async = median(r.e5.map((e) => e.asyncS)), e5N = r.e5[0].N;
record('browser_e5_sync_step_us', e5Sync / e5N * 1e6, 'asyncnd, waitToRead after each step, median of 5 runs');
record('browser_e5_async_step_us', e5Async / e5N * 1e6, 'asyncnd, waitAll once at the end, median of 5 runs');
record('browser_e5_speedup', e5Sync / e5Async, 'sync / async');
record('browser_tfjs_tiny_op_us', median(r.tfjsTiny.opUs), 'TF.js wasm: tf.add(x, 1).dispose() per op, median of 5');
record('browser_tfjs_tiny_op_sync_us', median(r.tfjsTiny.syncUs), 'TF.js wasm: the same with dataSync() each op, median of 5');

const libs = {};
for (const [key, l] of Object.entries(r.libs)) {
  libs[key] = { threads_asked: l.threadsAsked, threads_reported: l.info.threads, workers_spawned: l.info.workersSpawned,
                median_ms: Number(l.medianMs.toFixed(3)), min_ms: Number(Math.min(...l.ms).toFixed(3)),
                max_ms: Number(Math.max(...l.ms).toFixed(3)), worst_rel_error: l.worstRelError };
  if (l.info.multithreadBinary !== undefined) libs[key].threaded_simd_binary = l.info.multithreadBinary;
  if (l.info.simd !== undefined) libs[key].simd = l.info.simd;
  if (l.readMs) libs[key].read_back_median_ms = Number(median(l.readMs).toFixed(3));  // a ready C, apart
}
console.log('\n  per Worker (threads reported by the library; Web Workers it started):');
for (const [key, l] of Object.entries(libs)) console.log(`    ${key.padEnd(11)} ${JSON.stringify(l)}`);

writeResults(out, { ...figures, libs }, {
  cpu_model: cpuModel(),
  cores: os.cpus().length,
  chromium: chromiumVersion,
  user_agent: r.userAgent,
  hardware_concurrency: r.hardwareConcurrency,
  cross_origin_isolated: r.crossOriginIsolated,
  asyncnd: `${require(path.join(root, 'wasm', 'package.json')).version} (wasm/dist, Emscripten 3.1.6, -O2 -pthread -msimd128 -fexceptions; the relaxed module + -mrelaxed-simd)`,
  asyncnd_simd: r.libs.asyncnd_1t.info.simd,
  tfjs: `${version('@tensorflow/tfjs-core')} (tfjs-core + tfjs-backend-wasm ${version('@tensorflow/tfjs-backend-wasm')})`,
  onnxruntime_web: version('onnxruntime-web'),
  method: `${r.n}x${r.n}x${r.n} float32, each library in its own Worker, C read back; ${runs}`,
  ...before,
});
