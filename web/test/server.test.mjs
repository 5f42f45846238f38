// server.test.mjs: the playground server sends the cross-origin isolation headers and the right
// MIME types, and serves nothing outside web/ and the built module: `..` plain or percent-encoded,
// backslashes, symlinks that leave the tree, the package's other files and web/node_modules, in
// any case. Its command line takes only decimal ports and says what it refused; it prints IPv6
// addresses in brackets; an error after listening is reported, not fatal.
// Run: node --test web/test/server.test.mjs  (make test-web; needs wasm/dist/ from make wasm)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { startServer, parseCommandLine, serverUrl, WEB_ROOT, WASM_ROOT } from '../server.mjs';

let server, port;
before(async () => {
  server = await startServer({ port: 0 });
  port = server.address().port;
});
after(() => {
  server.closeAllConnections();
  server.close();
});

// A raw request: the path goes out exactly as written (no URL normalisation on our side).
function get(rawPath, method = 'GET') {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: rawPath, method }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end();
  });
}

function assertIsolationHeaders(r) {
  assert.equal(r.headers['cross-origin-opener-policy'], 'same-origin');
  assert.equal(r.headers['cross-origin-embedder-policy'], 'require-corp');
  assert.equal(r.headers['cross-origin-resource-policy'], 'same-origin');
}

test('the page, its scripts and the module come with COOP/COEP and their MIME types', async () => {
  const cases = [
    ['/', 'text/html; charset=utf-8'],
    ['/index.html', 'text/html; charset=utf-8'],
    ['/app.js', 'text/javascript; charset=utf-8'],
    ['/worker.js', 'text/javascript; charset=utf-8'],
    ['/style.css', 'text/css; charset=utf-8'],
    ['/wasm/index.cjs', 'text/javascript; charset=utf-8'],
    ['/wasm/dist/asyncnd.js', 'text/javascript; charset=utf-8'],
    ['/wasm/dist/asyncnd.worker.js', 'text/javascript; charset=utf-8'],
    ['/wasm/dist/asyncnd.wasm', 'application/wasm'],
    ['/experiments/chapter.cjs', 'text/javascript; charset=utf-8'],
  ];
  for (const [p, type] of cases) {
    const r = await get(p);
    assert.equal(r.status, 200, p);
    assert.equal(r.headers['content-type'], type, p);
    assertIsolationHeaders(r);
  }
  const wasm = await get('/wasm/dist/asyncnd.wasm');
  assert.deepEqual([...wasm.body.subarray(0, 4)], [0, 0x61, 0x73, 0x6d]);  // "\0asm"
  assert.equal(Number(wasm.headers['content-length']), fs.statSync(path.join(WASM_ROOT, 'dist', 'asyncnd.wasm')).size);
  const head = await get('/index.html', 'HEAD');
  assert.equal(head.status, 200);
  assert.equal(head.body.length, 0);
});

test('errors carry the isolation headers too; other methods are refused', async () => {
  const r = await get('/no-such-file.js');
  assert.equal(r.status, 404);
  assertIsolationHeaders(r);
  assert.equal((await get('/index.html', 'POST')).status, 405);
  assert.equal((await get('/index.html', 'PUT')).status, 405);
});

test('path traversal is refused, plain or encoded', async () => {
  const attempts = [
    '/../Makefile',
    '/../../etc/passwd',
    '/%2e%2e/Makefile',
    '/%2E%2E/%2E%2E/etc/passwd',
    '/%2e%2e%2fMakefile',
    '/wasm/dist/../../Makefile',
    '/wasm/dist/%2e%2e/%2e%2e/Makefile',
    '/wasm/dist/..%2f..%2fMakefile',
    '/wasm/dist/%2e%2e/CMakeLists.txt',
    '/experiments/../Makefile',
    '/experiments/%2e%2e/Makefile',
    '/./index.html',
    '/..%5cMakefile',
    '/%5c..%5cMakefile',
    '/index.html%00.png',
    '/%E0%A4%A',
  ];
  for (const p of attempts) {
    const r = await get(p);
    assert.ok([400, 403].includes(r.status), `${p} answered ${r.status}`);
    assert.doesNotMatch(r.body.toString(), /PACKAGES|root:|cmake_minimum_required/, p);
    assertIsolationHeaders(r);
  }
});

test('only web/ (without node_modules and tests), the built module and the experiments are served', async () => {
  for (const p of ['/wasm/CMakeLists.txt', '/wasm/package.json', '/wasm/bindings.cpp', '/wasm/test/',
                   '/node_modules/chart.js/package.json', '/test/e2e.mjs', '/Makefile', '/wasm/dist/',
                   '/experiments/chapter.h', '/experiments/', '/experiments']) {
    const r = await get(p);
    assert.equal(r.status, 404, `${p} answered ${r.status}`);
  }
});

test('a symlink inside web/ that points outside is refused; one that stays inside is served', async () => {
  const out = path.join(WEB_ROOT, `.test-link-out-${process.pid}`);
  const inside = path.join(WEB_ROOT, `.test-link-in-${process.pid}.html`);
  fs.symlinkSync(path.join(WEB_ROOT, '..', 'Makefile'), out);
  fs.symlinkSync(path.join(WEB_ROOT, 'index.html'), inside);
  try {
    const r = await get(`/${path.basename(out)}`);
    assert.equal(r.status, 403);
    assert.doesNotMatch(r.body.toString(), /PACKAGES/);
    const ok = await get(`/${path.basename(inside)}`);
    assert.equal(ok.status, 200);
  } finally {
    fs.unlinkSync(out);
    fs.unlinkSync(inside);
  }
});

test('web/test and web/node_modules are refused in any case (case-insensitive file systems)', async () => {
  // A folder named TEST: its own folder on Linux, web/test itself on macOS or Windows (EEXIST).
  const upper = path.join(WEB_ROOT, 'TEST');
  let made = false;
  try {
    fs.mkdirSync(upper);
    made = true;
    fs.writeFileSync(path.join(upper, 'e2e.mjs'), 'secret\n');
  } catch (e) {
    if (e.code !== 'EEXIST') throw e;
  }
  try {
    for (const p of ['/TEST/e2e.mjs', '/Test/e2e.mjs', '/Node_Modules/chart.js/package.json']) {
      const r = await get(p);
      assert.equal(r.status, 404, `${p} answered ${r.status}`);
    }
  } finally {
    if (made) fs.rmSync(upper, { recursive: true });
  }
});

test('the command line: decimal ports 0..65535 only, refused values named; an empty host refused', () => {
  assert.deepEqual(parseCommandLine([], {}), { port: 8080, host: '127.0.0.1' });
  assert.deepEqual(parseCommandLine(['--port', '9000', '--host', '0.0.0.0'], {}), { port: 9000, host: '0.0.0.0' });
  assert.deepEqual(parseCommandLine([], { PORT: '0', HOST: '::1' }), { port: 0, host: '::1' });
  assert.deepEqual(parseCommandLine(['--port', '65535'], { PORT: 'x' }), { port: 65535, host: '127.0.0.1' });
  for (const bad of ['', ' ', 'abc', '0x50', '1e3', '-1', '65536', '80.5', '+80', ' 80']) {
    assert.throws(() => parseCommandLine(['--port', bad], {}), (e) => e.message.includes(`bad port '${bad}' (--port)`), `--port '${bad}'`);
    assert.throws(() => parseCommandLine([], { PORT: bad }), (e) => e.message.includes(`bad port '${bad}' (PORT)`), `PORT='${bad}'`);
  }
  assert.throws(() => parseCommandLine(['--port'], {}), /--port needs a value/);
  assert.throws(() => parseCommandLine(['--host'], {}), /--host needs a value/);
  assert.throws(() => parseCommandLine(['--prot', '9000'], {}), /unknown argument '--prot'/);
  assert.throws(() => parseCommandLine([], { HOST: '' }), /bad host '' \(HOST\)/);
});

test('the command line refuses before starting: exit 2 and the value as typed', () => {
  const server = path.join(WEB_ROOT, 'server.mjs');
  for (const [args, env, message] of [[['--port', 'abc'], {}, "bad port 'abc' (--port)"],
                                      [['--port'], {}, '--port needs a value'],
                                      [[], { PORT: '' }, "bad port '' (PORT)"]]) {
    const r = spawnSync(process.execPath, [server, ...args], { env: { ...process.env, PORT: undefined, ...env }, encoding: 'utf8', timeout: 10000 });
    assert.equal(r.status, 2, `${args} ${JSON.stringify(env)}: ${r.stderr}`);
    assert.ok(r.stderr.includes(`server: ${message}`), r.stderr);
  }
});

test('the address printed: IPv6 in brackets', () => {
  assert.equal(serverUrl({ address: '127.0.0.1', port: 8080 }), 'http://127.0.0.1:8080/');
  assert.equal(serverUrl({ address: '::1', port: 8080 }), 'http://[::1]:8080/');
  assert.equal(serverUrl({ address: '::', port: 9000 }), 'http://[::]:9000/');
});

test('an error after listening (an accept error) is reported and the server keeps serving', async () => {
  const logged = [];
  const s = await startServer({ port: 0, log: (m) => logged.push(m) });
  try {
    s.emit('error', Object.assign(new Error('accept EMFILE'), { code: 'EMFILE' }));
    s.emit('error', new Error('accept EMFILE again'));
    assert.deepEqual(logged, ['server: accept EMFILE', 'server: accept EMFILE again']);
    const r = await new Promise((resolve, reject) => {
      http.get({ host: '127.0.0.1', port: s.address().port, path: '/' }, (res) => { res.resume(); resolve(res.statusCode); }).on('error', reject);
    });
    assert.equal(r, 200);
  } finally {
    s.closeAllConnections();
    s.close();
  }
});
