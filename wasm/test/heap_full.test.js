// A program that keeps arrays alive until the 2 GiB heap is full, then smaller ones until even 4
// bytes do not fit, and goes on using the module there (found by an audit). Every failure must be
// an Error naming the op, and nothing may end the process or keep it from exiting:
//   - a worker whose op failed there handled the failure with allocations of its own, and the
//     bad_alloc they threw ended the process (caught nowhere on the worker);
//   - the glue's error handlers copied the message into a std::string, and the bad_alloc reached
//     JavaScript as a bare number; data() then left its read pending, which kept Node alive.
// Its own file, so its own module: the heap stays as this test leaves it.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers');

const loading = h.setup({ hooks: true });  // nd._testing.gate

const isError = (e) => {
  assert.ok(e instanceof Error, `not an Error: ${typeof e} ${e}`);
  return true;
};

test('with the heap full, every call fails with an Error and the module goes on', async () => {
  const nd = await loading;
  // A GEMM queued behind a gate: its output exists, and it runs once the heap is full, where its
  // packing buffer cannot be had (a failure handled on a worker, with no memory to spare). No
  // byte bound: a push waiting on it behind the gate would wait for ever.
  nd.engine.setMaxInflight({ ops: 0, bytes: 0 });
  const a = nd.ones([64, 512]), b = nd.ones([512, 64]);
  const gate = nd._testing.gate([64, 512]);
  const a2 = a.add(gate.array);
  const c = nd.dot(a2, b);
  const kept = nd.full([3], 2);
  const fill = [];
  for (let bytes = 512 * 1024 * 1024; bytes >= 4; ) {
    try {
      fill.push(nd.zeros([bytes / 4]));
    } catch (e) {
      isError(e);
      // The allocator names the op; where even the engine's own records do not fit, the glue
      // says the heap is full (naming the op would need memory).
      assert.match(e.message, /^zeros: alloc: out of WebAssembly memory|^out of WebAssembly memory \(std::bad_alloc\)/);
      // It counts the arrays left to the garbage collector (every one here: none was deleted),
      // which the heap filling does not prompt to run.
      const left = /\((\d+) arrays? not deleted and in no tidy scope, so left to the garbage collector/
        .exec(e.message);
      assert.ok(left && Number(left[1]) >= fill.length, e.message);
      bytes /= 2;
    }
  }
  gate.open(0);
  await c.data().then(
    (v) => assert.equal(v[0], 512),  // the packing found room after all
    (e) => { isError(e); assert.match(e.message, /^dot failed on cpu\(0\): out of memory|^out of WebAssembly memory|no memory left/); });
  // At the edge: ops that may fail on a worker or at the call, reads that wait for them.
  const reads = [];
  for (let i = 0; i < 200; ++i) {
    try {
      const y = kept.add(i);
      reads.push(y.data().then(() => y.delete(), (e) => { isError(e); y.delete(); }));
    } catch (e) {
      isError(e);
    }
  }
  await Promise.all(reads);
  try { nd.waitAll(); } catch (e) { isError(e); }
  for (const a of fill) a.delete();
  try { nd.waitAll(); } catch (e) { isError(e); }
  // Memory is back: the module works, and the array kept through it all has its values.
  nd.tidy(() => assert.deepEqual(kept.add(1).toArray(), [3, 3, 3]));
  assert.deepEqual(await kept.data(), new Float32Array([2, 2, 2]));
  for (const x of [kept, a, b, gate.array, a2, c]) x.delete();
  nd.engine.resetMaxInflight();
});
