// panels.js: what each experiment panel says and shows. `render(result, message, tr)` turns the
// figures measured in the Worker (experiments/chapter.cjs) into a table, a chart and text in the language
// of the translator `tr` (i18n/index.js: tr.t, tr.html, tr.fmt); nothing here invents a number.
// Titles, explanations and parameter labels are dictionary keys, looked up by the page.
/* global Chart */
import { e2Names } from './graph.js';

const C = { sync: '#94a3b8', engine: '#4f46e5', wait: '#0ea5e9', warn: '#f59e0b', ok: '#10b981' };

// E6's training modes (experiments/chapter.cjs, E6_MODES): the dictionary key of each one's name
// and its colour in the memory chart. A new mode needs a line here and its key in every i18n/
// dictionary.
const E6_MODES = {
  sync: { label: 'E6.mode.sync', color: '#0ea5e9' },
  nosync: { label: 'E6.mode.none', color: '#ef4444' },
  bounded: { label: 'E6.mode.bound', color: '#10b981' },
  default: { label: 'E6.mode.default', color: '#f59e0b' },
};
// What a run added to the engine's memory at its peak (the parameters and gradients it started
// with are not counted; the memory chart draws the same rise).
const e6Rise = (s) => s.peakBytes - s.baseBytes;
// A mode's name in the current language; boundBytes: the engine bound the 'bounded' mode ran with.
// A mode this table does not know yet keeps its name in experiments/chapter.cjs.
function e6ModeLabel(key, boundBytes, tr, fallback = key) {
  const m = E6_MODES[key];
  return m ? tr.t(m.label, { size: tr.fmt(boundBytes, 'MB') }) : tr.raw(fallback);
}

// The progress line the Worker reports: a dictionary key and its parameters (E6 names its mode
// by key; numbers are formatted for the language by tr.t).
export function progressText(key, params = {}, tr) {
  if (!key) return '';
  const p = { ...params };
  if (p.mode !== undefined) p.mode = e6ModeLabel(p.mode, p.boundBytes, tr);
  return tr.t(key, p);
}

function lineChart(canvas, series, boundBytes, tr) {
  return new Chart(canvas, {
    type: 'line',
    data: {
      datasets: series.map((s) => ({
        label: e6ModeLabel(s.key, boundBytes, tr),
        data: s.samples.map((p) => ({ x: p.t * 1e3, y: p.bytes / 1e6 })),
        borderColor: E6_MODES[s.key]?.color || '#64748b',
        backgroundColor: E6_MODES[s.key]?.color || '#64748b',
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
        x: { type: 'linear', title: { display: true, text: tr.t('E6.axis.x') } },
        y: { beginAtZero: true, title: { display: true, text: tr.t('E6.axis.y') } },
      },
    },
  });
}

// Microseconds per step, from seconds for N steps.
const perStep = (seconds, N, tr) => tr.fmt(seconds / N, 'us');

// Where the default engine's byte bound came from, in the reader's language. The engine names it
// (bound_source_name); in a page it is the module's heap (e6Run puts the engine's own bounds back
// before the default mode), and any other name is shown as the engine wrote it.
const BOUND_SOURCE_KEYS = { 'wasm heap': 'E6.source.wasmHeap' };
const boundSource = (name, tr) => (BOUND_SOURCE_KEYS[name] ? tr.t(BOUND_SOURCE_KEYS[name]) : String(name));

export const PANELS = [
  {
    key: 'E1',
    title: 'E1.title',
    explain: 'E1.explainHtml',
    params: [{ key: 'n', label: 'param.size', value: 1000, min: 100, max: 2000, step: 100 },
             { key: 'iters', label: 'param.repeats', value: 10, min: 1, max: 20 }],
    render: (r, m, { t }) => ({
      figures: [
        { key: 'syncS', label: t('E1.fig.sync'), value: r.syncS, unit: 's' },
        { key: 'returnedS', label: t('E1.fig.returned'), value: r.returnedS, unit: 's', note: t('E1.note.returned') },
        { key: 'finishedS', label: t('E1.fig.finished'), value: r.finishedS, unit: 's', note: t('E1.note.finished') },
      ],
      chart: { bars: [
        { label: t('E1.bar.sync'), value: r.syncS, color: C.sync },
        { label: t('E1.bar.returned'), value: r.returnedS, color: C.engine },
        { label: t('E1.bar.finished'), value: r.finishedS, color: C.wait },
      ] },
      text: t('E1.text', { n: String(r.n) }),
    }),
  },
  {
    key: 'E2',
    title: 'E2.title',
    explain: 'E2.explainHtml',
    render: (r, m, { t, html }) => ({
      figures: [
        { key: 'ops', label: t('E2.fig.ops'), value: m.events.length, unit: '' },
        { key: 'vars', label: t('E2.fig.vars'), value: new Set(m.events.flatMap((e) => [...e.reads, ...e.writes])).size, unit: '' },
      ],
      graph: { names: e2Names([...m.events].sort((a, b) => a.push - b.push)) },
      html: html('E2.resultHtml', { z: r.z }),
    }),
  },
  {
    key: 'E3',
    title: 'E3.title',
    explain: 'E3.explainHtml',
    params: [{ key: 'n', label: 'param.size', value: 2000, min: 200, max: 3000, step: 100 }],
    render: (r, m, { t, html }) => ({
      figures: [
        { key: 'queuedS', label: t('E3.fig.queued'), value: r.queuedS, unit: 's' },
        { key: 'printedS', label: t('E3.fig.printed'), value: r.printedS, unit: 's' },
        { key: 'waitToReadS', label: t('E3.fig.waitToRead'), value: r.waitToReadS, unit: 's' },
        { key: 'waitAllS', label: t('E3.fig.waitAll'), value: r.waitAllS, unit: 's' },
        { key: 'waitAll2S', label: t('E3.fig.waitAll2'), value: r.waitAll2S, unit: 's' },
        { key: 'waitFirstOfTwoS', label: t('E3.fig.waitFirst'), value: r.waitFirstOfTwoS, unit: 's' },
      ],
      chart: { bars: [
        { label: t('E3.bar.waitToRead'), value: r.waitToReadS, color: C.engine },
        { label: t('E3.bar.waitAll'), value: r.waitAllS, color: C.wait },
        { label: t('E3.bar.waitAll2'), value: r.waitAll2S, color: C.sync },
        { label: t('E3.bar.waitFirst'), value: r.waitFirstOfTwoS, color: C.engine },
      ] },
      html: html('E3.textHtml', { n: String(r.n), sum: r.sum }),
    }),
  },
  {
    key: 'E4',
    title: 'E4.title',
    explain: 'E4.explainHtml',
    params: [{ key: 'n', label: 'param.size', value: 2000, min: 200, max: 3000, step: 100 }],
    render: (r, m, { t, fmt }) => ({
      figures: [
        { key: 'dataSyncS', label: t('E4.fig.dataSync'), value: r.dataSyncS, unit: 's', note: t('E4.note.values', { count: r.values }) },
        { key: 'itemS', label: t('E4.fig.item'), value: r.itemS, unit: 's', note: t('E4.note.norm', { norm: fmt(r.norm, '') }) },
        { key: 'toStringS', label: t('E4.fig.toString'), value: r.toStringS, unit: 's' },
        { key: 'awaitDataS', label: t('E4.fig.awaitData'), value: r.awaitDataS, unit: 's' },
        { key: 'dataReturnedS', label: t('E4.fig.dataReturned'), value: r.dataReturnedS, unit: 's' },
        { key: 'ticks', label: t('E4.fig.ticks'), value: r.ticks, unit: '', note: t('E4.note.ticks') },
      ],
      // The API's own names, the same in every language.
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
    title: 'E5.title',
    explain: 'E5.explainHtml',
    params: [{ key: 'N', label: 'param.ops', value: 10000, min: 1000, max: 50000, step: 1000 }],
    render: (r, m, tr) => {
      const { t, fmt } = tr;
      return {
        figures: [
          { key: 'syncS', label: t('E5.fig.sync'), value: r.syncS, unit: 's', note: t('E5.note.perStep', { time: perStep(r.syncS, r.N, tr) }) },
          { key: 'asyncS', label: t('E5.fig.async'), value: r.asyncS, unit: 's', note: t('E5.note.perStep', { time: perStep(r.asyncS, r.N, tr) }) },
          { key: 'speedup', label: t('E5.fig.speedup'), value: r.speedup, unit: 'x' },
          { key: 'pushS', label: t('E5.fig.push'), value: r.pushS, unit: 's', note: t('E5.note.perPush', { time: perStep(r.pushS, r.N, tr) }) },
          { key: 't1', label: t('E5.fig.t1'), value: r.t1, unit: 'us', note: t('E5.note.t1') },
          { key: 't2', label: t('E5.fig.t2'), value: r.t2, unit: 'us',
            note: t('E5.note.t2', { count: r.t2Samples, tick: fmt(r.clockUs * 1e-6, 'us') }) },
          { key: 't3', label: t('E5.fig.t3'), value: r.t3, unit: 'us', note: t('E5.note.t3') },
          { key: 'chapterModelAsyncS', label: t('E5.fig.chapterModel'), value: r.chapterModelAsyncS, unit: 's',
            note: t('E5.note.chapterModel') },
          { key: 'modelAsyncS', label: t('E5.fig.model'), value: r.modelAsyncS, unit: 's', note: t('E5.note.model') },
        ],
        chart: { bars: [
          { label: t('E5.bar.each'), value: r.syncS, color: C.sync },
          { label: t('E5.bar.once'), value: r.asyncS, color: C.engine },
        ] },
        text: r.t1 > r.t2 ? t('E5.text.pushBound') : t('E5.text.workerBound'),
      };
    },
  },
  {
    key: 'E6',
    title: 'E6.title',
    explain: 'E6.explainHtml',
    wide: true,
    params: [{ key: 'batches', label: 'param.batches', value: 20, min: 2, max: 100 },
             { key: 'boundMB', label: 'param.boundMB', value: 25.2, min: 1, max: 1024, step: 0.1 }],
    unavailable: (s) => (s.hasNN ? null : 'E6.unavailableHtml'),
    render: (r, m, tr) => {
      const { t, fmt } = tr;
      const by = Object.fromEntries(r.series.map((s) => [s.key, s]));
      const mode = (s) => e6ModeLabel(s.key, r.boundBytes, tr);
      return {
        matrix: {
          columns: [t('E6.col.peak'), t('E6.col.returned'), t('E6.col.perBatch'), t('E6.col.batchesDone'),
                    t('E6.col.bound'), t('E6.col.pushWaits')],
          rows: r.series.map((s) => ({
            label: mode(s),
            cells: [{ key: `${s.key}.peakBytes`, value: e6Rise(s), unit: 'MB' },
                    { key: `${s.key}.pushedS`, value: s.pushedS, unit: 's' },
                    { key: `${s.key}.perBatchS`, value: s.perBatchS, unit: 's' },
                    { key: `${s.key}.batchesDone`, value: s.batchesDone, unit: '' },
                    { key: `${s.key}.boundBytes`, value: s.boundBytes, unit: 'MB',
                      textKey: s.boundBytes === 0 ? 'E6.boundOff' : undefined },
                    { key: `${s.key}.pushWaits`, value: s.pushWaits, unit: '' }],
          })),
        },
        chart: { height: 300, make: (canvas) => lineChart(canvas, r.series, r.boundBytes, tr) },
        text: tr.sentences(
          by.nosync && by.sync && t('E6.text.peaks', { none: fmt(e6Rise(by.nosync), 'MB'), sync: fmt(e6Rise(by.sync), 'MB') }),
          by.default && t('E6.text.default', { peak: fmt(e6Rise(by.default), 'MB'), bound: fmt(by.default.boundBytes, 'MB'),
                                               source: boundSource(by.default.boundSource, tr), count: by.default.pushWaits }),
          // The error is the engine's own message (an allocation that failed), as it is.
          ...r.series.filter((s) => s.error).map((s) =>
            t('E6.text.stopped', { mode: mode(s), done: s.batchesDone, total: r.batches, error: s.error }))),
      };
    },
  },
  {
    key: 'E7',
    title: 'E7.title',
    explain: 'E7.explainHtml',
    params: [{ key: 'n', label: 'param.size', value: 1500, min: 200, max: 3000, step: 100 }],
    render: (r, m, { t, sentences }) => ({
      figures: [
        { key: 'dotS', label: t('E7.fig.dot'), value: r.dotS, unit: 's' },
        { key: 'jsS', label: t('E7.fig.js'), value: r.jsS, unit: 's' },
        { key: 'serialS', label: t('E7.fig.serial'), value: r.serialS, unit: 's' },
        { key: 'overlapS', label: t('E7.fig.overlap'), value: r.overlapS, unit: 's' },
        { key: 'pushS', label: t('E7.fig.push'), value: r.pushS, unit: 's' },
      ],
      chart: { bars: [
        { label: t('E7.bar.dot'), value: r.dotS, color: C.engine },
        { label: t('E7.bar.js'), value: r.jsS, color: C.warn },
        { label: t('E7.bar.serial'), value: r.serialS, color: C.sync },
        { label: t('E7.bar.overlap'), value: r.overlapS, color: C.ok },
      ] },
      text: sentences(t('E7.text.gpu'), r.overlapS < 0.8 * r.serialS ? t('E7.text.overlap') : t('E7.text.noOverlap')),
    }),
  },
];
