// A classic Web Worker using the package: blocking calls are allowed here.
importScripts('../../dist/asyncnd.js', '../../index.cjs');
(async () => {
  const moduleUrl = new URL('../../dist/asyncnd.js', self.location.href).href;
  const nd = await asyncnd.load({ threads: 2, moduleUrl });
  const a = nd.tidy(() => nd.arange(6).reshape([2, 3]));
  const sum = nd.tidy(() => a.sum().item());
  const arr = a.toArray();
  const text = a.toString();
  let error = '';
  try { nd.dot(a, a); } catch (e) { error = e instanceof Error ? e.message : 'not an Error'; }
  a.delete();
  nd.waitAll();
  const st = nd.engine.stats();
  postMessage({ sum, arr, text, error, simd: nd.simd, live: st.liveArrays, bytes: st.bytesInUse });
})().catch((e) => postMessage({ error: String((e && e.stack) || e) }));
