// Errors: bad input throws a JS Error at the call (the C++ message, naming the op and the shapes),
// an op that fails while it runs rejects/throws at the wait, and the module keeps working.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers');

const loading = h.setup({ hooks: true });  // nd._testing

test('bad shapes throw an Error at the call, naming the op and the shapes', async () => {
  const nd = await loading;
  nd.tidy(() => {
    const a = nd.ones([2, 3]), b = nd.ones([4, 5]);
    const before = nd.engine.stats().pushed;
    assert.throws(() => nd.dot(a, b), { name: 'Error', message: 'dot: inner dimensions differ: a=[2,3] b=[4,5]' });
    assert.throws(() => a.add(b), (e) => e instanceof Error && /add/.test(e.message) && /\[2,3\]/.test(e.message) && /\[4,5\]/.test(e.message));
    assert.throws(() => a.reshape([7]), (e) => e instanceof Error && /reshape/.test(e.message));
    assert.throws(() => a.sum(5), (e) => e instanceof Error && /sum/.test(e.message));
    assert.throws(() => nd.zeros([2, -3]), /zeros: bad dimension -3 at index 1/);
    assert.throws(() => nd.fromArray(new Float32Array(5), [2, 2]), (e) => e instanceof Error && /5/.test(e.message));
    assert.throws(() => nd.arange(0, 1, 0), (e) => e instanceof Error && /arange/.test(e.message));
    assert.throws(() => nd.ones([1]).norm().sum(0), Error);
    assert.equal(nd.engine.stats().pushed, before + 2, 'only the two arrays made in the last line were queued');
    assert.deepEqual(a.add(1).toArray(), [[2, 2, 2], [2, 2, 2]], 'the module works after the errors');
  });
});

test('an op that fails at run time: its Error at waitToRead, data(), item; dependents skipped', async () => {
  const nd = await loading;
  const x = nd.ones([4]);
  const bad = nd._testing.failingOp(x, 'kernel exploded');
  const dep = nd.tidy(() => bad.mul(3).add(1));  // inherits the failure
  const fine = x.add(41);                          // independent: unaffected
  await assert.rejects(dep.data(), (e) => e instanceof Error && /failing_op/.test(e.message) && /kernel exploded/.test(e.message));
  assert.throws(() => bad.waitToRead(), (e) => e instanceof Error && /kernel exploded/.test(e.message));
  assert.deepEqual(Array.from(await fine.data()), [42, 42, 42, 42]);
  // The error is reported once per array (as in C++); waitAll reports the ones nobody read yet.
  const again = nd._testing.failingOp(x, 'second failure');
  assert.throws(() => nd.waitAll(), /second failure/);
  nd.waitAll();  // nothing more to report
  const again2 = nd.tidy(() => nd._testing.failingOp(x, 'third').sum());
  assert.throws(() => again2.item(), /third/);
  nd.waitAll();
  for (const a of [x, bad, dep, fine, again, again2]) a.delete();
  // The module keeps working.
  nd.tidy(() => assert.equal(nd.ones([10]).sum().item(), 10));
});

test('using a deleted array throws, naming the call', async () => {
  const nd = await loading;
  const x = nd.ones([2]);
  x.delete();
  x.delete();  // idempotent
  assert.ok(x.isDeleted);
  assert.throws(() => x.add(1), { message: 'add: the array was deleted' });
  assert.throws(() => x.toArray(), { message: 'toArray: the array was deleted' });
  await assert.rejects(x.data(), { message: 'data: the array was deleted' });
  nd.tidy(() => assert.throws(() => nd.ones([2]).add('a'), TypeError));
});

test('bad arguments to load, seed, setMaxInflight', async () => {
  const asyncnd = require('..');
  await assert.rejects(asyncnd.load({ threads: 0 }), /load: threads must be an integer from 1 to 64, got 0/);
  await assert.rejects(asyncnd.load({ threads: 1.5 }), /threads/);
  const nd = await loading;
  assert.throws(() => nd.seed(-1), /seed/);
  assert.throws(() => nd.engine.setMaxInflight({ ops: -1 }), /setMaxInflight/);
});

test('on a browser main thread, blocking calls throw and name await x.data()', async () => {
  const nd = await loading;
  const x = nd.ones([2]);
  globalThis.window = {};  // what a page's main thread looks like (no importScripts)
  try {
    for (const call of [() => x.waitToRead(), () => x.toArray(), () => x.item(), () => x.toString(),
                        () => x.dataSync(), () => nd.waitAll()]) {
      assert.throws(call, /blocking call on the browser's main thread.*await x\.data\(\)/);
    }
    assert.deepEqual(Array.from(await x.data()), [1, 1], 'the non-blocking read still works');
  } finally {
    delete globalThis.window;
  }
  x.delete();
});
