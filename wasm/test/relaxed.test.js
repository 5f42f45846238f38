// The two builds of the module and the pick between them: the shipped bytes (the relaxed module
// holds f32x4.relaxed_madd, fd 85 02, and no prototype opcode; the SIMD128 one neither), the
// pick without relaxed SIMD (this process: Node 20 without a flag runs only SIMD128), the errors
// for a bad or impossible choice, and the relaxed module itself in a child Node process with
// --experimental-wasm-relaxed-simd: auto picks it, and its GEMM is right on odd shapes and
// transposes (test/gemm_check.js), next to the SIMD128 module's on the same inputs.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const asyncnd = require('..');
const { scan } = require('../tools/relaxed_opcodes.cjs');

const dist = path.join(__dirname, '..', 'dist');
const RELAXED_FLAG = '--experimental-wasm-relaxed-simd';  // Node 20 (V8 11.3)

test('the shipped bytes: relaxed_madd only in the relaxed module, no prototype opcode anywhere', () => {
  const relaxed = scan(fs.readFileSync(path.join(dist, 'asyncnd-relaxed.wasm')));
  assert.ok(relaxed.madd >= 12, `relaxed_madd count ${relaxed.madd} (the 6x8 micro-kernel has 12)`);
  assert.equal(relaxed.proto, 0, 'prototype f32x4.fma (fd af 01) left in the relaxed module');
  assert.deepEqual(scan(fs.readFileSync(path.join(dist, 'asyncnd.wasm'))), { madd: 0, proto: 0 });
  for (const f of ['asyncnd-relaxed.js', 'asyncnd-relaxed.worker.js']) assert.ok(fs.existsSync(path.join(dist, f)), f);
});

test('without relaxed SIMD (Node 20, no flag): auto loads SIMD128, relaxed rejects, the relaxed bytes do not validate', {
  skip: asyncnd.supportsRelaxedSimd() ? 'this Node runs relaxed SIMD without a flag' : false,
}, async () => {
  assert.equal(WebAssembly.validate(fs.readFileSync(path.join(dist, 'asyncnd-relaxed.wasm'))), false);
  assert.equal(WebAssembly.validate(fs.readFileSync(path.join(dist, 'asyncnd.wasm'))), true);
  const nd = await asyncnd.load({ threads: 1 });
  assert.equal(nd.simd, 'simd128');
  assert.equal(nd.backend, 'cpu (WebAssembly, 128-bit SIMD, worker threads)');
  assert.equal(await asyncnd.load({ threads: 1, simd: 'simd128' }), nd);
  assert.equal(await asyncnd.load({ threads: 1, simd: 'auto' }), nd);
  await assert.rejects(asyncnd.load({ threads: 1, simd: 'relaxed' }),
    new RegExp(`^Error: load: simd 'relaxed': this WebAssembly engine does not run relaxed SIMD .*${RELAXED_FLAG}`));
});

test('a bad choice is an Error naming the option or the variable and the value', async () => {
  await assert.rejects(asyncnd.load({ threads: 1, simd: 'fast' }),
    { message: "load: simd must be 'auto', 'relaxed' or 'simd128', got 'fast'" });
  await assert.rejects(asyncnd.load({ threads: 1, simd: 128 }),
    { message: "load: simd must be 'auto', 'relaxed' or 'simd128', got 128" });
  const out = execFileSync(process.execPath, ['-e', `
    require(${JSON.stringify(path.join(__dirname, '..'))}).load({ threads: 1 })
      .then(() => console.log('loaded'), (e) => console.log(e.message));`],
  { encoding: 'utf8', env: { ...process.env, ASYNCND_WASM_SIMD: 'SIMD128' } });
  assert.equal(out.trim(), "load: ASYNCND_WASM_SIMD must be 'auto', 'relaxed' or 'simd128', got 'SIMD128'");
});

// The child: both modules on the same inputs, auto's pick, the hooks module (no relaxed build
// next to it) falling back, ASYNCND_WASM_SIMD forcing SIMD128; one JSON line.
const child = `
  const asyncnd = require(${JSON.stringify(path.join(__dirname, '..'))});
  const { gemmCheck } = require(${JSON.stringify(path.join(__dirname, 'gemm_check.js'))});
  (async () => {
    const out = { supported: asyncnd.supportsRelaxedSimd() };
    const auto = await asyncnd.load({ threads: 2 });
    const simd128 = await asyncnd.load({ threads: 2, simd: 'simd128' });
    out.auto = { simd: auto.simd, backend: auto.backend };
    out.explicit = (await asyncnd.load({ threads: 2, simd: 'relaxed' })) === auto;
    const r = gemmCheck(auto, 20261125), s = gemmCheck(simd128, 20261125);
    let differ = 0, total = 0;
    r.values.forEach((v, i) => v.forEach((x, j) => { total++; if (x !== s.values[i][j]) differ++; }));
    out.relaxed = { cases: r.cases, worst: r.worst, failures: r.failures };
    out.simd128 = { cases: s.cases, worst: s.worst, failures: s.failures };
    out.differ = differ;
    out.total = total;
    for (const nd of [auto, simd128]) {
      nd.waitAll();
      const st = nd.engine.stats();
      if (st.liveArrays || st.bytesInUse || st.pending) out.leak = st;
    }
    const hooks = await asyncnd.load({ threads: 1, moduleUrl: process.env.HOOKS });
    out.hooks = hooks.simd;
    console.log(JSON.stringify(out));
    process.exit(0);
  })().catch((e) => { console.log(JSON.stringify({ error: String(e && e.stack || e) })); process.exit(0); });`;

test(`the relaxed module in Node with ${RELAXED_FLAG}: picked by auto, GEMM right on odd shapes and transposes`, {
  timeout: 120000,
}, () => {
  const hooksModule = process.env.ASYNCND_HOOKS_MODULE ||
    path.join(__dirname, '..', '..', 'build-wasm', 'hooks', 'asyncnd.js');
  const env = { ...process.env, HOOKS: hooksModule };
  delete env.ASYNCND_WASM_SIMD;
  const out = JSON.parse(execFileSync(process.execPath, [RELAXED_FLAG, '-e', child], { encoding: 'utf8', env }).trim().split('\n').pop());
  assert.equal(out.error, undefined, out.error);
  assert.equal(out.supported, true);
  assert.deepEqual(out.auto, { simd: 'relaxed', backend: 'cpu (WebAssembly, 128-bit SIMD + relaxed FMA, worker threads)' });
  assert.equal(out.explicit, true, "simd: 'relaxed' gives auto's instance");
  assert.deepEqual(out.relaxed.failures, []);
  assert.deepEqual(out.simd128.failures, []);
  assert.ok(out.relaxed.worst <= 2 && out.simd128.worst <= 2);
  assert.equal(out.leak, undefined, JSON.stringify(out.leak));
  assert.equal(out.hooks, 'simd128', 'a moduleUrl with no relaxed build next to it loads as SIMD128');
  // Fused (one rounding per step) where the hardware has FMA: then some products differ from
  // SIMD128's mul + add in the last bits. Reported, not required.
  console.log(`relaxed vs SIMD128: ${out.differ} of ${out.total} products differ in the last bits; ` +
              `worst error / (k u sum|ab|): relaxed ${out.relaxed.worst.toFixed(3)}, SIMD128 ${out.simd128.worst.toFixed(3)}`);

  const forced = execFileSync(process.execPath, [RELAXED_FLAG, '-e', `
    require(${JSON.stringify(path.join(__dirname, '..'))}).load({ threads: 1 })
      .then((nd) => { console.log(nd.simd); process.exit(0); });`],
  { encoding: 'utf8', env: { ...env, ASYNCND_WASM_SIMD: 'simd128' } });
  assert.equal(forced.trim(), 'simd128', 'ASYNCND_WASM_SIMD=simd128 forces the SIMD128 module');
});
