// bench/browser/worker_ort.mjs: ONNX Runtime Web (its wasm execution provider, the SIMD + threads
// binary) in a module Worker, running a one-node MatMul model that onnx_matmul.mjs writes. Its
// thread count is ort.env.wasm.numThreads, set before the first session (a cross-origin-isolated
// Worker honours it; the default is min(4, ceil(hardwareConcurrency / 2))). Each run passes A and
// B as ort.Tensors (ORT copies them into its heap) and reads C back.
import './protocol.js';
import * as ort from './node_modules/onnxruntime-web/dist/ort.wasm.min.mjs';
import { matmulModel } from './onnx_matmul.mjs';

let session, feeds;
self.serve({
  async init(m) {
    ort.env.wasm.numThreads = m.threads;
    ort.env.wasm.wasmPaths = new URL('./node_modules/onnxruntime-web/dist/', import.meta.url).href;
    session = await ort.InferenceSession.create(matmulModel(m.n), {
      executionProviders: ['wasm'], graphOptimizationLevel: 'all',
    });
    feeds = { A: new ort.Tensor('float32', m.a, [m.n, m.n]), B: new ort.Tensor('float32', m.b, [m.n, m.n]) };
    return { library: 'ort', version: ort.env.versions.web, threads: ort.env.wasm.numThreads,
             workersSpawned: self.workersSpawned(), hardwareConcurrency: navigator.hardwareConcurrency };
  },
  gemm: ({ reps, samples }) => self.timeProducts(reps, samples, async () => {
    const { C } = await session.run(feeds);
    const data = C.data;
    C.dispose();
    return data;
  }),
});
