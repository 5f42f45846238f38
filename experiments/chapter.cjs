// experiments/chapter.cjs: the chapter's experiments E1-E7 ("Asynchronous Computation") on the
// WebAssembly engine, written once for JavaScript. Each takes the loaded API `nd`
// (`await asyncnd.load()`) and an optional context, runs the chapter's code and returns plain
// figures (seconds, bytes, counts, and the engine's own strings); nothing here prints, and nothing
// is text for a reader: whoever calls writes the words, in its own language. Used by
//   examples/node/chapter.mjs   Node (ES module): `import chapter from '../../experiments/chapter.cjs'`
//   web/worker.js               the playground's Web Worker, as a classic script:
//                               importScripts('/experiments/chapter.cjs') (web/server.mjs serves
//                               this one file), then the global `asyncndChapter`
//   bench/wasm/bench.mjs        E5 and E6, repeated, as JSON figures
// It loads nothing itself (the caller passes `nd`), so the same file runs in all three. Its C++
// twin, on the native engine, is experiments/chapter.h.
//
// The context, every member optional:
//   params                 the experiment's sizes (each function says which, and its defaults)
//   progress(fraction, step, params)   where a long run is, `fraction` from 0 to 1; `step` names
//                          the step ('warmup', 'syncStep', 'batch', ...: the playground turns it
//                          into words), `params` its numbers
//   profile(fn, cb)        runs fn with the profiler on and hands its events to cb; by default
//                          only where an experiment needs the events itself (E2, E5), by starting
//                          and stopping the engine's profiler (a caller that profiles its own
//                          work around an experiment passes its own), and the playground records
//                          every run for its timelines
//   startProfile(), stopProfile()   the same around a stretch with awaits in it (E4) or a long
//                          one (E6); by default nothing
// Every function blocks its thread while it waits (waitToRead, waitAll, dataSync): run it in Node
// or in a Web Worker, never on a page's main thread. Each frees every array it made.
'use strict';

(function (root, factory) {
  const api = factory();
  // CommonJS (Node, which also gives it to ES modules as their default import), or a global for a
  // classic script and importScripts().
  if (typeof module === 'object' && module && module.exports) module.exports = api;
  else root.asyncndChapter = api;
}(typeof globalThis !== 'undefined' ? globalThis : self, function () {
  const now = () => performance.now() / 1000;  // seconds

  function context(nd, ctx = {}) {
    const profile = (fn, cb) => {
      if (!cb) return fn();
      nd.profiler.start();
      try {
        fn();
      } finally {
        nd.profiler.stop();
      }
      cb(nd.profiler.events());
      return undefined;
    };
    return {
      params: {},
      progress: () => {},
      profile,
      startProfile: () => {},
      stopProfile: () => {},
      ...ctx,
    };
  }

  // Sleeps this thread (a blocking wait is fine in Node and in a Worker). Made on first use: a
  // page that is not cross-origin isolated has no SharedArrayBuffer, and the Worker must still
  // load this file to say so.
  let sleepCell = null;
  function sleepMs(ms) {
    if (!sleepCell) sleepCell = new Int32Array(new SharedArrayBuffer(4));
    Atomics.wait(sleepCell, 0, 0, ms);
  }

  // The smallest step of this thread's clock (seconds): browsers coarsen performance.now().
  function clockTick() {
    let best = Infinity;
    for (let i = 0; i < 50; ++i) {
      const a = performance.now();
      let b = a;
      while (b === a) b = performance.now();
      best = Math.min(best, b - a);
    }
    return best / 1000;
  }

  const show = (v) => (typeof v === 'string' ? `'${v}'` : typeof v === 'bigint' ? `${v}n` : String(v));

  // A number of experiment `exp`: `def` when absent (undefined or null), else a number from min to
  // max, a whole one unless `real`. Anything else is an Error naming the experiment, the name and
  // the value as given, thrown before the experiment makes anything.
  function num(exp, name, v, def, { min = 1, max = Number.MAX_SAFE_INTEGER, real = false } = {}) {
    if (v === undefined || v === null) return def;
    if (typeof v !== 'number' || !Number.isFinite(v) || (!real && !Number.isInteger(v)) || v < min || v > max) {
      const what = real ? 'a number' : 'an integer';
      const range = max === Number.MAX_SAFE_INTEGER ? `${min} or more` : `from ${min} to ${max}`;
      throw new Error(`${exp}: ${name} must be ${what} ${range}, got ${show(v)}`);
    }
    return v;
  }
  const param = (ctx, exp, name, def, range) => num(exp, name, ctx.params[name], def, range);

  // E1: `iters` random n x n matrices, each multiplied by itself, as the chapter's loop:
  // synchronous (wait for every op, the way NumPy behaves) vs the engine, whose loop only queues;
  // tidy frees each step's arrays once their ops ran. params: n (1000), iters (10).
  function e1(nd, context_) {
    const ctx = context(nd, context_);
    const n = param(ctx, 'E1', 'n', 1000), iters = param(ctx, 'E1', 'iters', 10);
    ctx.progress(0, 'warmup');
    nd.tidy(() => nd.dot(nd.random.normal([n, n]), nd.random.normal([n, n])).waitToRead());

    let t0 = now();
    for (let i = 0; i < iters; ++i) {
      nd.tidy(() => {
        const a = nd.random.normal([n, n]);
        a.waitToRead();
        nd.dot(a, a).waitToRead();
      });
      ctx.progress((i + 1) / (2 * iters), 'syncStep', { i: i + 1, n: iters });
    }
    const syncS = now() - t0;

    ctx.progress(0.5, 'queueing');
    let returnedS, finishedS;
    ctx.profile(() => {
      t0 = now();
      for (let i = 0; i < iters; ++i) {
        nd.tidy(() => {
          const a = nd.random.normal([n, n]);
          nd.dot(a, a);
        });
      }
      returnedS = now() - t0;
      nd.waitAll();
      finishedS = now() - t0;
    });
    return { n, iters, syncS, returnedS, finishedS };
  }

  // Which op waits for which, from profiler events in push order: the engine's rules replayed (a
  // read waits for the last write of its variable; a write for the last write and every read
  // since). Returns [earlier op, op that waits] index pairs, sorted, each once.
  function dependencies(events) {
    const lastWriter = new Map(), readers = new Map(), edges = new Map();
    const edge = (from, to) => edges.set(`${from} ${to}`, [from, to]);
    events.forEach((e, i) => {
      for (const v of e.reads) {
        if (lastWriter.has(v)) edge(lastWriter.get(v), i);
        readers.set(v, [...(readers.get(v) || []), i]);
      }
      for (const v of e.writes) {
        if (lastWriter.has(v)) edge(lastWriter.get(v), i);
        for (const rd of readers.get(v) || []) edge(rd, i);
        readers.set(v, []);
        lastWriter.set(v, i);
      }
    });
    return [...edges.values()].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  }

  // E2: z = x * y + 2, recorded by the profiler: which op read and wrote which variable.
  // Returns z as text, the events in push order and the edges between them (dependencies()).
  function e2(nd, context_) {
    const ctx = context(nd, context_);
    let z, events = [];
    ctx.progress(0, 'e2');
    ctx.profile(() => {
      const x = nd.ones([1, 2]), y = nd.ones([1, 2]);
      const zz = nd.tidy(() => x.mul(y).add(2));
      zz.waitToRead();
      z = zz.toString();
      [x, y, zz].forEach((a) => a.delete());
    }, (ev) => { events = ev; });
    events = [...events].sort((a, b) => a.pushUs - b.pushUs);
    return { z, events, edges: dependencies(events) };
  }

  // E3, E4 and E7 work on x ~ U(0, 1) [n, n] (params.n, else defaultN), after one product to warm
  // up; body(ctx, x, n) gives the figures (or a promise of them). x is freed once it is done.
  function onSquare(nd, context_, exp, defaultN, body) {
    const ctx = context(nd, context_);
    const n = param(ctx, exp, 'n', defaultN);
    const x = nd.random.uniform([n, n]);
    let pending = null;
    try {
      ctx.progress(0, 'warmup');
      nd.tidy(() => nd.dot(x, x).waitToRead());
      const r = body(ctx, x, n);
      if (r && typeof r.then === 'function') pending = r.finally(() => x.delete());
      return pending || r;
    } finally {
      if (!pending) x.delete();
    }
  }

  // E3: barriers. y = dot(x, x).sum() queued, then printed; one dot waited with waitToRead, with
  // waitAll, two dots with waitAll, and two dots waited for the first alone (waitToRead, about one
  // product where they run in the order pushed). params: n (2000).
  function e3(nd, context_) {
    return onSquare(nd, context_, 'E3', 2000, (ctx, x, n) => {
      const r = { n };
      ctx.profile(() => {
        let t0 = now();
        const s = nd.tidy(() => nd.dot(x, x).sum());
        r.queuedS = now() - t0;
        r.sum = s.toString();
        r.printedS = now() - t0;
        s.delete();
        ctx.progress(0.25, 'calling', { call: 'waitToRead()' });
        t0 = now();
        nd.tidy(() => nd.dot(x, x).waitToRead());
        r.waitToReadS = now() - t0;
        ctx.progress(0.5, 'calling', { call: 'waitAll()' });
        t0 = now();
        nd.tidy(() => { nd.dot(x, x); });
        nd.waitAll();
        r.waitAllS = now() - t0;
        ctx.progress(0.75, 'twoDots');
        t0 = now();
        nd.tidy(() => { nd.dot(x, x); nd.dot(x, x); });
        nd.waitAll();
        r.waitAll2S = now() - t0;
        t0 = now();
        nd.tidy(() => {
          const y = nd.dot(x, x);
          nd.dot(x, x);
          y.waitToRead();
        });
        r.waitFirstOfTwoS = now() - t0;
        nd.waitAll();  // the second, not timed
      });
      return r;
    });
  }

  // E4: implicit blockers (dataSync, item, toString each wait for a whole product), and the
  // JavaScript way, `await x.data()`, which never blocks: a 1 ms timer counts how often the event
  // loop ran meanwhile. params: n (2000).
  function e4(nd, context_) {
    return onSquare(nd, context_, 'E4', 2000, async (ctx, x, n) => {
      const r = { n };
      ctx.startProfile();
      try {
        return await e4Calls(nd, ctx, x, r);
      } finally {
        ctx.stopProfile();  // also when a call failed
      }
    });
  }
  // E4's calls, with the profiler on (e4 stops it, also when one fails).
  async function e4Calls(nd, ctx, x, r) {
    let t0 = now();
    const host = nd.tidy(() => nd.dot(x, x).dataSync());
    r.dataSyncS = now() - t0;
    r.values = host.length;
    ctx.progress(0.25, 'calling', { call: 'item()' });
    t0 = now();
    r.norm = nd.tidy(() => nd.dot(x, x).norm().item());
    r.itemS = now() - t0;
    ctx.progress(0.5, 'calling', { call: 'toString()' });
    t0 = now();
    r.text = nd.tidy(() => nd.dot(x, x).sum().toString());
    r.toStringS = now() - t0;
    ctx.progress(0.75, 'calling', { call: 'await data()' });
    t0 = now();
    const y = nd.dot(x, x);
    const p = y.data();
    r.dataReturnedS = now() - t0;
    let ticks = 0;
    const ticker = setInterval(() => { ++ticks; }, 1);
    try {
      await p;
    } finally {
      clearInterval(ticker);
      y.delete();
    }
    r.awaitDataS = now() - t0;
    r.ticks = ticks;
    return r;
  }

  // E5: N x (y = x + 1) on a [1, 2] array, waiting after each (syncS) vs once (asyncS; pushS: its
  // pushes alone); the chapter's t1 (a push, timed around each push of a synchronous loop), t2 (a
  // worker's run of one op, from the profiler) and t3 (the rest of a synchronous step: handing the
  // result back), in seconds. params: N (10000), warmup (1000), profiled (1000).
  function e5(nd, context_) {
    const ctx = context(nd, context_);
    const N = param(ctx, 'E5', 'N', 10000);
    const warmup = param(ctx, 'E5', 'warmup', 1000, { min: 0 });
    const profiled = Math.min(param(ctx, 'E5', 'profiled', 1000), N);
    const x = nd.ones([1, 2]);
    try {
      ctx.progress(0, 'warmup');
      for (let i = 0; i < warmup; ++i) x.add(1).delete();
      nd.waitAll();

      const step = Math.max(1, N >> 3);
      let t0 = now();
      for (let i = 0; i < N; ++i) {
        const y = x.add(1);
        y.waitToRead();
        y.delete();
        if (i % step === step - 1) ctx.progress(0.33 * (i + 1) / N, 'synchronous');
      }
      const syncS = now() - t0;

      ctx.progress(0.33, 'asynchronous');
      t0 = now();
      for (let i = 0; i < N; ++i) x.add(1).delete();
      const pushS = now() - t0;
      nd.waitAll();
      const asyncS = now() - t0;

      let t1Total = 0;
      for (let i = 0; i < N; ++i) {
        const a = now();
        const y = x.add(1);
        t1Total += now() - a;
        y.waitToRead();
        y.delete();
        if (i % step === step - 1) ctx.progress(0.4 + 0.5 * (i + 1) / N, 'timingPushes');
      }
      ctx.progress(0.9, 'profiling');
      let events = [];
      ctx.profile(() => {
        for (let i = 0; i < profiled; ++i) x.add(1).delete();
        nd.waitAll();
      }, (ev) => { events = ev; });
      // The mean, not the median: a browser's clock ticks every 5 us or so (more when not
      // isolated), coarser than one tiny op, so most single durations read 0 or one tick; the
      // mean of many such readings is still a fair estimate of the real duration.
      const run = events.filter((e) => e.name === 'add').map((e) => e.endUs - e.startUs);
      const t2 = run.length ? run.reduce((a, b) => a + b, 0) / run.length * 1e-6 : 0;
      const t1 = t1Total / N;
      const t3 = Math.max(0, syncS / N - t1 - t2);
      return { N, syncS, asyncS, pushS, t1, t2, t3, t2Samples: run.length, clockUs: clockTick() * 1e6,
               speedup: syncS / asyncS, modelSyncS: N * (t1 + t2 + t3),
               // The chapter's model for the asynchronous loop, t1 + N t2 + t3, holds when the
               // workers are the bottleneck; when the pushes are (t1 > t2) the loop goes at their
               // pace, N t1 + t2 + t3. modelAsyncS is the larger of the two.
               chapterModelAsyncS: t1 + N * t2 + t3,
               modelAsyncS: Math.max(t1 + N * t2 + t3, N * t1 + t2 + t3) };
    } finally {
      x.delete();
    }
  }

  function hasNN(nd) {
    return !!(nd && nd.nn && nd.autograd && typeof nd.autograd.record === 'function' &&
              nd.nn.Sequential && nd.nn.Dense && nd.nn.L2Loss && nd.nn.SGD && nd.nn.DataIter);
  }

  // E6's ways of training, in the order the playground shows them:
  //   sync     read the loss each batch (l.mean().item()): the frontend waits for every batch
  //   nosync   never read it, the byte bound switched off (setMaxInflight({ ops, bytes: 0 })): the
  //            frontend queues every batch at once, the chapter's problem
  //   bounded  never read it, with a small nd.engine.setMaxInflight({ bytes })
  //   default  never read it, the engine's default bound (a quarter of the module's 2 GiB heap):
  //            the frontend runs ahead, then pushes wait
  const E6_MODES = ['sync', 'nosync', 'bounded', 'default'];
  const E6_DEFAULTS = { batches: 100, batchSize: 1024, features: 512, lr: 0.005, seed: 1, drainSampleMs: 0 };
  // Three of the largest activations ([batchSize, 2048] floats), as the native demo's bound.
  const e6DefaultBoundBytes = (batchSize = 1024) => 3 * batchSize * 2048 * 4;

  // E6, one mode: the chapter's MLP (Dense 2048 relu, Dense 512 relu, Dense 1; SGD lr 0.005; L2
  // loss) trained on its data iterator's batches (nd.nn.DataIter: X ~ N(0,1) [batchSize,
  // features], y = ones [batchSize]), after one warm-up batch (deferred parameters, gradients).
  // The engine's bounds are reset first (the default engine), then the mode's applied; the
  // caller's are put back at the end, also after a failure; nd's random numbers are left seeded
  // with `seed` (nd.seed, as the run starts). Bad options are an Error naming them,
  // before anything is made. options: batches, batchSize, features, lr, seed (E6_DEFAULTS), boundBytes
  // (bounded; e6DefaultBoundBytes), drainSampleMs (> 0: once the loop returned, sample the
  // memory every this many ms until the queue is empty, for a curve of the drain).
  // Returns, besides the settings: pushedS (first batch to the loop's return), totalS (to waitAll),
  // batchS (mean time between two batches handed out), perBatchS (totalS per batch done),
  // batchEnds (when each batch was queued), peakBytes (the engine's peak, resetPeak after the
  // warm-up: parameters and gradients included) and baseBytes (in use before the first batch),
  // samples [{ t, bytes (over baseBytes), pending }] (after each forward pass, each batch, while
  // draining and at the end), heapPeakBytes (the wasm memory's size) and rssPeakBytes (Node only,
  // else null; process.memoryUsage().rss), both the largest after a batch or at the end; pushWaits,
  // boundBytes and boundSource (the bound in force), batchesDone, error: an allocation past the
  // module's 2 GiB is an Error at the call that needed it; the run stops there, drains and
  // reports its message (the engine keeps working).
  function e6Run(nd, mode, options = {}, context_) {
    const ctx = context(nd, context_);
    if (!E6_MODES.includes(mode)) throw new Error(`e6Run: unknown mode '${mode}'`);
    const o = { ...E6_DEFAULTS, ...options };
    const batches = num('e6Run', 'batches', o.batches), batchSize = num('e6Run', 'batchSize', o.batchSize);
    const features = num('e6Run', 'features', o.features), seed = num('e6Run', 'seed', o.seed, 1, { min: 0 });
    const lr = num('e6Run', 'lr', o.lr, 0.005, { min: 0, real: true });
    const drainSampleMs = num('e6Run', 'drainSampleMs', o.drainSampleMs, 0, { min: 0, real: true });
    // At least 1: a bound of 0 is no bound, and 'bounded' ran unbounded under that name.
    const boundBytes = num('e6Run', 'boundBytes', options.boundBytes, e6DefaultBoundBytes(batchSize), { min: 1 });
    const rss = typeof process !== 'undefined' && process.memoryUsage ? () => process.memoryUsage().rss : null;
    let point = null;  // set once the measured batches start
    let net = null, trainer = null;
    const loss = nd.nn.L2Loss();
    const step = (X, y, read) => {
      const l = nd.autograd.record(() => loss.forward(net.forward(X), y));
      if (point) point();  // the forward pass queued: what a batch holds in flight
      if (read) l.mean().item();  // the synchronising read
      l.backward(nd.ones(l.shape));  // one loss value per example
      trainer.step(batchSize);
    };
    const out = { mode, batches, batchSize, boundBytes: 0, boundSource: 'none', pushWaits: 0,
                  batchesDone: 0, error: null, samples: [], batchEnds: [], rssPeakBytes: null };
    // The caller's bounds, put back at the end (the run changes them): as they were set, or, where
    // they were the engine's own, by resetMaxInflight (which keeps their source).
    const callers = nd.engine.stats();
    const restoreBounds = () => {
      nd.engine.resetMaxInflight();
      const s = nd.engine.stats();
      if (s.maxInflightOps !== callers.maxInflightOps || s.maxInflightBytes !== callers.maxInflightBytes) {
        nd.engine.setMaxInflight({ ops: callers.maxInflightOps, bytes: callers.maxInflightBytes });
      }
    };
    try {
      nd.seed(seed);
      net = nd.nn.Sequential().add(nd.nn.Dense(2048, 'relu'), nd.nn.Dense(512, 'relu'), nd.nn.Dense(1));
      trainer = nd.nn.SGD(net, lr);
      nd.tidy(() => step(nd.random.normal([batchSize, features]), nd.ones([batchSize]), true));
      nd.waitAll();
      nd.engine.resetMaxInflight();
      const ops = nd.engine.stats().maxInflightOps;
      if (mode === 'nosync') nd.engine.setMaxInflight({ ops, bytes: 0 });
      if (mode === 'bounded') nd.engine.setMaxInflight({ ops, bytes: boundBytes });
      const before = nd.engine.stats();
      out.boundBytes = before.maxInflightBytes;
      out.boundSource = before.maxInflightBytesSource;
      nd.engine.resetPeak();
      out.baseBytes = nd.engine.stats().bytesInUse;
      let heapPeak = 0, rssPeak = 0;
      const it = nd.nn.DataIter(batches, batchSize, features);
      const t0 = now();
      point = () => {  // a point of the memory curve
        const s = nd.engine.stats();
        out.samples.push({ t: now() - t0, bytes: s.bytesInUse - out.baseBytes, pending: s.pending });
        return s;
      };
      const sample = () => {  // a point, and the process's memory (after each batch, at the end)
        heapPeak = Math.max(heapPeak, point().heapBytes);
        if (rss) rssPeak = Math.max(rssPeak, rss());
      };
      try {
        for (let b = 0; b < batches; ++b) {
          nd.tidy(() => {
            const { X, y } = it.next();
            step(X, y, mode === 'sync');
          });
          out.batchesDone = b + 1;
          out.batchEnds.push(now() - t0);
          sample();
          ctx.progress((b + 1) / batches, 'batch', { mode, boundBytes, i: b + 1, n: batches });
        }
      } catch (e) {
        out.error = e.message;  // e.g. out of WebAssembly memory: stop queuing, drain below
      }
      out.pushedS = now() - t0;
      if (drainSampleMs > 0) {
        while (nd.engine.stats().pending > 0) {
          sleepMs(drainSampleMs);
          point();
        }
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
      out.perBatchS = out.totalS / Math.max(1, out.batchesDone);
      const after = nd.engine.stats();
      out.peakBytes = after.bytesPeak;
      out.pushWaits = after.pushWaits - before.pushWaits;
      out.heapPeakBytes = heapPeak;
      if (rss) out.rssPeakBytes = rssPeak;
    } finally {
      restoreBounds();
      if (net) net.delete();
      if (trainer) trainer.delete();
      try { nd.waitAll(); } catch (e) { out.error = out.error || e.message; }
    }
    return out;
  }

  // E6, every mode in one run (the playground's panel). params: batches (20), batch (the batch
  // size, 1024), boundMB (the bounded mode's bound, default e6DefaultBoundBytes). Returns
  // { batches, batch, boundBytes, series: one e6Run result per mode, with key = the mode }.
  function e6(nd, context_) {
    const ctx = context(nd, context_);
    if (!hasNN(nd)) {
      throw new Error('E6 needs nd.nn and nd.autograd, which this build of the JavaScript API does not have');
    }
    const batches = param(ctx, 'E6', 'batches', 20), batch = param(ctx, 'E6', 'batch', 1024);
    const boundMB = param(ctx, 'E6', 'boundMB', null, { min: 1e-6, real: true });
    const boundBytes = boundMB === null ? e6DefaultBoundBytes(batch) : Math.round(boundMB * 1e6);
    const out = { batches, batch, boundBytes, series: [] };
    ctx.startProfile();
    try {
      E6_MODES.forEach((mode, mi) => {
        const sub = { ...ctx, progress: (f, step, p) => ctx.progress((mi + f) / E6_MODES.length, step, p) };
        const r = e6Run(nd, mode, { batches, batchSize: batch, boundBytes, drainSampleMs: 2 }, sub);
        out.series.push({ key: mode, ...r });
      });
    } finally {
      ctx.stopProfile();
    }
    return out;
  }

  // E7: WebAssembly has no GPU. The chapter's exercise instead: on the CPU, can you still observe
  // asynchrony? The engine's workers compute a product while this thread does JavaScript work
  // sized to take about as long; if the two overlap, both take about the longer one, not the sum.
  // params: n (1500).
  function e7(nd, context_) {
    return onSquare(nd, context_, 'E7', 1500, (ctx, x, n) => {
      let t0 = now();
      nd.tidy(() => nd.dot(x, x).waitToRead());
      const dotS = now() - t0;
      const jsWork = (iters) => {
        let acc = 0;
        for (let i = 1; i <= iters; ++i) acc += Math.sqrt(i) * 1e-9;
        return acc;
      };
      jsWork(1e6);  // once untimed: the first calls run before the JIT has optimised the loop
      t0 = now();
      jsWork(1e6);
      const perIter = Math.max(1e-10, (now() - t0) / 1e6);
      const iters = Math.max(1e5, Math.round(dotS / perIter));
      ctx.progress(0.3, 'jsAlone');
      t0 = now();
      jsWork(iters);
      const jsS = now() - t0;
      ctx.progress(0.6, 'bothAtOnce');
      let pushS, overlapS;
      ctx.profile(() => {
        t0 = now();
        const y = nd.dot(x, x);
        pushS = now() - t0;
        jsWork(iters);
        y.waitToRead();
        overlapS = now() - t0;
        y.delete();
      });
      return { n, dotS, jsS, pushS, overlapS, serialS: dotS + jsS, gpu: null };  // no GPU here
    });
  }

  return {
    e1, e2, e3, e4, e5, e6, e6Run, e7,
    EXPERIMENTS: { E1: e1, E2: e2, E3: e3, E4: e4, E5: e5, E6: e6, E7: e7 },
    E6_MODES, E6_DEFAULTS, e6DefaultBoundBytes, dependencies, hasNN,
  };
}));
