// Asynchrony seen from JavaScript: ops queue and return, results follow push order under
// concurrency, barriers, and `await data()` that never blocks the JavaScript thread.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers');

const loading = h.setup({ hooks: true });  // nd._testing
const tick = () => new Promise((r) => setImmediate(r));

test('await data() returns at once and settles only when the op finishes', async () => {
  const nd = await loading;
  const gate = nd._testing.gate([2, 3]);  // its op stays pending until gate.open()
  const y = nd.tidy(() => gate.array.mul(2).add(1));
  const p = y.data();
  assert.ok(p instanceof Promise);
  let settled = false;
  p.then(() => { settled = true; }, () => { settled = true; });
  for (let i = 0; i < 20; ++i) await tick();  // the event loop keeps turning meanwhile
  assert.equal(settled, false, 'data() settled before its input was computed');
  assert.ok(nd.engine.stats().pending >= 3, 'gate, mul, add and the read are queued');
  gate.open(5);
  assert.deepEqual(Array.from(await p), [11, 11, 11, 11, 11, 11]);
  gate.array.delete();
  y.delete();
});

test('many concurrent data() reads each get their own values', async () => {
  const nd = await loading;
  const xs = [];
  for (let i = 0; i < 200; ++i) xs.push(nd.tidy(() => nd.full([3], i).mul(2)));
  const got = await Promise.all(xs.map((x) => x.data()));
  got.forEach((v, i) => assert.deepEqual(Array.from(v), [2 * i, 2 * i, 2 * i]));
  xs.forEach((x) => x.delete());
});

test('data() keeps its array alive even if it is deleted before the read settles', async () => {
  const nd = await loading;
  const gate = nd._testing.gate([4]);
  const y = gate.array.add(1);
  const p = y.data();
  y.delete();
  gate.array.delete();
  gate.open(1);
  assert.deepEqual(Array.from(await p), [2, 2, 2, 2]);
});

test('ordering: random dependent chains on several arrays, interleaved, match a serial run', async () => {
  const nd = await loading;
  const next = h.rng(h.testSeed('ordering'));
  const nArrays = 8, steps = 3000, n = 64;
  const ref = Array.from({ length: nArrays }, (_, i) => new Float64Array(n).fill(i));
  let arrs = ref.map((_, i) => nd.full([n], i));
  for (let s = 0; s < steps; ++s) {
    // Each step rewrites one array from one or two others (read-after-write, write-after-read).
    const i = Math.floor(next() * nArrays), j = Math.floor(next() * nArrays);
    const op = Math.floor(next() * 3), c = Math.floor(next() * 5) - 2;
    let out;
    const r = new Float64Array(n);
    if (op === 0) { out = arrs[j].add(c); for (let k = 0; k < n; ++k) r[k] = ref[j][k] + c; }
    else if (op === 1) { out = arrs[i].sub(arrs[j]); for (let k = 0; k < n; ++k) r[k] = ref[i][k] - ref[j][k]; }
    else { out = nd.tidy(() => arrs[j].mul(-1).add(arrs[i])); for (let k = 0; k < n; ++k) r[k] = ref[i][k] - ref[j][k]; }
    arrs[i].delete();
    arrs[i] = out;
    ref[i] = r;
  }
  const got = await Promise.all(arrs.map((a) => a.data()));
  got.forEach((v, i) => h.assertClose(v, Float32Array.from(ref[i]), 0, 0, `array ${i}`));
  arrs.forEach((a) => a.delete());
});

// In wasm, workers fresh from a parallel op (a GEMM split across them) spin a while before they
// park (kAfterJobSpin in core/src/engine/worker_pool.cpp), beside the usual single idle spinner.
// The pool counts its spinners to decide whether a push must wake a parked worker: if that count
// went wrong, a push would find nobody awake and wake nobody, and a read would never settle. Reads
// here are awaited (data()) against a clock: a stalled engine cannot be waited for (the check after
// each test would block in waitAll), so a stall ends this file's process with a failure.
test('after parallel ops, tiny ops and idle gaps of every length, every push still runs', async () => {
  const nd = await loading;
  const settled = async (p, what) => {
    const t = setTimeout(() => {
      console.error(`engine stalled: ${what} did not settle within 20 s (a push woke no worker)`);
      process.exit(1);
    }, 20000);
    try {
      return await p;
    } finally {
      clearTimeout(t);
    }
  };
  const n = 192;  // 2 n^3 = 14 MFLOP: the GEMM splits into tasks for every worker
  const a = nd.full([n, n], 0.5), b = nd.full([n, n], 2);
  let seed = 7;
  const rand = () => { seed = (seed * 1103515245 + 12345) >>> 0; return seed / 4294967296; };
  for (let i = 0; i < 150; ++i) {
    const c = nd.dot(a, b);  // every entry n
    const t = nd.tidy(() => nd.full([2], i).add(1));  // tiny ops: no parallel_for
    const [cv, tv] = await settled(Promise.all([c.data(), t.data()]), `round ${i}'s reads`);
    assert.equal(cv[i % cv.length], n, `product ${i}`);
    assert.deepEqual(Array.from(tv), [i + 1, i + 1], `tiny op ${i}`);
    c.delete();
    t.delete();
    // Gaps from none to past both spins (0.1 and 2 ms), so workers are caught spinning after the
    // product, spinning idle, and parked.
    const gap = rand() * 4;
    if (gap > 0.5) await new Promise((r) => setTimeout(r, gap));
    if (rand() < 0.5) {
      const u = nd.tidy(() => nd.full([2], 1).add(1));
      await settled(u.data(), `round ${i}'s extra read`);
      u.delete();
    }
  }
  a.delete();
  b.delete();
});

test('waitAll waits for everything queued; waitToRead for one array', async () => {
  const nd = await loading;
  nd.tidy(() => {
    const a = nd.random.normal([300, 300]);
    const outs = [];
    for (let i = 0; i < 4; ++i) outs.push(nd.dot(a, a).sum());
    outs[0].waitToRead();
    nd.waitAll();
    assert.equal(nd.engine.stats().pending, 0);
    const v = outs.map((o) => o.item());
    v.forEach((x) => assert.equal(x, v[0]));  // same inputs, same kernel: the same bits
  });
});

test('profiler: records ops with workers and times, exports Chrome trace JSON', async () => {
  const nd = await loading;
  nd.profiler.start();
  nd.tidy(() => {
    const x = nd.ones([64, 64]);
    nd.dot(x, x).add(1).waitToRead();
  });
  nd.waitAll();
  const json = nd.profiler.stop();
  const trace = JSON.parse(json);
  assert.ok(Array.isArray(trace.traceEvents));
  const names = nd.profiler.events().map((e) => e.name);
  for (const n of ['ones', 'dot', 'add']) assert.ok(names.includes(n), `${n} in ${names}`);
  const dot = nd.profiler.events().find((e) => e.name === 'dot');
  assert.ok(dot.worker >= 0 && dot.endUs >= dot.startUs && dot.startUs >= dot.pushUs);
  assert.ok(trace.traceEvents.some((e) => e.name === 'dot'));
});

test('setMaxInflight bounds the queue and the results stay right', async () => {
  const nd = await loading;
  nd.engine.setMaxInflight({ ops: 4, bytes: 0 });
  try {
    let y = nd.zeros([1000]);
    for (let i = 0; i < 500; ++i) {
      const next = y.add(1);
      y.delete();
      y = next;
      assert.ok(nd.engine.stats().pending <= 5, 'pending within the bound (+ the op being pushed)');
    }
    assert.equal(nd.tidy(() => y.max().item()), 500);
    nd.waitAll();
    y.delete();
  } finally {
    nd.engine.setMaxInflight({ ops: 0, bytes: 0 });
  }
});
