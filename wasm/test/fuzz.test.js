// Seeded fuzz of the JavaScript API: random sequences of documented calls, good and bad. Every
// value read is checked against a reference computed here in double precision that carries a
// sound bound on each element's float32 error; every bad call must throw an Error naming the op
// and queue nothing; at the end (helpers' afterEach) no array, variable or byte is left.
//   ASYNCND_FUZZ_SEED=N   reproduce a run (the seed is printed)
//   ASYNCND_FUZZ_STEPS=N  number of steps (default 3000)
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers');

const loading = h.setup({ hooks: true });  // nd._testing

const SEED = Number(process.env.ASYNCND_FUZZ_SEED || 20261124);
const STEPS = Number(process.env.ASYNCND_FUZZ_STEPS || 3000);
// Float32's unit roundoff, doubled (FMA contraction and reassociation in SIMD kernels).
const U = 2 ** -23;
// exp, tanh, sigmoid: the kernels' accuracy (the conformance table's tolerances, doubled).
const TREL = 4e-6, TABS = 2e-7;
const MAX_MAG = 1e4;

// Mulberry32: small, seedable, and the same on every engine.
function makeRng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, pick: (n) => Math.floor(next() * n), uniform: (lo, hi) => lo + (hi - lo) * next() };
}

const sizeOf = (s) => s.reduce((a, b) => a * b, 1);
function broadcast(a, b) {
  const n = Math.max(a.length, b.length), out = [];
  for (let i = 0; i < n; ++i) {
    const x = a[a.length - n + i] ?? 1, y = b[b.length - n + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1) return null;
    out.push(x === 1 ? y : x);
  }
  return out;
}
// Position in `inn` (broadcast to `out`) of output element i.
function at(i, out, inn) {
  let flat = 0, stride = 1;
  const off = out.length - inn.length;
  for (let d = out.length - 1; d >= 0; --d) {
    const idx = i % out[d];
    i = Math.floor(i / out[d]);
    if (d >= off) {
      const dim = inn[d - off];
      if (dim !== 1) flat += idx * stride;
      stride *= dim;
    }
  }
  return flat;
}
// A reference: shape, values v, error bounds e (both plain arrays of doubles).
function refBinary(a, b, f) {
  const shape = broadcast(a.shape, b.shape), n = sizeOf(shape), v = new Array(n), e = new Array(n);
  for (let i = 0; i < n; ++i) {
    const ia = at(i, shape, a.shape), ib = at(i, shape, b.shape);
    [v[i], e[i]] = f(a.v[ia], a.e[ia], b.v[ib], b.e[ib]);
  }
  return { shape, v, e };
}
const addB = (a, ea, b, eb) => { const v = a + b; return [v, (ea + eb) * (1 + U) + U * Math.abs(v)]; };
const subB = (a, ea, b, eb) => addB(a, ea, -b, eb);
const mulB = (a, ea, b, eb) => {
  const v = a * b, p = Math.abs(a) * eb + Math.abs(b) * ea + ea * eb;
  return [v, p * (1 + U) + U * Math.abs(v)];
};
function refUnary(a, f) {
  const v = new Array(a.v.length), e = new Array(a.v.length);
  for (let i = 0; i < v.length; ++i) [v[i], e[i]] = f(a.v[i], a.e[i]);
  return { shape: a.shape.slice(), v, e };
}
function refReduce(a, axis, keepdims, kind) {  // axis -1: all; kind 0 sum, 1 mean, 2 max
  let outer = 1, len = 1, inner = 1;
  const shape = [];
  if (axis < 0) {
    len = sizeOf(a.shape);
    if (keepdims) a.shape.forEach(() => shape.push(1));
  } else {
    a.shape.forEach((d, i) => {
      if (i < axis) outer *= d;
      if (i > axis) inner *= d;
      if (i === axis) { len = d; if (keepdims) shape.push(1); } else shape.push(d);
    });
  }
  const n = outer * inner, v = new Array(n), e = new Array(n), g = (len + 2) * U;
  for (let o = 0; o < outer; ++o) {
    for (let k2 = 0; k2 < inner; ++k2) {
      let s = 0, sabs = 0, err = 0, mx = -Infinity, emx = 0;
      for (let k = 0; k < len; ++k) {
        const i = (o * len + k) * inner + k2;
        s += a.v[i]; sabs += Math.abs(a.v[i]); err += a.e[i];
        mx = Math.max(mx, a.v[i]); emx = Math.max(emx, a.e[i]);
      }
      let val, bound;
      if (kind === 2) { val = mx; bound = emx; } else {
        val = s; bound = err * (1 + g) + g * (sabs + err);
        if (kind === 1) { val /= len; bound = bound / len + U * Math.abs(val); }
      }
      v[o * inner + k2] = val; e[o * inner + k2] = bound;
    }
  }
  return { shape, v, e };
}
function refDot(a, b) {
  const [m, k] = a.shape, n = b.shape[1], v = new Array(m * n), e = new Array(m * n), g = (k + 2) * U;
  for (let i = 0; i < m; ++i) {
    for (let j = 0; j < n; ++j) {
      let s = 0, sabs = 0, p = 0;
      for (let q = 0; q < k; ++q) {
        const x = a.v[i * k + q], y = b.v[q * n + j], ex = a.e[i * k + q], ey = b.e[q * n + j];
        s += x * y; sabs += Math.abs(x * y); p += Math.abs(x) * ey + Math.abs(y) * ex + ex * ey;
      }
      v[i * n + j] = s; e[i * n + j] = p * (1 + g) + g * (sabs + p);
    }
  }
  return { shape: [m, n], v, e };
}
function refTranspose(a) {
  const shape = a.shape.slice().reverse(), n = sizeOf(a.shape), v = new Array(n), e = new Array(n);
  const nd = a.shape.length;
  for (let i = 0; i < n; ++i) {
    let rem = i;
    const idx = new Array(nd);
    for (let d = nd - 1; d >= 0; --d) { idx[d] = rem % a.shape[d]; rem = Math.floor(rem / a.shape[d]); }
    let flat = 0;
    for (let d = 0; d < nd; ++d) flat = flat * shape[d] + idx[nd - 1 - d];
    v[flat] = a.v[i]; e[flat] = a.e[i];
  }
  return { shape, v, e };
}
const exact = (vals, shape) => ({ shape, v: Array.from(vals), e: new Array(vals.length).fill(0) });

test(`fuzz: ${STEPS} random API steps (ASYNCND_FUZZ_SEED=${SEED})`, async () => {
  const nd = await loading;
  console.log(`[seed] fuzz.test.js: ASYNCND_FUZZ_SEED=${SEED} ASYNCND_FUZZ_STEPS=${STEPS}`);
  const rng = makeRng(SEED);
  const { pick, uniform } = rng;
  let step = 0;
  const where = () => `step ${step} (ASYNCND_FUZZ_SEED=${SEED})`;
  const pool = [];          // { a: NDArray, r: reference, poisoned: message or '' }
  let unreported = [];      // failures no wait has reported yet

  // Now and then an array large enough that the kernels split it across the workers.
  const randomShape = () => pick(40) === 0 ? [150 + pick(100), 150 + pick(100)] : Array.from({ length: pick(4) }, () => (pick(9) === 0 ? (pick(4) === 0 ? 0 : 1) : 1 + pick(5)));
  const partner = (s) => {
    const t = s.slice(pick(s.length + 1)).map((d) => (pick(3) === 0 ? 1 : d));
    if (pick(4) === 0 && t.length === s.length && t.length < 4) t.unshift(1 + pick(3));
    return t;
  };
  const randomValues = (n) => Float32Array.from({ length: n }, () => uniform(-2, 2));
  const any = () => pool[pick(pool.length)];
  const healthy = () => {
    for (let i = 0; i < 8; ++i) { const e = any(); if (!e.poisoned) return e; }
    return null;
  };
  const remove = (entry) => { pool.splice(pool.indexOf(entry), 1); entry.a.delete(); };
  const keepOrDrop = (a, r) => {
    if (r.v.some((x, i) => !(Math.abs(x) <= MAX_MAG) || !(r.e[i] <= 1e-2))) { a.delete(); return; }
    pool.push({ a, r, poisoned: '' });
  };
  const compare = (got, r, how) => {
    assert.equal(got.length, r.v.length, `${where()}: ${how} length`);
    for (let i = 0; i < got.length; ++i) {
      if (!(Math.abs(got[i] - r.v[i]) <= r.e[i] + 1e-30)) {
        assert.fail(`${where()}: ${how} element ${i} of [${r.shape}] is ${got[i]}, reference ${r.v[i]} +- ${r.e[i]}`);
      }
    }
  };
  const namesUnreported = (msg) => unreported.some((m) => msg.includes(m) && msg.includes('failing_op'));

  // Every kind of read: each one waits.
  async function check(entry) {
    const { a, r } = entry;
    assert.deepEqual(a.shape, r.shape, `${where()}: shape`);
    switch (pick(unreported.length ? 4 : 5)) {
      case 0: compare(a.dataSync(), r, 'dataSync'); break;
      case 1: compare(await a.data(), r, 'data()'); break;
      case 2: a.waitToRead(); compare(a.dataSync(), r, 'waitToRead'); break;
      case 3: {
        const t = a.toArray();
        compare(r.shape.length === 0 ? [t] : t.flat(Infinity), r, 'toArray');
        break;
      }
      default: nd.waitAll(); compare(a.dataSync(), r, 'waitAll'); break;
    }
  }

  // fn must throw an Error naming op, and queue nothing.
  function bad(fn, op) {
    const before = nd.engine.stats();
    let err = null;
    try { fn(); } catch (e) { err = e; }
    assert.ok(err instanceof Error, `${where()}: bad call to ${op} did not throw an Error (${err})`);
    assert.ok(err.message.startsWith(op) || err.message.includes(`${op}:`), `${where()}: '${err.message}' does not name ${op}`);
    assert.equal(nd.engine.stats().pushed, before.pushed, `${where()}: bad call to ${op} queued something`);
  }

  const steps = {
    create() {
      const s = randomShape(), n = sizeOf(s);
      switch (pick(6)) {
        case 0: pool.push({ a: nd.zeros(s), r: exact(new Array(n).fill(0), s), poisoned: '' }); break;
        case 1: pool.push({ a: nd.ones(s), r: exact(new Array(n).fill(1), s), poisoned: '' }); break;
        case 2: {
          const v = Math.fround(uniform(-3, 3));
          pool.push({ a: nd.full(s, v), r: exact(new Array(n).fill(v), s), poisoned: '' });
          break;
        }
        case 3: {
          const len = pick(12);
          pool.push({ a: nd.arange(-3, -3 + 0.5 * len, 0.5), r: exact(Array.from({ length: len }, (_, i) => -3 + 0.5 * i), [len]), poisoned: '' });
          break;
        }
        case 4: {
          const a = nd.random.uniform(s, -1, 1), v = a.dataSync();
          for (const x of v) assert.ok(x >= -1 && x <= 1, `${where()}: uniform value ${x}`);
          pool.push({ a, r: exact(v, s), poisoned: '' });
          break;
        }
        default: {
          const v = randomValues(n);
          pool.push({ a: nd.fromArray(v, s), r: exact(v, s), poisoned: '' });
        }
      }
    },
    binary() {
      const a = healthy();
      if (!a) return;
      let b = null;
      // A partner whose broadcast with a has at most 2^18 elements (as tests/test_fuzz.cpp), else
      // a fresh one: two large arrays, one reshaped to [n,1,1], would broadcast past the heap.
      for (let i = 0; i < 6 && !b; ++i) {
        const c = any(), s = c.poisoned ? null : broadcast(a.r.shape, c.r.shape);
        if (s && sizeOf(s) <= 2 ** 18) b = c;
      }
      let fresh = null;
      if (!b) {
        const s = partner(a.r.shape), v = randomValues(sizeOf(s));
        fresh = nd.fromArray(v, s);
        b = { a: fresh, r: exact(v, s) };
      }
      const [x, y] = pick(2) ? [a, b] : [b, a];
      switch (pick(4)) {
        case 0: keepOrDrop(x.a.add(y.a), refBinary(x.r, y.r, addB)); break;
        case 1: keepOrDrop(nd.sub(x.a, y.a), refBinary(x.r, y.r, subB)); break;
        case 2: keepOrDrop(x.a.mul(y.a), refBinary(x.r, y.r, mulB)); break;
        default: {
          const s = pick(2) ? 2 ** (pick(5) - 2) : Math.fround(uniform(-2, 2));
          const sr = { shape: [], v: [s], e: [0] };
          if (pick(2)) keepOrDrop(nd.mul(s, x.a), refBinary(sr, x.r, mulB));
          else keepOrDrop(x.a.sub(s), refBinary(x.r, sr, subB));
        }
      }
      if (fresh) fresh.delete();
    },
    unary() {
      const a = healthy();
      if (!a) return;
      switch (pick(5)) {
        case 0: keepOrDrop(a.a.neg(), refUnary(a.r, (x, e) => [-x, e])); break;
        case 1: keepOrDrop(nd.relu(a.a), refUnary(a.r, (x, e) => [Math.max(x, 0), e])); break;
        case 2: keepOrDrop(a.a.tanh(), refUnary(a.r, (x, e) => { const v = Math.tanh(x); return [v, e + TREL * Math.abs(v) + TABS]; })); break;
        case 3: keepOrDrop(a.a.sigmoid(), refUnary(a.r, (x, e) => { const v = 1 / (1 + Math.exp(-x)); return [v, 0.25 * e + TREL * v + TABS]; })); break;
        default:
          if (a.r.v.some((x) => Math.abs(x) > 8)) return;
          keepOrDrop(a.a.exp(), refUnary(a.r, (x, e) => { const v = Math.exp(x); return [v, v * Math.expm1(e) * (1 + TREL) + TREL * v + TABS]; }));
      }
    },
    reduce() {
      const a = healthy();
      if (!a) return;
      const ndim = a.r.shape.length, kind = pick(3), all = ndim === 0 || pick(3) === 0;
      const axis = all ? -1 : pick(ndim), keepdims = pick(2) === 0;
      const len = all ? sizeOf(a.r.shape) : a.r.shape[axis];
      const op = ['sum', 'mean', 'max'][kind];
      if (kind === 2 && len === 0) { bad(() => (all ? a.a.max() : a.a.max(axis, keepdims)), 'max'); return; }
      if (kind === 1 && len === 0) return;
      if (all) {
        const out = a.a[op]();
        const r = refReduce(a.r, -1, false, kind);
        if (pick(2)) {
          const v = out.item();  // item(): a wait too
          out.delete();
          if (!(Math.abs(v - r.v[0]) <= r.e[0] + 1e-30)) assert.fail(`${where()}: ${op} item ${v} vs ${r.v[0]} +- ${r.e[0]}`);
        } else {
          keepOrDrop(out, r);
        }
      } else {
        const given = pick(2) ? axis - ndim : axis;
        keepOrDrop(a.a[op](given, keepdims), refReduce(a.r, axis, keepdims, kind));
      }
    },
    dot() {
      const a = healthy();
      if (!a || a.r.shape.length !== 2) return;
      const s = [a.r.shape[1], 1 + pick(5)], v = randomValues(sizeOf(s));
      const b = nd.fromArray(v, s);
      keepOrDrop(a.a.dot(b), refDot(a.r, exact(v, s)));
      b.delete();
    },
    reshape() {
      const a = healthy();
      if (!a) return;
      if (pick(3) === 0) { keepOrDrop(a.a.transpose(), refTranspose(a.r)); return; }
      let n = sizeOf(a.r.shape);
      let s = [];
      if (n === 0) s = [0, 1 + pick(3)];
      else {
        while (n > 1 && s.length < 3) {
          let f = 1 + pick(Math.min(n, 6));
          while (n % f) --f;
          s.push(f);
          n /= f;
        }
        s.push(n);
      }
      const given = s.slice();
      if (sizeOf(s) > 0 && pick(2)) given[pick(s.length)] = -1;
      pool.push({ a: pick(2) ? a.a.reshape(given) : a.a.reshape(...given), r: { ...a.r, shape: s }, poisoned: '' });
    },
    async read() {
      const e = any();
      if (!e.poisoned) { await check(e); return; }
      // A failure: every kind of wait reports it, naming the failed op; waitAll reports the first
      // not yet reported (ops finish in any order) and forgets the others.
      const pending = unreported.includes(e.poisoned);
      const mode = pick(pending ? 4 : 3);
      let msg = '';
      try {
        if (mode === 0) e.a.waitToRead();
        else if (mode === 1) await e.a.data();
        else if (mode === 2) e.a.dataSync();
        else nd.waitAll();
      } catch (err) {
        assert.ok(err instanceof Error);
        msg = err.message;
      }
      if (mode === 3) {
        assert.ok(namesUnreported(msg), `${where()}: waitAll gave '${msg}'`);
        unreported = [];
      } else {
        assert.ok(msg.includes(e.poisoned), `${where()}: expected '${e.poisoned}', got '${msg}'`);
        unreported = unreported.filter((m) => m !== e.poisoned);
      }
      for (const x of pool.filter((y) => y.poisoned === e.poisoned)) remove(x);
    },
    drop() {
      const e = any();
      if (!e.poisoned) remove(e);
    },
    tidy() {
      // Arrays made inside go, except the one returned (kept in the pool).
      const a = healthy();
      if (!a) return;
      const kept = nd.tidy(() => {
        const t = a.a.mul(2);
        t.add(1);  // deleted by tidy
        return t.sub(1);
      });
      keepOrDrop(kept, refBinary(refBinary(a.r, { shape: [], v: [2], e: [0] }, mulB), { shape: [], v: [1], e: [0] }, subB));
    },
    badCall() {
      const a = healthy();
      if (!a) return;
      const s = a.r.shape, n = sizeOf(s), ndim = s.length;
      const lastGt1 = ndim > 0 && s[ndim - 1] > 1;
      const wrong = nd.ones([lastGt1 ? s[ndim - 1] + 1 + pick(3) : 2]);
      const dead = nd.ones([1]);
      dead.delete();
      try {
        switch (pick(14)) {
          case 0: if (lastGt1) bad(() => a.a.add(wrong), 'add'); break;
          case 1: bad(() => a.a.sum(ndim + pick(3)), 'sum'); break;
          case 2: bad(() => a.a.mean(2 ** 32 + pick(3)), 'mean'); break;
          case 3: bad(() => a.a.reshape([n + 1 + pick(3)]), 'reshape'); break;
          case 4: bad(() => a.a.dot(wrong), 'dot'); break;
          case 5: bad(() => nd.zeros([2 ** (30 + pick(10)), 1 + pick(3)]), 'zeros'); break;
          case 6: bad(() => nd.ones([2, [undefined, null, -1, 1.5, '3', NaN][pick(6)]]), 'ones'); break;
          case 7: if (n !== 1) bad(() => a.a.item(), 'item'); break;
          case 8: bad(() => nd.fromArray(new Float32Array(n + 1), s), 'fromArray'); break;
          case 9: bad(() => nd.arange(0, 1, 0), 'arange'); break;
          case 10: bad(() => dead.add(a.a), 'add'); break;
          case 11: bad(() => nd.full(s, ['x', undefined, {}, null][pick(4)]), 'full'); break;
          case 12: bad(() => a.a.max([2 ** 31, -(2 ** 31) - 1, Number.MAX_SAFE_INTEGER][pick(3)]), 'max'); break;
          default: bad(() => dead.shape, 'shape'); break;
        }
      } finally {
        wrong.delete();
      }
    },
    failing() {
      const a = healthy();
      if (!a) return;
      const msg = `fuzz failure <${step}>`;
      const out = nd._testing.failingOp(a.a, msg);
      unreported.push(msg);
      pool.push({ a: out, r: a.r, poisoned: msg });
      if (pick(2)) pool.push({ a: nd.tidy(() => out.mul(0.5).exp()), r: a.r, poisoned: msg });  // skipped
    },
    autograd() {
      const a = healthy();
      if (!a || sizeOf(a.r.shape) === 0) return;
      const xv = a.a.dataSync();
      const x = nd.fromArray(xv, a.r.shape);
      x.attachGrad();
      const val = Array.from(xv), der = val.map(() => 1);
      const loss = nd.tidy(() => nd.autograd.record(() => {
        let y = x;
        for (let k = 1 + pick(4); k > 0; --k) {
          switch (pick(4)) {
            case 0: {
              const c = Math.fround(uniform(-1.5, 1.5));
              y = y.mul(c);
              for (let i = 0; i < val.length; ++i) { val[i] *= c; der[i] *= c; }
              break;
            }
            case 1:
              y = y.tanh();
              for (let i = 0; i < val.length; ++i) { val[i] = Math.tanh(val[i]); der[i] *= 1 - val[i] * val[i]; }
              break;
            case 2:
              y = y.sigmoid();
              for (let i = 0; i < val.length; ++i) { val[i] = 1 / (1 + Math.exp(-val[i])); der[i] *= val[i] * (1 - val[i]); }
              break;
            default:
              y = y.mul(y);
              for (let i = 0; i < val.length; ++i) { der[i] *= 2 * val[i]; val[i] *= val[i]; }
          }
        }
        if (pick(2)) {
          for (let i = 0; i < der.length; ++i) der[i] /= der.length;
          return y.mean();
        }
        return y.sum();
      }));
      loss.backward();
      const g = x.grad.dataSync();
      const scale = der.reduce((m, d) => Math.max(m, Math.abs(d)), 0);
      for (let i = 0; i < g.length; ++i) {
        // A tolerance, not a proof: gradients' float error is not propagated like the values'.
        if (!(Math.abs(g[i] - der[i]) <= 1e-3 * Math.abs(der[i]) + 1e-4 * scale + 1e-5)) {
          assert.fail(`${where()}: gradient ${i} is ${g[i]}, chain rule ${der[i]}`);
        }
      }
      loss.delete();
      x.delete();
    },
  };
  const table = [
    [14, 'create'], [16, 'binary'], [8, 'unary'], [8, 'reduce'], [4, 'dot'], [5, 'reshape'],
    [10, 'read'], [8, 'drop'], [4, 'tidy'], [10, 'badCall'], [5, 'failing'], [8, 'autograd'],
  ];
  const total = table.reduce((s, [w]) => s + w, 0);
  for (step = 0; step < STEPS; ++step) {
    let r = pick(total), name = 'create';
    for (const [w, n] of table) { if (r < w) { name = n; break; } r -= w; }
    if (pool.length < 3) name = 'create';
    await steps[name]();
    while (pool.length > 24) {
      const e = any();
      if (!e.poisoned) remove(e);
      else await steps.read();
    }
  }
  // Check what is left, then let it all go.
  for (const e of pool.slice()) if (!e.poisoned) await check(e);
  for (const e of pool.splice(0)) e.a.delete();
  let msg = '';
  try { nd.waitAll(); } catch (err) { msg = err.message; }
  if (unreported.length) assert.ok(namesUnreported(msg), `final waitAll gave '${msg}'`);
  else assert.equal(msg, '', 'final waitAll');
});
