// The op table from JavaScript: every public op of core's table (the module's opTable, which
// index.cjs reads its op codes from) is an NDArray method and an nd function, declared in
// index.d.ts, and computes what its C++ name says.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const h = require('./helpers');

const loading = h.setup();

// C++ names are snake_case; JavaScript's are camelCase (broadcast_to -> broadcastTo).
const jsName = (name) => name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

test('every op of the table has an NDArray method, an nd function and a declaration', async () => {
  const nd = await loading;
  const all = [...nd.ops.unary, ...nd.ops.binary, ...nd.ops.reduce, ...nd.ops.other];
  assert.ok(nd.ops.unary.includes('exp') && nd.ops.binary.includes('pow') && nd.ops.reduce.includes('sum'));
  const dts = fs.readFileSync(path.join(__dirname, '..', 'index.d.ts'), 'utf8');
  const x = nd.ones([2, 3]);
  const missing = [];
  for (const name of all) {
    const js = jsName(name);
    if (typeof x[js] !== 'function') missing.push(`NDArray.prototype.${js}`);
    if (typeof nd[js] !== 'function') missing.push(`nd.${js}`);
    if (!new RegExp(`\\b${js}\\(`).test(dts)) missing.push(`index.d.ts: ${js}(`);
  }
  assert.deepStrictEqual(missing, []);
  x.delete();
});

test('op codes follow the table: each op runs its own kernel', async () => {
  const nd = await loading;
  nd.tidy(() => {
  const x = nd.fromArray([0.5, 1, 2, 4], [2, 2]);
  const vals = (a) => Array.from(a.dataSync());
  const close = (got, want) => got.forEach((g, i) => assert.ok(Math.abs(g - want[i]) <= 1e-5 * Math.max(1, Math.abs(want[i])), `${g} vs ${want[i]}`));
  // The reference: JavaScript's Math function of the same name, where there is one.
  const unary = { neg: (v) => -v, relu: (v) => Math.max(v, 0), sigmoid: (v) => 1 / (1 + Math.exp(-v)) };
  for (const name of nd.ops.unary) {
    const f = unary[name] || Math[name];
    assert.ok(f, `no reference for ${name}: add one to this test`);
    close(vals(x[name]()), vals(x).map(f));
  }
  const binary = { add: (a, b) => a + b, sub: (a, b) => a - b, mul: (a, b) => a * b, div: (a, b) => a / b, pow: Math.pow };
  for (const name of nd.ops.binary) {
    close(vals(x[name](x)), vals(x).map((v) => binary[name](v, v)));
    close(vals(x[name](3)), vals(x).map((v) => binary[name](v, 3)));
    close(vals(nd[name](3, x)), vals(x).map((v) => binary[name](3, v)));  // the scalar on the left
  }
  close(vals(x.sum()), [7.5]);
  close(vals(x.mean(0)), [1.25, 2.5]);
  close(vals(x.max(1)), [1, 4]);
  close(vals(x.norm()), [Math.sqrt(0.25 + 1 + 4 + 16)]);
  close(vals(x.broadcastTo([3, 2, 2])), [...vals(x), ...vals(x), ...vals(x)]);
  close(vals(x.copyTo()), vals(x));
  assert.throws(() => x.copyTo('gpu'), /copyTo: no device 'gpu'/);
  });
});
