// worker.js: the playground's Web Worker. It loads the asyncnd WebAssembly module (whose engine
// threads are nested Web Workers), runs the chapter's experiments (experiments/chapter.cjs, shared
// with the Node example and the benchmarks) and the user's code cell,
// and posts figures, profiler events, console output and progress to the page, which never
// blocks: every blocking wait (waitToRead, waitAll, dataSync...) happens on this thread.
// Messages in:  {type:'init', threads, bound} · {type:'run', id, exp, params, bound}
//               {type:'code', id, src, bound}
// Messages out: {type:'ready', ...} · {type:'progress', id, fraction, key, params} ·
//               {type:'log', id, level, text, more | key, params} ·
//               {type:'done', id, result, events, eventsTotal, stats} ·
//               {type:'failed', id, message | key, params, thrown, parse, line} ·
//               {type:'fatal', message | key}
// `more`: how many characters of a long line were not sent (MAX_LINE_CHARS); `parse`: the code
// cell could not be parsed (it never ran).
// A `key` names a text of the page's dictionaries (i18n/): the page writes it in the reader's
// language. A `message` is an Error's own text (the engine's, the user's code's), shown as it is.
'use strict';

const MAX_EVENTS = 6000;  // events sent for one run's timeline (the earliest ones)

// The npm package in a browser: the Emscripten loader, then the package's wrapper (which defines
// the global `asyncnd`); the loader's URL tells it where the .wasm and its threads' script are.
// Then the experiments (the global `asyncndChapter`; server.mjs serves that one file), and the
// output's writer (show.cjs, the global `asyncndShow`).
importScripts('/wasm/dist/asyncnd.js', '/wasm/index.cjs', '/experiments/chapter.cjs', 'show.cjs');
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
  let stack;
  try {
    stack = String((e && e.stack) || '');
  } catch {
    return null;  // a thrown Proxy, revoked: no stack to read
  }
  const m = new RegExp(`${CELL_URL.replace('.', '\\.')}:(\\d+):(\\d+)`).exec(stack);
  return m ? Number(m[1]) - 2 : null;
}

// An Error's text; `thrown` tells the page when what was thrown is not an Error at all (then the
// text is the value, as format() shows it: `throw null` shows null, `throw ''` shows ""). Never
// throws: a Proxy or an object without a prototype must not turn into a second error.
function describe(e) {
  try {
    if (e instanceof Error) return { message: `${e.name === 'Error' ? '' : `${e.name}: `}${e.message}`, thrown: false };
  } catch { /* a hostile Error subclass or Proxy: shown as a value below */ }
  return { message: format(e, true), thrown: true };
}

// Turns console arguments into text, as a console would show them (show.cjs); `quote` writes a
// string as a literal (a thrown '' must show as ""). Never throws for what it cannot show. The one
// exception is an NDArray whose op failed: toString() is a read, and a read rethrows the op's
// error, as the same call in the cell would.
const isNDArray = (x) => nd !== null && x instanceof nd.NDArray;
function format(v, quote = false) {
  let array = false;
  try {
    array = isNDArray(v);
  } catch { /* a revoked Proxy throws even here */ }
  if (array) return v.isDeleted ? '<deleted NDArray>' : v.toString();
  return self.asyncndShow(v, { quote, ndarray: isNDArray });
}

// What one console line or the returned value may send to the page: a 20 MB string froze the
// page's layout for seconds, Stop included. Past the cap the page says how much was cut (`more`).
const MAX_LINE_CHARS = 10000;
const MAX_LINES = 2000;
function capped(text) {
  if (text.length <= MAX_LINE_CHARS) return { text, more: 0 };
  // Not in the middle of a surrogate pair.
  const end = /[\uD800-\uDBFF]/.test(text[MAX_LINE_CHARS - 1]) ? MAX_LINE_CHARS - 1 : MAX_LINE_CHARS;
  return { text: text.slice(0, end), more: text.length - end };
}

async function runCode(id, src, bound) {
  // The header's bound applies to this run, as to an experiment (and is set again at the end, in
  // case the cell changed it).
  setBound(bound);
  const ctx = makeContext(id, {}, bound);
  let lines = 0;
  const log = (level) => (...args) => {
    if (lines > MAX_LINES) return;
    if (lines++ === MAX_LINES) {
      post({ type: 'log', id, level: 'warn', key: 'code.truncated', params: { count: MAX_LINES } });
      return;
    }
    post({ type: 'log', id, level, ...capped(args.map((a) => format(a)).join(' ')) });
  };
  // debug, dir and table print as log does (a table as its JSON): a cell copied from elsewhere
  // should not stop at "console.table is not a function".
  const cons = { log: log('log'), info: log('info'), warn: log('warn'), error: log('error'),
                 debug: log('log'), dir: log('log'), table: log('log') };
  const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
  let fn;
  try {
    fn = new AsyncFunction('nd', 'console', 'sleep', `${src}\n//# sourceURL=${CELL_URL}`);
  } catch (e) {
    // The cell never ran: `parse` lets the page say so before the engine's SyntaxError text.
    post({ type: 'failed', id, ...describe(e), parse: true, line: null, events: [], eventsTotal: 0 });
    return;
  }
  const before = nd.engine.stats();
  ctx.startProfile();
  // `threw`, not the error's truth: `throw null`, `throw 0` and `throw ''` are failures too.
  let value, error, threw = false;
  try {
    value = await fn(nd, cons, (ms) => new Promise((r) => setTimeout(r, ms)));
  } catch (e) {
    threw = true;
    error = e;
  }
  // Whatever the code left queued finishes (or fails) before the profile is taken.
  try {
    nd.waitAll();
  } catch (e) {
    if (!threw) {
      threw = true;
      error = e;
    }
  }
  ctx.stopProfile();
  setBound(bound);
  if (threw) {
    post({ type: 'failed', id, ...describe(error), line: errorLine(error),
           events: ctx.events, eventsTotal: ctx.total(), stats: nd.engine.stats() });
    return;
  }
  let shown, valueError;
  try {
    shown = value === undefined ? undefined : capped(format(value));
  } catch (e) {
    valueError = describe(e).message;  // an NDArray whose op failed (format's one exception)
  }
  const after = nd.engine.stats();
  post({ type: 'done', id, result: { value: shown?.text, valueMore: shown?.more, valueError,
                                     opsPushed: after.pushed - before.pushed },
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
  post({ type: 'log', id: null, level: 'error', key: 'code.unhandled',
        params: { message: capped(describe(ev.reason).message).text } });
});
