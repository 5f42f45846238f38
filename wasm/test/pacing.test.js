// load({ pacing }) and ASYNCND_CPU_PACING: how the engine's idle workers take queued ops (README,
// "Thread policy"). stats().pacing says which is in force; 'auto' means runs for one worker and
// ops one by one for several; a bad value rejects the load, naming the option or the variable.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const asyncnd = require('..');
const h = require('./helpers');

const loading = h.setup();

test('stats().pacing: auto is runs for one worker, ops one by one for several', async () => {
  const nd = await loading;
  const s = nd.engine.stats();
  assert.equal(s.pacing, s.workers === 1 ? 'runs' : 'ops');
});

test('load({ pacing: "runs" }) with two workers: a burst of small ops taken in runs, every ' +
     'result right and in push order', async () => {
  const nd = await asyncnd.load({ threads: 2, pacing: 'runs' });
  assert.notEqual(nd, await loading, 'another pacing is another module');
  assert.deepEqual([nd.engine.stats().workers, nd.engine.stats().pacing], [2, 'runs']);
  // Independent ops (a burst that runs split between the two workers) and a chain of adds, each
  // on the result of the one before (which must run in push order whoever runs them).
  const x = nd.full([2048], 1);
  let acc = nd.zeros([4]);
  const ys = [];
  for (let i = 0; i < 400; ++i) {
    ys.push(x.add(i));
    const next = acc.add(i);
    acc.delete();
    acc = next;
  }
  const got = await Promise.all(ys.map((y) => y.data()));
  got.forEach((v, i) => {
    assert.equal(v.length, 2048);
    assert.equal(v[0], 1 + i);
    assert.equal(v[2047], 1 + i);
  });
  assert.deepEqual(Array.from(await acc.data()), [79800, 79800, 79800, 79800]);  // 0 + ... + 399
  ys.forEach((y) => y.delete());
  x.delete();
  acc.delete();
  nd.waitAll();
  assert.equal(nd.engine.stats().liveArrays, 0);
  // The same options give the same module; 'ops' another one.
  assert.equal(await asyncnd.load({ threads: 2, pacing: 'runs' }), nd);
  assert.equal((await asyncnd.load({ threads: 2, pacing: 'ops' })).engine.stats().pacing, 'ops');
});

test('a bad pacing rejects the load, naming the option', async () => {
  await assert.rejects(asyncnd.load({ threads: 1, pacing: 'fast' }),
    { message: "load: pacing must be 'auto', 'runs' or 'ops', got 'fast'" });
  await assert.rejects(asyncnd.load({ threads: 1, pacing: 2 }),
    { message: "load: pacing must be 'auto', 'runs' or 'ops', got 2" });
});

test('ASYNCND_CPU_PACING picks it in Node when the option is not given; a bad value rejects', () => {
  const script = `
    const asyncnd = require(${JSON.stringify(path.join(__dirname, '..'))});
    (async () => {
      const out = {};
      process.env.ASYNCND_CPU_PACING = 'sometimes';
      try { await asyncnd.load({ threads: 2 }); out.bad = 'loaded'; } catch (e) { out.bad = e.message; }
      process.env.ASYNCND_CPU_PACING = 'runs';
      out.env = (await asyncnd.load({ threads: 2 })).engine.stats().pacing;
      out.option = (await asyncnd.load({ threads: 2, pacing: 'ops' })).engine.stats().pacing;
      console.log(JSON.stringify(out));
      process.exit(0);
    })();`;
  const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }).trim().split('\n').pop());
  assert.deepEqual(out, {
    bad: "load: ASYNCND_CPU_PACING must be 'auto', 'runs' or 'ops', got 'sometimes'",
    env: 'runs',
    option: 'ops',  // the option wins over the variable
  });
});
