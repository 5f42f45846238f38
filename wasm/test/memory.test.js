// Memory: delete() and tidy give the bytes back (engine stats), and a FinalizationRegistry frees
// arrays that nobody deleted once the garbage collector has collected their wrappers.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const v8 = require('node:v8');
const vm = require('node:vm');
const h = require('./helpers');

const loading = h.setup();

test('delete() gives the bytes back once the queued ops that use the array finish', async () => {
  const nd = await loading;
  nd.waitAll();
  const base = nd.engine.stats().bytesInUse;
  const x = nd.ones([1000, 250]);  // 1 MB
  const y = x.mul(2);
  nd.waitAll();
  assert.equal(nd.engine.stats().bytesInUse - base, 2e6);
  x.delete();                      // y's op is done; x goes now
  nd.waitAll();
  assert.equal(nd.engine.stats().bytesInUse - base, 1e6);
  assert.equal(nd.tidy(() => y.sum().item()), 2 * 250000);
  y.delete();
});

test('tidy deletes what it made except what it returns, nested; keep opts out', async () => {
  const nd = await loading;
  let kept;
  const [a, b] = nd.tidy(() => {
    const t = nd.ones([100]);
    const inner = nd.tidy(() => {
      const u = t.add(1);
      kept = nd.keep(u.mul(3));
      return { v: u.add(1), tmp: 1 };
    }).v;
    assert.ok(!t.isDeleted && !inner.isDeleted);
    return [inner, t.add(5)];
  });
  assert.ok(!a.isDeleted && !b.isDeleted && !kept.isDeleted);
  assert.equal(nd.engine.stats().liveArrays, 3);
  assert.deepEqual(Array.from(await a.data()).slice(0, 2), [3, 3]);
  assert.deepEqual(Array.from(await kept.data()).slice(0, 2), [6, 6]);
  a.delete(); b.delete(); kept.delete();
  // A throwing fn still frees its arrays; a Promise is refused.
  assert.throws(() => nd.tidy(() => { nd.ones([3]); throw new Error('inside'); }), /inside/);
  assert.throws(() => nd.tidy(async () => nd.ones([3])), /tidy: fn returned a Promise/);
});

test('tidy finds arrays in any result: shared parts, cycles, deep nesting; getters are not run', async () => {
  const nd = await loading;
  nd.waitAll();
  const live0 = nd.engine.stats().liveArrays;
  // A cycle (a tree node with a parent link) used to overflow the stack, and every array of the
  // scope stayed alive for good (nothing registers a scoped array with the collector).
  const cyc = nd.tidy(() => {
    nd.ones([10]);  // an intermediate: deleted
    const out = { w: nd.ones([10]).mul(2) };
    out.self = out;
    return out;
  });
  assert.ok(!cyc.w.isDeleted);
  assert.equal(nd.engine.stats().liveArrays - live0, 1);
  cyc.w.delete();
  // Shared parts, 40 levels deep: each level's object twice. Looked at once each, it is quick
  // (visited twice per level, 2^40 visits).
  const shared = nd.tidy(() => {
    let node = { leaf: nd.ones([2]) };
    for (let i = 0; i < 40; ++i) node = { l: node, r: node };
    return node;
  });
  let leaf = shared;
  while (!leaf.leaf) leaf = leaf.l;
  assert.ok(!leaf.leaf.isDeleted);
  leaf.leaf.delete();
  // Nested 100 000 arrays deep: no stack per level.
  const deep = nd.tidy(() => {
    let node = [nd.ones([2])];
    for (let i = 0; i < 100000; ++i) node = [node];
    return node;
  });
  let inner = deep;
  while (Array.isArray(inner)) inner = inner[0];
  assert.ok(!inner.isDeleted);
  inner.delete();
  // A getter is not called: what it would give is not kept; the data property beside it is.
  let called = false;
  const withGetter = nd.tidy(() => {
    const hidden = nd.ones([2]);
    return { get g() { called = true; return hidden; }, a: nd.ones([2]) };
  });
  assert.equal(called, false);
  assert.ok(!withGetter.a.isDeleted);
  withGetter.a.delete();
  assert.equal(nd.engine.stats().liveArrays, live0);
  // A result that cannot be looked through (its `then` getter throws) deletes the scope's
  // arrays and throws, saying so.
  assert.throws(() => nd.tidy(() => {
    nd.ones([2]);
    return { get then() { throw new Error('no then'); } };
  }), /tidy: could not look for arrays in fn's result \(Error: no then\); the arrays made in fn were deleted/);
  assert.equal(nd.engine.stats().liveArrays, live0);
});

// Runs make() (which drops what it makes), checks that `made` arrays are then alive, and that
// garbage collection brings the engine's live arrays and bytes back to where they were.
async function freedAfterCollection(nd, made, make) {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc');
  nd.waitAll();
  const before = nd.engine.stats();
  make();
  nd.waitAll();
  assert.equal(nd.engine.stats().liveArrays - before.liveArrays, made);
  for (let i = 0; i < 50 && nd.engine.stats().liveArrays > before.liveArrays; ++i) {
    gc();
    await new Promise((r) => setTimeout(r, 10));  // finalizers run as tasks after a collection
  }
  nd.waitAll();
  const after = nd.engine.stats();
  assert.equal(after.liveArrays, before.liveArrays, 'the registry released every collected array');
  assert.equal(after.bytesInUse, before.bytesInUse);
}

test('arrays nobody deleted are freed after garbage collection (FinalizationRegistry)', async () => {
  // 10 000 arrays, never deleted, made in one synchronous run with 5000 deleted ones: an
  // array is registered at the end of its task, or every 4096 arrays in a longer run (index.cjs).
  const nd = await loading;
  await freedAfterCollection(nd, 10000, () => {
    for (let i = 0; i < 5000; ++i) {
      nd.ones([100]).add(i);
      nd.ones([100]).delete();
    }
  });
});

test('arrays that leave tidy scopes alive are freed after garbage collection too', async () => {
  // Inside a scope an array is not in the FinalizationRegistry (its scope deletes it); one that
  // leaves every scope (nd.keep, or returned from the outermost tidy) must enter it then.
  const nd = await loading;
  await freedAfterCollection(nd, 41, () => {
    for (let i = 0; i < 20; ++i) {
      nd.tidy(() => {
        nd.keep(nd.ones([100]).add(i));  // kept: out of every scope
        nd.ones([100]);                  // deleted by the scope
        return [nd.ones([100]).mul(2)];  // returned from the outermost scope
      });
    }
    nd.tidy(() => nd.tidy(() => nd.ones([3])));  // through a nested scope, then out
  });
});

test('a loop of 2000 steps with delete keeps memory flat', async () => {
  const nd = await loading;
  let y = nd.zeros([256, 256]);
  nd.waitAll();
  const start = nd.engine.stats().bytesInUse;
  for (let i = 0; i < 2000; ++i) {
    const next = y.add(1);
    y.delete();
    y = next;
  }
  nd.waitAll();
  assert.equal(nd.engine.stats().bytesInUse, start);
  assert.equal(nd.tidy(() => y.mean().item()), 2000);
  y.delete();
});
