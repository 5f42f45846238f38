// bench/browser/worker_tfjs.js: TensorFlow.js's wasm backend in a classic Worker (its Emscripten
// glue detects a Worker by importScripts, which module Workers lack), from the pinned npm files
// (the UMD builds define the global `tf`, and `tf.wasm`). With SharedArrayBuffer and wasm threads
// available (a cross-origin-isolated page) it picks its threaded SIMD binary. Its thread count:
// tf.wasm.setThreadsCount(n) before the backend starts, but the backend's C++
// (init_with_threads_count in tfjs-backend-wasm's backend.cc) caps n at
// navigator.hardwareConcurrency / 2 (read when the module starts), so on a 2-core machine it
// alone gives one thread (tf.wasm.getThreadsCount() then reports 1). So where n threads need it,
// this Worker reports hardwareConcurrency = 2n to TF.js (the cap assumes two hyperthreads per
// core) and calls setThreadsCount(n); getThreadsCount() reports what XNNPACK's pool was made with.
'use strict';
importScripts('protocol.js', 'node_modules/@tensorflow/tfjs-core/dist/tf-core.min.js',
  'node_modules/@tensorflow/tfjs-backend-wasm/dist/tf-backend-wasm.min.js');

let a, b;
self.serve({
  async init(m) {
    tf.wasm.setWasmPaths(new URL('node_modules/@tensorflow/tfjs-backend-wasm/dist/', self.location.href).href);
    const realConcurrency = navigator.hardwareConcurrency;
    if (2 * m.threads > realConcurrency) {
      Object.defineProperty(WorkerNavigator.prototype, 'hardwareConcurrency', { get: () => 2 * m.threads });
    }
    tf.wasm.setThreadsCount(m.threads);
    if (!(await tf.setBackend('wasm'))) throw new Error('tf.setBackend(\'wasm\') failed');
    await tf.ready();
    a = tf.tensor2d(m.a, [m.n, m.n]);
    b = tf.tensor2d(m.b, [m.n, m.n]);
    return { library: 'tfjs', version: tf.version_core, threads: tf.wasm.getThreadsCount(),
             multithreadBinary: tf.env().getBool('WASM_HAS_MULTITHREAD_SUPPORT') &&
               tf.env().getBool('WASM_HAS_SIMD_SUPPORT'),
             workersSpawned: self.workersSpawned(), hardwareConcurrency: realConcurrency,
             hardwareConcurrencyShown: navigator.hardwareConcurrency };
  },
  gemm: ({ reps, samples }) => self.timeProducts(reps, samples, () => {
    const c = tf.matMul(a, b);
    const data = c.dataSync();
    c.dispose();
    return data;
  }),
  // tf.add(x, 1).dispose() per op (the wasm backend runs each op at once), and the same with
  // dataSync each step; as bench/wasm/bench.mjs measures it in Node.
  tiny() {
    const x = tf.ones([1, 2]);
    const N = 10000, op = [], sync = [];
    for (let r = 0; r < 6; ++r) {
      let t0 = performance.now();
      for (let i = 0; i < N; ++i) tf.add(x, 1).dispose();
      const t1 = performance.now();
      for (let i = 0; i < N; ++i) { const y = tf.add(x, 1); y.dataSync(); y.dispose(); }
      const t2 = performance.now();
      if (r > 0) { op.push((t1 - t0) / N * 1e3); sync.push((t2 - t1) / N * 1e3); }
    }
    x.dispose();
    return { opUs: op, syncUs: sync };
  },
});
