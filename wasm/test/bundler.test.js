// The package through a real bundler: a tiny app doing `import asyncnd from 'asyncnd'`, with the
// package installed from its `npm pack` tarball, bundled by esbuild (test/bundler/package-lock.json
// pins it; `make test-wasm` installs it) for the browser, served with the files README.md's
// "Browsers" says a bundler user must copy (the two modules' .js, .wasm and .worker.js, next to
// the bundle), and run in headless Chromium on a cross-origin-isolated page with 2 engine workers:
// Chromium runs relaxed SIMD, so the relaxed module is the one picked.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { skip: noChromium, inChromium } = require('./browser/chromium.js');

const pkgDir = path.join(__dirname, '..');
const esbuildDir = path.join(__dirname, 'bundler', 'node_modules', 'esbuild');
const skip = noChromium || (!fs.existsSync(esbuildDir) &&
  'SKIPPED: esbuild is not installed (make test-wasm installs it: npm ci in wasm/test/bundler)');

const app = `import asyncnd from 'asyncnd';
const out = { crossOriginIsolated: self.crossOriginIsolated };
try {
  const nd = await asyncnd.load({ threads: 2 });
  out.workers = nd.engine.stats().workers;
  out.simd = nd.simd;
  const a = nd.tidy(() => nd.arange(6).reshape([2, 3])), b = nd.ones([3, 2]);
  const c = nd.tidy(() => nd.dot(a, b).mul(2));
  out.c = Array.from(await c.data());
  const big = nd.ones([300, 300]);
  const s = nd.tidy(() => nd.dot(big, big).sum());
  out.sum = (await s.data())[0];
  [a, b, c, big, s].forEach((x) => x.delete());
  out.live = nd.engine.stats().liveArrays;
} catch (e) {
  out.error = String((e && e.stack) || e);
}
await fetch('/result', { method: 'POST', body: JSON.stringify(out) });
`;
const page = `<!doctype html>
<script type="module" src="app.js"
  onerror="fetch('/result', { method: 'POST', body: JSON.stringify({ error: 'app.js failed to load' }) })"></script>
`;

test('bundled by esbuild, `import asyncnd from \'asyncnd\'` runs in headless Chromium with 2 workers', {
  skip, timeout: 180000,
}, async () => {
  const esbuild = require(esbuildDir);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'asyncnd-bundler-'));
  try {
    // The package as a user installs it: the tarball's files under node_modules/asyncnd.
    const packed = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', tmp], {
      cwd: pkgDir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }));
    const installed = path.join(tmp, 'node_modules', 'asyncnd');
    fs.mkdirSync(installed, { recursive: true });
    execFileSync('tar', ['-xzf', path.join(tmp, packed[0].filename), '-C', installed, '--strip-components=1']);
    fs.writeFileSync(path.join(tmp, 'app.mjs'), app);

    const pub = path.join(tmp, 'public');
    const built = await esbuild.build({
      entryPoints: [path.join(tmp, 'app.mjs')], bundle: true, format: 'esm', platform: 'browser',
      outfile: path.join(pub, 'app.js'), logLevel: 'silent',
    });
    assert.deepEqual(built.errors, []);
    // What a bundler user copies next to the bundle (README.md, "Browsers").
    fs.mkdirSync(path.join(pub, 'dist'));
    for (const f of ['asyncnd.js', 'asyncnd.wasm', 'asyncnd.worker.js',
      'asyncnd-relaxed.js', 'asyncnd-relaxed.wasm', 'asyncnd-relaxed.worker.js']) {
      fs.copyFileSync(path.join(installed, 'dist', f), path.join(pub, 'dist', f));
    }
    fs.writeFileSync(path.join(pub, 'index.html'), page);

    const out = await inChromium(pub, 'index.html');
    assert.equal(out.error, undefined, out.error);
    assert.deepEqual(out, {
      crossOriginIsolated: true, workers: 2, simd: 'relaxed', c: [6, 6, 24, 24], sum: 300 * 300 * 300, live: 0,
    });
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
