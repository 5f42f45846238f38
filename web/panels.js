// panels.js: what each experiment panel says and shows. `render` turns the figures measured in the
// Worker (experiments.js) into a table, a chart and text; nothing here invents a number.
/* global Chart */
import { e2Names } from './graph.js';

const C = { sync: '#94a3b8', engine: '#4f46e5', wait: '#0ea5e9', warn: '#f59e0b', ok: '#10b981' };

function lineChart(canvas, series) {
  const colors = { sync: '#0ea5e9', none: '#ef4444', bound: '#10b981' };
  return new Chart(canvas, {
    type: 'line',
    data: {
      datasets: series.map((s) => ({
        label: s.label,
        data: s.samples.map((p) => ({ x: p.t * 1e3, y: p.bytes / 1e6 })),
        borderColor: colors[s.key],
        backgroundColor: colors[s.key],
        pointRadius: 0,
        borderWidth: 2,
        tension: 0.1,
      })),
    },
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      parsing: false,
      plugins: { legend: { position: 'bottom' } },
      scales: {
        x: { type: 'linear', title: { display: true, text: 'milliseconds since the first batch' } },
        y: { beginAtZero: true, title: { display: true, text: 'MB in use above the start' } },
      },
    },
  });
}

export const PANELS = [
  {
    key: 'E1',
    title: 'Queueing is not computing',
    explain: 'Ten random 1000×1000 matrices, each used in a matrix product. The <b>synchronous</b> run waits for every ' +
      'result before going on, as NumPy does. The <b>engine</b> run only queues the work: its loop returns almost at ' +
      'once, and the real cost shows up when <code>nd.waitAll()</code> waits for the workers to finish.',
    params: [{ key: 'n', label: 'size', value: 1000, min: 100, max: 2000, step: 100 },
             { key: 'iters', label: 'repeats', value: 10, min: 1, max: 20 }],
    render: (r) => ({
      figures: [
        { key: 'syncS', label: 'synchronous (wait after every op)', value: r.syncS, unit: 's' },
        { key: 'returnedS', label: 'engine: the loop returned after', value: r.returnedS, unit: 's', note: 'only queued' },
        { key: 'finishedS', label: 'engine: waitAll returned after', value: r.finishedS, unit: 's', note: 'the real cost' },
      ],
      chart: { bars: [
        { label: 'synchronous', value: r.syncS, color: C.sync },
        { label: 'engine: loop returned', value: r.returnedS, color: C.engine },
        { label: 'engine: after waitAll', value: r.finishedS, color: C.wait },
      ] },
      text: `The engine’s loop makes two ${r.n}×${r.n} matrices per step, the synchronous one a single one.`,
    }),
  },
  {
    key: 'E2',
    title: 'The dependency graph of z = x * y + 2',
    explain: 'The engine records, for every op, which arrays it reads and which it writes. From those records alone, ' +
      'taken by the profiler during a real run, this graph is drawn: <code>mul</code> must wait for both <code>ones</code>, ' +
      '<code>add</code> for <code>mul</code>; the two <code>ones</code> depend on nothing and may run at the same time.',
    render: (r, m) => ({
      figures: [
        { key: 'ops', label: 'ops recorded', value: m.events.length, unit: '' },
        { key: 'vars', label: 'arrays read or written', value: new Set(m.events.flatMap((e) => [...e.reads, ...e.writes])).size, unit: '' },
      ],
      graph: { names: e2Names([...m.events].sort((a, b) => a.push - b.push)) },
      text: `z = <code>${escapeHtml(r.z)}</code>`,
    }),
  },
  {
    key: 'E3',
    title: 'Barriers',
    explain: 'Two ways to wait: <code>y.waitToRead()</code> waits for the ops that write <code>y</code>; ' +
      '<code>nd.waitAll()</code> waits for everything queued. With one product queued they take about the same; with two, ' +
      '<code>waitAll</code> waits for both. Printing a result is a wait too.',
    params: [{ key: 'n', label: 'size', value: 2000, min: 200, max: 3000, step: 100 }],
    render: (r) => ({
      figures: [
        { key: 'queuedS', label: 'dot(x, x).sum() queued after', value: r.queuedS, unit: 's' },
        { key: 'printedS', label: 'printing the sum finished after', value: r.printedS, unit: 's' },
        { key: 'waitToReadS', label: 'one dot + y.waitToRead()', value: r.waitToReadS, unit: 's' },
        { key: 'waitAllS', label: 'one dot + nd.waitAll()', value: r.waitAllS, unit: 's' },
        { key: 'waitAll2S', label: 'two dots + nd.waitAll()', value: r.waitAll2S, unit: 's' },
      ],
      chart: { bars: [
        { label: 'one dot + waitToRead', value: r.waitToReadS, color: C.engine },
        { label: 'one dot + waitAll', value: r.waitAllS, color: C.wait },
        { label: 'two dots + waitAll', value: r.waitAll2S, color: C.sync },
      ] },
      text: `Products of ${r.n}×${r.n} matrices. sum = <code>${escapeHtml(r.sum)}</code>`,
    }),
  },
  {
    key: 'E4',
    title: 'Implicit blockers',
    explain: 'Anything that needs the values must wait for them: copying to a host array (<code>dataSync</code>), ' +
      'a scalar (<code>item</code>), text (<code>toString</code>). Each one below costs a full product. ' +
      'The JavaScript way, <code>await y.data()</code>, waits without blocking: a 1 ms timer keeps firing meanwhile.',
    params: [{ key: 'n', label: 'size', value: 2000, min: 200, max: 3000, step: 100 }],
    render: (r) => ({
      figures: [
        { key: 'dataSyncS', label: 'dot + dataSync()', value: r.dataSyncS, unit: 's', note: `${r.values} values copied out` },
        { key: 'itemS', label: 'dot + norm().item()', value: r.itemS, unit: 's', note: `norm = ${r.norm.toPrecision(6)}` },
        { key: 'toStringS', label: 'dot + sum().toString()', value: r.toStringS, unit: 's' },
        { key: 'awaitDataS', label: 'dot + await data()', value: r.awaitDataS, unit: 's' },
        { key: 'dataReturnedS', label: 'data() returned its promise after', value: r.dataReturnedS, unit: 's' },
        { key: 'ticks', label: 'a 1 ms timer fired while awaiting', value: r.ticks, unit: '', note: 'times: the thread was free' },
      ],
      chart: { bars: [
        { label: 'dataSync()', value: r.dataSyncS, color: C.engine },
        { label: 'item()', value: r.itemS, color: C.engine },
        { label: 'toString()', value: r.toStringS, color: C.engine },
        { label: 'await data()', value: r.awaitDataS, color: C.ok },
      ] },
    }),
  },
  {
    key: 'E5',
    title: 'Ten thousand small ops: t1, t2, t3',
    explain: 'Ten thousand <code>y = x + 1</code> on a 1×2 array, waiting after each one vs once at the end. The chapter splits ' +
      'a step in three: <b>t1</b> the frontend pushes the op, <b>t2</b> a worker computes it, <b>t3</b> the result is handed back. ' +
      'Waiting each time costs N (t1 + t2 + t3); waiting once lets pushing and computing overlap.',
    params: [{ key: 'N', label: 'ops', value: 10000, min: 1000, max: 50000, step: 1000 }],
    render: (r) => ({
      figures: [
        { key: 'syncS', label: 'synchronous (waitToRead each time)', value: r.syncS, unit: 's', note: `${fmt1(r.syncS / r.N * 1e6)} µs per step` },
        { key: 'asyncS', label: 'asynchronous (waitAll once)', value: r.asyncS, unit: 's', note: `${fmt1(r.asyncS / r.N * 1e6)} µs per step` },
        { key: 'speedup', label: 'speed-up', value: r.speedup, unit: 'x' },
        { key: 'pushS', label: 'pushing alone, in the asynchronous loop', value: r.pushS, unit: 's', note: `${fmt1(r.pushS / r.N * 1e6)} µs per push and delete` },
        { key: 't1', label: 't1: push (frontend)', value: r.t1, unit: 'us', note: 'timed around each push' },
        { key: 't2', label: 't2: compute (worker)', value: r.t2, unit: 'us', note: `mean of ${r.t2Samples} profiled ops (the clock ticks every ${r.clockUs.toFixed(1)} µs)` },
        { key: 't3', label: 't3: return to JavaScript', value: r.t3, unit: 'us', note: 'synchronous step − t1 − t2' },
        { key: 'modelAsyncS', label: 'model for the asynchronous loop', value: r.modelAsyncS, unit: 's', note: 'max(t1 + N t2 + t3, N t1 + t2 + t3)' },
      ],
      chart: { bars: [
        { label: 'wait after each op', value: r.syncS, color: C.sync },
        { label: 'wait once', value: r.asyncS, color: C.engine },
      ] },
      text: r.t1 > r.t2
        ? 'Here t1 > t2: JavaScript pushes more slowly than a worker computes, so the asynchronous loop goes at the pace of the pushes.'
        : 'Here t2 ≥ t1: the workers are the bottleneck, and the asynchronous loop costs about N t2.',
    }),
  },
  {
    key: 'E6',
    title: 'Memory: do not overfill the queue',
    wide: true,
    explain: 'The chapter trains an MLP (Dense 2048 relu, Dense 512 relu, Dense 1; batches of 1024×512; SGD, learning rate 0.005; ' +
      'L2 loss) four ways: with a synchronising read of the loss each batch; with none and the engine’s byte bound switched off ' +
      '(the frontend races ahead and every queued batch holds its memory: past about 33 batches the module’s 2 GiB run out); ' +
      'with none but a small backpressure bound, which makes a push wait instead; and with none on the default engine, whose ' +
      'byte bound (a quarter of the module’s heap, 512 MiB) lets the frontend run ahead, then waits. ' +
      'The chart samples the engine’s bytes in use over time.',
    params: [{ key: 'batches', label: 'batches', value: 20, min: 2, max: 100 },
             { key: 'boundMB', label: 'bound MB', value: 25.2, min: 1, max: 1024, step: 0.1 }],
    unavailable: (s) => (s.hasNN ? null :
      '<strong>This experiment cannot run yet.</strong> It needs <code>nd.nn</code> and <code>nd.autograd</code> in the ' +
      'JavaScript API, which this build of the WebAssembly package does not have (rebuild it: make wasm). ' +
      'The panel shows no figures rather than made-up ones; it runs as soon as the module provides them.'),
    render: (r) => {
      const by = Object.fromEntries(r.series.map((s) => [s.key, s]));
      return {
        matrix: {
          columns: ['peak memory increase', 'the loop returned after', 'time per batch', 'batches done',
                    'byte bound', 'pushes waited'],
          rows: r.series.map((s) => ({
            label: s.label,
            cells: [{ key: `${s.key}.peakBytes`, value: s.peakBytes, unit: 'MB' },
                    { key: `${s.key}.pushedS`, value: s.pushedS, unit: 's' },
                    { key: `${s.key}.perBatchS`, value: s.perBatchS, unit: 's' },
                    { key: `${s.key}.batchesDone`, value: s.batchesDone, unit: '' },
                    { key: `${s.key}.boundBytes`, value: s.boundBytes, unit: 'MB' },
                    { key: `${s.key}.pushWaits`, value: s.pushWaits, unit: '' }],
          })),
        },
        chart: { height: 300, make: (canvas) => lineChart(canvas, r.series) },
        text: (by.none && by.sync
          ? `Without a read the queue held up to ${(by.none.peakBytes / 1e6).toFixed(0)} MB more; with one, ${(by.sync.peakBytes / 1e6).toFixed(0)} MB.`
          : '') + (by.default
          ? ` The default engine held at most ${(by.default.peakBytes / 1e6).toFixed(0)} MB more (its bound: ${(by.default.boundBytes / 1e6).toFixed(0)} MB, from the ${by.default.boundSource}), and ${by.default.pushWaits} pushes waited on it.`
          : '') + r.series.filter((s) => s.error).map((s) =>
          ` “${s.label}” stopped after ${s.batchesDone} of ${r.batches} batches: ${s.error.replace(/[&<>]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;' })[c])}.`).join(''),
      };
    },
  },
  {
    key: 'E7',
    title: 'No GPU here: asynchrony on the CPU',
    explain: 'WebAssembly has no GPU, so the chapter’s CPU-vs-GPU comparison cannot run in a browser. Its exercise can: ' +
      '<i>on the CPU, can you still observe asynchrony?</i> The engine’s workers compute a product while this thread does ' +
      'its own JavaScript work of about the same length. If the two overlap, doing both takes about the longer of the two, ' +
      'not their sum.',
    params: [{ key: 'n', label: 'size', value: 1500, min: 200, max: 3000, step: 100 }],
    render: (r) => ({
      figures: [
        { key: 'dotS', label: 'the product alone', value: r.dotS, unit: 's' },
        { key: 'jsS', label: 'the JavaScript work alone', value: r.jsS, unit: 's' },
        { key: 'serialS', label: 'one after the other (sum)', value: r.serialS, unit: 's' },
        { key: 'overlapS', label: 'both at once (push, JS work, wait)', value: r.overlapS, unit: 's' },
        { key: 'pushS', label: 'the push returned after', value: r.pushS, unit: 's' },
      ],
      chart: { bars: [
        { label: 'product alone', value: r.dotS, color: C.engine },
        { label: 'JavaScript alone', value: r.jsS, color: C.warn },
        { label: 'one after the other', value: r.serialS, color: C.sync },
        { label: 'both at once', value: r.overlapS, color: C.ok },
      ] },
      text: `GPU: ${escapeHtml(r.gpu)}. ${r.overlapS < 0.8 * r.serialS
        ? 'Both at once took clearly less than the sum: the CPU engine is asynchronous too.'
        : 'Both at once took about the sum here: the engine’s threads and this one compete for the same cores. Try one worker thread (top right) on a two-core machine.'}`,
    }),
  },
];

function fmt1(x) { return x.toFixed(2); }
function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}
