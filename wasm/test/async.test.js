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
