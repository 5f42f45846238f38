// The engine's default bounds: a quarter of the module's 2 GiB heap in bytes (and 524288 ops),
// reported by stats(); setMaxInflight and resetMaxInflight; ASYNCND_MAX_INFLIGHT_BYTES/_OPS from
// the process's environment, and bad values; the chapter's E6 without a read and without any
// setting completes with a bounded heap.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const h = require('./helpers');

const loading = h.setup();
const HEAP_MAX = 2 ** 31;  // -sMAXIMUM_MEMORY in wasm/CMakeLists.txt
const DEFAULT_BYTES = HEAP_MAX / 4;

test('stats() reports the default bounds, then what setMaxInflight and resetMaxInflight set', async () => {
  const nd = await loading;
  let s = nd.engine.stats();
  assert.equal(s.maxInflightOps, 524288);
  assert.equal(s.maxInflightBytes, DEFAULT_BYTES);
  assert.equal(s.maxInflightBytesSource, 'wasm heap');
  assert.equal(typeof s.pushWaits, 'number');
  nd.engine.setMaxInflight({ ops: 7, bytes: 1000 });
  s = nd.engine.stats();
  assert.deepEqual([s.maxInflightOps, s.maxInflightBytes, s.maxInflightBytesSource], [7, 1000, 'user']);
  nd.engine.setMaxInflight({ ops: 7, bytes: 0 });  // 0: no byte bound
  assert.equal(nd.engine.stats().maxInflightBytesSource, 'none');
  nd.engine.resetMaxInflight();
  s = nd.engine.stats();
  assert.deepEqual([s.maxInflightOps, s.maxInflightBytes, s.maxInflightBytesSource], [524288, DEFAULT_BYTES, 'wasm heap']);
  for (const bad of [{ bytes: -1 }, { bytes: 1.5 }, { ops: NaN }, { bytes: 'lots' }]) {
    assert.throws(() => nd.engine.setMaxInflight(bad), /setMaxInflight: (ops|bytes) must be an integer from 0 to 4294967295, got /);
  }
  assert.equal(nd.engine.stats().maxInflightBytes, DEFAULT_BYTES, 'a rejected call changed the bound');
});

test('E6 without a read and without any setting: the default bound holds the heap', async () => {
  const nd = await loading;
  const chapter = require('../../experiments/chapter.cjs');
  // 12 batches of the chapter's MLP would queue about 760 MB unbounded (63 MB of activations
  // each), more than the 512 MiB bound: pushes must wait, and memory stays under the bound plus
  // about a batch.
  const batches = 12, oneBatch = 64e6;
  const r = chapter.e6Run(nd, 'default', { batches });
  assert.equal(r.error, null);
  assert.equal(r.batchesDone, batches);
  assert.equal(r.boundBytes, DEFAULT_BYTES);
  assert.equal(r.boundSource, 'wasm heap');
  assert.ok(r.pushWaits > 0, 'no push waited: the loop was not held back');
  assert.ok(r.peakBytes <= DEFAULT_BYTES + oneBatch + 30e6,  // + parameters and gradients (~6 MB)
            `engine peak ${r.peakBytes} over the bound ${DEFAULT_BYTES} + one batch`);
  assert.ok(r.heapPeakBytes < DEFAULT_BYTES + 256 * 2 ** 20, `wasm heap grew to ${r.heapPeakBytes}`);
  assert.ok(Number.isFinite(r.totalS) && r.totalS > 0);
});

test('ASYNCND_MAX_INFLIGHT_BYTES / _OPS override the defaults in Node; bad values are an Error at load', () => {
  // A child process: the module reads them when it loads. Failed loads are not cached, so one
  // child tries the bad values first and a good one last.
  const script = `
    const asyncnd = require(${JSON.stringify(path.join(__dirname, '..'))});
    (async () => {
      const out = {};
      for (const [k, v] of ${JSON.stringify([
    ['ASYNCND_MAX_INFLIGHT_BYTES', '-1'], ['ASYNCND_MAX_INFLIGHT_BYTES', '12abc'],
    ['ASYNCND_MAX_INFLIGHT_BYTES', 'lots'], ['ASYNCND_MAX_INFLIGHT_BYTES', '99999999999999999999'],
    ['ASYNCND_MAX_INFLIGHT_OPS', '1e6']])}) {
        process.env[k] = v;
        try { await asyncnd.load({ threads: 1 }); out[k + '=' + v] = 'loaded'; }
        catch (e) { out[k + '=' + v] = e.message; }
        delete process.env[k];
      }
      process.env.ASYNCND_MAX_INFLIGHT_BYTES = '1000000';
      process.env.ASYNCND_MAX_INFLIGHT_OPS = '0';
      const s = (await asyncnd.load({ threads: 1 })).engine.stats();
      out.good = [s.maxInflightOps, s.maxInflightBytes, s.maxInflightBytesSource];
      console.log(JSON.stringify(out));
      process.exit(0);
    })();`;
  const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }).trim().split('\n').pop());
  assert.deepEqual(out.good, [0, 1e6, 'env']);
  // A failed load drops its module's workers: they kept Node alive after the rejection. This child
  // ends by itself (no process.exit), within the timeout.
  const alone = `
    require(${JSON.stringify(path.join(__dirname, '..'))}).load({ threads: 2 })
      .then(() => console.log('loaded'), (e) => console.log('rejected: ' + e.message));`;
  const ended = execFileSync(process.execPath, ['-e', alone], {
    encoding: 'utf8', timeout: 30000, env: { ...process.env, ASYNCND_MAX_INFLIGHT_BYTES: 'abc' },
  });
  assert.match(ended, /^rejected: ASYNCND_MAX_INFLIGHT_BYTES: expected .* got 'abc'/);
  for (const [key, message] of Object.entries(out)) {
    if (key === 'good') continue;
    const [name, value] = key.split('=');
    assert.match(message, new RegExp(`^${name}: expected .* got '${value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}'$`), key);
  }
});
