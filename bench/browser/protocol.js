// bench/browser/protocol.js: the message protocol every library's Worker speaks with the page
// (main.mjs). A classic script, so that the classic TF.js Worker (importScripts) and the module
// Workers (a side-effect import) share it. `serve(handlers)` answers each message
// { id, cmd, ...args } with { id, result } from handlers[cmd](args), or { id, error }.
//   init({ threads, n, a, b, samples })  load the library with `threads` threads, upload a and b
//                                         (n x n, row-major); resolves with what the library
//                                         reports about itself (version, threads it uses)
//   gemm({ reps })                        reps x (C = A B, C read back into JS); resolves with
//                                         { ms: [each product's time], samples: C at `samples` }
//   tiny()                                the library's per-op cost on a [1,2] array
// Each Worker also counts the Web Workers the library starts (its threads), by wrapping Worker.
'use strict';
(function () {
  let spawned = 0;
  if (typeof self.Worker === 'function') {
    const NativeWorker = self.Worker;
    self.Worker = class extends NativeWorker {
      constructor(...args) { super(...args); spawned += 1; }
    };
  }
  self.workersSpawned = () => spawned;
  self.serve = (handlers) => {
    let queue = Promise.resolve();  // one command at a time, in order
    self.onmessage = (e) => {
      const { id, cmd } = e.data;
      queue = queue.then(async () => {
        try {
          if (!handlers[cmd]) throw new Error(`unknown command ${cmd}`);
          self.postMessage({ id, result: await handlers[cmd](e.data) });
        } catch (err) {
          self.postMessage({ id, error: String((err && (err.stack || err.message)) || err) });
        }
      });
    };
    self.postMessage({ id: 0, result: 'ready' });
  };
  // Times `reps` runs of `product()` (which returns C as a Float32Array, read back into JS).
  self.timeProducts = async (reps, samples, product) => {
    const ms = [];
    let c = null;
    for (let r = 0; r < reps; ++r) {
      const t0 = performance.now();
      c = await product();
      ms.push(performance.now() - t0);
    }
    return { ms, samples: c ? Array.from(samples, (i) => c[i]) : [] };
  };
}());
