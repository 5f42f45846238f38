// e6_mlp.mjs: the chapter's memory experiment (E6) on the WebAssembly engine, shared by
// examples/node/chapter.mjs and bench/wasm/bench.mjs (the JavaScript twin of examples/cpp/e6_mlp.h).
// The chapter's MLP (Dense 2048 relu, Dense 512 relu, Dense 1; SGD lr 0.005; L2 loss) trained on
// its data iterator's batches (X ~ N(0,1) [1024, 512], y = ones [1024]) in one of four modes:
//   sync     read the loss each batch (l.mean().item()): the frontend waits for every batch
//   nosync   never read it, the byte bound switched off (setMaxInflight({ ops, bytes: 0 })): the
//            frontend queues every batch at once, the chapter's problem
//   bounded  never read it, with a small nd.engine.setMaxInflight({ bytes }): pushes wait instead
//   default  never read it, the engine as loaded: its default byte bound (a quarter of the
//            module's 2 GiB heap) lets the frontend run ahead, then makes pushes wait
// Measured: the engine's peak bytes (stats().bytesPeak after resetPeak(), parameters and
// gradients included), the process RSS and the wasm memory size at their largest during the run,
// the mean time between two batches handed out, and the total time to waitAll.
// An allocation past the wasm memory's 2 GiB limit is an Error thrown at the call that needed
// it: the run stops there and reports it (error, batchesDone), and the engine keeps working.

export const E6_DEFAULTS = { batches: 100, batchSize: 1024, features: 512, lr: 0.005 };
// Three of the largest activations ([1024, 2048] floats), as the native demo's bound.
export const e6DefaultBoundBytes = (batchSize = 1024) => 3 * batchSize * 2048 * 4;

export function runE6(nd, mode, options = {}) {
  const { batches, batchSize, features, lr } = { ...E6_DEFAULTS, ...options };
  const boundBytes = options.boundBytes ?? e6DefaultBoundBytes(batchSize);
  if (!['sync', 'nosync', 'bounded', 'default'].includes(mode)) throw new Error(`runE6: unknown mode '${mode}'`);
  const now = () => performance.now() / 1000;
  nd.seed(1);
  const net = nd.nn.Sequential().add(nd.nn.Dense(2048, 'relu'), nd.nn.Dense(512, 'relu'), nd.nn.Dense(1));
  const loss = nd.nn.L2Loss();
  const trainer = nd.nn.SGD(net, lr);
  const step = (X, y, read) => {
    const l = nd.autograd.record(() => loss.forward(net.forward(X), y));
    if (read) l.mean().item();
    l.backward(nd.ones(l.shape));  // one loss value per example
    trainer.step(batchSize);
  };
  const out = { mode, batches, batchSize, boundBytes: 0, boundSource: 'none', pushWaits: 0, batchesDone: 0, error: null };
  let rssPeak = 0, heapPeak = 0;
  const sample = () => {
    rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
    heapPeak = Math.max(heapPeak, nd.engine.stats().heapBytes);
  };
  try {
    // One warm-up batch: the deferred parameters and their gradients are made here.
    nd.tidy(() => step(nd.random.normal([batchSize, features]), nd.ones([batchSize]), true));
    nd.waitAll();
    const ops = nd.engine.stats().maxInflightOps;
    if (mode === 'nosync') nd.engine.setMaxInflight({ ops, bytes: 0 });
    if (mode === 'bounded') nd.engine.setMaxInflight({ ops, bytes: boundBytes });
    const before = nd.engine.stats();
    out.boundBytes = before.maxInflightBytes;
    out.boundSource = before.maxInflightBytesSource;
    nd.engine.resetPeak();
    const it = nd.nn.DataIter(batches, batchSize, features);
    const t0 = now();
    try {
      for (let b = 0; b < batches; ++b) {
        nd.tidy(() => {
          const { X, y } = it.next();
          step(X, y, mode === 'sync');
        });
        out.batchesDone = b + 1;
        sample();
      }
      out.pushedS = now() - t0;
    } catch (e) {
      out.error = e.message;  // e.g. out of WebAssembly memory: stop queuing, drain below
    }
    try {
      nd.waitAll();
    } catch (e) {
      out.error = out.error || e.message;
    }
    out.totalS = now() - t0;
    sample();
    const h = it.handoutS;
    out.batchS = h.length > 1 ? (h[h.length - 1] - h[0]) / (h.length - 1) : NaN;
    const after = nd.engine.stats();
    out.peakBytes = after.bytesPeak;
    out.pushWaits = after.pushWaits - before.pushWaits;
    out.rssPeakBytes = rssPeak;
    out.heapPeakBytes = heapPeak;
  } finally {
    nd.engine.resetMaxInflight();
    net.delete();
    trainer.delete();
    try { nd.waitAll(); } catch (e) { out.error = out.error || e.message; }
  }
  return out;
}

// As a program: one mode in a fresh process (a clean wasm heap and RSS), printing its figures as
// one JSON line. bench/wasm/bench.mjs runs it this way.
//   node examples/node/e6_mlp.mjs <sync|nosync|bounded|default> [batches] [threads]
import { pathToFileURL } from 'node:url';
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [mode = 'sync', batches = '100', threads = '2'] = process.argv.slice(2);
  const { default: asyncnd } = await import('../../wasm/index.mjs');
  const nd = await asyncnd.load({ threads: Number(threads) });
  console.log(JSON.stringify(runE6(nd, mode, { batches: Number(batches) })));
}
