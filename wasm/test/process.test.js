// The package leaves the process's own error handling alone. Emscripten's glue, by default, adds
// process.on('uncaughtException') and ('unhandledRejection') handlers that throw again: after a
// load(), any error of the user's program (ours or not) exited with code 7 and 110 KB of the
// glue's minified source on stderr, and a user's own unhandledRejection handler could not keep the
// process alive. Each case runs in a child Node process.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const pkg = JSON.stringify(path.join(__dirname, '..'));

// Runs `body` in a child after `nd = await load({ threads: 2 })`; returns its status and output.
function child(body) {
  const src = `const asyncnd = require(${pkg});
    const listeners = () => ['uncaughtException', 'unhandledRejection'].map((e) => process.listenerCount(e));
    const before = listeners();
    asyncnd.load({ threads: 2 }).then(async (nd) => { ${body} });`;
  return spawnSync(process.execPath, ['-e', src], { encoding: 'utf8', timeout: 60000 });
}

test('loading adds no process-wide error handler', () => {
  const r = child("console.log(JSON.stringify([before, listeners()])); nd.ones([2]).delete();");
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), [[0, 0], [0, 0]]);
});

test("an error of the user's own, thrown or rejected, ends the process as Node ends it", () => {
  for (const body of ["setTimeout(() => { throw new Error('my own bug'); }, 0);",
                      "throw new Error('my own bug');",  // a rejection of the .then
                      "const x = nd.ones([2]); x.delete(); setTimeout(() => x.add(1), 0);"]) {
    const r = child(body);
    assert.equal(r.status, 1, `${body}: status ${r.status} (7 was the glue's rethrow)`);
    assert.match(r.stderr, /my own bug|add: the array was deleted/, body);
    // Node's own report is a few hundred bytes; the glue's dump was 110 KB.
    assert.ok(r.stderr.length < 5000, `${body}: ${r.stderr.length} bytes on stderr`);
  }
});

test("a user's unhandledRejection handler keeps the process running", () => {
  const r = child(`process.on('unhandledRejection', (e) => console.log('handled: ' + e.message));
    Promise.reject(new Error('ignored on purpose'));
    setTimeout(() => console.log('still running'), 50);`);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'handled: ignored on purpose\nstill running\n');
});
