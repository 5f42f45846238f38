// experiments.js: the chapter's experiments E1-E7, run inside the playground's Web Worker
// (worker.js loads this file with importScripts). Each experiment takes the loaded API `nd` and
// a context { params, progress(fraction, key, params), profile(fn) } and returns plain figures
// (seconds, bytes, counts) that the page draws; nothing here is a made-up number. A progress
// `key` is a key of the page's dictionaries (i18n/), written in the reader's language there. They
// follow examples/node/chapter.mjs, the Node.js version, with the page's parameters.
'use strict';

(function (global) {
  const now = () => performance.now() / 1000;  // seconds

  // Sleeps this Worker (a blocking wait is fine here: this is not the page's thread).
  const sleepCell = new Int32Array(new SharedArrayBuffer(4));
  function sleepMs(ms) { Atomics.wait(sleepCell, 0, 0, ms); }

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

  // E1: ten random n x n matrices, each used in a product: synchronous vs the engine.
  function e1(nd, ctx) {
    const n = ctx.params.n || 1000, iters = ctx.params.iters || 10;
    ctx.progress(0, 'progress.warmup');
    nd.tidy(() => nd.dot(nd.random.normal([n, n]), nd.random.normal([n, n])).waitToRead());

    let t0 = now();
    for (let i = 0; i < iters; ++i) {
      nd.tidy(() => {
        const a = nd.random.normal([n, n]);
        a.waitToRead();
        nd.dot(a, a).waitToRead();
      });
      ctx.progress((i + 1) / (2 * iters), 'progress.syncStep', { i: i + 1, n: iters });
    }
    const syncS = now() - t0;

    ctx.progress(0.5, 'progress.queueing');
    let returnedS, finishedS;
    ctx.profile(() => {
      t0 = now();
      for (let i = 0; i < iters; ++i) {
        nd.tidy(() => { nd.dot(nd.random.normal([n, n]), nd.random.normal([n, n])); });
      }
      returnedS = now() - t0;
      nd.waitAll();
      finishedS = now() - t0;
    });
    return { n, iters, syncS, returnedS, finishedS };
  }

  // E2: z = x * y + 2, recorded by the profiler: which op read and wrote which variable.
  function e2(nd, ctx) {
    let text;
    ctx.progress(0, 'progress.e2');
    ctx.profile(() => {
      const x = nd.ones([1, 2]), y = nd.ones([1, 2]);
      const z = nd.tidy(() => x.mul(y).add(2));
      z.waitToRead();
      text = z.toString();
      [x, y, z].forEach((a) => a.delete());
    });
    return { z: text };
  }

  // E3: barriers. One dot waited with waitToRead, with waitAll, and two dots with waitAll.
  function e3(nd, ctx) {
    const n = ctx.params.n || 2000;
    const x = nd.random.uniform([n, n]);
    try {
      ctx.progress(0, 'progress.warmup');
      nd.tidy(() => nd.dot(x, x).waitToRead());
      const r = { n };
      ctx.profile(() => {
        let t0 = now();
        const s = nd.tidy(() => nd.dot(x, x).sum());
        r.queuedS = now() - t0;
        r.sum = s.toString();
        r.printedS = now() - t0;
        s.delete();
        ctx.progress(0.25, 'progress.calling', { call: 'waitToRead()' });
        t0 = now();
        nd.tidy(() => nd.dot(x, x).waitToRead());
        r.waitToReadS = now() - t0;
        ctx.progress(0.5, 'progress.calling', { call: 'waitAll()' });
        t0 = now();
        nd.tidy(() => { nd.dot(x, x); });
        nd.waitAll();
        r.waitAllS = now() - t0;
        ctx.progress(0.75, 'progress.twoDots');
        t0 = now();
        nd.tidy(() => { nd.dot(x, x); nd.dot(x, x); });
        nd.waitAll();
        r.waitAll2S = now() - t0;
      });
      return r;
    } finally {
      x.delete();
    }
  }

  // E4: implicit blockers: anything that needs the values waits for them; and the JavaScript
  // way, `await x.data()`, which never blocks.
  async function e4(nd, ctx) {
    const n = ctx.params.n || 2000;
    const x = nd.random.uniform([n, n]);
    try {
      ctx.progress(0, 'progress.warmup');
      nd.tidy(() => nd.dot(x, x).waitToRead());
      const r = { n };
      ctx.startProfile();
      let t0 = now();
      const host = nd.tidy(() => nd.dot(x, x).dataSync());
      r.dataSyncS = now() - t0;
      r.values = host.length;
      ctx.progress(0.25, 'progress.calling', { call: 'item()' });
      t0 = now();
      r.norm = nd.tidy(() => nd.dot(x, x).norm().item());
      r.itemS = now() - t0;
      ctx.progress(0.5, 'progress.calling', { call: 'toString()' });
      t0 = now();
      r.text = nd.tidy(() => nd.dot(x, x).sum().toString());
      r.toStringS = now() - t0;
      ctx.progress(0.75, 'progress.calling', { call: 'await data()' });
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
      ctx.stopProfile();
      return r;
    } finally {
      x.delete();
    }
  }

  // E5: N x (y = x + 1) on a [1, 2] array, waiting after each vs once; t1, t2, t3 estimated.
  function e5(nd, ctx) {
    const N = ctx.params.N || 10000;
    const x = nd.ones([1, 2]);
    try {
      ctx.progress(0, 'progress.warmup');
      for (let i = 0; i < 1000; ++i) x.add(1).delete();
      nd.waitAll();

      const step = Math.max(1, N >> 3);
      let t0 = now();
      for (let i = 0; i < N; ++i) {
        const y = x.add(1);
        y.waitToRead();
        y.delete();
        if (i % step === step - 1) ctx.progress(0.33 * (i + 1) / N, 'progress.synchronous');
      }
      const syncS = now() - t0;

      ctx.progress(0.33, 'progress.asynchronous');
      t0 = now();
      for (let i = 0; i < N; ++i) x.add(1).delete();
      const pushS = now() - t0;
      nd.waitAll();
      const asyncS = now() - t0;

      // t1: the push alone, timed around each push of a synchronous loop.
      let t1Total = 0;
      for (let i = 0; i < N; ++i) {
        const a = now();
        const y = x.add(1);
        t1Total += now() - a;
        y.waitToRead();
        y.delete();
        if (i % step === step - 1) ctx.progress(0.4 + 0.5 * (i + 1) / N, 'progress.timingPushes');
      }
      // t2: how long a worker ran each op, from the profiler (a sample of 1000 ops).
      const profiled = Math.min(1000, N);
      ctx.progress(0.9, 'progress.profiling');
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
      // t3: the rest of a synchronous step: handing the result back to JavaScript.
      const t3 = Math.max(0, syncS / N - t1 - t2);
      return { N, syncS, asyncS, pushS, t1, t2, t3, t2Samples: run.length, clockUs: clockTick() * 1e6,
               speedup: syncS / asyncS, modelSyncS: N * (t1 + t2 + t3),
               // The chapter's t1 + N t2 + t3 when the workers are the bottleneck; N t1 + t2 + t3
               // when the pushes are (t1 > t2): the loop goes at the pace of the slower side.
               modelAsyncS: Math.max(t1 + N * t2 + t3, N * t1 + t2 + t3) };
    } finally {
      x.delete();
    }
  }

  // Builds an object with `new` when C is a class or constructor, else by calling it, so that a
  // plain factory works too (the package's nd.nn accepts both spellings).
  function make(C, ...args) {
    try {
      return new C(...args);
    } catch (e) {
      if (e instanceof TypeError && /not a constructor/.test(e.message)) return C(...args);
      throw e;
    }
  }
  function apply(f, ...args) {
    if (typeof f === 'function') return f(...args);
    if (f && typeof f.forward === 'function') return f.forward(...args);
    if (f && typeof f.call === 'function') return f.call(...args);
    throw new TypeError('E6: cannot call this nn block (no forward/call)');
  }

  function hasNN(nd) {
    return !!(nd && nd.nn && nd.autograd && typeof nd.autograd.record === 'function' &&
              nd.nn.Sequential && nd.nn.Dense && nd.nn.L2Loss && nd.nn.SGD);
  }

  // E6: memory while training the chapter's MLP (Dense 2048 relu, Dense 512 relu, Dense 1;
  // batches of 1024 x 512; SGD lr 0.005; L2 loss), with a synchronising read every batch, with
  // none (the byte bound switched off: the chapter's problem), with none but a small byte bound,
  // and with none on the default engine (its byte bound, a quarter of the module's heap).
  // Samples the engine's bytes in use.
  function e6(nd, ctx) {
    if (!hasNN(nd)) {
      throw new Error('E6 needs nd.nn and nd.autograd, which this build of the JavaScript API does not have yet');
    }
    const batches = ctx.params.batches || 20, batch = ctx.params.batch || 1024;
    // The native demo's bound: three of the largest activations ([1024, 2048] floats).
    const boundBytes = ctx.params.boundMB ? Math.round(ctx.params.boundMB * 1e6) : 3 * batch * 2048 * 4;
    const modes = [
      { key: 'sync', label: 'read each batch (l.mean().item())' },
      { key: 'none', label: 'no read' },
      { key: 'bound', label: `no read, engine bound ${(boundBytes / 1e6).toFixed(1)} MB` },
      { key: 'default', label: 'no read, default engine' },
    ];
    const out = { batches, batch, boundBytes, series: [] };
    ctx.startProfile();
    modes.forEach((mode, mi) => {
      nd.seed(1);
      if (mode.key === 'default') nd.engine.resetMaxInflight();
      else nd.engine.setMaxInflight(mode.key === 'bound' ? { ops: 0, bytes: boundBytes } : { ops: 0, bytes: 0 });
      const st0 = nd.engine.stats();
      const net = make(nd.nn.Sequential);
      const layers = [make(nd.nn.Dense, 2048, 'relu'), make(nd.nn.Dense, 512, 'relu'), make(nd.nn.Dense, 1)];
      layers.forEach((l) => net.add(l));
      const loss = make(nd.nn.L2Loss);
      const params = typeof net.parameters === 'function' ? net.parameters() : net.parameters;
      const trainer = make(nd.nn.SGD, params, 0.005);
      // One whole training step outside the measurement and outside any tidy scope (as the native
      // demo does): deferred parameters and gradients are created here and must outlive it.
      const warm = [nd.random.normal([batch, 512]), nd.ones([batch])];
      // (tidy: the network's output is an intermediate; the recorded graph keeps what it needs)
      warm.push(nd.tidy(() => nd.autograd.record(() => apply(loss, apply(net, warm[0]), warm[1]))));
      warm.push(nd.ones(warm[2].shape));
      warm[2].backward(warm[3]);
      trainer.step(batch);
      nd.waitAll();
      warm.forEach((a) => a.delete());
      const base = nd.engine.stats().bytesInUse;
      const samples = [];
      const t0 = now();
      const sample = () => {
        const s = nd.engine.stats();
        samples.push({ t: now() - t0, bytes: s.bytesInUse - base, pending: s.pending });
      };
      const batchEnds = [];
      // Unbounded, the queue can outgrow the module's 2 GiB: the allocation throws an Error at
      // the call; the run stops there, drains, and reports it (the engine keeps working).
      let error = null, batchesDone = 0;
      try {
        for (let b = 0; b < batches; ++b) {
          nd.tidy(() => {
            const X = nd.random.normal([batch, 512]);
            const y = nd.ones([batch]);  // the chapter's labels: np.ones((batch_size,))
            const l = nd.autograd.record(() => apply(loss, apply(net, X), y));
            sample();  // the forward pass queued: what a batch holds in flight
            if (mode.key === 'sync') l.mean().item();  // the synchronising read
            l.backward(nd.ones(l.shape));  // the loss has one value per example
            trainer.step(batch);
          });
          batchesDone = b + 1;
          batchEnds.push(now() - t0);
          sample();
          ctx.progress((mi + (b + 1) / batches) / modes.length, 'progress.batch',
                       { mode: mode.key, boundBytes, i: b + 1, n: batches });
        }
      } catch (e) {
        error = e.message;
      }
      const pushedS = now() - t0;
      // Drain while sampling: the memory held by the queued batches goes as they finish.
      while (nd.engine.stats().pending > 0) {
        sleepMs(2);
        sample();
      }
      try {
        nd.waitAll();
      } catch (e) {
        error = error || e.message;
      }
      const totalS = now() - t0;
      sample();
      const peak = samples.reduce((m, s) => Math.max(m, s.bytes), 0);
      const st1 = nd.engine.stats();
      out.series.push({ key: mode.key, label: mode.label, samples, pushedS, totalS,
                        perBatchS: totalS / Math.max(1, batchesDone), peakBytes: peak, batchEnds,
                        batchesDone, error, boundBytes: st0.maxInflightBytes,
                        boundSource: st0.maxInflightBytesSource, pushWaits: st1.pushWaits - st0.pushWaits });
      // Every nn handle: the parameters' memory goes with the last one (network, layers, trainer).
      for (const o of [...(params && params[Symbol.iterator] ? params : []), ...layers, net, trainer, loss]) {
        if (o && typeof o.delete === 'function') o.delete();
      }
    });
    nd.engine.resetMaxInflight();  // the worker then applies the page's bound controls again
    ctx.stopProfile();
    return out;
  }

  // E7: there is no GPU in WebAssembly. The chapter's exercise instead: on the CPU, can you still
  // observe asynchrony? The engine's workers compute a product while this thread does its own
  // JavaScript work; if the two overlap, doing both takes about the longer of the two, not the sum.
  function e7(nd, ctx) {
    const n = ctx.params.n || 1500;
    const x = nd.random.uniform([n, n]);
    try {
      ctx.progress(0, 'progress.warmup');
      nd.tidy(() => nd.dot(x, x).waitToRead());
      let t0 = now();
      nd.tidy(() => nd.dot(x, x).waitToRead());
      const dotS = now() - t0;
      // JavaScript work sized to take about as long as the product.
      const jsWork = (iters) => {
        let acc = 0;
        for (let i = 1; i <= iters; ++i) acc += Math.sqrt(i) * 1e-9;
        return acc;
      };
      t0 = now();
      jsWork(1e6);
      const perIter = Math.max(1e-10, (now() - t0) / 1e6);
      const iters = Math.max(1e5, Math.round(dotS / perIter));
      ctx.progress(0.3, 'progress.jsAlone');
      t0 = now();
      jsWork(iters);
      const jsS = now() - t0;
      ctx.progress(0.6, 'progress.bothAtOnce');
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
      return { n, dotS, jsS, pushS, overlapS, serialS: dotS + jsS,
               gpu: 'none: WebAssembly runs on the CPU only' };
    } finally {
      x.delete();
    }
  }

  global.EXPERIMENTS = { E1: e1, E2: e2, E3: e3, E4: e4, E5: e5, E6: e6, E7: e7 };
  global.EXPERIMENTS_HAS_NN = hasNN;
})(self);
