// A classic Web Worker (as the web playground's): the package's classic scripts, the SIMD128
// module's .js loaded first, as the README says; load() with simd 'auto' then loads
// dist/asyncnd-relaxed.js itself (importScripts) where the browser runs relaxed SIMD. GEMM on odd
// shapes against a float64 reference (gemm_check.js) on that module and on the forced SIMD128 one.
importScripts('../../dist/asyncnd.js', '../../index.cjs', '../gemm_check.js');
(async () => {
  const moduleUrl = new URL('../../dist/asyncnd.js', self.location.href).href;
  const out = { supported: asyncnd.supportsRelaxedSimd() };
  const nd = await asyncnd.load({ threads: 2, moduleUrl });
  const s = await asyncnd.load({ threads: 2, moduleUrl, simd: 'simd128' });
  out.auto = { simd: nd.simd, backend: nd.backend };
  out.simd128 = s.simd;
  const r = gemmCheck(nd, 20261125), q = gemmCheck(s, 20261125);
  out.relaxed = { worst: r.worst, failures: r.failures };
  out.simd128Check = { worst: q.worst, failures: q.failures };
  let differ = 0;
  r.values.forEach((v, i) => v.forEach((x, j) => { if (x !== q.values[i][j]) differ++; }));
  out.differ = differ;
  try { await asyncnd.load({ threads: 2, moduleUrl, simd: 'fma' }); } catch (e) { out.badChoice = e.message; }
  nd.waitAll();
  out.live = nd.engine.stats().liveArrays + s.engine.stats().liveArrays;
  postMessage(out);
})().catch((e) => postMessage({ error: String((e && e.stack) || e) }));
