// show.test.mjs: how the code cell writes values (show.cjs): plain data as JSON writes it, and what
// JSON gets wrong or refuses spelled out (cycles, Map, Set, undefined, NaN, bigints, functions,
// sparse arrays, nested errors and NDArrays), bounded work on large or deep values, and no throw
// for objects that refuse to be read.
// Run: node --test web/test/show.test.mjs  (make test-web)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const { show } = createRequire(import.meta.url)('../show.cjs');

test('plain data is written as JSON writes it', () => {
  for (const v of [{ a: 1, b: [1, 2, { c: 'x"y' }] }, [], {}, [true, null, 'é'], { 'a b': [[]] }, 1.5, -3, true, null]) {
    assert.equal(show(v), JSON.stringify(v));
  }
  assert.equal(show('text'), 'text');
  assert.equal(show('', { quote: true }), '""');
  assert.equal(show(new Date(Date.UTC(2026, 10, 29))), '"2026-11-29T00:00:00.000Z"');  // toJSON
  assert.equal(show({ toJSON: () => ({ as: 'json' }) }), '{"as":"json"}');
});

test('what JSON gets wrong or refuses is spelled out', () => {
  const cyclic = { a: 1 };
  cyclic.self = cyclic;
  cyclic.list = [cyclic, 2];
  assert.equal(show(cyclic), '{"a":1,"self":[Circular],"list":[[Circular],2]}');
  const shared = [1];
  assert.equal(show({ x: shared, y: shared }), '{"x":[1],"y":[1]}', 'a value seen twice is not a cycle');
  assert.equal(show(new Map([['a', 1], [{ k: 2 }, new Set([3])]])), 'Map(2) {"a" => 1, {"k":2} => Set(1) {3}}');
  assert.equal(show(new Set()), 'Set(0) {}');
  assert.equal(show({ u: undefined, n: NaN, i: -Infinity, z: -0, b: 10n }), '{"u":undefined,"n":NaN,"i":-Infinity,"z":-0,"b":10n}');
  assert.equal(show([function f() {}, () => {}, Symbol('s')]), '[[Function: f],[Function (anonymous)],Symbol(s)]');
  assert.equal(show([1, , 3]), '[1,<empty>,3]');  // eslint-disable-line no-sparse-arrays
  assert.equal(show({ e: new TypeError('bad') }), '{"e":[TypeError: bad]}');
  assert.equal(show({ t: new Float32Array([1.25, 1 / 3]), d: new DataView(new ArrayBuffer(8)) }),
               '{"t":Float32Array(2) [1.25, 0.333333],"d":DataView(8)}');
  assert.equal(show(new BigInt64Array(2)), 'BigInt64Array(2) [0n, 0n]');
  assert.equal(show(Object.create(null)), '{}');
});

test('NDArrays inside values are written by their shape', () => {
  class NDArray {
    constructor(shape, isDeleted = false) { this.shape = shape; this.isDeleted = isDeleted; }
  }
  const ndarray = (x) => x instanceof NDArray;
  assert.equal(show({ w: new NDArray([2, 3]), s: new NDArray([]), gone: new NDArray([1], true) }, { ndarray }),
               '{"w":<NDArray 2x3>,"s":<NDArray scalar>,"gone":<deleted NDArray>}');
  const revoked = Proxy.revocable({}, {});
  revoked.revoke();
  assert.match(show([revoked.proxy], { ndarray }), /^\[<unreadable: .*revoked>\]$/);
});

test('large and deep values: bounded work', () => {
  const big = Array.from({ length: 1e5 }, (_, i) => i);
  const text = show(big);  // the first 100 entries, then a count
  assert.ok(text.startsWith('[0,1,2,') && text.endsWith(',99,... 99900 more]'), text.slice(-30));
  assert.ok(show(new Map(big.map((i) => [i, i]))).endsWith('99 => 99, ... 99900 more}'));
  assert.ok(show(Object.fromEntries(big.slice(0, 150).map((i) => [`k${i}`, i]))).endsWith('"k99":99,... 50 more}'));
  let deep = [];
  for (let i = 0; i < 100000; ++i) deep = [deep];  // JSON.stringify overflows the stack here
  assert.equal(show(deep), '[[[[[[[[[Array]]]]]]]]]');
});

test('values that refuse to be read never make show throw', () => {
  const getter = { a: 1, get b() { throw new Error('no b'); } };
  assert.equal(show(getter), '{"a":1,<unreadable: no b>}');
  assert.equal(show({ toJSON() { throw new RangeError('no json'); } }), '[object Object]');
  const hostile = new Proxy({}, { ownKeys() { throw new Error('no keys'); } });
  assert.equal(show(hostile), '{<unreadable: no keys>}');
  const revoked = Proxy.revocable({}, {});
  revoked.revoke();
  assert.equal(show(revoked.proxy), '[object]');
  assert.equal(show({ toJSON() { return this; } }), '[Circular]');
});
