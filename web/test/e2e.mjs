// e2e.mjs: the playground end to end in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core). Starts the server on a free port, loads the page, runs every experiment panel
// and checks that its figures are numbers, that E2's graph has the ops and arrays of
// z = x * y + 2 with the right edges, that each run's timeline has events; runs the code cell
// with a snippet and with one that throws (falsy values, unprintable ones, syntax errors, long
// output); refuses fields out of range; fails on any console error. Then the page in each of
// its languages: switched live (results kept and re-rendered), E2 run again, no text overflowing
// its box, every text on the page from that language's dictionary; ?lang=, the remembered choice
// and the browser's preference. Screenshots go to build/playground/ (<lang>-*.png per language).
// Run from the repository root (make test-web):  node web/test/e2e.mjs
import fs from 'node:fs';
import path from 'node:path';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { startServer } from '../server.mjs';
import { LANGUAGES, STORAGE_KEY } from '../i18n/index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');
const require = createRequire(path.join(here, '..', 'package.json'));
const { chromium } = require('playwright-core');

const SHOTS = path.join(repo, 'build', 'playground');
fs.mkdirSync(SHOTS, { recursive: true });
const CHROMIUM = process.env.CHROMIUM ||
  ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
// As the package's browser tests (wasm/test/browser/chromium.js): a machine without Chromium (make
// setup installs it) says so, rather than fail with Playwright's launch error.
if (!CHROMIUM || !fs.existsSync(CHROMIUM)) {
  console.log(`e2e: SKIPPED: no Chromium${CHROMIUM ? ` at ${CHROMIUM}` : ''} ` +
              '(apt-get install chromium, or CHROMIUM=/path/to/chromium)');
  process.exit(0);
}
const THREADS = Number(process.env.PLAYGROUND_THREADS || 2);

let passed = 0, failed = 0;
async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    ++passed;
    console.log(`ok   ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  } catch (e) {
    ++failed;
    console.log(`FAIL ${name}\n     ${String(e && e.stack || e).split('\n').join('\n     ')}`);
  }
}

const server = await startServer({ port: 0 });
const base = `http://127.0.0.1:${server.address().port}/`;
const userDataDir = fs.mkdtempSync(path.join(repo, 'build', 'chromium-profile-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: CHROMIUM,
  headless: true,
  locale: 'en-US',  // the browser's preference: the page starts in English
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1440, height: 1000 },
});
const page = context.pages()[0] || await context.newPage();
const consoleErrors = [];
page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
// Warnings too (Cytoscape warned of a custom wheel sensitivity and of width: 'label' at each graph).
const consoleWarnings = [];
page.on('console', (m) => { if (m.type() === 'warning') consoleWarnings.push(m.text()); });
page.on('pageerror', (e) => consoleErrors.push(`page error: ${e.message}`));
// Nothing may come from outside this server: the page is self-contained.
const outside = [];
await page.route('**/*', (route) => {
  const u = route.request().url();
  if (u.startsWith(base) || u.startsWith('data:') || u.startsWith('blob:')) return route.continue();
  outside.push(u);
  return route.abort();
});

// Runs a code cell: its state ('done', 'failed', 'invalid' when refused) and its output lines.
async function runCell(src) {
  await page.evaluate((s) => window.playground.editor.setValue(s), src);
  await page.click('#code-run');
  await page.waitForFunction(() => ['done', 'failed', 'invalid'].includes(document.querySelector('#panel-code').dataset.state));
  return page.evaluate(() => ({ state: document.querySelector('#panel-code').dataset.state,
                                lines: [...document.querySelectorAll('#code-output .line')].map((l) => l.textContent) }));
}

const figures = (key) => page.$$eval(`#panel-${key} td[data-fig]`,
  (tds) => tds.map((td) => ({ key: td.dataset.fig, value: td.dataset.value, text: td.textContent })));

async function runPanel(key, params = {}, timeout = 120000, shot = `${key}.png`) {
  for (const [k, v] of Object.entries(params)) await page.fill(`#panel-${key} input[data-param="${k}"]`, String(v));
  await page.click(`#panel-${key} button.run`);
  await page.waitForFunction((k) => {
    const s = document.querySelector(`#panel-${k}`).dataset.state;
    return s === 'done' || s === 'failed';
  }, key, { timeout });
  const st = await page.$eval(`#panel-${key}`, (e) => e.dataset.state);
  const err = await page.$eval(`#panel-${key}`, (e) => e.querySelector('.error')?.textContent || '');
  assert.equal(st, 'done', `${key} failed: ${err}`);
  const figs = await figures(key);
  assert.ok(figs.length > 0, `${key}: no figures`);
  for (const f of figs) {
    assert.ok(f.value !== '' && Number.isFinite(Number(f.value)), `${key}: figure ${f.key} is not a number: '${f.value}'`);
  }
  const events = await page.$eval(`#panel-${key} .timeline-box`, (e) => Number(e.dataset.events || 0));
  assert.ok(events > 0, `${key}: the timeline has no events`);
  const drawn = await page.evaluate((k) => {
    const c = window.playground.timelines[k];
    return c ? c.data.datasets.reduce((n, d) => n + d.data.length, 0) : 0;
  }, key);
  assert.equal(drawn, events, `${key}: the timeline chart draws ${drawn} bars for ${events} events`);
  const el = await page.$(`#panel-${key}`);
  await el.screenshot({ path: path.join(SHOTS, shot) });
  return Object.fromEntries(figs.map((f) => [f.key, Number(f.value)]));
}

try {
  await check('page loads cross-origin isolated, the worker starts the module', async () => {
    await page.goto(base);
    assert.equal(await page.evaluate(() => window.crossOriginIsolated), true);
    await page.waitForFunction(() => window.playground.ready, null, { timeout: 60000 });
    if (await page.evaluate(() => window.playground.threads) !== THREADS) {
      await page.selectOption('#threads', String(THREADS));  // restarts the worker by itself
      await page.waitForFunction((n) => window.playground.ready && window.playground.threads === n, THREADS, { timeout: 60000 });
    }
    const status = await page.textContent('#status-text');
    assert.match(status, new RegExp(`${THREADS} engine threads`));
    assert.equal(await page.$eval('#isolation', (e) => e.hidden), true);
    // The page stays responsive: a frame renders while the Worker loads and runs.
    assert.equal(await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r(true)))), true);
  });

  await check('E1: synchronous vs engine, return vs waitAll', async () => {
    const f = await runPanel('E1');
    assert.ok(f.syncS > 0 && f.finishedS > 0 && f.returnedS >= 0);
    assert.ok(f.returnedS < f.finishedS, `the loop returned (${f.returnedS}) before waitAll (${f.finishedS})`);
    // The timeline zooms: a wheel turn over it narrows the visible time range; reset restores it.
    const range = () => page.evaluate(() => {
      const x = window.playground.timelines.E1.scales.x;
      return x.max - x.min;
    });
    const full = await range();
    const box = await (await page.$('#panel-E1 .timeline-wrap canvas')).boundingBox();
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await page.mouse.wheel(0, -400);
    await page.waitForFunction((r) => {
      const x = window.playground.timelines.E1.scales.x;
      return x.max - x.min < r * 0.95;
    }, full, { timeout: 5000 });
    await page.click('#panel-E1 .reset-zoom');
    assert.ok(Math.abs(await range() - full) < full * 1e-6);
  });

  await check('E2: the graph of z = x * y + 2 from the profiler', async () => {
    const f = await runPanel('E2');
    assert.equal(f.ops, 4);
    const g = await page.evaluate(() => {
      const cy = window.playground.graphs.E2;
      const label = (id) => cy.getElementById(id).data('label');
      return {
        ops: cy.nodes('.op').map((n) => n.data('label')).sort(),
        vars: cy.nodes('.var').map((n) => n.data('label')).sort(),
        edges: cy.edges().map((e) => `${label(e.data('source'))}->${label(e.data('target'))}`).sort(),
        rendered: document.querySelector('#graph-E2 canvas') !== null,
      };
    });
    assert.deepEqual(g.ops, ['add', 'mul', 'ones', 'ones']);
    assert.deepEqual(g.vars, ['t1', 'x', 'y', 'z']);
    assert.deepEqual(g.edges, ['add->z', 'mul->t1', 'ones->x', 'ones->y', 't1->add', 'x->mul', 'y->mul']);
    assert.ok(g.rendered, 'the graph was not drawn');
  });

  await check('E3: barriers', async () => {
    const f = await runPanel('E3', { n: 1000 });
    assert.ok(f.waitToReadS > 0 && f.waitAllS > 0 && f.waitAll2S > 0 && f.waitFirstOfTwoS > 0);
  });

  await check('E4: implicit blockers and await data()', async () => {
    const f = await runPanel('E4', { n: 1000 });
    assert.ok(f.dataSyncS > 0 && f.itemS > 0 && f.toStringS > 0 && f.awaitDataS > 0);
    assert.ok(f.dataReturnedS < f.awaitDataS, 'data() must return before the values are ready');
  });

  await check('E5: 10000 ops, t1 t2 t3', async () => {
    const f = await runPanel('E5');
    for (const k of ['syncS', 'asyncS', 't1', 't2', 't3', 'speedup']) assert.ok(f[k] >= 0, `${k}=${f[k]}`);
    assert.ok(f.t1 > 0 && f.t2 > 0);
    // One clock for every engine thread (wasm/backends.cpp): no op of the 1000 drawn appears to
    // start before an op it reads finished on another thread.
    const note = await page.textContent('#panel-E5 .timeline-note');
    assert.ok(!/clocks disagree/.test(note), note);
  });

  await check('E6: trains the MLP four ways on nd.nn; peak memory per mode and the memory line chart', async () => {
    assert.equal(await page.evaluate(() => window.playground.hasNN), true, 'the module has no nd.nn');
    const p = await page.$('#panel-E6');
    assert.equal(await p.$('.notice') === null || await p.$eval('.notice', (n) => n.hidden || !/cannot run/.test(n.textContent)), true);
    // Three batches of the chapter's network (1024 x 512, Dense 2048/512/1) per mode: the full
    // configuration (100 batches) is the panel's batch control, too slow for a test on 2 cores.
    const f = await runPanel('E6', { batches: 3 }, 600000);
    for (const m of ['sync', 'nosync', 'bounded', 'default']) {
      assert.ok(f[`${m}.peakBytes`] > 0, `${m}: peak ${f[`${m}.peakBytes`]}`);
      assert.ok(f[`${m}.perBatchS`] > 0 && f[`${m}.pushedS`] > 0, `${m}: times`);
    }
    // One batch's activations alone are tens of MB: reading each batch keeps about one in flight.
    assert.ok(f['sync.peakBytes'] > 10e6, `sync peak ${f['sync.peakBytes']}`);
    // The line chart: one line per mode, each with the memory samples (2 per batch at least).
    const lines = await page.evaluate(() => {
      const c = window.playground.charts.E6;
      return c ? { type: c.config.type, n: c.data.datasets.map((d) => d.data.length),
                   drawn: !!document.querySelector('#panel-E6 .chart-box canvas, #panel-E6 canvas') } : null;
    });
    assert.ok(lines, 'no E6 chart');
    assert.equal(lines.type, 'line');
    assert.equal(lines.n.length, 4);
    // (b) runs with the byte bound off, (d) with the engine's default (a quarter of 2 GiB).
    assert.equal(f['nosync.boundBytes'], 0);
    assert.equal(await page.textContent('#panel-E6 td[data-fig="nosync.boundBytes"]'), 'off');  // not "0.0 MB"
    assert.equal(f['default.boundBytes'], 512 * 2 ** 20);
    for (const n of lines.n) assert.ok(n >= 6, `a line has ${n} samples`);
  });

  await check('E7: no GPU; asynchrony on the CPU', async () => {
    const f = await runPanel('E7', { n: 1000 });
    assert.ok(f.dotS > 0 && f.jsS > 0 && f.overlapS > 0);
    assert.match(await page.textContent('#panel-E7 .result-text'), /GPU: none/);
  });

  await check('code cell: runs a snippet, shows output, graph and timeline', async () => {
    await page.evaluate(() => window.playground.editor.setValue(
      "const a = nd.ones([2, 2]);\nconst b = a.mul(3).add(1);\nconsole.log('b =', b.toArray());\nreturn b.sum().item();\n"));
    await page.click('#code-run');
    await page.waitForFunction(() => ['done', 'failed'].includes(document.querySelector('#panel-code').dataset.state));
    assert.equal(await page.$eval('#panel-code', (e) => e.dataset.state), 'done');
    const out = await page.textContent('#code-output');
    assert.match(out, /b = \[\[4,4\],\[4,4\]\]/);
    assert.match(out, /⇒ 16/);
    assert.ok(Number(await page.$eval('#code-graph', (e) => e.dataset.nodes)) >= 6);
    assert.ok(Number(await page.$eval('#code-panel .timeline-box, #panel-code .timeline-box', (e) => e.dataset.events)) >= 4);
    await (await page.$('#panel-code')).screenshot({ path: path.join(SHOTS, 'code.png') });
  });

  await check('code cell: a thrown error is shown inline and the playground keeps working', async () => {
    await page.evaluate(() => window.playground.editor.setValue(
      "const a = nd.ones([2, 3]);\nconst b = nd.ones([4, 5]);\nconst c = nd.dot(a, b);\n"));
    await page.click('#code-run');
    await page.waitForFunction(() => ['done', 'failed'].includes(document.querySelector('#panel-code').dataset.state));
    assert.equal(await page.$eval('#panel-code', (e) => e.dataset.state), 'failed');
    const out = await page.textContent('#code-output');
    assert.match(out, /Error \(line 3\): dot: .*\[2,3\].*\[4,5\]/);
    await (await page.$('#panel-code')).screenshot({ path: path.join(SHOTS, 'code-error.png') });
    await page.evaluate(() => window.playground.editor.setValue("throw new Error('my own error');"));
    await page.click('#code-run');
    await page.waitForFunction(() => ['done', 'failed'].includes(document.querySelector('#panel-code').dataset.state));
    assert.match(await page.textContent('#code-output'), /my own error/);
    // An error far down a long cell: its line is marked and scrolled into the editor's view.
    const long = await runCell(`let x = 0;\n${'x += 1;\n'.repeat(298)}nd.dot(nd.ones([2]), nd.ones([3]));\n`);
    assert.match(long.lines[0], /\(line 300\): dot/);
    assert.equal(await page.evaluate(() => {
      const line = document.querySelector('.CodeMirror .error-line');
      if (!line) return 'the marked line is not drawn';
      const box = document.querySelector('.CodeMirror-scroll').getBoundingClientRect();
      const r = line.getBoundingClientRect();
      return r.top >= box.top && r.bottom <= box.bottom ? 'in view' : `out of view: ${r.top} not in ${box.top}..${box.bottom}`;
    }), 'in view');
    // Still working afterwards.
    await page.evaluate(() => window.playground.editor.setValue('return nd.arange(5).sum().item();'));
    await page.click('#code-run');
    await page.waitForFunction(() => ['done', 'failed'].includes(document.querySelector('#panel-code').dataset.state));
    assert.match(await page.textContent('#code-output'), /⇒ 10/);
    const f = await runPanel('E2');
    assert.equal(f.ops, 4);
  });

  await check('code cell: falsy throws fail, any value prints, syntax errors say so, long output is cut', async () => {
    for (const [src, shown] of [['throw null;', 'null'], ['await Promise.reject(0);', '0'], ["throw '';", '""']]) {
      const r = await runCell(src);
      assert.equal(r.state, 'failed', src);
      assert.deepEqual(r.lines, [`Error: a value that is not an Error was thrown: ${shown}`], src);
    }
    let r = await runCell("console.log(new BigInt64Array(2), { a: 1n });\nconsole.debug('d');\nconsole.table([1]);\n" +
                          "const c = { m: new Map([['k', new Set([nd.zeros([2, 3])])]]) };\nc.self = c;\nconsole.log(c);\n" +
                          'throw Object.create(null);');
    assert.equal(r.state, 'failed');
    assert.deepEqual(r.lines, ['BigInt64Array(2) [0n, 0n] {"a":1n}', 'd', '[1]', '{"m":Map(1) {"k" => Set(1) {<NDArray 2x3>}},"self":[Circular]}',
                               'Error: a value that is not an Error was thrown: {}']);
    r = await runCell('const = 3;');
    assert.match(r.lines[0], /^The cell could not be parsed: SyntaxError: /);
    r = await runCell("console.log('x'.repeat(1e6));\nfor (let i = 0; i < 2001; ++i) console.log(i);");
    assert.equal(r.state, 'done');
    assert.ok(r.lines[0].length < 10100 && r.lines[0].endsWith('… and 990,000 more characters'), r.lines[0].slice(-60));
    assert.equal(r.lines.length, 2001);
    assert.equal(r.lines[2000], 'output truncated after 2,000 lines');
  });

  await check('panel fields and the header bounds: out of range refused with the field and value, nothing sent', async () => {
    for (const [key, param, value, message] of [['E3', 'n', '-1', 'size = -1 is refused: from 200 to 3,000 in steps of 100'],
                                                ['E5', 'N', '', 'ops is empty: give a value from 1,000 to 50,000'],
                                                ['E6', 'batches', '101', 'batches = 101 is refused: a whole number from 2 to 100']]) {
      const input = `#panel-${key} input[data-param="${param}"]`;
      const before = await page.inputValue(input);
      await page.fill(input, value);
      await page.click(`#panel-${key} button.run`);
      assert.equal(await page.$eval(`#panel-${key}`, (e) => e.dataset.state), 'invalid');
      assert.equal(await page.textContent(`#panel-${key} .run-error`), message);
      assert.equal(await page.evaluate(() => window.playground.busy), null, 'a refused run was sent');
      await page.fill(input, before);
    }
    // Negative or fractional ops are refused, not read as 0 (no bound).
    await page.fill('#bound-ops', '-5');
    await page.dispatchEvent('#bound-ops', 'change');
    assert.equal(await page.isVisible('#bound-error'), true);
    const r = await runCell('return 1;');
    assert.equal(r.state, 'invalid');
    assert.deepEqual(r.lines, ['Max ops in flight = -5 is refused: a whole number of ops, 0 or more (empty: the engine’s default; 0: no bound)']);
    // A run applies the bound the fields show, without waiting for a change event.
    await page.$eval('#bound-ops', (i) => { i.value = '7'; });
    await page.$eval('#bound-mb', (i) => { i.value = '0.0000001'; });  // a tenth of a byte: one byte, not 0 (off)
    assert.deepEqual((await runCell('const s = nd.engine.stats();\nreturn [s.maxInflightOps, s.maxInflightBytes];')).lines, ['⇒ [7,1]']);
    assert.equal(await page.isVisible('#bound-error'), false);
    for (const id of ['#bound-ops', '#bound-mb']) {
      await page.fill(id, '');
      await page.dispatchEvent(id, 'change');
    }
  });

  await check('backpressure control and reloading the worker with another thread count', async () => {
    await page.fill('#bound-ops', '4');
    await page.dispatchEvent('#bound-ops', 'change');
    await page.selectOption('#threads', '1');
    await page.waitForFunction(() => window.playground.ready && window.playground.threads === 1, null, { timeout: 60000 });
    await page.click('#reload');  // the same count again
    await page.waitForFunction(() => window.playground.ready && window.playground.threads === 1, null, { timeout: 60000 });
    await page.evaluate(() => window.playground.editor.setValue(
      'const x = nd.ones([64, 64]);\nfor (let i = 0; i < 200; ++i) x.add(i).delete();\nreturn nd.engine.stats().workers;'));
    await page.click('#code-run');
    await page.waitForFunction(() => ['done', 'failed'].includes(document.querySelector('#panel-code').dataset.state));
    assert.match(await page.textContent('#code-output'), /⇒ 1$/m);
    await page.fill('#bound-ops', '');  // back to the engine's default
    await page.dispatchEvent('#bound-ops', 'change');
    // More MB than a 32-bit size holds: the largest bound, not an error (nor no bound at all).
    await page.fill('#bound-mb', '5000');
    await page.dispatchEvent('#bound-mb', 'change');
    await page.evaluate(() => window.playground.editor.setValue('return nd.engine.stats().maxInflightBytes;'));
    await page.click('#code-run');
    await page.waitForFunction(() => ['done', 'failed'].includes(document.querySelector('#panel-code').dataset.state));
    assert.match(await page.textContent('#code-output'), /⇒ 4294967295$/m);
    await page.fill('#bound-mb', '');
    await page.dispatchEvent('#bound-mb', 'change');
  });

  await check('the keyboard can leave the code editor: Tab indents, Esc then Tab moves on', async () => {
    const inEditor = () => page.evaluate(() => !!document.activeElement.closest('.CodeMirror'));
    await page.evaluate(() => window.playground.editor.setValue('return 1;'));
    await page.click('.CodeMirror');
    await page.keyboard.press('Tab');
    assert.equal(await inEditor(), true, 'Tab left the editor');
    assert.match(await page.evaluate(() => window.playground.editor.getValue()), /^\s+|\s+$/, 'Tab did not indent');
    await page.keyboard.press('Escape');
    await page.keyboard.press('Tab');
    assert.equal(await inEditor(), false, 'Esc then Tab stayed in the editor');
    assert.notEqual(await page.evaluate(() => document.activeElement.tagName), 'BODY', 'the focus went nowhere');
    await page.click('.CodeMirror');  // back in: Tab indents again
    await page.keyboard.press('Escape');
    await page.keyboard.press('a');
    await page.keyboard.press('Tab');
    assert.equal(await inEditor(), true, 'a key between Esc and Tab did not cancel the way out');
  });

  await check('Stop run ends a runaway code cell by restarting the worker', async () => {
    await page.evaluate(() => window.playground.editor.setValue('while (true) {}'));
    await page.click('#code-run');
    await page.waitForFunction(() => !document.querySelector('#stop').disabled);
    await page.click('#stop');
    await page.waitForFunction(() => document.querySelector('#panel-code').dataset.state === 'failed');
    assert.match(await page.textContent('#code-output'), /the worker was restarted/);
    assert.match(await page.textContent('#code-state'), /^stopped: the worker was restarted with a new engine/);
    await page.waitForFunction(() => window.playground.ready, null, { timeout: 60000 });
    // A panel stopped in its run: the previous run's figures and text go with it.
    await runPanel('E3', { n: 1000 });
    await page.fill('#panel-E3 input[data-param="n"]', '3000');
    await page.click('#panel-E3 button.run');
    await page.waitForFunction(() => !document.querySelector('#stop').disabled);
    await page.click('#stop');
    await page.waitForFunction(() => document.querySelector('#panel-E3').dataset.state === 'failed');
    assert.deepEqual(await page.$eval('#panel-E3', (e) => [e.querySelectorAll('td[data-fig]').length, e.querySelector('.result-text'),
                                                            e.querySelector('.chart-box').hidden]), [0, null, true]);
    // Its records went with the worker: the timeline says so, not that none were made.
    assert.equal(await page.textContent('#panel-E3 .timeline-note'), LANGUAGES[0].dict['timeline.lost']);
    await page.waitForFunction(() => window.playground.ready, null, { timeout: 60000 });
    await page.evaluate(() => window.playground.editor.setValue('return nd.ones([3]).sum().item();'));
    await page.click('#code-run');
    await page.waitForFunction(() => ['done', 'failed'].includes(document.querySelector('#panel-code').dataset.state));
    assert.match(await page.textContent('#code-output'), /⇒ 3/);
  });

  // Each language, switched live: the results already on the page stay and are drawn again in it.
  await page.evaluate(() => { window.notReloaded = true; });
  const e1Before = (await figures('E1')).map((f) => f.value);
  for (const lang of ['fr', 'zh', 'id', 'en']) {
    const { dict, locale } = LANGUAGES.find((l) => l.code === lang);
    await check(`${lang}: switched live, E2 runs, nothing overflows, every text from the ${lang} dictionary`, async () => {
      await page.selectOption('#lang', lang);
      assert.equal(await page.evaluate(() => window.notReloaded), true, 'the page reloaded');
      assert.equal(await page.evaluate(() => document.documentElement.lang), locale);
      assert.equal(await page.title(), dict['page.title']);
      assert.equal(await page.textContent('#reload'), dict['header.reload']);
      assert.equal(await page.getAttribute('#bound-mb', 'placeholder'), dict['header.boundDefault']);
      assert.equal(new URL(page.url()).searchParams.get('lang'), lang);
      assert.equal(await page.evaluate((k) => localStorage.getItem(k), STORAGE_KEY), lang);
      // The results are kept, in this language: E1's table (same values, labels and number format
      // of the language), E6's matrix, the timelines.
      const e1 = await figures('E1');
      assert.deepEqual(e1.map((f) => f.value), e1Before, 'E1 lost its results');
      assert.equal(await page.textContent('#panel-E1 .figs th'), dict['E1.fig.sync']);
      const decimal = new Intl.NumberFormat(locale).formatToParts(1.5).find((x) => x.type === 'decimal').value;
      for (const f of e1) assert.ok(f.text.includes(decimal), `E1 ${f.key}: '${f.text}' is not written the ${lang} way`);
      assert.equal(await page.textContent('#panel-E6 .figs th.col'), dict['E6.col.peak']);
      assert.ok(await page.evaluate(() => ['E1', 'E5', 'E6', 'code'].every((k) => window.playground.timelines[k] || window.playground.charts[k])));
      assert.equal(await page.evaluate(() => window.playground.timelines.E1.options.scales.x.title.text), dict['timeline.axis']);
      await runPanel('E2', {}, 120000, `${lang}-E2.png`);
      assert.equal(await page.textContent('#panel-E2 button.run'), dict['panel.runAgain']);
      // No text wider than its box, and the page never scrolls sideways.
      const overflow = await page.evaluate(() => {
        const bad = [];
        const sel = 'button, h1, h2, h3, th, td, label, select, .status, .tag, .progress-text, .panel-head, .run-row, ' +
                    '.params, .controls, .brand, .panel, .figures, .explain, .result-text, .graph-note, .timeline-note, .banner';
        for (const e of document.querySelectorAll(sel)) {
          if (!e.getClientRects().length) continue;  // not displayed
          if (e.scrollWidth > e.clientWidth + 1 || (e.scrollHeight > e.clientHeight + 1 && getComputedStyle(e).overflowY === 'hidden')) {
            bad.push(`${e.tagName.toLowerCase()}${e.id ? `#${e.id}` : ''}.${e.className}: '${e.textContent.trim().slice(0, 40)}' ` +
                     `${e.scrollWidth}>${e.clientWidth}`);
          }
        }
        if (document.documentElement.scrollWidth > window.innerWidth) bad.push(`the page: ${document.documentElement.scrollWidth}>${window.innerWidth}`);
        return bad;
      });
      assert.deepEqual(overflow, []);
      // Every piece of text (and every title= and placeholder=) on the page is part of a string that this
      // language's translator made: none is left over from another language or written by hand.
      // Not checked: the code editor, what the code printed, and the engine's own messages.
      const foreign = await page.evaluate(() => {
        const div = document.createElement('div');
        const pieces = [...window.playground.i18n.produced].flatMap((s) => { div.innerHTML = s; return [s, div.textContent]; });
        const skip = '.CodeMirror, #code-output, [data-raw], script, style, textarea';
        const bad = [];
        const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
        for (let n = walker.nextNode(); n; n = walker.nextNode()) {
          const text = n.textContent.trim();
          if (text && !n.parentElement.closest(skip) && !pieces.some((p) => p.includes(text))) bad.push(text);
        }
        for (const e of document.querySelectorAll('[title]')) if (!pieces.includes(e.title)) bad.push(`title: ${e.title}`);
        for (const e of document.querySelectorAll('[placeholder]')) if (!pieces.includes(e.placeholder)) bad.push(`placeholder: ${e.placeholder}`);
        return bad;
      });
      assert.deepEqual(foreign, []);
      if (lang === 'zh') {
        // Han characters drawn with a real font (two different characters draw differently; with
        // no CJK font both would be the same empty box), and lines far enough apart for them.
        const glyphs = await page.evaluate(() => {
          const draw = (ch) => {
            const c = document.createElement('canvas');
            c.width = c.height = 32;
            const g = c.getContext('2d');
            g.font = `24px ${getComputedStyle(document.body).fontFamily}`;
            g.fillText(ch, 2, 26);
            return c.toDataURL();
          };
          const style = getComputedStyle(document.querySelector('#panel-E1 .explain'));
          return { distinct: draw('异') !== draw('步'), lineRatio: parseFloat(style.lineHeight) / parseFloat(style.fontSize) };
        });
        assert.ok(glyphs.distinct, 'Chinese renders as boxes: no CJK font (make setup installs fonts-wqy-microhei)');
        assert.ok(glyphs.lineRatio >= 1.6, `Chinese line height ${glyphs.lineRatio}`);
      }
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.screenshot({ path: path.join(SHOTS, `${lang}-top.png`) });
      await (await page.$('header.top')).screenshot({ path: path.join(SHOTS, `${lang}-header.png`) });
      await (await page.$('#panel-E6')).screenshot({ path: path.join(SHOTS, `${lang}-E6.png`) });
      await (await page.$('#panel-code')).screenshot({ path: path.join(SHOTS, `${lang}-code.png`) });
      await page.screenshot({ path: path.join(SHOTS, `${lang}-page.png`), fullPage: true });
    });
  }

  // A phone's width: the page never scrolls sideways (the panels' grid once had a 560 px minimum);
  // a wide table scrolls in its own box; every button stays inside its panel. In the language
  // with the longest words, and E6's six columns drawn.
  await check('at 400 px wide the page fits: tables scroll in their boxes, buttons stay in their panels', async () => {
    await page.selectOption('#lang', 'id');
    await page.setViewportSize({ width: 400, height: 900 });
    try {
      // The charts drawn at 1440 px shrink when their ResizeObserver fires, a frame or more later.
      await page.waitForFunction(() => document.documentElement.scrollWidth <= window.innerWidth, null, { timeout: 5000 })
        .catch(() => {});  // the check below says what is too wide
      const bad = await page.evaluate(() => {
        const out = [];
        if (document.documentElement.scrollWidth > window.innerWidth) {
          out.push(`the page: ${document.documentElement.scrollWidth}>${window.innerWidth}`);
          // The outermost elements that reach past the window: the ones to fix.
          for (const e of document.querySelectorAll('body *')) {
            const r = e.getBoundingClientRect(), up = e.parentElement.getBoundingClientRect();
            if (e.getClientRects().length && r.right > window.innerWidth + 1 && up.right <= window.innerWidth + 1) {
              out.push(`${e.tagName.toLowerCase()}${e.id ? `#${e.id}` : ''}.${e.className}: right ${Math.round(r.right)}`);
            }
          }
        }
        for (const b of document.querySelectorAll('.panel button')) {
          const panel = b.closest('.panel').getBoundingClientRect(), r = b.getBoundingClientRect();
          if (r.width && (r.right > panel.right + 1 || r.left < panel.left - 1)) out.push(`button '${b.textContent}' leaves its panel`);
        }
        const e6 = document.querySelector('#panel-E6 .figures');
        if (!(e6.querySelector('table') && getComputedStyle(e6).overflowX === 'auto')) out.push('E6 table not in a scrolling box');
        return out;
      });
      assert.deepEqual(bad, []);
      await page.screenshot({ path: path.join(SHOTS, 'narrow-id.png'), fullPage: true });
    } finally {
      await page.setViewportSize({ width: 1440, height: 1000 });
      await page.selectOption('#lang', 'en');
    }
  });

  await check('?lang= links to a language, the choice is remembered, else the browser\'s preference', async () => {
    const p2 = await context.newPage();
    const lang = () => p2.evaluate(() => window.playground.i18n.code);
    await p2.goto(`${base}?lang=zh`);
    assert.equal(await lang(), 'zh');
    assert.equal(await p2.textContent('#reload'), LANGUAGES.find((l) => l.code === 'zh').dict['header.reload']);
    await p2.selectOption('#lang', 'id');
    await p2.goto(base);  // no ?lang=: the remembered choice
    assert.equal(await lang(), 'id');
    await p2.evaluate((k) => localStorage.removeItem(k), STORAGE_KEY);
    await p2.addInitScript(() => Object.defineProperty(navigator, 'languages', { get: () => ['de-DE', 'fr-CA', 'en'] }));
    await p2.goto(base);  // nothing remembered: the first of the browser's languages the page has
    assert.equal(await lang(), 'fr');
    assert.equal(await p2.evaluate(() => document.documentElement.lang), 'fr');
    await p2.evaluate((k) => localStorage.removeItem(k), STORAGE_KEY);
    await p2.close();
  });

  await check('the whole page (screenshot) and no console errors, nothing fetched from outside', async () => {
    await page.screenshot({ path: path.join(SHOTS, 'page.png'), fullPage: true });
    assert.deepEqual(consoleErrors, []);
    assert.deepEqual(consoleWarnings, []);
    assert.deepEqual(outside, []);
  });
  await check('without cross-origin isolation the page says threads are unavailable and what to do', async () => {
    // The same page with the two headers stripped (as a server without them would send it).
    const p2 = await context.newPage();
    p2.on('pageerror', (e) => consoleErrors.push(`page error (not isolated): ${e.message}`));
    await p2.route(base, async (route) => {
      const res = await route.fetch();
      const headers = { ...res.headers() };
      delete headers['cross-origin-opener-policy'];
      delete headers['cross-origin-embedder-policy'];
      await route.fulfill({ response: res, headers });
    });
    await p2.goto(base);
    assert.equal(await p2.evaluate(() => window.crossOriginIsolated), false);
    const banner = await p2.$('#isolation');
    assert.equal(await banner.isVisible(), true);
    assert.match(await banner.textContent(), /not cross-origin isolated.*make playground/s);
    assert.equal(await p2.$eval('#panel-E1 button.run', (b) => b.disabled), true);
    await p2.screenshot({ path: path.join(SHOTS, 'not-isolated.png') });
    await p2.close();
    assert.deepEqual(consoleErrors, []);
  });
  await check('plain http:// to another machine: the page says it is not a secure context', async () => {
    // The same server's answers under a name that is not localhost, as a LAN address would be.
    const p2 = await context.newPage();
    p2.on('pageerror', (e) => consoleErrors.push(`page error (not secure): ${e.message}`));
    await p2.route('http://insecure.test/**', async (route) => {
      const u = new URL(route.request().url());
      await route.fulfill({ response: await route.fetch({ url: new URL(u.pathname + u.search, base).href }) });
    });
    await p2.goto('http://insecure.test/');
    assert.equal(await p2.evaluate(() => window.isSecureContext), false);
    assert.match(await p2.textContent('#isolation'), /not a secure context.*HTTPS.*SSH tunnel/s);
    assert.match(await p2.textContent('#status-text'), /not in a secure context/);
    await p2.close();
    assert.deepEqual(consoleErrors, []);
  });
} finally {
  await context.close();
  server.close();
  // Chromium's helpers may still write into the profile just after it closes (ENOTEMPTY): a
  // leftover temporary folder is not a test failure.
  try {
    fs.rmSync(userDataDir, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
  } catch (e) {
    console.error(`e2e: could not remove ${userDataDir}: ${e.message}`);
  }
}

console.log(`\nplayground end-to-end tests (screenshots in ${path.relative(repo, SHOTS)}/)`);
console.log(`e2e: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
