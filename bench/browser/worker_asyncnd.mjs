// bench/browser/worker_asyncnd.mjs: asyncnd in a module Worker, loaded as a browser user loads it
// (the package's ES module entry, wasm/index.browser.mjs, made by `make wasm`). The product is
// nd.dot then dataSync (C copied out of the wasm heap into JS); E5 is experiments/chapter.cjs's,
// as bench/wasm/bench.mjs and the playground run it.
import './protocol.js';
import asyncnd from '../../wasm/index.browser.mjs';
import '../../experiments/chapter.cjs';  // defines globalThis.asyncndChapter in a module

let nd, a, b, n;
self.serve({
  async init(m) {
    n = m.n;
    nd = await asyncnd.load({ threads: m.threads, simd: m.simd || 'auto' });
    a = nd.fromArray(m.a, [n, n]);
    b = nd.fromArray(m.b, [n, n]);
    nd.waitAll();
    return { library: 'asyncnd', threads: nd.engine.stats().workers, simd: nd.simd, workersSpawned: self.workersSpawned(),
             crossOriginIsolated: self.crossOriginIsolated, hardwareConcurrency: navigator.hardwareConcurrency };
  },
  // The product as a user writes it: nd.dot, then dataSync(), a blocker that waits for C and
  // copies it out of the wasm heap into a new Float32Array. readMs: that read-back alone, of a C
  // already computed, timed after the products (inside them, dataSync touches the new array's
  // pages while the product still runs: wasm/index.cjs, copyOut).
  gemm: async ({ reps, samples }) => {
    const r = await self.timeProducts(reps, samples, () => {
      const c = nd.dot(a, b);
      const data = c.dataSync();
      c.delete();
      return data;
    });
    const c = nd.dot(a, b);
    c.waitToRead();
    const readMs = [];
    for (let k = 0; k < 3; ++k) {
      const t = performance.now();
      c.dataSync();
      readMs.push(performance.now() - t);
    }
    c.delete();
    return { ...r, readMs };
  },
  // The chapter's E5 (10 000 x y = x + 1 on a [1,2] array: waitToRead each step vs waitAll once),
  // five times, interleaved as chapter.e5 does it.
  tiny() {
    const runs = [];
    for (let r = 0; r < 5; ++r) runs.push(self.asyncndChapter.e5(nd, { params: { N: 10000, warmup: 2000 } }));
    return runs.map(({ N, syncS, asyncS }) => ({ N, syncS, asyncS }));
  },
});
