// A module Web Worker importing the package's browser entry by URL: blocking calls are allowed.
import asyncnd from '../../index.browser.mjs';

try {
  const nd = await asyncnd.load({ threads: 2 });
  const a = nd.tidy(() => nd.arange(6).reshape([2, 3]).mul(2));
  const arr = a.toArray();
  const sum = nd.tidy(() => a.sum().item());
  a.delete();
  nd.waitAll();
  const st = nd.engine.stats();
  postMessage({ arr, sum, workers: st.workers, simd: nd.simd, live: st.liveArrays, bytes: st.bytesInUse });
} catch (e) {
  postMessage({ error: String((e && e.stack) || e) });
}
