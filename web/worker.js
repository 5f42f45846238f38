// worker.js: the playground's Web Worker. It loads the asyncnd WebAssembly module (whose engine
// threads are nested Web Workers), runs the chapter's experiments (experiments/chapter.cjs, shared
// with the Node example and the benchmarks) and the user's code cell,
// and posts figures, profiler events, console output and progress to the page, which never
// blocks: every blocking wait (waitToRead, waitAll, dataSync...) happens on this thread.
// Messages in:  {type:'init', threads, bound} · {type:'run', id, exp, params, bound}
//               {type:'code', id, src, bound}
// Messages out: {type:'ready', ...} · {type:'progress', id, fraction, key, params} ·
//               {type:'log', id, level, text | key, params} ·
//               {type:'done', id, result, events, eventsTotal, stats} ·
//               {type:'failed', id, message | key, params, thrown, line} · {type:'fatal', message | key}
// A `key` names a text of the page's dictionaries (i18n/): the page writes it in the reader's
// language. A `message` is an Error's own text (the engine's, the user's code's), shown as it is.
'use strict';

const MAX_EVENTS = 6000;  // events sent for one run's timeline (the earliest ones)

// The npm package in a browser: the Emscripten loader, then the package's wrapper (which defines
// the global `asyncnd`); the loader's URL tells it where the .wasm and its threads' script are.
// Then the experiments (the global `asyncndChapter`; server.mjs serves that one file).
importScripts('/wasm/dist/asyncnd.js', '/wasm/index.cjs', '/experiments/chapter.cjs');
const MODULE_URL = new URL('/wasm/dist/asyncnd.js', self.location.href).href;
const { EXPERIMENTS, hasNN } = self.asyncndChapter;

// The experiments name their steps; the page's dictionaries (i18n/) word them, by these keys.
const PROGRESS_KEYS = {
  warmup: 'progress.warmup',
  syncStep: 'progress.syncStep',
  queueing: 'progress.queueing',
  e2: 'progress.e2',
  calling: 'progress.calling',
  twoDots: 'progress.twoDots',
  synchronous: 'progress.synchronous',
  asynchronous: 'progress.asynchronous',
  timingPushes: 'progress.timingPushes',
  profiling: 'progress.profiling',
  batch: 'progress.batch',
  jsAlone: 'progress.jsAlone',
  bothAtOnce: 'progress.bothAtOnce',
  done: 'progress.done',
};

let nd = null;

function post(msg) { self.postMessage(msg); }

// Profiler events, made small for the page: times in microseconds from the run's first push.
function compactEvents(raw, into) {
  for (const e of raw) {
    if (into.length >= MAX_EVENTS) break;
    into.push({ name: e.name, worker: e.worker, push: e.pushUs, start: e.startUs, end: e.endUs,
                reads: e.reads, writes: e.writes, failed: e.failed, skipped: e.skipped });
  }
  return raw.length;
}

function makeContext(id, params, bound) {
  const events = [];
  let total = 0;
  let last = 0;
  const ctx = {
    params: params || {},
    bound,
    events,
    total: () => total,
    progress(fraction, step, params = {}) {
      // Throttled: a tight loop must not flood the page with messages.
      const t = performance.now();
      if (fraction < 1 && t - last < 50) return;
      last = t;
      post({ type: 'progress', id, fraction, key: PROGRESS_KEYS[step], params });
    },
    startProfile() { nd.profiler.start(); },
    stopProfile(cb) {
      nd.profiler.stop();
      const raw = nd.profiler.events();
      total += compactEvents(raw, events);
      if (cb) cb(raw);
    },
    profile(fn, cb) {
      ctx.startProfile();
      try {
        fn();
      } finally {
        ctx.stopProfile(cb);
      }
    },
  };
  return ctx;
}

// bound.ops / bound.bytes: a number (0 = no bound), or null for the engine's default.
function setBound(bound) {
  const b = bound || {};
  nd.engine.resetMaxInflight();
  if (b.ops == null && b.bytes == null) return;
  const s = nd.engine.stats();
  nd.engine.setMaxInflight({ ops: b.ops ?? s.maxInflightOps, bytes: b.bytes ?? s.maxInflightBytes });
}

const CELL_URL = 'playground-cell.js';
function errorLine(e) {
  // The cell's function is named by its sourceURL; its body starts on line 3 of that source (the
  // header that `new AsyncFunction` adds takes two lines).
  const m = new RegExp(`${CELL_URL.replace('.', '\\.')}:(\\d+):(\\d+)`).exec((e && e.stack) || '');
  return m ? Number(m[1]) - 2 : null;
}

// An Error's text; `thrown` tells the page when what was thrown is not an Error at all.
function describe(e) {
  if (e instanceof Error) return { message: `${e.name === 'Error' ? '' : `${e.name}: `}${e.message}`, thrown: false };
  return { message: String(e), thrown: true };
}

// Turns console arguments into text, as a terminal would show them.
function format(v) {
  if (typeof v === 'string') return v;
  if (nd && v instanceof nd.NDArray) return v.isDeleted ? '<deleted NDArray>' : v.toString();
  if (ArrayBuffer.isView(v)) {
    const head = Array.from(v.slice(0, 32)).map((x) => Number(x.toPrecision(6)));
    return `${v.constructor.name}(${v.length}) [${head.join(', ')}${v.length > 32 ? ', ...' : ''}]`;
  }
  if (v instanceof Error) return v.stack || String(v);
  if (typeof v === 'object' && v !== null) {
    try {
      return JSON.stringify(v, (k, x) => (nd && x instanceof nd.NDArray ? `<NDArray ${x.shape.join('x')}>` : x));
    } catch {
      return String(v);
    }
  }
  return String(v);
}

async function runCode(id, src, bound) {
  const ctx = makeContext(id, {}, bound);
  const lines = [];
  const log = (level) => (...args) => {
    const text = args.map(format).join(' ');
    if (lines.length < 2000) {
      lines.push({ level, text });
      post({ type: 'log', id, level, text });
    }
  };
  const cons = { log: log('log'), info: log('info'), warn: log('warn'), error: log('error') };
  const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
  let fn;
  try {
    fn = new AsyncFunction('nd', 'console', 'sleep', `${src}\n//# sourceURL=${CELL_URL}`);
  } catch (e) {
    post({ type: 'failed', id, ...describe(e), line: null, events: [], eventsTotal: 0 });
    return;
  }
  const before = nd.engine.stats();
  ctx.startProfile();
  let value, error = null;
  try {
    value = await fn(nd, cons, (ms) => new Promise((r) => setTimeout(r, ms)));
  } catch (e) {
    error = e;
  }
  // Whatever the code left queued finishes (or fails) before the profile is taken.
  try {
    nd.waitAll();
  } catch (e) {
    if (!error) error = e;
  }
  ctx.stopProfile();
  setBound(bound);
  if (error) {
    post({ type: 'failed', id, ...describe(error), line: errorLine(error),
           events: ctx.events, eventsTotal: ctx.total(), stats: nd.engine.stats() });
    return;
  }
  let shown, valueError;
  try {
    shown = value === undefined ? undefined : format(value);
  } catch (e) {
    valueError = describe(e).message;
  }
  const after = nd.engine.stats();
  post({ type: 'done', id, result: { value: shown, valueError, opsPushed: after.pushed - before.pushed },
         events: ctx.events, eventsTotal: ctx.total(), stats: after });
}

async function runExperiment(id, exp, params, bound) {
  const f = Object.hasOwn(EXPERIMENTS, exp) ? EXPERIMENTS[exp] : null;
  if (!f) {
    post({ type: 'failed', id, key: 'error.noExperiment', params: { name: String(exp) }, line: null });
    return;
  }
  setBound(bound);
  const ctx = makeContext(id, params, bound);
  const t0 = performance.now();
  try {
    const result = await f(nd, ctx);
    ctx.progress(1, 'done');
    post({ type: 'done', id, result, wallS: (performance.now() - t0) / 1000,
           events: ctx.events, eventsTotal: ctx.total(), stats: nd.engine.stats() });
  } catch (e) {
    try { nd.profiler.stop(); } catch { /* not recording */ }
    try { nd.waitAll(); } catch { /* the failure is reported below */ }
    post({ type: 'failed', id, ...describe(e), line: null, events: ctx.events,
           eventsTotal: ctx.total() });
  } finally {
    setBound(bound);
  }
}

// One job at a time, in arrival order: runs share one engine and must not interleave.
let queue = Promise.resolve();
self.onmessage = (ev) => {
  const m = ev.data;
  queue = queue.then(async () => {
    try {
      if (m.type === 'init') {
        if (!self.crossOriginIsolated) {
          post({ type: 'fatal', key: 'error.notIsolated' });
          return;
        }
        nd = await self.asyncnd.load({ threads: m.threads, moduleUrl: MODULE_URL });
        setBound(m.bound);
        post({ type: 'ready', threads: nd.threads, backend: nd.backend,
               hasNN: hasNN(nd), stats: nd.engine.stats() });
      } else if (!nd) {
        post({ type: 'failed', id: m.id, key: 'error.notLoaded', line: null });
      } else if (m.type === 'run') {
        await runExperiment(m.id, m.exp, m.params, m.bound);
      } else if (m.type === 'code') {
        await runCode(m.id, m.src, m.bound);
      } else if (m.type === 'bound') {
        setBound(m.bound);
        post({ type: 'bound', bound: m.bound });
      }
    } catch (e) {
      if (m.type === 'init') post({ type: 'fatal', ...describe(e) });
      else post({ type: 'failed', id: m.id, ...describe(e), line: null });
    }
  });
};

// A promise rejection nobody handled (e.g. a forgotten `x.data()` in the code cell): show it.
self.addEventListener('unhandledrejection', (ev) => {
  ev.preventDefault();
  post({ type: 'log', id: null, level: 'error', key: 'code.unhandled', params: { message: describe(ev.reason).message } });
});
