// Shared by the node --test files: loads the package from this folder, checks after each test
// that nothing leaked (no live array, no pending op, no allocated byte), and compares values with
// plain JavaScript loops.
'use strict';
const assert = require('node:assert/strict');
const { afterEach } = require('node:test');
const path = require('node:path');
const asyncnd = require('..');

const THREADS = Number(process.env.ASYNCND_TEST_THREADS || 2);
// The build tree's hooks module (make wasm): the package's objects plus the tests' hooks
// (nd._testing, wasm/testing/) and the benchmarks' (nd._bench); the package itself has neither.
const HOOKS_MODULE = process.env.ASYNCND_HOOKS_MODULE ||
  path.join(__dirname, '..', '..', 'build-wasm', 'hooks', 'asyncnd.js');

// Loads the module and installs the per-test leak check. Call at the top of a test file.
// { hooks: true } loads the hooks module instead of the package's dist/. The package's module is
// the one load() picks: SIMD128 in Node 20 unless it runs with --experimental-wasm-relaxed-simd
// (then ASYNCND_WASM_SIMD=relaxed or simd128 chooses); the hooks module is built for SIMD128 only.
function setup({ hooks = false } = {}) {
  const loading = asyncnd.load(hooks ? { threads: THREADS, moduleUrl: HOOKS_MODULE, simd: 'simd128' }
                                     : { threads: THREADS });
  afterEach(async () => {
    const nd = await loading;
    nd.waitAll();
    const s = nd.engine.stats();
    assert.equal(s.liveArrays, 0, 'live arrays after the test (missing delete/tidy)');
    assert.equal(s.liveNnObjects, 0, 'live nn objects after the test (missing delete)');
    assert.equal(s.pending, 0, 'ops still pending after waitAll');
    assert.equal(s.bytesInUse, 0, 'bytes still allocated after the test');
    assert.equal(s.liveVars, 0, 'engine variables still alive after the test');
  });
  return loading;
}

// Row-major index helpers for the plain-JS references.
function sizeOf(shape) { return shape.reduce((a, b) => a * b, 1); }
function stridesOf(shape) {
  const st = new Array(shape.length);
  let s = 1;
  for (let d = shape.length - 1; d >= 0; --d) { st[d] = s; s *= shape[d]; }
  return st;
}
// NumPy broadcasting of two shapes, by hand.
function broadcastShape(a, b) {
  const n = Math.max(a.length, b.length), out = [];
  for (let i = 0; i < n; ++i) {
    const x = a[a.length - n + i] ?? 1, y = b[b.length - n + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1) throw new Error('not broadcastable');
    out.push(Math.max(x, y));
  }
  return out;
}
// Plain-loop elementwise with broadcasting: out[i] = f(a[ia], b[ib]).
function refBinary(av, as, bv, bs, f) {
  const os = broadcastShape(as, bs), n = sizeOf(os), out = new Float32Array(n);
  const ost = stridesOf(os), ast = stridesOf(as), bst = stridesOf(bs);
  for (let i = 0; i < n; ++i) {
    let ia = 0, ib = 0;
    for (let d = 0; d < os.length; ++d) {
      const idx = Math.floor(i / ost[d]) % os[d];
      const da = d - (os.length - as.length), db = d - (os.length - bs.length);
      if (da >= 0 && as[da] !== 1) ia += idx * ast[da];
      if (db >= 0 && bs[db] !== 1) ib += idx * bst[db];
    }
    out[i] = f(av[ia], bv[ib]);
  }
  return { values: out, shape: os };
}

function assertClose(actual, expected, rtol = 1e-5, atol = 1e-6, what = 'values') {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < actual.length; ++i) {
    const a = actual[i], e = expected[i];
    if (Number.isNaN(e)) { assert.ok(Number.isNaN(a), `${what}[${i}]: expected NaN, got ${a}`); continue; }
    if (!(Math.abs(a - e) <= atol + rtol * Math.abs(e))) {
      assert.fail(`${what}[${i}]: got ${a}, expected ${e} (rtol ${rtol}, atol ${atol})`);
    }
  }
}

// A seeded generator for test inputs (mulberry32): gemm_check.js's, which the browser tests load
// too.
const { rng } = require('./gemm_check.js');
function testSeed(name) {
  const seed = Number(process.env.ASYNCND_TEST_SEED || 20261122);
  console.log(`[seed] ${name}: ASYNCND_TEST_SEED=${seed}`);
  return seed;
}
function randomValues(next, n, lo = -2, hi = 2) {
  const v = new Float32Array(n);
  for (let i = 0; i < n; ++i) v[i] = lo + (hi - lo) * next();
  return v;
}

module.exports = { setup, THREADS, sizeOf, stridesOf, broadcastShape, refBinary, assertClose, rng,
                   testSeed, randomValues };
