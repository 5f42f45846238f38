// The JavaScript API end to end: every op's values against plain JavaScript loops, broadcasting,
// shapes, creation, random numbers, reductions, the blocking readers.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers');

const loading = h.setup();

test('the README example: z = x * y + 2', async () => {
  const nd = await loading;
  nd.tidy(() => {
    const x = nd.ones([1, 2]), y = nd.ones([1, 2]);
    const z = x.mul(y).add(2);
    assert.deepEqual(z.shape, [1, 2]);
    assert.deepEqual(z.toArray(), [[3, 3]]);
    assert.equal(z.toString(), '[[3, 3]] <NDArray 1x2 cpu(0)>');
  });
});

test('creation: zeros, ones, full, arange, fromArray', async () => {
  const nd = await loading;
  nd.tidy(() => {
    assert.deepEqual(Array.from(nd.zeros([2, 3]).dataSync()), [0, 0, 0, 0, 0, 0]);
    assert.deepEqual(nd.ones(3).toArray(), [1, 1, 1]);
    assert.deepEqual(nd.full([2, 2], 7.5).toArray(), [[7.5, 7.5], [7.5, 7.5]]);
    assert.deepEqual(nd.arange(5).toArray(), [0, 1, 2, 3, 4]);
    assert.deepEqual(nd.arange(1, 2, 0.25).toArray(), [1, 1.25, 1.5, 1.75]);
    assert.deepEqual(nd.fromArray([[1, 2, 3], [4, 5, 6]]).shape, [2, 3]);
    assert.deepEqual(nd.fromArray([[1, 2, 3], [4, 5, 6]]).toArray(), [[1, 2, 3], [4, 5, 6]]);
    assert.deepEqual(nd.fromArray(new Float32Array([1, 2, 3, 4]), [2, 2]).toArray(), [[1, 2], [3, 4]]);
    assert.deepEqual(nd.fromArray([1, 2, 3, 4, 5, 6], [3, 2]).toArray(), [[1, 2], [3, 4], [5, 6]]);
    assert.deepEqual(nd.fromArray([[1, 2], [3, 4]], [4]).toArray(), [1, 2, 3, 4]);
    assert.throws(() => nd.fromArray([[1, 2], [3]]), /fromArray: ragged nested array/);
    assert.equal(require('node:util').inspect(nd.ones([2, 3])), 'NDArray [2,3] cpu(0)');
    assert.equal(nd.full([], 4).item(), 4);
    assert.deepEqual(nd.full([], 4).shape, []);
    assert.equal(nd.zeros([0, 3]).size, 0);
  });
});

test('elementwise binary ops with broadcasting, against plain loops', async () => {
  const nd = await loading;
  const next = h.rng(h.testSeed('binary'));
  const pairs = [[[3, 4], [3, 4]], [[3, 4], [4]], [[3, 1], [1, 4]], [[2, 3, 4], [3, 1]], [[5], []],
                 [[1], [2, 2]], [[4, 1, 3], [1, 5, 1]]];
  const ops = {
    add: (a, b) => a + b, sub: (a, b) => a - b, mul: (a, b) => a * b, div: (a, b) => a / b,
    pow: (a, b) => Math.pow(a, b),
  };
  for (const [as, bs] of pairs) {
    // pow: positive bases keep the reference real.
    const av = h.randomValues(next, h.sizeOf(as), 0.5, 2), bv = h.randomValues(next, h.sizeOf(bs), 0.5, 2);
    nd.tidy(() => {
      const a = nd.fromArray(av, as), b = nd.fromArray(bv, bs);
      for (const [name, f] of Object.entries(ops)) {
        const ref = h.refBinary(av, as, bv, bs, f);
        const got = a[name](b);
        assert.deepEqual(got.shape, ref.shape, `${name} ${JSON.stringify(as)} ${JSON.stringify(bs)}`);
        h.assertClose(got.dataSync(), ref.values, 1e-5, 1e-6, `${name} ${JSON.stringify(as)}x${JSON.stringify(bs)}`);
        h.assertClose(nd[name](a, b).dataSync(), ref.values, 1e-5, 1e-6, `nd.${name}`);
      }
    });
  }
});

test('scalar forms on either side', async () => {
  const nd = await loading;
  nd.tidy(() => {
    const v = new Float32Array([0.5, 1, 2, 4]);
    const x = nd.fromArray(v, [2, 2]);
    const check = (arr, f, what) => h.assertClose(arr.dataSync(), Float32Array.from(v, f), 1e-6, 1e-6, what);
    check(x.add(3), (a) => a + 3, 'x+3');
    check(x.sub(3), (a) => a - 3, 'x-3');
    check(x.mul(3), (a) => a * 3, 'x*3');
    check(x.div(3), (a) => a / 3, 'x/3');
    check(x.pow(2), (a) => a * a, 'x**2');
    check(nd.add(3, x), (a) => 3 + a, '3+x');
    check(nd.sub(3, x), (a) => 3 - a, '3-x');
    check(nd.mul(3, x), (a) => 3 * a, '3*x');
    check(nd.div(3, x), (a) => 3 / a, '3/x');
    check(nd.pow(2, x), (a) => Math.pow(2, a), '2**x');
  });
});

test('unary ops against Math', async () => {
  const nd = await loading;
  const next = h.rng(h.testSeed('unary'));
  const v = h.randomValues(next, 257, -3, 3);
  const pos = Float32Array.from(v, (a) => Math.abs(a) + 0.1);
  nd.tidy(() => {
    const x = nd.fromArray(v, [257]), p = nd.fromArray(pos, [257]);
    const cases = [
      ['neg', x, v, (a) => -a], ['exp', x, v, Math.exp], ['log', p, pos, Math.log],
      ['sqrt', p, pos, Math.sqrt], ['relu', x, v, (a) => Math.max(a, 0)],
      ['sigmoid', x, v, (a) => 1 / (1 + Math.exp(-a))], ['tanh', x, v, Math.tanh],
    ];
    for (const [name, arr, vals, f] of cases) {
      h.assertClose(arr[name]().dataSync(), Float32Array.from(vals, f), 1e-5, 1e-6, name);
      h.assertClose(nd[name](arr).dataSync(), Float32Array.from(vals, f), 1e-5, 1e-6, `nd.${name}`);
    }
    // The same signs and tails as natively: relu(-0) is +0 (as Math.max(-0, 0)), and sigmoid's
    // negative tail keeps its subnormals (1 / (1 + e^100) is not 0).
    assert.ok(Object.is(nd.fromArray([-0, -0, -0, -0, -0]).relu().dataSync()[4], 0));
    const tail = nd.fromArray([-100, -103]).sigmoid().dataSync();
    assert.ok(tail[0] > 3.7e-44 && tail[0] < 3.9e-44 && tail[1] > 0, `sigmoid tail ${tail}`);
  });
});

// dataSync on work still queued: it touches its new array's pages before it waits (copyOut), so
// the copy must land whole, every page of it, and bad handles still fail as before.
test('dataSync straight after queued work returns every element of the finished result', async () => {
  const nd = await loading;
  const next = h.rng(h.testSeed('dataSync pending'));
  const [m, k, n] = [300, 200, 1030];  // C: 309 000 floats, about 302 pages of 4 KiB
  const av = h.randomValues(next, m * k), bv = h.randomValues(next, k * n);
  nd.tidy(() => {
    const a = nd.fromArray(av, [m, k]), b = nd.fromArray(bv, [k, n]);
    const want = nd.dot(a, b).add(1);
    want.waitToRead();
    const ref = want.dataSync();  // read when ready
    const got = nd.dot(a, b).add(1).dataSync();  // read while queued
    assert.equal(got.length, m * n);
    assert.deepEqual(Array.from(got), Array.from(ref));
  });
  const gone = nd.zeros([2048]);
  gone.delete();
  assert.throws(() => gone.dataSync(), /dataSync/);
});

test('dot against a triple loop, transpose, reshape', async () => {
  const nd = await loading;
  const next = h.rng(h.testSeed('dot'));
  for (const [m, k, n] of [[1, 1, 1], [3, 5, 7], [64, 33, 17], [130, 70, 90]]) {
    const av = h.randomValues(next, m * k), bv = h.randomValues(next, k * n);
    const ref = new Float32Array(m * n);
    for (let i = 0; i < m; ++i)
      for (let j = 0; j < n; ++j) {
        let s = 0;
        for (let p = 0; p < k; ++p) s += av[i * k + p] * bv[p * n + j];
        ref[i * n + j] = s;
      }
    nd.tidy(() => {
      const a = nd.fromArray(av, [m, k]), b = nd.fromArray(bv, [k, n]);
      const c = nd.dot(a, b);
      assert.deepEqual(c.shape, [m, n]);
      h.assertClose(c.dataSync(), ref, 1e-4, 1e-4, `dot ${m}x${k}x${n}`);
      h.assertClose(a.dot(b).dataSync(), ref, 1e-4, 1e-4, 'a.dot(b)');
      const t = a.transpose();
      assert.deepEqual(t.shape, [k, m]);
      const tv = t.dataSync();
      for (let i = 0; i < m; ++i) for (let p = 0; p < k; ++p) assert.equal(tv[p * m + i], av[i * k + p]);
      assert.deepEqual(a.T.shape, [k, m]);
    });
  }
  nd.tidy(() => {
    const x = nd.arange(12);
    assert.deepEqual(x.reshape([3, 4]).toArray(), [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]);
    assert.deepEqual(x.reshape(2, -1).shape, [2, 6]);
    assert.deepEqual(nd.reshape(x, [4, 3]).shape, [4, 3]);
  });
});

test('reductions: sum, mean, max over all or one axis, norm', async () => {
  const nd = await loading;
  const next = h.rng(h.testSeed('reduce'));
  const shape = [3, 4, 5], v = h.randomValues(next, 60);
  const st = h.stridesOf(shape);
  const refAxis = (axis, init, f, fin = (s) => s) => {
    const outShape = shape.filter((_, d) => d !== axis), out = [];
    const n = h.sizeOf(outShape);
    for (let o = 0; o < n; ++o) {
      // Decompose o over outShape, then walk the reduced axis.
      let rem = o, base = 0;
      const dims = shape.map((_, d) => d).filter((d) => d !== axis);
      for (let q = dims.length - 1; q >= 0; --q) {
        const d = dims[q], idx = rem % shape[d];
        rem = Math.floor(rem / shape[d]);
        base += idx * st[d];
      }
      let acc = init;
      for (let i = 0; i < shape[axis]; ++i) acc = f(acc, v[base + i * st[axis]]);
      out.push(fin(acc, shape[axis]));
    }
    return { shape: outShape, values: Float32Array.from(out) };
  };
  nd.tidy(() => {
    const x = nd.fromArray(v, shape);
    const total = v.reduce((a, b) => a + b, 0);
    h.assertClose([x.sum().item()], [total], 1e-5, 1e-5, 'sum');
    h.assertClose([x.mean().item()], [total / 60], 1e-5, 1e-6, 'mean');
    assert.equal(x.max().item(), Math.max(...v));
    h.assertClose([x.norm().item()], [Math.sqrt(v.reduce((a, b) => a + b * b, 0))], 1e-5, 1e-6, 'norm');
    for (let axis = 0; axis < 3; ++axis) {
      const s = refAxis(axis, 0, (a, b) => a + b);
      const got = x.sum(axis);
      assert.deepEqual(got.shape, s.shape);
      h.assertClose(got.dataSync(), s.values, 1e-5, 1e-5, `sum axis ${axis}`);
      const m = refAxis(axis, 0, (a, b) => a + b, (a, n) => a / n);
      h.assertClose(x.mean(axis).dataSync(), m.values, 1e-5, 1e-6, `mean axis ${axis}`);
      const mx = refAxis(axis, -Infinity, Math.max);
      h.assertClose(x.max(axis).dataSync(), mx.values, 0, 0, `max axis ${axis}`);
    }
    assert.deepEqual(x.sum(-1).shape, [3, 4]);
    assert.deepEqual(x.sum(1, true).shape, [3, 1, 5]);
    assert.deepEqual(nd.mean(x, 0).shape, [4, 5]);
    // keepdims without an axis keeps every axis, of length 1, as NumPy does (it gave []).
    assert.deepEqual(x.sum(undefined, true).shape, [1, 1, 1]);
    h.assertClose(x.sum(null, true).dataSync(), [total], 1e-5, 1e-5, 'sum keepdims');
    assert.deepEqual(nd.max(x, undefined, true).toArray(), [[[Math.max(...v)]]]);
    assert.deepEqual(nd.mean(nd.ones([]), undefined, true).shape, []);
  });
});

test('random numbers: seeded, reproducible, with the requested moments', async () => {
  const nd = await loading;
  nd.tidy(() => {
    nd.seed(42);
    const a = nd.random.normal([200, 100], 1, 2).dataSync();
    const u = nd.random.uniform([10000], -1, 3).dataSync();
    nd.seed(42);
    assert.deepEqual(nd.random.normal([200, 100], 1, 2).dataSync(), a);
    assert.deepEqual(nd.random.uniform([10000], -1, 3).dataSync(), u);
    const mean = a.reduce((s, x) => s + x, 0) / a.length;
    const sd = Math.sqrt(a.reduce((s, x) => s + (x - mean) ** 2, 0) / a.length);
    assert.ok(Math.abs(mean - 1) < 0.1, `normal mean ${mean}`);
    assert.ok(Math.abs(sd - 2) < 0.1, `normal std ${sd}`);
    assert.ok(u.every((x) => x >= -1 && x < 3), 'uniform range');
  });
});

// The same digests as the native test "random floats: the same seed gives the same bits on every
// CPU and in WebAssembly" (tests/test_ops_random.cpp): FNV-1a over the float32 bits.
test('random numbers: the same seed gives the same bits as natively (x86-64 and AArch64)', async () => {
  const nd = await loading;
  const fnv1a = (a) => {
    let d = 1469598103934665603n;
    for (const w of new Uint32Array(a.buffer, a.byteOffset, a.length)) {
      d = ((d ^ BigInt(w)) * 1099511628211n) & 0xffffffffffffffffn;
    }
    return d.toString(16).padStart(16, '0');
  };
  nd.tidy(() => {
    nd.seed(7);
    const g = nd.random.normal([100003], 0.5, 2).dataSync();
    const u = nd.random.uniform([100003], -1, 3).dataSync();
    assert.equal(fnv1a(g), '27ecb4249957aac0');
    assert.equal(fnv1a(u), '9d9d0ccbd5f9ac4d');
  });
});

test('item, toString, shape, size, ndim', async () => {
  const nd = await loading;
  nd.tidy(() => {
    const x = nd.arange(6).reshape([2, 3]);
    assert.equal(x.sum().item(), 15);
    assert.equal(x.size, 6);
    assert.equal(x.ndim, 2);
    assert.equal(x.toString(), '[[0, 1, 2],\n [3, 4, 5]] <NDArray 2x3 cpu(0)>');
    assert.match(String(nd.ones([2])), /^\[1, 1\] <NDArray 2 cpu\(0\)>$/);
  });
});
