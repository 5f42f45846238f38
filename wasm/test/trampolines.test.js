// The tiny op's calls through JavaScript. With Emscripten's JS-based C++ exceptions (-fexceptions,
// wasm/CMakeLists.txt), a call to a function that may throw, made where locals must be destroyed,
// leaves WebAssembly through an `invoke_*` trampoline (a JavaScript try/catch) and comes back: about
// 20 ns each in Node 20 on the AMD EPYC Zen 4. A tiny op made 46 of them before the engine's
// bookkeeping was marked noexcept (bench/notes/wasm.md, "WebAssembly: calls that may throw"), half
// of its cost; a change that puts a throwing call back on the path would go unnoticed in the
// timings' noise. This test counts them: it copies the package's module, wraps each trampoline of
// the copy with a counter, and runs x.add(1).delete() through the JS API.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const asyncnd = require('..');
const { THREADS } = require('./helpers');

const dist = path.join(__dirname, '..', 'dist');
// 10-12 now: the binding's, then the push path's calls that may throw (an out-of-memory
// allocation, a deleted variable), and, when the main thread happens to run an array's deletion
// or to wake a worker, a few more (a mutex, a condition variable). The bound leaves room for that
// timing-dependent part; the 13 calls per op that copying and dropping variable handles made (46
// in all before) would not fit.
const MAX_PER_OP = 16;

test(`x.add(1).delete() leaves WebAssembly through at most ${MAX_PER_OP} exception trampolines`, async (t) => {
  const js = fs.readFileSync(path.join(dist, 'asyncnd.js'), 'utf8');
  const trampoline = /function (invoke_\w+)\(index([^)]*)\)\{/g;
  const found = (js.match(trampoline) || []).length;
  if (found === 0) {
    t.skip('the module has no invoke_* trampolines (built with -fwasm-exceptions?)');
    return;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asyncnd-trampolines-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  // The counter lives on the main thread's global object; each engine worker runs its own copy of
  // the module's JavaScript and counts into its own, which this test does not read: the push path
  // (the frontend) is what it measures.
  fs.writeFileSync(path.join(dir, 'asyncnd.js'),
    js.replace(trampoline, 'function $1(index$2){++globalThis.__asyncndTrampolines;'));
  for (const f of ['asyncnd.wasm', 'asyncnd.worker.js']) fs.copyFileSync(path.join(dist, f), path.join(dir, f));
  globalThis.__asyncndTrampolines = 0;
  const nd = await asyncnd.load({ threads: THREADS, simd: 'simd128', moduleUrl: path.join(dir, 'asyncnd.js') });

  const x = nd.ones([1, 2]);
  for (let i = 0; i < 1000; ++i) x.add(1).delete();  // first-use paths (recyclers, pools) out of the way
  nd.waitAll();
  const N = 5000;
  globalThis.__asyncndTrampolines = 0;
  for (let i = 0; i < N; ++i) x.add(1).delete();
  nd.waitAll();
  const perOp = globalThis.__asyncndTrampolines / N;
  x.delete();
  nd.waitAll();
  assert.ok(perOp > 0, 'no trampoline counted: the wrapping did not take');
  assert.ok(perOp <= MAX_PER_OP,
    `${perOp.toFixed(2)} trampolines per op (at most ${MAX_PER_OP}): a call that may throw is back ` +
    'on the push path; find it by its table index (build-wasm with --profiling-funcs and wasm-dis)');
});
