// app.js: the playground page. It owns the Web Worker that runs asyncnd (worker.js) and never
// waits on it: every run is a message out and messages back (progress, figures, profiler events).
// It draws the figures with Chart.js, the dependency graphs with Cytoscape (dagre layout) and the
// per-thread timelines with Chart.js floating bars and its zoom plugin; the code cell is
// CodeMirror. Every word it writes comes from the dictionaries in i18n/ (see bind() below: a switch
// of language re-renders everything, results included). For the browser tests it exposes its
// state as window.playground.
/* global Chart, ChartZoom, cytoscape, CodeMirror */
import { PANELS, progressText } from './panels.js';
import { buildGraph, clockSkewUs } from './graph.js';
import { LANGUAGES, STORAGE_KEY, chooseLanguage, makeTranslator } from './i18n/index.js';
import { checkBound, checkParam } from './inputs.js';

const $ = (sel, root = document) => root.querySelector(sel);
const el = (tag, attrs = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k === 'html') e.innerHTML = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
};

// ---- languages ----------------------------------------------------------------------------
// The current translator (i18n/index.js) and shorthands for it.
let i18n = makeTranslator('en');
const t = (key, params) => i18n.t(key, params);
const html = (key, params) => i18n.html(key, params);
const fmt = (value, unit) => i18n.fmt(value, unit);

// Text that depends on the language: bind(element, fn, slot) sets the element's text ('text'),
// HTML ('html') or an attribute (any other slot) to fn() now and again at each change of language.
// Elements that left the page are forgotten at the next change.
const bindings = new Map();
function applyBinding(e, slot, fn) {
  const v = fn();
  if (slot === 'text') e.textContent = v;
  else if (slot === 'html') e.innerHTML = v;
  else e.setAttribute(slot, v);
}
function bind(e, fn, slot = 'text') {
  if (!bindings.has(e)) bindings.set(e, new Map());
  bindings.get(e).set(slot, fn);
  applyBinding(e, slot, fn);
  return e;
}

function queryLanguage() {
  return new URLSearchParams(location.search).get('lang');
}
function storedLanguage() {
  try {
    return localStorage.getItem(STORAGE_KEY);
  } catch {
    return null;  // storage disabled: the choice lasts for this page only
  }
}

// Switches the page to a language at once: every bound text, the results already shown (tables,
// charts, graphs, timelines) and the code cell's example if it was not edited. Nothing reloads.
function setLanguage(code, { remember = false } = {}) {
  const example = state.editor && state.editor.getValue() === defaultCode();
  i18n = makeTranslator(code);
  state.i18n = i18n;
  document.documentElement.lang = i18n.locale;
  document.title = t('page.title');
  Chart.defaults.font.family = getComputedStyle(document.body).fontFamily;
  Chart.defaults.locale = i18n.locale;  // the axes' numbers
  for (const [e, slots] of bindings) {
    if (!e.isConnected) {
      bindings.delete(e);
      continue;
    }
    for (const [slot, fn] of slots) applyBinding(e, slot, fn);
  }
  $('#lang').value = i18n.code;
  if (remember) {
    try {
      localStorage.setItem(STORAGE_KEY, i18n.code);
    } catch { /* storage disabled */ }
    const url = new URL(location.href);
    url.searchParams.set('lang', i18n.code);
    history.replaceState(null, '', url);
  }
  if (example) state.editor.setValue(defaultCode());
  for (const p of PANELS) if (p.ui && state.results[p.key]) showResult(p, state.results[p.key]);
  for (const p of PANELS) if (p.ui && state.failed[p.key]) showTimeline(p.key, p.ui.tlCanvas, p.ui.tlNote, state.failed[p.key]);
  if (state.results.code) afterCode(state.results.code);
}

Chart.register(window.ChartZoom);
Chart.defaults.font.size = 12;
Chart.defaults.color = '#475467';

const PALETTE = ['#4f46e5', '#0ea5e9', '#f59e0b', '#10b981', '#ef4444', '#8b5cf6', '#ec4899',
                 '#14b8a6', '#84cc16', '#f97316', '#64748b', '#a855f7'];
const opColors = new Map();
function colorOf(name) {
  if (!opColors.has(name)) opColors.set(name, PALETTE[opColors.size % PALETTE.length]);
  return opColors.get(name);
}

const state = {
  worker: null,
  ready: false,
  hasNN: false,
  threads: 0,
  requestedThreads: 0,  // the count the current Worker was started with
  busy: null,        // the id of the run in flight
  nextId: 1,
  handlers: new Map(),
  charts: {},        // panel key -> Chart (figures)
  timelines: {},     // panel key -> Chart (timeline)
  graphs: {},        // panel key -> cytoscape instance
  results: {},       // panel key -> last result message (and 'code': the code cell's)
  failed: {},        // panel key -> the failure message of its last run, if that run failed
  i18n: null,        // the current translator: code, locale, produced (every string it made)
};
window.playground = state;

// ---- the worker ---------------------------------------------------------------------------
function hardwareThreads() { return navigator.hardwareConcurrency || 2; }

// The header's bound fields, checked by inputs.js (checkBound: empty keeps the engine's default,
// 0 switches the bound off, a positive number replaces it): { bound: { ops, bytes } }, or { error }
// for the first field that is refused, which names it (field: its label's key). The banner under
// the header says what is wrong until the field is corrected.
function boundFromControls() {
  const fields = [['#bound-ops', 'ops', 'header.maxOps'], ['#bound-mb', 'MB', 'header.maxMB']];
  const bound = {};
  let error = null;
  for (const [id, kind, field] of fields) {
    const input = $(id);
    const r = checkBound(input.value, kind, input.validity.badInput);
    input.classList.toggle('invalid', !!r.error);
    if (r.error) error ??= { ...r.error, field };
    else bound[kind === 'ops' ? 'ops' : 'bytes'] = r.value;
  }
  const banner = $('#bound-error');
  banner.hidden = !error;
  if (error) bind(banner, () => failureText(error));
  return error ? { error } : { bound };
}

function setStatus(kind, text) {
  $('#status').dataset.state = kind;
  bind($('#status-text'), text);
}

// A failure the Worker reports: its own (a dictionary key) or the engine's message, as it is; or
// a field the page refused (inputs.js), whose name (m.field, a key) is written in the current
// language.
const failureText = (m) => (m.key ? t(m.key, m.field ? { ...m.params, field: t(m.field) } : m.params) : m.message);
// The module's heap is full (the engine's "out of memory", or a JavaScript allocation that failed):
// the page adds what frees it.
const outOfMemory = (m) => !m.key && /out of (WebAssembly )?memory|allocation failed/i.test(m.message || '');

function startWorker(threads) {
  if (state.worker) state.worker.terminate();
  state.requestedThreads = threads;
  for (const [, h] of state.handlers) h.fail({ key: 'error.workerRestarted', line: null });
  state.handlers.clear();
  state.ready = false;
  state.busy = null;
  setStatus('loading', () => t('status.loading', { count: threads }));
  updateButtons();
  const w = new Worker('worker.js');
  state.worker = w;
  w.onmessage = (ev) => onWorkerMessage(ev.data);
  w.onerror = (ev) => {
    ev.preventDefault();
    const why = ev.message;
    setStatus('error', () => t('status.workerFailed', { why: why || t('status.unknownError') }));
    updateButtons();
  };
  // A refused bound field starts the engine with its default; runs are refused until it is fixed.
  w.postMessage({ type: 'init', threads, bound: boundFromControls().bound ?? null });
}

// The thread list takes effect by itself: a count other than the Worker's restarts it, at once
// when it is idle, else when its run ends or it is ready (as Reload worker, which is disabled while
// it loads: a Worker ended while its engine threads load their script makes the browser log
// network errors).
function applyThreads() {
  const threads = Number($('#threads').value);
  if (threads === state.requestedThreads || state.busy !== null) return;
  if ($('#status').dataset.state === 'loading') return;
  startWorker(threads);
}

function onWorkerMessage(m) {
  if (m.type === 'ready') {
    state.ready = true;
    state.threads = m.threads;
    state.hasNN = m.hasNN;
    setStatus('ready', () => t('status.ready', { count: m.threads, backend: m.backend }));
    for (const p of PANELS) refreshAvailability(p);
    updateButtons();
    applyThreads();
    return;
  }
  if (m.type === 'fatal') {
    setStatus('error', () => failureText(m));
    updateButtons();
    return;
  }
  if (m.type === 'bound') return;
  const h = state.handlers.get(m.id);
  if (m.type === 'log' && m.id === null) {
    appendOutput(m.level, m.key ? () => t(m.key, m.params) : m.text);
    return;
  }
  if (!h) return;
  if (m.type === 'progress') h.progress(m);
  else if (m.type === 'log') h.log(m);
  else if (m.type === 'done' || m.type === 'failed') {
    state.handlers.delete(m.id);
    state.busy = null;
    updateButtons();
    if (m.type === 'done') h.done(m);
    else h.fail(m);
    applyThreads();
  }
}

// bound: what boundFromControls() accepted (the callers refuse to run otherwise).
function send(msg, bound, handler) {
  const id = state.nextId++;
  state.handlers.set(id, handler);
  state.busy = id;
  updateButtons();
  state.worker.postMessage({ ...msg, id, bound });
  return id;
}

function updateButtons() {
  const canRun = state.ready && state.busy === null;
  document.querySelectorAll('button.run').forEach((b) => {
    b.disabled = !canRun || b.dataset.unavailable === 'true';
  });
  $('#stop').disabled = state.busy === null;
  // Not while loading: a Worker ended while its engine threads still load their script makes
  // the browser log network errors for nothing.
  $('#reload').disabled = state.busy !== null || $('#status').dataset.state === 'loading';
}

// ---- charts -------------------------------------------------------------------------------
// A bar's label in lines of about `width` characters, broken at spaces (Chart.js draws an array
// as lines): on a narrow screen a long label (Indonesian's) was cut at the canvas's left edge.
function wrapLabel(label, width = 22) {
  const lines = [];
  for (const word of String(label).split(' ')) {
    const last = lines.length - 1;
    if (last >= 0 && lines[last].length + 1 + word.length <= width) lines[last] += ` ${word}`;
    else lines.push(word);
  }
  return lines.length > 1 ? lines : label;
}

function barChart(canvas, bars, { unit = 's', title } = {}) {
  const scale = unit === 's' ? 1e3 : unit === 'us' ? 1e6 : 1;
  const axis = unit === 's' ? t('axis.ms') : unit === 'us' ? t('axis.us') : unit;
  return new Chart(canvas, {
    type: 'bar',
    data: {
      labels: bars.map((b) => wrapLabel(b.label)),
      datasets: [{
        data: bars.map((b) => b.value * scale),
        backgroundColor: bars.map((b) => b.color || '#4f46e5'),
        borderRadius: 4,
        barPercentage: 0.7,
      }],
    },
    options: {
      indexAxis: 'y',
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      plugins: {
        legend: { display: false },
        title: title ? { display: true, text: title, align: 'start', font: { weight: '600' } } : { display: false },
        tooltip: { callbacks: { label: (c) => fmt(c.raw / scale, unit) } },
      },
      scales: {
        x: { beginAtZero: true, title: { display: true, text: axis }, grid: { color: '#eef0f4' } },
        y: { grid: { display: false } },
      },
    },
  });
}

// A timeline: one row per engine thread (and the JavaScript thread for inline ops), one bar per
// op from its start to its end, coloured by op name. Wheel or pinch zooms, drag pans.
function timelineChart(canvas, events, threads) {
  const t0 = events.reduce((m, e) => Math.min(m, e.push, e.start), Infinity);
  const rows = [];
  const row = (w) => (w < 0 ? t('timeline.jsThread') : t('timeline.worker', { n: w }));
  for (let w = 0; w < threads; ++w) rows.push(row(w));
  if (events.some((e) => e.worker < 0)) rows.push(row(-1));
  for (const e of events) {
    if (e.worker >= threads && !rows.includes(row(e.worker))) rows.push(row(e.worker));
  }
  const byName = new Map();
  for (const e of events) {
    if (!byName.has(e.name)) byName.set(e.name, []);
    byName.get(e.name).push({
      x: [(e.start - t0) / 1e3, (e.end - t0) / 1e3],
      y: row(e.worker),
      ev: e,
    });
  }
  const datasets = [...byName.entries()].map(([name, data]) => ({
    label: name,
    data,
    backgroundColor: colorOf(name),
    borderWidth: 0,
    grouped: false,
    barPercentage: 0.8,
    categoryPercentage: 0.9,
    minBarLength: 2,
  }));
  const end = events.reduce((m, e) => Math.max(m, (e.end - t0) / 1e3), 0);
  return new Chart(canvas, {
    type: 'bar',
    data: { labels: rows, datasets },
    options: {
      indexAxis: 'y',
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      parsing: { xAxisKey: 'x', yAxisKey: 'y' },
      plugins: {
        legend: { position: 'bottom', labels: { boxWidth: 12, boxHeight: 12 } },
        tooltip: {
          callbacks: {
            label: (c) => {
              const e = c.raw.ev;
              // Profiler times are in microseconds; fmt takes seconds.
              return i18n.sentences(t('timeline.tooltip', { name: e.name, ran: fmt((e.end - e.start) * 1e-6, 'us'),
                                                            queued: fmt((e.start - e.push) * 1e-6, 's') }),
                                    e.failed && t('timeline.opFailed'), e.skipped && t('timeline.opSkipped'));
            },
          },
        },
        zoom: {
          limits: { x: { min: 0, max: end * 1.02 + 0.001, minRange: 0.001 } },
          pan: { enabled: true, mode: 'x' },
          zoom: { wheel: { enabled: true }, pinch: { enabled: true }, mode: 'x' },
        },
      },
      scales: {
        x: { type: 'linear', min: 0, max: end * 1.02 + 0.001, title: { display: true, text: t('timeline.axis') }, grid: { color: '#eef0f4' } },
        y: { type: 'category', labels: rows, grid: { display: false } },
      },
    },
  });
}

function showTimeline(key, canvas, note, m) {
  if (state.timelines[key]) state.timelines[key].destroy();
  delete state.timelines[key];
  const events = m.events || [];
  canvas.closest('.timeline-box').dataset.events = String(events.length);
  if (!events.length) {
    canvas.parentElement.hidden = true;  // no empty frame left from an earlier run
    // A run stopped by restarting the worker lost its records with it: it did record ops.
    bind(note, () => t(m.key === 'error.workerRestarted' ? 'timeline.lost' : 'timeline.empty'));
    return;
  }
  canvas.parentElement.hidden = false;  // shown from the first run on, before Chart.js sizes it
  const chart = timelineChart(canvas, events, state.threads);
  state.timelines[key] = chart;
  canvas.ondblclick = () => chart.resetZoom();
  const total = m.eventsTotal || events.length;
  const skew = clockSkewUs(events);
  bind(note, () => i18n.sentences(
    t('timeline.recorded', { count: total }),
    total > events.length && t('timeline.drawnOf', { shown: events.length, total }),
    t('timeline.help'),
    skew > 1 && t('timeline.skew', { time: fmt(skew * 1e-6, 's') })));
}

// An op node's width: its label's, measured in the graph's font (Cytoscape adds the padding).
// Cytoscape's own width: 'label' does the same but is deprecated and warns in the console.
let measureCtx = null;
function opWidth(node) {
  measureCtx = measureCtx || document.createElement('canvas').getContext('2d');
  measureCtx.font = `600 12px ${Chart.defaults.font.family}`;
  return Math.ceil(measureCtx.measureText(String(node.data('label') ?? '')).width);
}

function showGraph(key, container, events, names) {
  if (state.graphs[key]) state.graphs[key].destroy();
  container.hidden = false;
  const g = buildGraph(events, names, 80, colorOf);
  const cy = cytoscape({
    container,
    elements: g.elements,
    userZoomingEnabled: true,
    minZoom: 0.2,
    maxZoom: 1.4,
    boxSelectionEnabled: false,
    style: [
      { selector: 'node', style: { label: 'data(label)', 'font-size': 12, 'text-valign': 'center', 'text-halign': 'center', color: '#101828', 'font-family': Chart.defaults.font.family } },
      { selector: 'node.op', style: { shape: 'round-rectangle', 'background-color': 'data(color)', color: '#fff', width: opWidth, height: 26, padding: '8px', 'font-weight': 600 } },
      { selector: 'node.var', style: { shape: 'ellipse', 'background-color': '#f2f4f7', 'border-width': 1.5, 'border-color': '#98a2b3', width: 44, height: 30 } },
      { selector: 'edge', style: { width: 1.6, 'line-color': '#98a2b3', 'target-arrow-color': '#98a2b3', 'target-arrow-shape': 'triangle', 'curve-style': 'bezier', 'arrow-scale': 0.9 } },
      { selector: 'edge.write', style: { 'line-color': '#4f46e5', 'target-arrow-color': '#4f46e5' } },
    ],
    layout: { name: 'dagre', rankDir: 'LR', nodeSep: 18, rankSep: 42, padding: 12 },
  });
  cy.on('layout', () => cy.fit(undefined, 12));
  state.graphs[key] = cy;
  container.dataset.nodes = String(cy.nodes().length);
  container.dataset.edges = String(cy.edges().length);
  const note = container.parentElement.querySelector('.graph-note');
  if (note) {
    bind(note, () => (g.truncated
      ? t('graph.truncated', { shown: g.ops, total: events.length })
      : t('graph.summary', { ops: t('graph.ops', { count: g.ops }), arrays: t('graph.arrays', { count: g.vars }) })));
  }
  return g;
}

// ---- the experiment panels ----------------------------------------------------------------
function buildPanel(p) {
  const params = el('div', { class: 'params' });
  for (const q of p.params || []) {
    const input = el('input', { type: 'number', min: String(q.min), max: String(q.max), step: String(q.step || 1), value: String(q.value), 'data-param': q.key });
    params.append(el('label', {}, bind(el('span'), () => t(q.label)), input));
  }
  const run = bind(el('button', { class: 'run', 'data-panel': p.key }), () => t('panel.run'));
  const progress = el('div', { class: 'progress', role: 'progressbar', 'aria-valuemin': '0', 'aria-valuemax': '100' }, el('div', { class: 'bar' }));
  const progressText = el('span', { class: 'progress-text' });
  const notice = el('div', { class: 'notice', hidden: '' });
  const figures = el('div', { class: 'figures' });
  const chartBox = el('div', { class: 'chart-box', hidden: '' }, el('canvas', { class: 'figure-chart' }));
  const extra = el('div', { class: 'extra' });
  const tlCanvas = el('canvas');
  const tlNote = bind(el('div', { class: 'timeline-note' }), () => t('panel.timelineHint'));
  const timeline = el('div', { class: 'timeline-box' },
    el('h3', {}, bind(el('span'), () => t('timeline.title')), ' ',
       bind(el('button', { class: 'link reset-zoom', 'data-for': p.key }), () => t('timeline.resetZoom'))),
    el('div', { class: 'timeline-wrap', hidden: '' }, tlCanvas), tlNote);
  const section = el('section', { class: `panel${p.wide ? ' wide' : ''}`, id: `panel-${p.key}`, 'data-key': p.key },
    el('div', { class: 'panel-head' },
      el('h2', {}, bind(el('span', { class: 'tag' }), () => i18n.raw(p.key)), ' ', bind(el('span'), () => t(p.title))),
      el('div', { class: 'run-row' }, params, run)),
    bind(el('p', { class: 'explain' }), () => html(p.explain), 'html'),
    el('div', { class: 'progress-row' }, progress, progressText),
    notice, figures, chartBox, extra, timeline);
  $('#panels').append(section);
  p.ui = { section, run, progress, progressText, notice, figures, chartBox, extra, tlCanvas, tlNote };
  run.addEventListener('click', () => runPanel(p));
}

function refreshAvailability(p) {
  const why = p.unavailable ? p.unavailable(state) : null;
  p.ui.run.dataset.unavailable = why ? 'true' : 'false';
  if (why) {
    p.ui.notice.hidden = false;
    bind(p.ui.notice, () => html(why), 'html');
    p.ui.section.dataset.available = 'false';
    p.ui.section.querySelector('.timeline-box').hidden = true;
    p.ui.section.querySelector('.progress-row').hidden = true;
  } else {
    p.ui.notice.hidden = true;
    p.ui.section.dataset.available = 'true';
    p.ui.section.querySelector('.timeline-box').hidden = false;
    p.ui.section.querySelector('.progress-row').hidden = false;
  }
}

// text: a function that gives the progress line in the current language.
function setProgress(ui, fraction, text) {
  ui.progress.firstChild.style.width = `${Math.round(Math.min(1, Math.max(0, fraction)) * 100)}%`;
  ui.progress.setAttribute('aria-valuenow', String(Math.round(fraction * 100)));
  bind(ui.progressText, text);
}

// A figure's cell: the formatted value, and the raw number for the tests (data-value).
// f.textKey: a word in place of the number (E6's switched-off bound reads "off", not "0.0 MB").
const figCell = (f) => el('td', { class: 'num', 'data-fig': f.key, 'data-value': String(f.value) },
  f.textKey ? t(f.textKey) : fmt(f.value, f.unit));

// view.figures: one row per figure (label, value, note); view.matrix: rows x columns of figures.
function renderFigures(p, view) {
  const ui = p.ui;
  ui.figures.replaceChildren();
  const table = el('table', { class: 'figs' });
  if (view.matrix) {
    table.classList.add('matrix');
    table.append(el('tr', {}, el('th', {}), ...view.matrix.columns.map((c) => el('th', { class: 'col' }, c))));
    for (const r of view.matrix.rows) table.append(el('tr', {}, el('th', {}, r.label), ...r.cells.map(figCell)));
  }
  for (const f of view.figures || []) {
    table.append(el('tr', {}, el('th', {}, f.label), figCell(f), el('td', { class: 'note' }, f.note || '')));
  }
  ui.figures.append(table);
}

// Draws a finished run's result (again, after a change of language): the figures, the chart, the
// graph, the text and the timeline, all in the current language.
function showResult(p, m) {
  const ui = p.ui;
  const view = p.render(m.result, m, i18n);
  renderFigures(p, view);
  if (state.charts[p.key]) state.charts[p.key].destroy();
  delete state.charts[p.key];
  ui.chartBox.hidden = !view.chart;
  if (view.chart) {
    ui.chartBox.style.height = `${view.chart.height || 64 + 34 * (view.chart.bars || []).length}px`;
    const canvas = ui.chartBox.querySelector('canvas');
    state.charts[p.key] = view.chart.make ? view.chart.make(canvas) : barChart(canvas, view.chart.bars, view.chart);
  }
  ui.extra.replaceChildren();
  if (view.graph) {
    const box = el('div', { class: 'graph', id: `graph-${p.key}` });
    ui.extra.append(el('div', { class: 'graph-box' }, el('h3', {}, t('panel.graphTitle')), box,
                       el('div', { class: 'graph-note' })));
    showGraph(p.key, box, m.events, view.graph.names);
  }
  if (view.text) ui.extra.append(el('p', { class: 'result-text' }, view.text));
  if (view.html) ui.extra.append(el('p', { class: 'result-text', html: view.html }));
  showTimeline(p.key, ui.tlCanvas, ui.tlNote, m);
}

// A run's error above the figures: the engine's own message as it is (data-raw), the page's in the
// current language.
function showRunError(ui, m) {
  ui.figures.before(bind(el('div', { class: 'run-error', ...(m.key ? {} : { 'data-raw': '' }) }), () => failureText(m)));
  if (outOfMemory(m)) ui.figures.before(bind(el('div', { class: 'run-error' }), () => t('error.oomHint')));
}

// The panel's parameters, each checked against its own min, max and step (inputs.js), then the
// header's bound: { params, bound }, or { error } naming the first field refused.
function panelInputs(p) {
  const params = {};
  for (const q of p.params || []) {
    const input = p.ui.section.querySelector(`[data-param="${q.key}"]`);
    const r = checkParam(input.value, q, input.validity.badInput);
    if (r.error) return { error: { ...r.error, field: q.label } };
    params[q.key] = r.value;
  }
  const b = boundFromControls();
  return b.error ? b : { params, bound: b.bound };
}

// Removes a panel's results: after a failed run, the previous run's figures would read as this
// run's.
function clearResult(p) {
  const ui = p.ui;
  delete state.results[p.key];
  ui.figures.replaceChildren();
  if (state.charts[p.key]) state.charts[p.key].destroy();
  delete state.charts[p.key];
  ui.chartBox.hidden = true;
  if (state.graphs[p.key]) state.graphs[p.key].destroy();
  delete state.graphs[p.key];
  ui.extra.replaceChildren();
}

function runPanel(p) {
  const ui = p.ui;
  ui.section.querySelectorAll('.run-error').forEach((e) => e.remove());
  const input = panelInputs(p);
  if (input.error) {
    // Nothing is sent; the last run's results, if any, stay: they are still that run's.
    ui.section.dataset.state = 'invalid';
    showRunError(ui, input.error);
    return;
  }
  ui.section.dataset.state = 'running';
  bind(ui.run, () => t('panel.running'));
  setProgress(ui, 0, () => t('progress.starting'));
  send({ type: 'run', exp: p.key, params: input.params }, input.bound, {
    progress: (m) => setProgress(ui, m.fraction, () => progressText(m.key, m.params, i18n)),
    log: () => {},
    done: (m) => {
      bind(ui.run, () => t('panel.runAgain'));
      ui.section.dataset.state = 'done';
      setProgress(ui, 1, () => t('panel.doneIn', { time: fmt(m.wallS, 's') }));
      state.results[p.key] = m;
      delete state.failed[p.key];
      showResult(p, m);
    },
    fail: (m) => {
      bind(ui.run, () => t('panel.run'));
      ui.section.dataset.state = 'failed';
      setProgress(ui, 0, () => t('panel.failed'));
      clearResult(p);
      showRunError(ui, m);
      state.failed[p.key] = m;  // its timeline is drawn again in another language
      showTimeline(p.key, ui.tlCanvas, ui.tlNote, m);  // what this run did before it failed
    },
  });
}

// ---- the code cell ------------------------------------------------------------------------
// The example the code cell starts with, its comments in the current language.
function defaultCode() {
  const quote = (s) => `'${s.replace(/[\\']/g, (c) => `\\${c}`)}'`;
  return `// ${t('code.example.where')}
const x = nd.random.normal([600, 600]);
const y = nd.random.normal([600, 600]);
const a = nd.dot(x, y);  // ${t('code.example.independent1')}
const b = nd.dot(y, x);  // ${t('code.example.independent2')}
const s = a.add(b).sum();  // ${t('code.example.sum')}
console.log(${quote(t('code.example.pending'))}, nd.engine.stats().pending);
console.log('sum =', s.item());  // ${t('code.example.item')}
return s.shape;
`;
}

let editor;
let errorLine = null;  // the CodeMirror line handle marked as the last error's, if any
let scrollPending = false;
// text: a string (what the code printed, shown as it is) or a function (a line the page writes,
// in the current language). more: how many characters the Worker cut off the end of the string.
function appendOutput(level, text, more = 0) {
  const out = $('#code-output');
  out.querySelector('.muted')?.remove();
  const line = el('div', { class: `line ${level}` });
  if (typeof text === 'function') bind(line, text);
  else line.textContent = text;
  if (more) line.append(bind(el('span', { class: 'more' }), () => t('code.moreChars', { count: more })));
  out.append(line);
  // Scrolled once per frame: reading scrollHeight after each of 2 000 lines laid the page out
  // 2 000 times (seconds).
  if (!scrollPending) {
    scrollPending = true;
    requestAnimationFrame(() => {
      scrollPending = false;
      out.scrollTop = out.scrollHeight;
    });
  }
}

// What a failed cell says: its SyntaxError (the cell never ran), a thrown value, or an error with
// its line when the stack names one.
function codeFailureText(m) {
  if (m.parse) return t('code.parseError', { message: m.message });
  const message = m.thrown ? t('code.thrown', { value: m.message }) : failureText(m);
  return m.line ? t('code.errorAt', { line: String(m.line), message }) : t('code.error', { message });
}

function runCode() {
  if (!state.ready || state.busy !== null) return;
  const out = $('#code-output');
  out.replaceChildren();
  editor.getAllMarks().forEach((mk) => mk.clear());
  // Only the one line marked before: a loop over every line took seconds on 20 000 lines.
  if (errorLine) editor.removeLineClass(errorLine, 'background', 'error-line');
  errorLine = null;
  delete state.results.code;
  const b = boundFromControls();
  if (b.error) {
    appendOutput('error', () => failureText(b.error));
    bind($('#code-state'), () => t('code.notRun'));
    $('#panel-code').dataset.state = 'invalid';
    return;
  }
  bind($('#code-state'), () => t('code.running'));
  $('#panel-code').dataset.state = 'running';
  const t0 = performance.now();
  send({ type: 'code', src: editor.getValue() }, b.bound, {
    progress: () => {},
    log: (m) => appendOutput(m.level, m.key ? () => t(m.key, m.params) : m.text, m.more),
    done: (m) => {
      const ms = performance.now() - t0;
      if (m.result.valueError !== undefined) appendOutput('error', () => t('code.cannotShow', { message: m.result.valueError }));
      else if (m.result.value !== undefined) appendOutput('result', `⇒ ${m.result.value}`, m.result.valueMore);
      bind($('#code-state'), () => t('code.finished', { time: fmt(ms / 1e3, 's'), count: m.result.opsPushed }));
      $('#panel-code').dataset.state = 'done';
      afterCode(m);
    },
    fail: (m) => {
      appendOutput('error', () => codeFailureText(m));
      if (outOfMemory(m)) appendOutput('warn', () => t('error.oomHint'));
      if (m.line && m.line <= editor.lineCount()) {
        errorLine = editor.addLineClass(m.line - 1, 'background', 'error-line');
        editor.scrollIntoView({ line: m.line - 1, ch: 0 }, 60);  // with 60 px of context around it
      }
      // Stop run and Reload worker end the run by starting a new engine: it did not keep running.
      bind($('#code-state'), () => t(m.key === 'error.workerRestarted' ? 'code.restarted' : 'code.stopped'));
      $('#panel-code').dataset.state = 'failed';
      afterCode(m);
    },
  });
}

function afterCode(m) {
  state.results.code = m;
  const events = m.events || [];
  if (events.length) showGraph('code', $('#code-graph'), events, null);
  else {
    if (state.graphs.code) state.graphs.code.destroy();
    delete state.graphs.code;
    $('#code-graph').hidden = true;
    bind($('#code-graph-note'), () => t('code.noOp'));
    $('#code-graph').dataset.nodes = '0';
    $('#code-graph').dataset.edges = '0';
  }
  showTimeline('code', $('#code-timeline'), $('#code-timeline-note'), m);
}

// ---- start ----------------------------------------------------------------------------------
function init() {
  // The language: ?lang=, else the remembered choice, else the browser's preference.
  i18n = makeTranslator(chooseLanguage({ query: queryLanguage(), stored: storedLanguage(),
                                         preferred: navigator.languages?.length ? navigator.languages : [navigator.language] }));
  state.i18n = i18n;
  document.documentElement.lang = i18n.locale;
  document.title = t('page.title');
  Chart.defaults.font.family = getComputedStyle(document.body).fontFamily;
  Chart.defaults.locale = i18n.locale;  // the axes' numbers
  for (const e of document.querySelectorAll('[data-i18n]')) bind(e, () => t(e.dataset.i18n));
  for (const e of document.querySelectorAll('[data-i18n-html]')) bind(e, () => html(e.dataset.i18nHtml), 'html');
  for (const e of document.querySelectorAll('[data-i18n-title]')) bind(e, () => t(e.dataset.i18nTitle), 'title');
  for (const e of document.querySelectorAll('[data-i18n-placeholder]')) bind(e, () => t(e.dataset.i18nPlaceholder), 'placeholder');
  bind($('#code-run kbd'), () => i18n.raw('Ctrl+Enter'));
  const langSelect = $('#lang');
  for (const l of LANGUAGES) langSelect.append(bind(el('option', { value: l.code, lang: l.locale }), () => i18n.raw(l.name)));
  langSelect.value = i18n.code;
  langSelect.addEventListener('change', () => setLanguage(langSelect.value, { remember: true }));
  setStatus('loading', () => t('status.starting'));

  const hw = hardwareThreads();
  const select = $('#threads');
  for (const n of [1, 2, 3, 4, 6, 8]) select.append(bind(el('option', { value: String(n) }), () => i18n.number(n)));
  const initial = Math.min(4, Math.max(2, hw - 1));
  select.value = String(initial);
  select.addEventListener('change', applyThreads);
  $('#reload').addEventListener('click', () => startWorker(Number(select.value)));
  $('#stop').addEventListener('click', () => startWorker(Number(select.value)));
  // A field that is refused shows why at once (boundFromControls); nothing is sent then.
  const applyBound = () => {
    const b = boundFromControls();
    if (!b.error && state.ready && state.busy === null) state.worker.postMessage({ type: 'bound', bound: b.bound });
  };
  $('#bound-ops').addEventListener('change', applyBound);
  $('#bound-mb').addEventListener('change', applyBound);

  for (const p of PANELS) buildPanel(p);
  document.querySelectorAll('.reset-zoom').forEach((b) => {
    b.addEventListener('click', () => state.timelines[b.dataset.for]?.resetZoom());
  });

  // Tab indents in the editor; Esc, then Tab or Shift-Tab, moves the focus out of it, so that a
  // keyboard alone can leave the cell (a key mapped to false is left to the browser).
  const keys = { 'Ctrl-Enter': runCode, 'Cmd-Enter': runCode, Esc: (cm) => cm.setOption('extraKeys', leaving) };
  const leaving = { ...keys, Tab: false, 'Shift-Tab': false };
  editor = CodeMirror.fromTextArea($('#code-src'), {
    mode: 'javascript', lineNumbers: true, matchBrackets: true, autoCloseBrackets: true,
    indentUnit: 2, tabSize: 2, extraKeys: keys,
  });
  editor.on('keydown', (cm, e) => {
    if (e.key !== 'Escape' && e.key !== 'Tab' && e.key !== 'Shift') cm.setOption('extraKeys', keys);
  });
  editor.on('blur', (cm) => cm.setOption('extraKeys', keys));
  editor.setValue(defaultCode());
  state.editor = editor;
  state.setLanguage = setLanguage;
  $('#code-run').addEventListener('click', runCode);
  updateButtons();

  fetch('vendor/versions.json').then((r) => r.json()).then((v) => {
    const list = Object.entries(v).map(([k, x]) => `${k} ${x}`).join(', ');
    bind($('#versions'), () => t('footer.versions', { list }));
  }).catch(() => {});

  if (!window.crossOriginIsolated || typeof SharedArrayBuffer === 'undefined') {
    // Plain http:// to another machine is not a secure context: no isolation, whatever headers
    // the server sends, so asking for those headers would send the reader the wrong way.
    const secure = window.isSecureContext;
    const b = $('#isolation');
    b.hidden = false;
    bind(b, () => html(secure ? 'banner.notIsolatedHtml' : 'banner.notSecureHtml'), 'html');
    setStatus('error', () => t(secure ? 'status.notIsolated' : 'status.notSecure'));
    document.querySelectorAll('button.run').forEach((x) => { x.dataset.unavailable = 'true'; x.disabled = true; });
    $('#reload').disabled = true;
    return;
  }
  startWorker(initial);
}

init();
