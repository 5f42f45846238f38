// Opens a page in headless Chromium (if installed), served with COOP/COEP from a folder, and
// resolves with what the page POSTs to /result: for test/browser.test.js, test/package.test.js,
// test/bundler.test.js and the browser benchmark (bench/browser/bench.mjs).
'use strict';
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');

const chromium = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
// .cjs only for the classic page (a <script> runs any type); module imports need a JavaScript type.
const types = {
  '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.cjs': 'text/javascript',
  '.wasm': 'application/wasm',
};
const skip = chromium ? false : 'SKIPPED: no Chromium (apt-get install chromium) on this machine';

// Serves `root` as / with COOP/COEP, opens `page` (a path under it) in headless Chromium and
// resolves with what the page POSTs to /result (rejects after `timeoutMs`, 90 s by default,
// without one). Each text the page POSTs to /log goes to `onLog` (default: ignored).
async function inChromium(root, page, { timeoutMs = 90000, onLog = () => {} } = {}) {
  let resolveResult;
  const result = new Promise((r) => { resolveResult = r; });
  const server = http.createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/result') {
      let body = '';
      req.on('data', (c) => { body += c; });
      req.on('end', () => { res.end('ok'); resolveResult(JSON.parse(body)); });
      return;
    }
    if (req.method === 'POST' && req.url === '/log') {
      let body = '';
      req.on('data', (c) => { body += c; });
      req.on('end', () => { res.end('ok'); onLog(body); });
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
      timer = setTimeout(() => reject(new Error(`no result from the page within ${timeoutMs / 1000} s`)), timeoutMs);
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
      console.error(`chromium.js: could not remove ${profile}: ${e.message}`);
    }
  }
}

module.exports = { chromium, skip, inChromium };
