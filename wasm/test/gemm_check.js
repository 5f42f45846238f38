// GEMM on odd shapes against a float64 reference, for the relaxed-SIMD module: in Node (a child
// process with --experimental-wasm-relaxed-simd, test/relaxed.test.js) and in Chromium (a classic
// Worker, test/browser/relaxed_worker.js). A plain script: require() it, or importScripts() it
// (then it defines `gemmCheck`).
//
// The bound is the usual one for a sum of k products in float32, |c - ref| <= 2 k u sum|a b|
// (u = 2^-24), whether each multiply-add rounds once (fused) or twice: f32x4.relaxed_madd may do
// either, as the hardware has it, so results can differ from the SIMD128 module's in the last bits,
// and from machine to machine.
(function (root) {
  'use strict';
  // m, k, n, transpose a, transpose b: the direct loop (tiny), thin rows (m < tile rows), whole and
  // partial 6x8 and 4x8 tiles, k across the 512-deep blocks, and transposed operands (whose rows
  // are strided in memory).
  const CASES = [
    [1, 1, 1, false, false], [3, 5, 7, false, false], [2, 300, 37, false, false],
    [6, 64, 8, false, false], [7, 65, 9, false, false], [13, 129, 17, false, false],
    [12, 40, 16, true, false], [37, 513, 29, false, false], [61, 100, 45, false, true],
    [100, 33, 99, true, true], [97, 1030, 41, true, false], [200, 50, 3, false, true],
  ];

  function rng(seed) {  // mulberry32 (test/helpers.js uses this one)
    let s = seed >>> 0;
    return () => {
      s = (s + 0x6d2b79f5) >>> 0;
      let t = s;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  // Runs every case on `nd` (blocking reads: Node or a Worker). Resolves with { cases, worst,
  // failures, values } where worst is the largest |c - ref| / (k u sum|a b|) seen (at most 2 when
  // right), and values the products (to compare two modules).
  function gemmCheck(nd, seed) {
    const next = rng(seed);
    const u = 2 ** -24;
    let worst = 0;
    const failures = [], values = [];
    for (const [m, k, n, ta, tb] of CASES) {
      const A = new Float32Array(m * k).map(() => next() * 4 - 2);
      const B = new Float32Array(k * n).map(() => next() * 4 - 2);
      // Stored transposed when ta / tb: dot reads them through a transposed view.
      const a = nd.fromArray(A, ta ? [k, m] : [m, k]), b = nd.fromArray(B, tb ? [n, k] : [k, n]);
      const c = nd.tidy(() => nd.dot(ta ? a.T : a, tb ? b.T : b).dataSync());
      a.delete();
      b.delete();
      values.push(Array.from(c));
      for (let i = 0; i < m; ++i) {
        for (let j = 0; j < n; ++j) {
          let ref = 0, mag = 0;
          for (let p = 0; p < k; ++p) {
            const x = ta ? A[p * m + i] : A[i * k + p], y = tb ? B[j * k + p] : B[p * n + j];
            ref += x * y;
            mag += Math.abs(x * y);
          }
          const err = Math.abs(c[i * n + j] - ref) / (k * u * mag + 1e-30);
          worst = Math.max(worst, err);
          if (!(err <= 2) && failures.length < 5) {
            failures.push(`${m}x${k}x${n}${ta ? ' a.T' : ''}${tb ? ' b.T' : ''} [${i},${j}]: ` +
                          `got ${c[i * n + j]}, expected ${ref}`);
          }
        }
      }
    }
    return { cases: CASES.length, worst, failures, values };
  }

  if (typeof module === 'object' && module.exports) module.exports = { gemmCheck, rng, CASES };
  else root.gemmCheck = gemmCheck;
})(typeof globalThis !== 'undefined' ? globalThis : this);
