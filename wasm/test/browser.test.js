// The package in a real browser (headless Chromium, if installed), on cross-origin-isolated pages
// (threads need COOP/COEP): loaded as classic scripts, the blocking calls refused on the page's
// main thread with an Error naming `await x.data()`, `data()` working there, and the full API,
// blocking calls included, inside a Web Worker; then as an ES module (index.browser.mjs) through
// an import map, on the page and in a module Worker. Chromium runs relaxed SIMD, so every form
// loads the relaxed-SIMD module (simd 'auto'); the last test checks its GEMM.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { skip, inChromium } = require('./browser/chromium.js');

const root = path.join(__dirname, '..');  // the package folder, served as /

test('in headless Chromium: classic scripts on a page and in a Web Worker', { skip, timeout: 120000 }, async () => {
  const out = await inChromium(root, 'test/browser/page.html');
  assert.equal(out.error, undefined, out.error);
  assert.equal(out.crossOriginIsolated, true);
  assert.equal(out.workers, 2);
  assert.equal(out.simd, 'relaxed');  // Chromium runs relaxed SIMD: auto picks that module
  for (const name of ['toArray', 'waitAll', 'item', 'toString']) {
    assert.match(out[name], new RegExp(`^${name}: blocking call on the browser's main thread.*await x\\.data\\(\\)`), name);
  }
  assert.deepEqual(out.data, [3, 3]);
  assert.ok(Number.isFinite(out.dotSum));
  assert.deepEqual(out.worker, {
    sum: 15, arr: [[0, 1, 2], [3, 4, 5]], text: '[[0, 1, 2],\n [3, 4, 5]] <NDArray 2x3 cpu(0)>',
    error: 'dot: inner dimensions differ: a=[2,3] b=[2,3]', simd: 'relaxed', live: 0, bytes: 0,
  });
});

test('in headless Chromium: the ES module through an import map, on a page and in a module Worker', {
  skip, timeout: 120000,
}, async () => {
  const out = await inChromium(root, 'test/browser/module.html');
  assert.equal(out.error, undefined, out.error);
  assert.equal(out.crossOriginIsolated, true);
  assert.equal(out.sameLoad, true);
  assert.equal(out.classicGlobal, 'undefined');
  assert.equal(out.workers, 2);
  assert.equal(out.simd, 'relaxed');
  assert.match(out.toArray, /^toArray: blocking call on the browser's main thread.*await x\.data\(\)/);
  assert.deepEqual(out.data, [2, 2, 2, 2]);
  assert.deepEqual(out.worker, { arr: [[0, 2, 4], [6, 8, 10]], sum: 30, workers: 2, simd: 'relaxed', live: 0, bytes: 0 });
});

test('in headless Chromium: auto picks the relaxed-SIMD module, its GEMM is right; SIMD128 when forced', {
  skip, timeout: 120000,
}, async () => {
  const out = await inChromium(root, 'test/browser/relaxed.html');
  assert.equal(out.error, undefined, out.error);
  assert.equal(out.supported, true, 'WebAssembly.validate of f32x4.relaxed_madd (Chromium 114+)');
  assert.deepEqual(out.auto, { simd: 'relaxed', backend: 'cpu (WebAssembly, 128-bit SIMD + relaxed FMA, worker threads)' });
  assert.equal(out.simd128, 'simd128');
  assert.deepEqual(out.relaxed.failures, []);
  assert.deepEqual(out.simd128Check.failures, []);
  assert.ok(out.relaxed.worst <= 2, `relaxed worst ${out.relaxed.worst}`);
  assert.equal(out.badChoice, "load: simd must be 'auto', 'relaxed' or 'simd128', got 'fma'");
  assert.equal(out.live, 0);
  console.log(`Chromium: relaxed vs SIMD128, ${out.differ} products differ in the last bits`);
});
