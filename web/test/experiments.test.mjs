// experiments.test.mjs: the chapter's experiments in JavaScript (experiments/chapter.cjs, which the
// playground runs in its Web Worker, examples/node/chapter.mjs in Node and bench/wasm/ in its
// benchmarks) run in Node on the same WebAssembly package, at small sizes: every figure is a
// finite number and the relations the chapter predicts where they hold on any machine. The file
// is loaded as the Worker loads it, as a classic script that sets a global, and as Node loads it.
// E6 trains the chapter's MLP on the package's nd.nn and nd.autograd, with small batches.
// Run: node --test web/test/experiments.test.mjs  (make test-web; needs make wasm)
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import vm from 'node:vm';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import asyncnd from '../../wasm/index.mjs';
import chapter from '../../experiments/chapter.cjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const file = path.join(here, '..', '..', 'experiments', 'chapter.cjs');
// As importScripts() runs it: a classic script (no `module`), which sets a global.
vm.runInThisContext(fs.readFileSync(file, 'utf8'), { filename: 'chapter.cjs' });
const { EXPERIMENTS, hasNN } = globalThis.asyncndChapter;
// The steps the Worker can word (worker.js, PROGRESS_KEYS).
const worded = new Set([...fs.readFileSync(path.join(here, '..', 'worker.js'), 'utf8')
  .matchAll(/^ {2}(\w+): 'progress\.\w+',$/gm)].map((m) => m[1]));

let nd;
before(async () => { nd = await asyncnd.load({ threads: 2 }); });

function context(params) {
  const events = [];
  const progress = [];
  const ctx = {
    params, bound: { ops: 0, bytes: 0 },
    progress: (f, step) => {
      assert.ok(worded.has(step), `step '${step}' has no key in worker.js's PROGRESS_KEYS`);
      progress.push([f, step]);
    },
    startProfile: () => nd.profiler.start(),
    stopProfile: (cb) => { nd.profiler.stop(); const e = nd.profiler.events(); events.push(...e); if (cb) cb(e); },
    profile: (fn, cb) => { ctx.startProfile(); try { fn(); } finally { ctx.stopProfile(cb); } },
  };
  return { ctx, events, progress };
}

function assertNumbers(obj, keys) {
  for (const k of keys) assert.ok(Number.isFinite(obj[k]), `${k} = ${obj[k]}`);
}

function assertClean() {
  nd.waitAll();
  const s = nd.engine.stats();
  assert.equal(s.pending, 0);
  assert.equal(s.liveArrays, 0, 'an experiment left arrays alive');
}

test('E1: the loop returns before waitAll; figures are numbers; ops profiled', async () => {
  const { ctx, events, progress } = context({ n: 200, iters: 3 });
  const r = await EXPERIMENTS.E1(nd, ctx);
  assertNumbers(r, ['syncS', 'returnedS', 'finishedS']);
  assert.ok(r.returnedS <= r.finishedS);
  assert.equal(events.filter((e) => e.name === 'dot').length, 3);
  assert.ok(progress.length > 0);
  assertClean();
});

test('E2: four ops, x and y into mul, mul into add', async () => {
  const { ctx, events } = context({});
  const r = await EXPERIMENTS.E2(nd, ctx);
  assert.match(r.z, /^\[\[3, 3\]\]/);
  const byName = events.sort((a, b) => a.pushUs - b.pushUs).map((e) => e.name);
  assert.deepEqual(byName, ['ones', 'ones', 'mul', 'add']);
  const [x, y, m, a] = events;
  assert.deepEqual(m.reads, [x.writes[0], y.writes[0]]);
  assert.deepEqual(a.reads, m.writes);
  assert.deepEqual(r.events.map((e) => e.name), byName);
  assert.deepEqual(r.edges, [[0, 2], [1, 2], [2, 3]]);
  assertClean();
});

test('Node loads the same file as CommonJS; without a context each experiment profiles only what it needs', async () => {
  assert.deepEqual(Object.keys(chapter.EXPERIMENTS), Object.keys(EXPERIMENTS));
  const r = chapter.e2(nd);
  assert.deepEqual(r.events.map((e) => e.name), ['ones', 'ones', 'mul', 'add']);
  const r5 = chapter.e5(nd, { params: { N: 300, warmup: 0, profiled: 100 } });
  assert.equal(r5.t2Samples, 100);
  assert.ok(r5.chapterModelAsyncS <= r5.modelAsyncS);
  assert.equal(nd.profiler.events().filter((e) => e.name === 'add').length, 100);
  assertClean();
});

test('E3, E4, E7: figures are numbers', async () => {
  const r3 = await EXPERIMENTS.E3(nd, context({ n: 300 }).ctx);
  assertNumbers(r3, ['queuedS', 'printedS', 'waitToReadS', 'waitAllS', 'waitAll2S', 'waitFirstOfTwoS']);
  const r4 = await EXPERIMENTS.E4(nd, context({ n: 300 }).ctx);
  assertNumbers(r4, ['dataSyncS', 'itemS', 'toStringS', 'awaitDataS', 'dataReturnedS', 'ticks', 'norm']);
  assert.equal(r4.values, 300 * 300);
  assert.ok(r4.dataReturnedS <= r4.awaitDataS);
  const r7 = await EXPERIMENTS.E7(nd, context({ n: 300 }).ctx);
  assertNumbers(r7, ['dotS', 'jsS', 'pushS', 'overlapS', 'serialS']);
  assert.equal(r7.gpu, null);
  assertClean();
});

test('E5: t1, t2, t3 estimated from a real run', async () => {
  const r = await EXPERIMENTS.E5(nd, context({ N: 2000 }).ctx);
  assertNumbers(r, ['syncS', 'asyncS', 'pushS', 't1', 't2', 't3', 'speedup', 'modelSyncS', 'modelAsyncS', 'clockUs']);
  assert.ok(r.t1 > 0 && r.t2 > 0 && r.t3 >= 0);
  assert.equal(r.t2Samples, 1000);
  assertClean();
});

test('E6: the MLP of the chapter trained four ways on the real nd.nn and nd.autograd', async () => {
  assert.equal(hasNN(nd), true);
  nd.waitAll();
  const before = nd.engine.stats().bytesInUse;
  const { ctx, events } = context({ batches: 3, batch: 64, boundMB: 2 });
  const r = await EXPERIMENTS.E6(nd, ctx);
  assert.deepEqual(r.series.map((s) => s.key), ['sync', 'nosync', 'bounded', 'default']);
  for (const s of r.series) {
    assert.ok(s.samples.length >= 3, `${s.key}: ${s.samples.length} samples`);
    for (const p of s.samples) assertNumbers(p, ['t', 'bytes', 'pending']);
    assertNumbers(s, ['pushedS', 'totalS', 'perBatchS', 'batchS', 'peakBytes', 'baseBytes', 'heapPeakBytes', 'rssPeakBytes']);  // Node: RSS too
    assert.ok(s.peakBytes > s.baseBytes, `${s.key}: no memory seen`);
    assert.equal(s.batchEnds.length, 3);
    assert.equal(s.batchesDone, 3);
    assert.equal(s.error, null);
  }
  assert.equal(r.boundBytes, 2e6);
  const by = Object.fromEntries(r.series.map((s) => [s.key, s]));
  assert.equal(by.nosync.boundBytes, 0);  // (b): the byte bound explicitly off
  assert.equal(by.nosync.boundSource, 'none');
  assert.equal(by.bounded.boundBytes, 2e6);
  assert.equal(by.bounded.boundSource, 'user');
  assert.equal(by.default.boundSource, 'wasm heap');  // (d): the engine as loaded
  assert.equal(by.default.boundBytes, 512 * 2 ** 20);
  // Forward, backward and the SGD step all ran through the engine.
  for (const name of ['dot', 'relu_grad', 'sgd_update']) {
    assert.ok(events.some((e) => e.name === name), `no ${name} op in the profile`);
  }
  nd.waitAll();
  const st = nd.engine.stats();
  assert.equal(st.pending, 0);
  assert.equal(st.liveNnObjects, 0, 'E6 left nn handles alive');
  assert.equal(st.bytesInUse, before, 'E6 left memory allocated');
});

test('bad parameters are an Error naming the experiment, the parameter and the value, before anything runs', async () => {
  nd.waitAll();
  const pushed = nd.engine.stats().pushed;
  const cases = [
    ['E1', { n: -5 }, "E1: n must be an integer 1 or more, got -5"],
    ['E1', { iters: '2' }, "E1: iters must be an integer 1 or more, got '2'"],
    ['E3', { n: NaN }, 'E3: n must be an integer 1 or more, got NaN'],  // ran the default size before
    ['E5', { N: -1 }, 'E5: N must be an integer 1 or more, got -1'],
    ['E5', { warmup: 1.5 }, 'E5: warmup must be an integer 0 or more, got 1.5'],
    ['E7', { n: 0 }, 'E7: n must be an integer 1 or more, got 0'],
    ['E6', { boundMB: -1 }, 'E6: boundMB must be a number 0.000001 or more, got -1'],
  ];
  for (const [key, params, message] of cases) {
    await assert.rejects(async () => EXPERIMENTS[key](nd, { params }), { message }, `${key} ${JSON.stringify(params)}`);
  }
  assert.throws(() => chapter.e6Run(nd, 'sync', { batches: 1, batchSize: 8, features: 4, lr: 'x' }),
                { message: "e6Run: lr must be a number 0 or more, got 'x'" });
  assert.equal(nd.engine.stats().pushed, pushed, 'a refused experiment queued ops');
  assert.equal(nd.engine.stats().liveNnObjects, 0, 'a refused E6 left nn objects');  // the net leaked
  assertClean();
});

test('E6 puts the caller\'s bounds back, after every mode and after a failure; E4 stops its profiler', async () => {
  nd.engine.setMaxInflight({ ops: 1000, bytes: 12345678 });
  try {
    for (const mode of chapter.E6_MODES) {
      chapter.e6Run(nd, mode, { batches: 1, batchSize: 16, features: 8, boundBytes: 1e6 });
      const s = nd.engine.stats();
      assert.deepEqual([s.maxInflightOps, s.maxInflightBytes], [1000, 12345678], mode);
    }
    // A failure inside the run's loop stops it (as running out of memory does) and is reported.
    const r = chapter.e6Run(nd, 'nosync', { batches: 2, batchSize: 16, features: 8 }, {
      progress: () => { throw new Error('progress failed'); },
    });
    assert.equal(r.error, 'progress failed');
    const s = nd.engine.stats();
    assert.deepEqual([s.maxInflightOps, s.maxInflightBytes], [1000, 12345678], 'after a failure');
  } finally {
    nd.engine.resetMaxInflight();
  }
  assert.equal(nd.engine.stats().maxInflightBytesSource, 'wasm heap');
  assert.equal(nd.engine.stats().liveNnObjects, 0);
  // E4 with a progress callback that fails: its profiler must not keep recording.
  let on = false;
  const ctx = { params: { n: 64 }, startProfile: () => { nd.profiler.start(); on = true; },
                stopProfile: () => { nd.profiler.stop(); on = false; },
                progress: (f, step) => { if (step === 'calling') throw new Error('progress failed'); } };
  await assert.rejects(async () => EXPERIMENTS.E4(nd, ctx), /progress failed/);
  assert.equal(on, false, 'E4 left its profiler on');
  assertClean();
});
