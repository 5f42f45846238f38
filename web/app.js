// app.js: the playground page. It owns the Web Worker that runs asyncnd (worker.js) and never
// waits on it: every run is a message out and messages back (progress, figures, profiler events).
// It draws the figures with Chart.js, the dependency graphs with Cytoscape (dagre layout) and the
// per-thread timelines with Chart.js floating bars and its zoom plugin; the code cell is
// CodeMirror. For the browser tests it exposes its state as window.playground.
/* global Chart, ChartZoom, cytoscape, CodeMirror */
import { PANELS } from './panels.js';
import { buildGraph, clockSkewUs } from './graph.js';

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

Chart.register(window.ChartZoom);
Chart.defaults.font.family = getComputedStyle(document.body).fontFamily;
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
  busy: null,        // the id of the run in flight
  nextId: 1,
  handlers: new Map(),
  charts: {},        // panel key -> Chart (figures)
  timelines: {},     // panel key -> Chart (timeline)
  graphs: {},        // panel key -> cytoscape instance
  results: {},       // panel key -> last result message
};
window.playground = state;

// ---- the worker ---------------------------------------------------------------------------
function hardwareThreads() { return navigator.hardwareConcurrency || 2; }

// An empty control keeps the engine's default bound (null); 0 switches that bound off.
function boundFromControls() {
  const read = (id) => ($(id).value.trim() === '' ? null : Math.max(0, Number($(id).value) || 0));
  const ops = read('#bound-ops'), mb = read('#bound-mb');
  return { ops: ops === null ? null : Math.floor(ops), bytes: mb === null ? null : Math.round(mb * 1e6) };
}

function setStatus(kind, text) {
  $('#status').dataset.state = kind;
  $('#status-text').textContent = text;
}

function startWorker(threads) {
  if (state.worker) state.worker.terminate();
  for (const [, h] of state.handlers) h.fail({ message: 'the worker was restarted', line: null });
  state.handlers.clear();
  state.ready = false;
  state.busy = null;
  setStatus('loading', `loading the module with ${threads} engine thread${threads > 1 ? 's' : ''}…`);
  updateButtons();
  const w = new Worker('worker.js');
  state.worker = w;
  w.onmessage = (ev) => onWorkerMessage(ev.data);
  w.onerror = (ev) => {
    ev.preventDefault();
    setStatus('error', `the worker failed to start: ${ev.message || 'unknown error'}`);
    updateButtons();
  };
  w.postMessage({ type: 'init', threads, bound: boundFromControls() });
}

function onWorkerMessage(m) {
  if (m.type === 'ready') {
    state.ready = true;
    state.threads = m.threads;
    state.hasNN = m.hasNN;
    setStatus('ready', `ready · ${m.threads} engine thread${m.threads > 1 ? 's' : ''} · ${m.backend} · threads available (cross-origin isolated)`);
    for (const p of PANELS) refreshAvailability(p);
    updateButtons();
    return;
  }
  if (m.type === 'fatal') {
    setStatus('error', m.message);
    updateButtons();
    return;
  }
  if (m.type === 'bound') return;
  const h = state.handlers.get(m.id);
  if (m.type === 'log' && m.id === null) {
    appendOutput(m.level, m.text);
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
  }
}

function send(msg, handler) {
  const id = state.nextId++;
  state.handlers.set(id, handler);
  state.busy = id;
  updateButtons();
  state.worker.postMessage({ ...msg, id, bound: boundFromControls() });
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

// ---- formatting ---------------------------------------------------------------------------
function fmt(value, unit) {
  if (typeof value !== 'number' || !Number.isFinite(value)) return String(value);
  switch (unit) {
    case 's': return value >= 1 ? `${value.toFixed(3)} s` : `${(value * 1e3).toFixed(value < 0.01 ? 3 : 1)} ms`;
    case 'us': return `${(value * 1e6).toFixed(2)} µs`;
    case 'x': return `${value.toFixed(1)}×`;
    case 'MB': return `${(value / 1e6).toFixed(1)} MB`;  // 10^6 bytes, as the native demo
    default: return Number.isInteger(value) ? String(value) : value.toPrecision(6);
  }
}

// ---- charts -------------------------------------------------------------------------------
function barChart(canvas, bars, { unit = 's', title } = {}) {
  const scale = unit === 's' ? 1e3 : unit === 'us' ? 1e6 : 1;
  const axis = unit === 's' ? 'milliseconds' : unit === 'us' ? 'microseconds' : unit;
  return new Chart(canvas, {
    type: 'bar',
    data: {
      labels: bars.map((b) => b.label),
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
  for (let w = 0; w < threads; ++w) rows.push(`worker ${w}`);
  if (events.some((e) => e.worker < 0)) rows.push('JavaScript thread');
  for (const e of events) {
    if (e.worker >= threads && !rows.includes(`worker ${e.worker}`)) rows.push(`worker ${e.worker}`);
  }
  const byName = new Map();
  for (const e of events) {
    if (!byName.has(e.name)) byName.set(e.name, []);
    byName.get(e.name).push({
      x: [(e.start - t0) / 1e3, (e.end - t0) / 1e3],
      y: e.worker < 0 ? 'JavaScript thread' : `worker ${e.worker}`,
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
              return `${e.name}: ran ${((e.end - e.start)).toFixed(1)} µs, queued ${((e.start - e.push) / 1e3).toFixed(3)} ms before` +
                     `${e.failed ? ' (failed)' : ''}${e.skipped ? ' (skipped)' : ''}`;
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
        x: { type: 'linear', min: 0, max: end * 1.02 + 0.001, title: { display: true, text: 'milliseconds since the first push' }, grid: { color: '#eef0f4' } },
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
    note.textContent = 'No engine op was recorded in this run.';
    return;
  }
  canvas.parentElement.hidden = false;  // shown from the first run on, before Chart.js sizes it
  const chart = timelineChart(canvas, events, state.threads);
  state.timelines[key] = chart;
  canvas.ondblclick = () => chart.resetZoom();
  const total = m.eventsTotal || events.length;
  note.textContent = `${events.length} op${events.length > 1 ? 's' : ''} recorded` +
    (total > events.length ? ` (the first ${events.length} of ${total} are drawn)` : '') +
    '. Scroll to zoom, drag to pan, double-click to reset.';
  const skew = clockSkewUs(events);
  if (skew > 1) {
    note.textContent += ` The threads' clocks disagree by at least ${(skew / 1e3).toFixed(3)} ms in this run ` +
      '(an op appears to start before an op it reads finished, on another thread), so bars on different rows may be ' +
      'shifted by that much. The module times every thread with one clock (performance.timeOrigin + now()); ' +
      'a disagreement means the browser\'s clocks drifted.';
  }
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
    wheelSensitivity: 0.3,
    boxSelectionEnabled: false,
    style: [
      { selector: 'node', style: { label: 'data(label)', 'font-size': 12, 'text-valign': 'center', 'text-halign': 'center', color: '#101828', 'font-family': Chart.defaults.font.family } },
      { selector: 'node.op', style: { shape: 'round-rectangle', 'background-color': 'data(color)', color: '#fff', width: 'label', height: 26, padding: '8px', 'font-weight': 600 } },
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
    note.textContent = g.truncated ? `The first ${g.ops} of ${events.length} ops are drawn.` :
      `${g.ops} op${g.ops > 1 ? 's' : ''}, ${g.vars} array${g.vars > 1 ? 's' : ''}. Arrows: read by, written by.`;
  }
  return g;
}

// ---- the experiment panels ----------------------------------------------------------------
function buildPanel(p) {
  const params = el('div', { class: 'params' });
  for (const q of p.params || []) {
    const input = el('input', { type: 'number', min: String(q.min), max: String(q.max), step: String(q.step || 1), value: String(q.value), 'data-param': q.key });
    params.append(el('label', {}, q.label, input));
  }
  const run = el('button', { class: 'run', 'data-panel': p.key }, 'Run');
  const progress = el('div', { class: 'progress', role: 'progressbar', 'aria-valuemin': '0', 'aria-valuemax': '100' }, el('div', { class: 'bar' }));
  const progressText = el('span', { class: 'progress-text' });
  const notice = el('div', { class: 'notice', hidden: '' });
  const figures = el('div', { class: 'figures' });
  const chartBox = el('div', { class: 'chart-box', hidden: '' }, el('canvas', { class: 'figure-chart' }));
  const extra = el('div', { class: 'extra' });
  const tlCanvas = el('canvas');
  const tlNote = el('div', { class: 'timeline-note' }, 'Run the experiment to see what each engine thread ran.');
  const timeline = el('div', { class: 'timeline-box' },
    el('h3', {}, 'Timeline ', el('button', { class: 'link reset-zoom', 'data-for': p.key }, 'reset zoom')),
    el('div', { class: 'timeline-wrap', hidden: '' }, tlCanvas), tlNote);
  const section = el('section', { class: `panel${p.wide ? ' wide' : ''}`, id: `panel-${p.key}`, 'data-key': p.key },
    el('div', { class: 'panel-head' },
      el('h2', {}, el('span', { class: 'tag' }, p.key), ` ${p.title}`),
      el('div', { class: 'run-row' }, params, run)),
    el('p', { class: 'explain', html: p.explain }),
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
    p.ui.notice.innerHTML = why;
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

function setProgress(ui, fraction, text) {
  ui.progress.firstChild.style.width = `${Math.round(Math.min(1, Math.max(0, fraction)) * 100)}%`;
  ui.progress.setAttribute('aria-valuenow', String(Math.round(fraction * 100)));
  ui.progressText.textContent = text || '';
}

// A figure's cell: the formatted value, and the raw number for the tests (data-value).
const figCell = (f) => el('td', { class: 'num', 'data-fig': f.key, 'data-value': String(f.value) }, fmt(f.value, f.unit));

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

function runPanel(p) {
  const ui = p.ui;
  const params = {};
  ui.section.querySelectorAll('[data-param]').forEach((i) => { params[i.dataset.param] = Number(i.value); });
  ui.section.dataset.state = 'running';
  ui.run.textContent = 'Running…';
  setProgress(ui, 0, 'starting');
  ui.section.querySelector('.run-error')?.remove();
  send({ type: 'run', exp: p.key, params }, {
    progress: (m) => setProgress(ui, m.fraction, m.text),
    log: () => {},
    done: (m) => {
      ui.run.textContent = 'Run again';
      ui.section.dataset.state = 'done';
      setProgress(ui, 1, `done in ${fmt(m.wallS, 's')}`);
      state.results[p.key] = m;
      const view = p.render(m.result, m);
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
        ui.extra.append(el('div', { class: 'graph-box' }, el('h3', {}, 'Dependency graph (from the profiler)'), box,
                           el('div', { class: 'graph-note' })));
        showGraph(p.key, box, m.events, view.graph.names);
      }
      if (view.text) ui.extra.append(el('p', { class: 'result-text', html: view.text }));
      showTimeline(p.key, ui.tlCanvas, ui.tlNote, m);
    },
    fail: (m) => {
      ui.run.textContent = 'Run';
      ui.section.dataset.state = 'failed';
      setProgress(ui, 0, 'failed');
      ui.figures.before(el('div', { class: 'run-error' }, m.message));
    },
  });
}

// ---- the code cell ------------------------------------------------------------------------
const DEFAULT_CODE = `// Runs in the playground's Web Worker: blocking calls are fine here.
const x = nd.random.normal([600, 600]);
const y = nd.random.normal([600, 600]);
const a = nd.dot(x, y);        // these two products do not depend
const b = nd.dot(y, x);        // on each other: they may run at once
const s = a.add(b).sum();      // waits for both, inside the engine
console.log('queued; ops pending now:', nd.engine.stats().pending);
console.log('sum =', s.item()); // item() blocks until the value exists
return s.shape;
`;

let editor;
function appendOutput(level, text) {
  const out = $('#code-output');
  out.querySelector('.muted')?.remove();
  out.append(el('div', { class: `line ${level}` }, text));
  out.scrollTop = out.scrollHeight;
}

function runCode() {
  if (!state.ready || state.busy !== null) return;
  const out = $('#code-output');
  out.replaceChildren();
  editor.getAllMarks().forEach((mk) => mk.clear());
  for (let i = 0; i < editor.lineCount(); ++i) editor.removeLineClass(i, 'background', 'error-line');
  $('#code-state').textContent = 'running…';
  $('#panel-code').dataset.state = 'running';
  const t0 = performance.now();
  send({ type: 'code', src: editor.getValue() }, {
    progress: () => {},
    log: (m) => appendOutput(m.level, m.text),
    done: (m) => {
      const ms = performance.now() - t0;
      if (m.result.value !== undefined) appendOutput('result', `⇒ ${m.result.value}`);
      $('#code-state').textContent = `finished in ${fmt(ms / 1e3, 's')} · ${m.result.opsPushed} ops pushed`;
      $('#panel-code').dataset.state = 'done';
      afterCode(m);
    },
    fail: (m) => {
      const where = m.line ? ` (line ${m.line})` : '';
      appendOutput('error', `Error${where}: ${m.message}`);
      if (m.line && m.line <= editor.lineCount()) editor.addLineClass(m.line - 1, 'background', 'error-line');
      $('#code-state').textContent = 'stopped with an error; the engine keeps running';
      $('#panel-code').dataset.state = 'failed';
      afterCode(m);
    },
  });
}

function afterCode(m) {
  const events = m.events || [];
  if (events.length) showGraph('code', $('#code-graph'), events, null);
  else {
    if (state.graphs.code) state.graphs.code.destroy();
    delete state.graphs.code;
    $('#code-graph').hidden = true;
    $('#code-graph-note').textContent = 'No op was recorded.';
    $('#code-graph').dataset.nodes = '0';
    $('#code-graph').dataset.edges = '0';
  }
  showTimeline('code', $('#code-timeline'), $('#code-timeline-note'), m);
}

// ---- start ----------------------------------------------------------------------------------
function init() {
  const hw = hardwareThreads();
  const select = $('#threads');
  for (const n of [1, 2, 3, 4, 6, 8]) select.append(el('option', { value: String(n) }, String(n)));
  const initial = Math.min(4, Math.max(2, hw - 1));
  select.value = String(initial);
  $('#reload').addEventListener('click', () => startWorker(Number(select.value)));
  $('#stop').addEventListener('click', () => startWorker(Number(select.value)));
  const applyBound = () => {
    if (state.ready && state.busy === null) state.worker.postMessage({ type: 'bound', bound: boundFromControls() });
  };
  $('#bound-ops').addEventListener('change', applyBound);
  $('#bound-mb').addEventListener('change', applyBound);

  for (const p of PANELS) buildPanel(p);
  document.querySelectorAll('.reset-zoom').forEach((b) => {
    b.addEventListener('click', () => state.timelines[b.dataset.for]?.resetZoom());
  });

  editor = CodeMirror.fromTextArea($('#code-src'), {
    mode: 'javascript', lineNumbers: true, matchBrackets: true, autoCloseBrackets: true,
    indentUnit: 2, tabSize: 2, viewportMargin: Infinity,
    extraKeys: { 'Ctrl-Enter': runCode, 'Cmd-Enter': runCode },
  });
  editor.setValue(DEFAULT_CODE);
  state.editor = editor;
  $('#code-run').addEventListener('click', runCode);
  updateButtons();

  fetch('vendor/versions.json').then((r) => r.json()).then((v) => {
    $('#versions').textContent = `asyncnd (WebAssembly, SIMD128, pthreads) · libraries bundled locally: ${Object.entries(v).map(([k, x]) => `${k} ${x}`).join(', ')}`;
  }).catch(() => {});

  if (!window.crossOriginIsolated || typeof SharedArrayBuffer === 'undefined') {
    const b = $('#isolation');
    b.hidden = false;
    b.innerHTML = '<strong>Threads are not available here.</strong> This page is not cross-origin isolated, so the browser ' +
      'withholds <code>SharedArrayBuffer</code>, which WebAssembly threads need, and the engine cannot start. ' +
      'Serve the playground with <code>make playground</code> (it sends the <code>Cross-Origin-Opener-Policy: same-origin</code> and ' +
      '<code>Cross-Origin-Embedder-Policy: require-corp</code> headers) and open <code>http://127.0.0.1:8080/</code>, not a file:// URL; ' +
      'another server must send the same two headers.';
    setStatus('error', 'threads unavailable: the page is not cross-origin isolated');
    document.querySelectorAll('button.run').forEach((x) => { x.dataset.unavailable = 'true'; x.disabled = true; });
    $('#reload').disabled = true;
    return;
  }
  startWorker(initial);
}

init();
