// The npm package from the outside: `npm pack` makes a tarball, a fresh project installs it
// (offline: the package has no dependencies) and uses it through require and through import, and
// in headless Chromium (if installed) as an ES module from node_modules through an import map.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { skip, inChromium } = require('./browser/chromium.js');

const pkgDir = path.join(__dirname, '..');
const npm = (args, cwd) => execFileSync('npm', args, {
  cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'],
  env: { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' },
});

const script = `
  const nd = await asyncnd.load({ threads: 2 });
  const x = nd.ones([1, 2]), y = nd.ones([1, 2]);
  const z = nd.tidy(() => x.mul(y).add(2));
  const v = Array.from(await z.data());
  const s = nd.tidy(() => nd.dot(nd.ones([3, 4]), nd.ones([4, 5])).sum().item());
  let msg = '';
  try { nd.dot(x, x); } catch (e) { msg = e instanceof Error ? e.message : 'not an Error'; }
  [x, y, z].forEach((a) => a.delete());
  nd.waitAll();
  const st = nd.engine.stats();
  const hooks = ['_testing', '_bench'].filter((k) => k in nd);  // the build tree's hooks module only
  console.log(JSON.stringify({ v, s, msg, live: st.liveArrays, bytes: st.bytesInUse, hooks }));
`;

// The installed package's browser entry, on a page of the app; the page POSTs its result.
const page = `<!doctype html>
<script type="importmap">{ "imports": { "asyncnd": "/node_modules/asyncnd/index.browser.mjs" } }</script>
<script type="module" onerror="fetch('/result', { method: 'POST', body: JSON.stringify({ error: 'module failed to load' }) })">
import asyncnd from 'asyncnd';
const out = {};
try {
  const nd = await asyncnd.load({ threads: 2 });
  const y = nd.ones([2, 2]).add(1);
  out.v = Array.from(await y.data());
  y.delete();
  out.workers = nd.engine.stats().workers;
} catch (e) { out.error = String((e && e.stack) || e); }
await fetch('/result', { method: 'POST', body: JSON.stringify(out) });
</script>
`;

test('npm pack, install the tarball in a fresh project, use it from require and import', async (t) => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'asyncnd-pkg-'));
  try {
    const packed = JSON.parse(npm(['pack', '--json', '--pack-destination', tmp], pkgDir));
    const files = packed[0].files.map((f) => f.path).sort();
    for (const f of ['index.cjs', 'index.mjs', 'index.browser.mjs', 'index.d.ts', 'package.json', 'README.md',
                     'dist/asyncnd.js', 'dist/asyncnd-api.mjs', 'dist/asyncnd.wasm', 'dist/asyncnd.worker.js',
                     'dist/asyncnd-relaxed.js', 'dist/asyncnd-relaxed.wasm', 'dist/asyncnd-relaxed.worker.js']) {
      assert.ok(files.includes(f), `${f} in the tarball (${files.join(', ')})`);
    }
    assert.ok(!files.some((f) => f.startsWith('test/') || f.startsWith('testing/') || f.startsWith('tools/')),
              'tests, their hooks and the build tools are not shipped');
    const tarball = path.join(tmp, packed[0].filename);
    const app = path.join(tmp, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
    npm(['install', '--offline', '--no-package-lock', tarball], app);
    assert.ok(fs.existsSync(path.join(app, 'node_modules', 'asyncnd', 'dist', 'asyncnd.wasm')));

    fs.writeFileSync(path.join(app, 'use.cjs'), `const asyncnd = require('asyncnd');\n(async () => {${script}})();\n`);
    fs.writeFileSync(path.join(app, 'use.mjs'), `import asyncnd from 'asyncnd';\nimport { load } from 'asyncnd';\nif (load !== asyncnd.load) throw new Error('named export differs');\n${script}\n`);
    const expected = { v: [3, 3], s: 60, msg: 'dot: inner dimensions differ: a=[1,2] b=[1,2]', live: 0, bytes: 0, hooks: [] };
    for (const file of ['use.cjs', 'use.mjs']) {
      // Plain node, no flags; the process must also exit by itself (engine workers do not hold it).
      const out = execFileSync(process.execPath, [file], { cwd: app, encoding: 'utf8', timeout: 60000 });
      assert.deepEqual(JSON.parse(out.trim()), expected, file);
    }
    await t.test('in headless Chromium, as an ES module through an import map', { skip }, async () => {
      fs.writeFileSync(path.join(app, 'index.html'), page);
      assert.deepEqual(await inChromium(app, 'index.html'), { v: [2, 2, 2, 2], workers: 2 });
    });
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
