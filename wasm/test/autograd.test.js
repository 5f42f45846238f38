// Autograd and nn from JavaScript: gradients against central finite differences, an MLP that
// learns a small synthetic regression, delete/tidy with parameters and gradients (no live array,
// no nn object, no byte left), and errors as JS Errors with the C++ message.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers');

const loading = h.setup();

// d sum(f(x)) / dx by central differences in float64 over the float32 forward pass.
async function finiteDiff(nd, f, values, shape, eps = 1e-2) {
  const out = new Float64Array(values.length);
  for (let i = 0; i < values.length; ++i) {
    const at = (d) => nd.tidy(() => {
      const v = Float32Array.from(values);
      v[i] += d;
      return f(nd.fromArray(v, shape)).sum().item();
    });
    out[i] = (at(eps) - at(-eps)) / (2 * eps);
  }
  return out;
}

const CASES = [
  { name: 'mul and add', shape: [3, 4], f: (nd, x) => x.mul(x).add(x.mul(3)) },
  { name: 'exp, tanh, sigmoid', shape: [2, 5], f: (nd, x) => x.exp().mul(0.1).add(x.tanh()).add(x.sigmoid()) },
  { name: 'relu and pow', shape: [6], f: (nd, x) => x.relu().pow(2) },
  { name: 'dot and transpose', shape: [3, 3], f: (nd, x) => nd.dot(x, x.T).mul(0.5) },
  { name: 'mean over an axis and broadcast div', shape: [4, 3], f: (nd, x) => x.div(x.mean(0).add(5)) },
  { name: 'norm', shape: [5], f: (nd, x) => x.norm() },
];

for (const c of CASES) {
  test(`gradient of ${c.name} matches finite differences`, async () => {
    const nd = await loading;
    const next = h.rng(h.testSeed(c.name));
    // Away from relu's kink so the difference quotient is the derivative.
    const values = h.randomValues(next, h.sizeOf(c.shape), -1.5, 1.5).map((v) => (Math.abs(v) < 0.1 ? v + 0.3 : v));
    const x = nd.fromArray(values, c.shape);
    x.attachGrad();
    // tidy deletes the intermediate handles: the recorded graph keeps what backward needs.
    const y = nd.tidy(() => nd.autograd.record(() => c.f(nd, x).sum()));
    assert.equal(nd.autograd.isRecording(), false);
    y.backward();  // one element: no head gradient needed
    const got = await x.grad.data();
    const want = await finiteDiff(nd, (z) => c.f(nd, z), values, c.shape);
    h.assertClose(got, want, 2e-2, 2e-3, `${c.name} gradient`);
    x.delete();  // also deletes x.grad's handle
    y.delete();
  });
}

test('backward with a head gradient, retainGraph, and grads written in place', async () => {
  const nd = await loading;
  const x = nd.fromArray([1, 2, 3]);
  x.attachGrad();
  const g = x.grad;  // the buffer: later backward calls write into it
  nd.tidy(() => {
    const y = nd.autograd.record(() => x.mul(x));          // [3], not a scalar
    y.backward(nd.fromArray([1, 10, 100]), { retainGraph: true });
    assert.deepEqual(Array.from(g.dataSync()), [2, 40, 600]);
    y.backward(nd.ones([3]));                              // the retained graph, once more
  });
  assert.deepEqual(Array.from(x.grad.dataSync()), [2, 4, 6]);  // overwritten (not accumulated)
  assert.equal(x.grad, g);
  x.delete();
  assert.ok(g.isDeleted);
});

test('an MLP learns a small synthetic regression (Dense, Sequential, L2Loss, SGD)', async () => {
  const nd = await loading;
  nd.seed(5);
  const next = h.rng(h.testSeed('mlp'));
  const n = 64, wTrue = [2, -3, 0.5];
  const xs = h.randomValues(next, n * 3, -1, 1);
  const ys = new Float32Array(n);
  for (let i = 0; i < n; ++i) ys[i] = wTrue[0] * xs[3 * i] + wTrue[1] * xs[3 * i + 1] + wTrue[2] * xs[3 * i + 2] + 1;
  const X = nd.fromArray(xs, [n, 3]), y = nd.fromArray(ys, [n]);
  const net = nd.nn.Sequential().add(nd.nn.Dense(16, 'relu'), new nd.nn.Dense(1));
  assert.ok(net instanceof nd.nn.Sequential && net instanceof nd.nn.Block);
  assert.equal(net.size, 2);
  const loss = nd.nn.L2Loss();
  const lossAt = () => nd.tidy(() => loss.forward(net.forward(X), y).mean().item());
  const first = lossAt();  // also creates the deferred parameters
  const params = net.parameters();
  assert.deepEqual(params.map((p) => p.shape), [[16, 3], [16], [1, 16], [1]]);
  assert.ok(params.every((p) => p.initialized));
  const trainer = nd.nn.SGD(params, 0.1);
  params.forEach((p) => p.delete());  // the trainer and the network keep their own handles
  for (let epoch = 0; epoch < 300; ++epoch) {
    nd.tidy(() => {
      const l = nd.autograd.record(() => loss.call(net.call(X), y));
      l.backward(nd.ones(l.shape));
      trainer.step(n);
    });
  }
  const last = lossAt();
  assert.ok(last < first / 20, `loss fell from ${first} to ${last} only`);
  net.delete();
  trainer.delete();
  X.delete();
  y.delete();
});

// Autograd keeps the arrays a gradient reads, not copies: a trainer's step between the recording
// and backward changed the second layer's weight under its graph, and the first layer's gradient
// came out of the new weight. Backward refuses, and queues nothing.
test('backward refuses weights that a trainer changed after they were recorded', async () => {
  const nd = await loading;
  const net = nd.nn.Sequential().add(nd.nn.Dense(4, 'relu', { inUnits: 3 }),
                                     nd.nn.Dense(1, '', { inUnits: 4 }));
  const loss = nd.nn.L2Loss();
  const trainer = nd.nn.SGD(net, 0.1);
  nd.tidy(() => {
    const x = nd.ones([2, 3]), label = nd.ones([2, 1]);
    nd.autograd.record(() => loss.forward(net.forward(x), label).sum()).backward();
    const l = nd.autograd.record(() => loss.forward(net.forward(x), label).sum());
    trainer.step(2);  // the first recording's gradients: changes the weights l's graph read
    assert.throws(() => l.backward(),
      /backward: the gradient of dot reads its input 2 \[1,4\], which was changed in place after it was recorded/);
    const again = nd.autograd.record(() => loss.forward(net.forward(x), label).sum());
    again.backward();  // the order a training loop uses: record, backward, step
    trainer.step(2);
  });
  trainer.delete();
  net.delete();
});

// Gluon's rule: a gradient that no backward wrote since the last step is not applied again (a
// layer left out of a step's graph was stepped with its old gradient every time).
test('SGD.step refuses a stale gradient, or skips it with ignoreStaleGrad', async () => {
  const nd = await loading;
  const a = nd.nn.Dense(1, '', { inUnits: 2 }), b = nd.nn.Dense(1, '', { inUnits: 2 });
  const listed = [...a.parameters(), ...b.parameters()];
  const trainer = nd.nn.SGD(listed, 0.5);
  listed.forEach((p) => p.delete());  // the trainer keeps its own handles
  nd.tidy(() => {
    const x = nd.ones([1, 2]);
    assert.throws(() => trainer.step(1), /^Error: SGD::step: the gradient of 'dense\d+_weight' \[1,2\] \(and of 3 more\) was not written since this trainer was made or last stepped.*ignoreStaleGrad: true/);
    nd.autograd.record(() => a.forward(x).add(b.forward(x)).sum()).backward();
    trainer.step(1);
    const before = b.parameters().map((p) => { const v = p.data().dataSync(); p.delete(); return v; });
    nd.autograd.record(() => a.forward(x).sum()).backward();  // b left out
    assert.throws(() => trainer.step(1), /not written since this trainer was made or last stepped/);
    trainer.step(1, { ignoreStaleGrad: true });
    const after = b.parameters().map((p) => { const v = p.data().dataSync(); p.delete(); return v; });
    assert.deepEqual(after, before, 'b skipped, not stepped again');
    assert.throws(() => trainer.step(1, { ignoreStale: true }), /^Error: SGD\.step: unknown option 'ignoreStale'/);
    assert.throws(() => trainer.step(1, { ignoreStaleGrad: 1 }), /^TypeError: SGD\.step: ignoreStaleGrad must be a boolean, got 1/);
  });
  trainer.delete();
  a.delete();
  b.delete();
});

// forward, parameters and the destructor recursed once per level: V8's stack overflowed inside
// the module at about 2 000 levels (a RangeError that left a push half done).
test('networks nested 20 000 deep run, list their parameters, and are freed', async () => {
  const nd = await loading;
  const top = nd.nn.Sequential();
  let s = top;
  for (let i = 0; i < 20000; ++i) {
    const inner = nd.nn.Sequential();
    s.add(inner);  // top's delete() deletes the handles it was given, down the chain
    s = inner;
  }
  const d = nd.nn.Dense(1, '', { inUnits: 2, useBias: false });
  nd.tidy(() => d.weight.setData(nd.fromArray([1, 2], [1, 2])));
  s.add(d);
  nd.tidy(() => assert.deepEqual(top.forward(nd.ones([1, 2])).toArray(), [[3]]));
  const params = top.parameters();
  assert.deepEqual(params.map((p) => p.shape), [[1, 2]]);
  params.forEach((p) => p.delete());
  top.delete();
  assert.ok(s.isDeleted && d.isDeleted);
  await nd.waitAll();
});

test('Dense layers: explicit sizes, weight and bias parameters, data and setData', async () => {
  const nd = await loading;
  const d = nd.nn.Dense(2, '', { inUnits: 3, init: 'normal', scale: 0.5 });
  assert.deepEqual(d.weight.shape, [2, 3]);
  assert.equal(d.weight, d.weight);  // one handle per layer
  nd.tidy(() => {
    d.weight.setData(nd.fromArray([1, 0, 0, 0, 1, 0], [2, 3]));
    const out = d.forward(nd.fromArray([[1, 2, 3]]));
    assert.deepEqual(out.toArray(), [[1, 2]]);            // bias starts at zero
    assert.deepEqual(Array.from(d.bias.data().dataSync()), [0, 0]);
    assert.deepEqual(Array.from(nd.nn.relu(nd.fromArray([-1, 2])).dataSync()), [0, 2]);
  });
  const nb = nd.nn.Dense(4, 'tanh', { useBias: false });
  assert.equal(nb.bias, null);
  nb.delete();
  d.delete();
});

test('delete and tidy: parameters, gradients and trainers leave no array, object or byte', async () => {
  const nd = await loading;
  nd.waitAll();
  const base = nd.engine.stats();
  const net = nd.nn.Sequential().add(nd.nn.Dense(8, 'relu'), nd.nn.Dense(1));
  const trainer = nd.nn.SGD(net, 0.01);
  const it = nd.nn.DataIter(3, 4, 5);
  let batches = 0;
  for (const { X, y } of it) {
    nd.tidy(() => {
      const l = nd.autograd.record(() => nd.nn.L2Loss().forward(net.forward(X), y));
      l.backward(nd.ones(l.shape));
      trainer.step(4);
      const ps = net.parameters();  // handles made inside tidy: tidy leaves nn objects alone
      const wg = ps[0].grad();       // an array handle: tidy deletes it, not the gradient
      assert.deepEqual(wg.shape, [8, 5]);
      ps.forEach((p) => p.delete());  // a Parameter handle keeps its values alive: delete it
    });
    X.delete();
    y.delete();
    ++batches;
  }
  assert.equal(batches, 3);
  assert.equal(it.handoutS.length, 3);
  assert.equal(it.next(), null);
  nd.waitAll();
  const during = nd.engine.stats();
  assert.ok(during.bytesInUse > base.bytesInUse, 'parameters and gradients hold memory');
  assert.equal(during.liveArrays, base.liveArrays);
  // The network's values outlive every handle but the network's and the trainer's.
  net.delete();
  nd.waitAll();
  assert.ok(nd.engine.stats().bytesInUse > base.bytesInUse, 'the trainer still holds the parameters');
  trainer.delete();
  nd.waitAll();
  assert.equal(nd.engine.stats().bytesInUse, base.bytesInUse);
  assert.equal(nd.engine.stats().liveNnObjects, 0);
});

test('a leaf made inside tidy takes its gradient with it', async () => {
  const nd = await loading;
  nd.waitAll();
  const base = nd.engine.stats().bytesInUse;
  let x;
  const g = nd.tidy(() => {
    x = nd.ones([10]);
    x.attachGrad();
    nd.autograd.record(() => x.mul(2).sum()).backward();
    return x.grad.sum();  // a result: kept
  });
  assert.ok(x.isDeleted);
  assert.equal(g.item(), 20);
  g.delete();
  nd.waitAll();
  assert.equal(nd.engine.stats().bytesInUse, base);
});

test('errors from autograd and nn are JS Errors with the message from C++', async () => {
  const nd = await loading;
  nd.tidy(() => {
    const x = nd.ones([2, 3]);
    x.attachGrad();
    const y = nd.autograd.record(() => x.mul(2));
    assert.throws(() => y.backward(), (e) => e instanceof Error && /backward/.test(e.message) && /\[2,3\]|2x3|6 elements|one element/.test(e.message));
    assert.throws(() => y.backward(nd.ones([3])), /backward/);
    assert.throws(() => nd.ones([2]).grad, /attach_grad|grad/);
    const z = nd.ones([1]);
    assert.throws(() => z.backward(), /backward/);  // never recorded
    assert.throws(() => nd.autograd.record(() => x.mul(2)).attachGrad(), /attach/);
    y.backward(nd.ones([2, 3]));  // still usable after the failed calls
    assert.deepEqual(Array.from(x.grad.dataSync()), [2, 2, 2, 2, 2, 2]);
    assert.throws(() => y.backward(nd.ones([2, 3])), /backward/);  // graph freed by the first
  });
  assert.throws(() => nd.autograd.record(() => { throw new Error('inside'); }), /inside/);
  assert.equal(nd.autograd.isRecording(), false);  // restored after the throw
  assert.throws(() => nd.autograd.record(async () => 1), /Promise/);
  const d = nd.nn.Dense(3);
  assert.throws(() => d.weight.data(), /not initialised/);
  assert.throws(() => nd.nn.Dense(0), /units/);
  assert.throws(() => nd.nn.Dense(2, 'softmax'), /softmax/);
  assert.throws(() => nd.nn.Dense(2, '', { init: 'zeros' }), /init/);
  nd.tidy(() => {
    d.forward(nd.ones([2, 4]));
    assert.throws(() => d.forward(nd.ones([2, 5])), /Dense|4|5/);
  });
  const t = nd.nn.SGD(d, 0.1);
  assert.throws(() => t.step(0), /batch/);
  assert.throws(() => nd.nn.SGD([1], 0.1), TypeError);
  const s = nd.nn.Sequential();
  assert.throws(() => s.add(s), /itself/);
  assert.throws(() => s.add({}), TypeError);
  // A cycle through another network: forward recursed until V8's stack overflowed, leaving a push
  // half done, and the next waitAll hung.
  const inner = nd.nn.Sequential();
  s.add(inner);
  assert.throws(() => inner.add(s), /Sequential::add: the block is this network or contains it/);
  assert.equal(inner.size, 0);
  inner.delete();
  // init looked up with `in`, which walks the prototype chain ('toString' was taken as uniform).
  assert.throws(() => nd.nn.Dense(2, '', { init: 'toString' }), /nn.Dense: init must be/);
  const loss = nd.nn.L2Loss();
  loss.weight = 'x';  // a plain property: checked at forward (it gave NaN losses)
  nd.tidy(() => assert.throws(() => loss.forward(nd.ones([2, 1]), nd.ones([2, 1])),
                              /nn.L2Loss: weight must be a number, got 'x'/));
  d.delete();
  nd.tidy(() => assert.throws(() => d.forward(nd.ones([1])), /deleted/));
  assert.throws(() => nd.tidy(() => nd.nn.L2Loss().forward(nd.ones([2, 3]), nd.ones([4]))), /L2Loss|broadcast/);
  t.delete();
  s.delete();
});

test('running out of WebAssembly memory is an Error at the call; training goes on', async () => {
  const nd = await loading;
  // The largest array a wasm32 target allows (2^31 - 1 bytes, rounded down to whole floats): more
  // than the module's 2 GiB memory has free. The error names the op, then the allocator.
  assert.throws(() => nd.zeros([536870911]), /^Error: zeros: alloc: out of WebAssembly memory for 2147483644 bytes/);
  const d = nd.nn.Dense(1, '', { inUnits: 2 });
  nd.tidy(() => {
    const X = nd.ones([4, 2]);
    const l = nd.autograd.record(() => nd.nn.L2Loss().forward(d.forward(X), nd.zeros([4])));
    l.backward(nd.ones([4]));
    assert.deepEqual(d.weight.grad().shape, [1, 2]);
  });
  d.delete();
});

// Found by an audit: options and floats checked as given; a refused async fn's own rejection
// does not end the process; objects that are not layers take no layer number.
test('autograd and nn arguments are checked as given, and layer numbers go to layers only', async () => {
  const nd = await loading;
  nd.tidy(() => {
    const x = nd.ones([2]);
    x.attachGrad();
    const y = nd.autograd.record(() => x.mul(2).sum());
    assert.throws(() => y.backward(null, { retainGraph: 'false' }),
                  { name: 'TypeError', message: "backward: retainGraph must be a boolean, got 'false'" });
    y.backward();
  });
  const d = nd.nn.Dense(1, '', { inUnits: 1 });
  assert.throws(() => nd.nn.SGD(d, 1e-50), /^Error: nn\.SGD: learningRate 1e-50 is 0 in float32: nothing would train$/);
  assert.throws(() => nd.nn.SGD(d, 1e39), /^Error: nn\.SGD: learningRate must be within float32's range, got 1e\+39$/);
  const sgd = nd.nn.SGD(d, 0.1);
  assert.throws(() => { sgd.learningRate = 1e-50; }, /^Error: SGD\.learningRate: value 1e-50 is 0 in float32/);
  assert.equal(sgd.learningRate, 0.1);
  assert.throws(() => nd.nn.L2Loss(NaN), /^Error: nn\.L2Loss: weight must be finite, got NaN$/);
  assert.throws(() => nd.nn.L2Loss(1e39), /^Error: nn\.L2Loss: weight must be within float32's range/);
  // An async fn is refused; its later rejection is handled here, not left to end the process.
  assert.throws(() => nd.autograd.record(async () => { throw new Error('inside async fn'); }),
                /fn returned a Promise/);
  assert.throws(() => nd.tidy(async () => { throw new Error('inside async fn'); }), /fn returned a Promise/);
  await new Promise((resolve) => setTimeout(resolve, 10));
  // Two layers made around a Sequential and a trainer get consecutive numbers.
  const a = nd.nn.Dense(1, '', { inUnits: 1 });
  const s = nd.nn.Sequential();
  const t = nd.nn.SGD(a, 0.1);
  const b = nd.nn.Dense(1, '', { inUnits: 1 });
  const num = (layer) => Number(/^dense(\d+)_weight$/.exec(layer.weight.name)[1]);
  assert.equal(num(b), num(a) + 1);
  for (const o of [d, sgd, a, s, t, b]) o.delete();
});
