// Bad input never kills the module: shapes too large for wasm32, JavaScript numbers outside what
// the op takes (never wrapped to int32), holes in shapes, reads after delete(), fill values that
// are not numbers. Each is an Error naming the op and the value as given, and queues nothing.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers');

const loading = h.setup({ hooks: true });  // nd._testing, nd._bench

// Expects fn() to throw an Error (not a TypeError from the glue) whose message matches re, with
// nothing queued.
function refused(nd, fn, re) {
  const before = nd.engine.stats().pushed;
  assert.throws(fn, (e) => {
    assert.ok(e instanceof Error, `not an Error: ${e}`);
    assert.match(e.message, re);
    return true;
  });
  assert.equal(nd.engine.stats().pushed, before, `queued something: ${re}`);
}

test('shapes larger than wasm32 allows are an Error naming the op, and the module goes on', async () => {
  const nd = await loading;
  const big = /has too many elements: the largest array on this target holds 536870911 float32 elements \(2147483644 bytes\)/;
  // 2^30 elements is 2^32 bytes: it wrapped wasm32's size_t to 0 bytes and the fill crashed.
  refused(nd, () => nd.zeros([2 ** 30]), /^zeros: shape \[1073741824\] has too many elements/);
  refused(nd, () => nd.zeros([65536, 65536]), big);
  refused(nd, () => nd.ones([1e10]), /^ones: shape \[10000000000\]/);
  refused(nd, () => nd.full([2 ** 29 + 1], 1), /^full: .*too many elements/);
  refused(nd, () => nd.random.normal([3, 2 ** 28]), /^random_normal: .*too many elements/);
  refused(nd, () => nd.random.uniform([2 ** 53 - 1]), /^random_uniform: .*too many elements/);
  nd.tidy(() => {
    // A broadcast output and a matrix product too large, from small (or empty) inputs.
    const col = nd.zeros([32768, 1]), row = nd.zeros([1, 32768]);
    refused(nd, () => col.add(row), /^add: shape \[32768,32768\] has too many elements/);
    const a = nd.zeros([65536, 0]), b = nd.zeros([0, 65536]);
    refused(nd, () => a.dot(b), /^dot: shape \[65536,65536\] has too many elements/);
    const one = nd.ones([1]);
    refused(nd, () => one.reshape([2 ** 30]), /^reshape: cannot reshape \[1\] into \[1073741824\]/);
    // The largest array that fits is allowed (when memory allows it): 512 MiB of floats is not
    // tried here; a modest one works as ever.
    assert.deepEqual(nd.ones([2]).add(1).toArray(), [2, 2]);
  });
});

// 3 000 dimensions of 1: toString overflowed the stack inside the module (RangeError, and the
// heap it held leaked); an empty array of 2**40 rows: toArray's new Array threw RangeError, and
// one of 1e9 rows filled V8's heap, which ends the process.
test('dimensions beyond 64 and empty arrays with too many rows for toArray are an Error', async () => {
  const nd = await loading;
  refused(nd, () => nd.zeros(new Array(3000).fill(1)), /^zeros: a shape of 3000 dimensions: an array has at most 64$/);
  nd.tidy(() => {
    const deepest = nd.ones(new Array(64).fill(1));
    assert.match(deepest.toString(), /^\[{64}1\]{64} <NDArray (1x){63}1 cpu\(0\)>$/);
    refused(nd, () => deepest.reshape(new Array(65).fill(1)), /^reshape: a shape of 65 dimensions/);
    for (const rows of [2 ** 40, 1e9]) {
      const empty = nd.zeros([rows, 0]);
      assert.throws(() => empty.toArray(),
                    { message: new RegExp(`^toArray: the empty array \\[${rows},0\\] would be ${rows + 1} nested JavaScript arrays \\(at most 16777216\\)`) });
    }
    assert.deepEqual(nd.zeros([3, 0, 5]).toArray(), [[], [], []]);
  });
});

test('integers outside int32 are refused, not wrapped by Embind', async () => {
  const nd = await loading;
  nd.tidy(() => {
    const a = nd.fromArray([[1, 2], [3, 4]]);
    const range = (v) => new RegExp(`^sum: axis must be an integer from -2147483648 to 2147483647, got ${v}$`);
    // 2**32 acted as axis 0, 2**32 + 1 as 1, MAX_SAFE_INTEGER as -1.
    refused(nd, () => a.sum(2 ** 32), range(4294967296));
    refused(nd, () => a.sum(2 ** 32 + 1), range(4294967297));
    refused(nd, () => a.sum(Number.MAX_SAFE_INTEGER), range(9007199254740991));
    refused(nd, () => a.sum(-(2 ** 31) - 1), range(-2147483649));
    refused(nd, () => a.mean(1.5, true), /^mean: axis must be an integer .* got 1\.5$/);
    refused(nd, () => a.max('1'), /^max: axis must be an integer .* got '1'$/);
    // In int32 but out of range for the shape: the C++ op says so, with the value as given.
    refused(nd, () => a.sum(2 ** 31 - 1), /^sum: axis 2147483647 is out of range for \[2,2\]/);
    assert.deepEqual(a.sum(-1).toArray(), [3, 7]);
  });
  refused(nd, () => nd.seed(2 ** 53), /^seed: the seed must be an integer from 0 to 9007199254740991, got 9007199254740992$/);
  refused(nd, () => nd.seed(-1), /^seed: .* got -1$/);
  refused(nd, () => nd.seed('7'), /^seed: .* got '7'$/);
  refused(nd, () => nd.engine.setMaxInflight({ ops: 2 ** 53 }), /^setMaxInflight: ops must be an integer/);
  refused(nd, () => nd.engine.setMaxInflight({ bytes: -1 }), /^setMaxInflight: bytes must be an integer .* got -1$/);
  // A bound is a 32-bit size in WebAssembly: 2^32 was once taken as 0 (no bound), silently.
  refused(nd, () => nd.engine.setMaxInflight({ bytes: 2 ** 32 }), /^setMaxInflight: bytes must be an integer from 0 to 4294967295, got 4294967296$/);
  refused(nd, () => nd.engine.setMaxInflight({ ops: 2 ** 32 }), /^setMaxInflight: ops must be an integer from 0 to 4294967295/);
  // A misspelt key read as no bound at all (the default one switched off with it).
  refused(nd, () => nd.engine.setMaxInflight({ maxBytes: 64e6 }), /^setMaxInflight: unknown option 'maxBytes' \(the options are ops, bytes\)$/);
  assert.ok(nd.engine.stats().maxInflightBytes > 0);
  refused(nd, () => nd.nn.Dense(2, '', { usebias: false }), /^nn\.Dense: unknown option 'usebias' \(the options are useBias, inUnits, init, scale\)$/);
  nd.tidy(() => {
    const x = nd.ones([2]);
    const y = nd.autograd.record(() => x.mul(2).sum());
    assert.throws(() => y.backward(null, null), { name: 'TypeError', message: 'backward: options must be an object, got null' });
    assert.throws(() => y.backward(null, { retain: true }), /^Error: backward: unknown option 'retain'/);
  });
  nd.engine.setMaxInflight({ ops: 2 ** 32 - 1, bytes: 2 ** 32 - 1 });
  assert.equal(nd.engine.stats().maxInflightBytes, 2 ** 32 - 1);
  nd.engine.resetMaxInflight();
  refused(nd, () => nd.nn.Dense(2 ** 53), /^nn\.Dense: units must be an integer from 1 to 9007199254740991, got 9007199254740992$/);
  refused(nd, () => nd.nn.Dense(4, '', { inUnits: -3 }), /^nn\.Dense: inUnits must be an integer .* got -3$/);
  refused(nd, () => nd._bench.benchVars(2 ** 32), /^benchVars: n must be an integer from 0 to 2147483647, got 4294967296$/);
  const d = nd.nn.Dense(1, '', { inUnits: 1 });
  const sgd = nd.nn.SGD(d, 0.1);
  refused(nd, () => sgd.step(2 ** 53), /^SGD\.step: batchSize must be an integer .* got 9007199254740992$/);
  refused(nd, () => sgd.step(0), /^SGD\.step: batchSize must be an integer from 1/);
  refused(nd, () => { sgd.learningRate = 'fast'; }, /^SGD\.learningRate: value must be a number, got 'fast'$/);
  refused(nd, () => nd.nn.SGD(d, undefined), /^nn\.SGD: learningRate must be a number, got undefined$/);
  sgd.delete();
  d.delete();
});

test('undefined, null and other non-numbers inside a shape are an Error naming the op', async () => {
  const nd = await loading;
  refused(nd, () => nd.zeros([2, undefined]), /^zeros: bad dimension undefined at index 1 of the shape \[2,undefined\]$/);
  refused(nd, () => nd.ones([null]), /^ones: bad dimension null at index 0/);
  refused(nd, () => nd.full([2, '2'], 1), /^full: bad dimension '2' at index 1/);
  refused(nd, () => nd.random.normal([1n]), /^random\.normal: bad dimension 1n at index 0/);
  refused(nd, () => nd.zeros([Symbol('x')]), /^zeros: bad dimension Symbol\(x\) at index 0/);
  refused(nd, () => nd.zeros([2 ** 53]), /^zeros: bad dimension 9007199254740992 at index 0/);
  refused(nd, () => nd.zeros([{}]), /^zeros: bad dimension \[object Object\] at index 0/);
  refused(nd, () => nd.fromArray([1, 2], [undefined]), /^fromArray: bad dimension undefined/);
  nd.tidy(() => {
    const x = nd.ones([6]);
    refused(nd, () => x.reshape([null, 3]), /^reshape: bad dimension null at index 0/);
    refused(nd, () => x.reshape(2, undefined), /^reshape: bad dimension undefined at index 1/);
    refused(nd, () => x.reshape([-2, 3]), /^reshape: bad dimension -2/);
    assert.deepEqual(x.reshape([-1, 3]).shape, [2, 3]);
  });
});

test('shape, size and ndim throw after delete(), as documented, even when read before', async () => {
  const nd = await loading;
  const a = nd.ones([2, 3]);
  assert.deepEqual([a.shape, a.size, a.ndim], [[2, 3], 6, 2]);  // cached now
  a.delete();
  assert.throws(() => a.shape, /^Error: shape: the array was deleted$/);
  assert.throws(() => a.size, /^Error: size: the array was deleted$/);
  assert.throws(() => a.ndim, /^Error: ndim: the array was deleted$/);
  assert.equal(a.isDeleted, true);
});

test('full with a fill value that is not a number is an Error naming full', async () => {
  const nd = await loading;
  refused(nd, () => nd.full([2], 'x'), /^full: value must be a number, got 'x'$/);
  refused(nd, () => nd.full([2], undefined), /^full: value must be a number, got undefined$/);
  refused(nd, () => nd.full([2], {}), /^full: value must be a number, got \[object Object\]$/);
  refused(nd, () => nd.random.normal([2], '0'), /^random\.normal: mean must be a number, got '0'$/);
  refused(nd, () => nd.random.uniform([2], 0, null), /^random\.uniform: hi must be a number, got null$/);
  refused(nd, () => nd.arange('5'), /^arange: stop must be a number, got '5'$/);
  nd.tidy(() => {
    assert.deepEqual(Array.from(nd.full([2], NaN).dataSync()).map(Number.isNaN), [true, true]);  // a number
    assert.deepEqual(nd.full([2], -1.5).toArray(), [-1.5, -1.5]);
  });
});

// The module takes float32: checked before the rounding, these were accepted (1 - 1e-9 < 1 read
// as 1, -1e-50 as -0) or refused naming inf for a finite value.
test('random parameters and initialiser scales are checked as given, before float32', async () => {
  const nd = await loading;
  refused(nd, () => nd.random.uniform([3], 1, 1 - 1e-9), /^random\.uniform: expects lo <= hi, got lo=1 hi=0\.999999999$/);
  refused(nd, () => nd.random.uniform([3], 0, 1e39), /^random\.uniform: hi must be within float32's range, got 1e\+39$/);
  refused(nd, () => nd.random.normal([3], 0, -1e-50), /^random\.normal: std must be >= 0, got -1e-50$/);
  refused(nd, () => nd.random.normal([3], -1e39, 1), /^random\.normal: mean must be within float32's range, got -1e\+39$/);
  // Finite float32 parameters whose draws overflow are the module's to refuse.
  refused(nd, () => nd.random.normal([3], 0, 1e38), /^random_normal: .* got mean=0 stddev=1e\+38$/);
  assert.throws(() => nd.nn.Dense(2, '', { scale: -1e-50 }),
                /^Error: nn\.Dense: the initialiser's scale must be finite and >= 0, got -1e-50$/);
  assert.throws(() => nd.nn.Dense(2, '', { init: 'normal', scale: 1e39 }),
                /^Error: nn\.Dense: scale must be within float32's range, got 1e\+39$/);
  assert.throws(() => nd.nn.Dense(2, '', { scale: 3e38 }), /^Error: Dense: the initialiser's scale 3e\+38 is too large/);
  nd.tidy(() => {
    assert.deepEqual(nd.random.uniform([2], 0.5, 0.5).toArray(), [0.5, 0.5]);
    assert.deepEqual(nd.random.normal([2], 2, 0).toArray(), [2, 2]);
  });
});

test('typed arrays that are not numbers and bounds that are not an object are refused', async () => {
  const nd = await loading;
  // A DataView read as an empty array; a BigInt64Array failed inside Float32Array.from.
  assert.throws(() => nd.fromArray(new DataView(new ArrayBuffer(16))),
                { name: 'TypeError', message: 'fromArray: expected a typed array of numbers, got a DataView' });
  assert.throws(() => nd.fromArray(new BigInt64Array(2)), /^TypeError: fromArray: .* got a BigInt64Array$/);
  // A typed array whose buffer was transferred: Embind's copy failed with its own TypeError.
  // A view that a shrunk resizable buffer left out of bounds reads as empty, like any JS reader
  // of it (Embind's copy threw a TypeError naming no op and calling the buffer detached).
  if (typeof ArrayBuffer.prototype.resize === 'function') {
    const rab = new ArrayBuffer(32, { maxByteLength: 64 });
    const view = new Float32Array(rab, 16, 4);
    rab.resize(8);
    nd.tidy(() => assert.deepEqual(nd.fromArray(view).shape, [0]));
    assert.throws(() => nd.fromArray(view, [4]), /^Error: fromArray: 0 values do not fill shape \[4\]/);
  }
  const moved = new Float32Array(4);
  structuredClone(moved.buffer, { transfer: [moved.buffer] });
  assert.throws(() => nd.fromArray(moved),
                { name: 'TypeError', message: /^fromArray: the Float32Array's buffer is detached/ });
  nd.tidy(() => assert.equal(nd.fromArray(new Float32Array(0)).size, 0));  // empty, not detached
  // setMaxInflight(5) destructured to { ops: 0, bytes: 0 }: both bounds went, silently.
  const before = nd.engine.stats();
  refused(nd, () => nd.engine.setMaxInflight(5), /^setMaxInflight: expected an object \{ ops, bytes \}, got 5$/);
  refused(nd, () => nd.engine.setMaxInflight(null), /got null$/);
  const after = nd.engine.stats();
  assert.deepEqual([after.maxInflightOps, after.maxInflightBytes], [before.maxInflightOps, before.maxInflightBytes]);
  // The free functions' receivers: "a.transpose is not a function" named no op.
  for (const op of ['transpose', 'reshape', 'broadcastTo', 'copyTo']) {
    assert.throws(() => nd[op](5, [1]), { name: 'TypeError', message: `${op}: expected an NDArray, got number` });
  }
  // load(null) threw at the call instead of rejecting.
  const asyncnd = require('..');
  await assert.rejects(() => asyncnd.load(null), { name: 'TypeError', message: 'load: options must be an object, got null' });
});

test('fromArray count errors name fromArray', async () => {
  const nd = await loading;
  refused(nd, () => nd.fromArray([1, 2, 3], [2, 2]), /^fromArray: 3 values do not fill shape \[2,2\] \(4 elements\)$/);
  refused(nd, () => nd.fromArray(new Float32Array(5), [2, 2]), /^fromArray: 5 values do not fill shape \[2,2\]/);
  refused(nd, () => nd.fromArray([[1, 2], [3, 4]], [3]), /^fromArray: 4 values do not fill shape \[3\]/);
});

test('load options: unknown names, values shown as given, moduleUrl checked and named', async () => {
  const asyncnd = require('..');
  // A misspelt option loaded the default silently.
  await assert.rejects(() => asyncnd.load({ thread: 2 }),
                       { message: "load: unknown option 'thread' (the options are threads, simd, pacing, moduleUrl)" });
  await assert.rejects(() => asyncnd.load({ threads: 1, memory: 1, bound: 2 }), /^Error: load: unknown option 'memory', 'bound' \(/);
  // A string that looks like a number was shown as one.
  await assert.rejects(() => asyncnd.load({ threads: '2' }), { message: "load: threads must be an integer from 1 to 64, got '2'" });
  await assert.rejects(() => asyncnd.load({ threads: [2] }), /got \[2\]$/);
  // moduleUrl: Node's own messages named neither load nor moduleUrl.
  await assert.rejects(() => asyncnd.load({ threads: 1, moduleUrl: 42 }),
                       { name: 'TypeError', message: /^load: moduleUrl must be the path or URL of asyncnd\.js .*got 42$/ });
  await assert.rejects(() => asyncnd.load({ threads: 1, moduleUrl: '' }), /moduleUrl must be .*got ''$/);
  await assert.rejects(() => asyncnd.load({ threads: 1, moduleUrl: '/nonexistent/asyncnd.js', simd: 'simd128' }),
                       /^Error: load: moduleUrl '\/nonexistent\/asyncnd\.js': cannot load \/nonexistent\/asyncnd\.js: Cannot find module/);
  const nd = await loading;
  assert.throws(() => new nd.nn.DataIter('5'), { message: "nn.DataIter: numBatches must be a positive integer, got '5'" });
});

test('errors of broadcastTo name it as JavaScript does, not as broadcast_to', async () => {
  const nd = await loading;
  const a = nd.ones([2, 3]);
  try {
    refused(nd, () => a.broadcastTo([4, 3]), /^broadcastTo: cannot broadcast \[2,3\] with \[4,3\]$/);
    refused(nd, () => nd.broadcastTo(a, [3]), /^broadcastTo: /);
  } finally {
    a.delete();
  }
});

test('an array of another load() is named as such, not as a value of the wrong type', async () => {
  const nd = await loading;
  const other = await require('..').load({ threads: 1, pacing: 'runs' });  // the package's module, not the hooks one
  assert.notEqual(other, nd);
  const a = other.ones([2]), b = nd.ones([2]);
  try {
    refused(nd, () => nd.add(b, a), /^add: the NDArray comes from another load\(\) .*fromArray\(x\.dataSync\(\)\)$/);
    refused(nd, () => b.mul(a), /^mul: the NDArray comes from another load\(\)/);
    refused(nd, () => nd.dot(a, a), /^dot: the NDArray comes from another load\(\)/);
    refused(nd, () => nd.add(b, { shape: [2] }), /^add: expected an NDArray, got object$/);
    // Each module works on.
    assert.deepEqual(Array.from(b.dataSync()), [1, 1]);
    other.tidy(() => assert.deepEqual(Array.from(other.add(a, 1).dataSync()), [2, 2]));
  } finally {
    a.delete();
    b.delete();
  }
});
