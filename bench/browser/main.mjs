// bench/browser/main.mjs: the page's side of the browser benchmark. Starts one Web Worker per
// library and thread count (asyncnd as loaded and with SIMD128 forced, TensorFlow.js wasm, ONNX
// Runtime Web; 1 and 2 threads), hands
// each the same two 1000x1000 float32 matrices, warms each up, then times C = A B with C read back
// into JavaScript: 9 rounds of 5 products per Worker, the Workers' order rotated each round, one
// Worker at a time (the others idle). Every product's sampled entries are checked against a
// float64 reference computed here. Then the per-op costs (E5 for asyncnd, tf.add for TF.js).
// POSTs everything to /result for bench.mjs, which writes bench/results/browser.json.
const N = 1000, WARMUP = 6, ROUNDS = 9, REPS = 5, PAUSE_MS = 200, N_SAMPLES = 256;

const log = (text) => fetch('/log', { method: 'POST', body: text });

// The Workers, in their first round's order; each later round starts two further on. asyncnd
// twice: as load() picks its module (the relaxed-SIMD one where the browser runs it), and with the
// SIMD128 module forced, to show what relaxed SIMD brings.
const configs = [
  { key: 'asyncnd_1t', lib: 'asyncnd', threads: 1, url: 'worker_asyncnd.mjs', type: 'module' },
  { key: 'tfjs_1t', lib: 'tfjs', threads: 1, url: 'worker_tfjs.js', type: 'classic' },
  { key: 'ort_1t', lib: 'ort', threads: 1, url: 'worker_ort.mjs', type: 'module' },
  { key: 'asyncnd_simd128_1t', lib: 'asyncnd', threads: 1, simd: 'simd128', url: 'worker_asyncnd.mjs', type: 'module' },
  { key: 'asyncnd_2t', lib: 'asyncnd', threads: 2, url: 'worker_asyncnd.mjs', type: 'module' },
  { key: 'tfjs_2t', lib: 'tfjs', threads: 2, url: 'worker_tfjs.js', type: 'classic' },
  { key: 'ort_2t', lib: 'ort', threads: 2, url: 'worker_ort.mjs', type: 'module' },
  { key: 'asyncnd_simd128_2t', lib: 'asyncnd', threads: 2, simd: 'simd128', url: 'worker_asyncnd.mjs', type: 'module' },
];

// A seeded generator (mulberry32): the same matrices in every run, uniform in [-1, 1).
function uniform(count, seed) {
  const out = new Float32Array(count);
  let s = seed >>> 0;
  for (let i = 0; i < count; ++i) {
    s = (s + 0x6D2B79F5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[i] = (((t ^ (t >>> 14)) >>> 0) / 4294967296) * 2 - 1;
  }
  return out;
}

// A Worker speaking protocol.js: call(cmd, args) resolves with its result or rejects with its error.
function start(cfg) {
  const w = new Worker(cfg.url, { type: cfg.type });
  const pending = new Map();
  let nextId = 1, fail = null;
  const ready = new Promise((resolve, reject) => pending.set(0, { resolve, reject }));
  w.onmessage = (e) => {
    const p = pending.get(e.data.id);
    pending.delete(e.data.id);
    if (e.data.error) p.reject(new Error(`${cfg.key}: ${e.data.error}`));
    else p.resolve(e.data.result);
  };
  w.onerror = (e) => {
    fail = new Error(`${cfg.key}: ${e.message || 'the Worker failed to start'}`);
    for (const p of pending.values()) p.reject(fail);
    pending.clear();
  };
  const call = (cmd, args = {}) => {
    if (fail) return Promise.reject(fail);
    const id = nextId++;
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      w.postMessage({ id, cmd, ...args });
    });
  };
  return { ready, call, terminate: () => w.terminate() };
}

const median = (xs) => { const s = [...xs].sort((x, y) => x - y); return s[s.length >> 1]; };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const out = { crossOriginIsolated: self.crossOriginIsolated, userAgent: navigator.userAgent,
              hardwareConcurrency: navigator.hardwareConcurrency, n: N, warmup: WARMUP, rounds: ROUNDS,
              reps: REPS, libs: {} };
const workers = [];
try {
  if (!self.crossOriginIsolated) throw new Error('the page is not cross-origin isolated (COOP/COEP headers missing)');
  const a = uniform(N * N, 1), b = uniform(N * N, 2);
  // Sampled entries of C, and their float64 reference and sum |a_ik b_kj| (the error's scale).
  const samples = Int32Array.from(uniform(N_SAMPLES, 3), (u) => Math.floor((u + 1) / 2 * N * N));
  const ref = Array.from(samples, (idx) => {
    const i = Math.floor(idx / N), j = idx % N;
    let s = 0, abs = 0;
    for (let k = 0; k < N; ++k) { const p = a[i * N + k] * b[k * N + j]; s += p; abs += Math.abs(p); }
    return { s, abs };
  });
  // Float32 sums of 1000 products err by about 1e-7 of sum |a_ik b_kj| per step at worst: a
  // wrong product (a transpose, a missed block) is off by about the entry itself.
  const check = (cfg, got) => {
    let worst = 0;
    got.forEach((c, k) => { worst = Math.max(worst, Math.abs(c - ref[k].s) / ref[k].abs); });
    if (!(worst <= 1e-4) || got.length !== N_SAMPLES) {
      throw new Error(`${cfg.key}: wrong product: sampled entries off by ${worst} of sum |a_ik b_kj|`);
    }
    return worst;
  };

  for (const cfg of configs) {
    const w = start(cfg);
    workers.push(w);
    await w.ready;
    const info = await w.call('init', { threads: cfg.threads, simd: cfg.simd, n: N, a, b });
    out.libs[cfg.key] = { lib: cfg.lib, threadsAsked: cfg.threads, info, ms: [], worstRelError: 0 };
    log(`${cfg.key}: loaded ${JSON.stringify(info)}`);
  }
  // Warm-up: V8 compiles each Worker's copy of a module on its own (Liftoff, then TurboFan once hot).
  for (let r = 0; r < WARMUP; ++r) {
    for (const [i, cfg] of configs.entries()) {
      const { samples: got } = await workers[i].call('gemm', { reps: 1, samples });
      check(cfg, got);
    }
  }
  log(`warm-up done (${WARMUP} products each); timing ${ROUNDS} rounds of ${REPS}`);
  for (let round = 0; round < ROUNDS; ++round) {
    for (let k = 0; k < configs.length; ++k) {
      const i = (k + 2 * round) % configs.length, cfg = configs[i], lib = out.libs[cfg.key];
      await sleep(PAUSE_MS);  // the previous Worker's threads stop spinning
      const { ms, samples: got, readMs } = await workers[i].call('gemm', { reps: REPS, samples });
      lib.worstRelError = Math.max(lib.worstRelError, check(cfg, got));
      lib.ms.push(...ms);
      if (readMs) (lib.readMs = lib.readMs || []).push(...readMs);
      log(`round ${round + 1} ${cfg.key}: median ${median(ms).toFixed(1)} ms`);
    }
  }
  for (const lib of Object.values(out.libs)) {
    lib.medianMs = median(lib.ms);
    lib.gflops = 2 * N * N * N / (lib.medianMs * 1e-3) * 1e-9;
  }
  await sleep(PAUSE_MS);
  out.e5 = await workers[configs.findIndex((c) => c.key === 'asyncnd_1t')].call('tiny');
  await sleep(PAUSE_MS);
  out.tfjsTiny = await workers[configs.findIndex((c) => c.key === 'tfjs_1t')].call('tiny');
} catch (e) {
  out.error = String((e && (e.stack || e.message)) || e);
}
workers.forEach((w) => w.terminate());
await fetch('/result', { method: 'POST', body: JSON.stringify(out) });
