// The package in a real browser (headless Chromium, if installed), on cross-origin-isolated pages
// (threads need COOP/COEP): loaded as classic scripts, the blocking calls refused on the page's
// main thread with an Error naming `await x.data()`, `data()` working there, and the full API,
// blocking calls included, inside a Web Worker; then as an ES module (index.browser.mjs) through
// an import map, on the page and in a module Worker.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');

const chromium = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
const root = path.join(__dirname, '..');  // the package folder, served as /
// .cjs only for the classic page (a <script> runs any type); module imports need a JavaScript type.
const types = {
  '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.cjs': 'text/javascript',
  '.wasm': 'application/wasm',
};
const skip = chromium ? false : 'SKIPPED: no Chromium (apt-get install chromium) on this machine';

// Serves the package folder with COOP/COEP, opens `page` (a path under it) in headless Chromium and
// resolves with what the page POSTs to /result.
async function inChromium(page) {
  let resolveResult;
  const result = new Promise((r) => { resolveResult = r; });
  const server = http.createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/result') {
      let body = '';
      req.on('data', (c) => { body += c; });
      req.on('end', () => { res.end('ok'); resolveResult(JSON.parse(body)); });
      return;
    }
    const file = path.join(root, decodeURIComponent(new URL(req.url, 'http://x').pathname));
    if (!file.startsWith(root + path.sep)) { res.writeHead(403); res.end(); return; }
    fs.readFile(file, (err, data) => {
      if (err) { res.writeHead(404); res.end(); return; }
      res.writeHead(200, {
        'Content-Type': types[path.extname(file)] || 'application/octet-stream',
        'Cross-Origin-Opener-Policy': 'same-origin',
        'Cross-Origin-Embedder-Policy': 'require-corp',
      });
      res.end(data);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'asyncnd-chromium-'));
  const url = `http://127.0.0.1:${server.address().port}/${page}`;
  const browser = spawn(chromium, ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
    '--no-first-run', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', `--user-data-dir=${profile}`, url], { stdio: 'ignore', detached: true });
  let timer;
  try {
    return await Promise.race([result, new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error('no result from the page within 90 s')), 90000);
    })]);
  } finally {
    clearTimeout(timer);
    // Chromium's helper processes (renderer, GPU, crash handler) outlive its main process and
    // keep writing into the profile: end the whole process group (detached: Chromium leads it).
    if (browser.exitCode === null) {
      const exited = new Promise((r) => browser.once('exit', r));
      try { process.kill(-browser.pid, 'SIGKILL'); } catch { browser.kill('SIGKILL'); }
      await exited;
    } else {
      try { process.kill(-browser.pid, 'SIGKILL'); } catch { /* the group is gone already */ }
    }
    server.close();
    // A profile a straggler still writes to is left in the temporary folder, not a test failure.
    try {
      fs.rmSync(profile, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
    } catch (e) {
      console.error(`browser.test.js: could not remove ${profile}: ${e.message}`);
    }
  }
}

test('in headless Chromium: classic scripts on a page and in a Web Worker', { skip, timeout: 120000 }, async () => {
  const out = await inChromium('test/browser/page.html');
  assert.equal(out.error, undefined, out.error);
  assert.equal(out.crossOriginIsolated, true);
  assert.equal(out.workers, 2);
  for (const name of ['toArray', 'waitAll', 'item', 'toString']) {
    assert.match(out[name], new RegExp(`^${name}: blocking call on the browser's main thread.*await x\\.data\\(\\)`), name);
  }
  assert.deepEqual(out.data, [3, 3]);
  assert.ok(Number.isFinite(out.dotSum));
  assert.deepEqual(out.worker, {
    sum: 15, arr: [[0, 1, 2], [3, 4, 5]], text: '[[0, 1, 2],\n [3, 4, 5]] <NDArray 2x3 cpu(0)>',
    error: 'dot: inner dimensions differ: a=[2,3] b=[2,3]', live: 0, bytes: 0,
  });
});

test('in headless Chromium: the ES module through an import map, on a page and in a module Worker', {
  skip, timeout: 120000,
}, async () => {
  const out = await inChromium('test/browser/module.html');
  assert.equal(out.error, undefined, out.error);
  assert.equal(out.crossOriginIsolated, true);
  assert.equal(out.sameLoad, true);
  assert.equal(out.classicGlobal, 'undefined');
  assert.equal(out.workers, 2);
  assert.match(out.toArray, /^toArray: blocking call on the browser's main thread.*await x\.data\(\)/);
  assert.deepEqual(out.data, [2, 2, 2, 2]);
  assert.deepEqual(out.worker, { arr: [[0, 2, 4], [6, 8, 10]], sum: 30, workers: 2, live: 0, bytes: 0 });
});
