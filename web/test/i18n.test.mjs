// i18n.test.mjs: the playground's dictionaries (web/i18n/). Every language has the same keys as
// English with the same {parameters}, plural forms its language uses, the same <tags> and the
// same <code> in HTML keys; no key is unused by the page's code; nothing is left identical to
// English except the short list below; the page's HTML has no text of its own outside the
// dictionaries; the language is chosen as documented; numbers are formatted for the language.
// And the page's checks on its number fields (inputs.js), whose refusals are dictionary texts.
// Run: node --test web/test/i18n.test.mjs  (make test-web)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LANGUAGES, chooseLanguage, languageOf, makeTranslator, unitFormatter, unitSupported } from '../i18n/index.js';
import { MAX_BOUND, checkBound, checkParam } from '../inputs.js';
import { PANELS } from '../panels.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const web = path.join(here, '..');
const en = LANGUAGES.find((l) => l.code === 'en').dict;
const others = LANGUAGES.filter((l) => l.code !== 'en');

// Keys whose text is legitimately the same as English in these languages: a formula, a word
// that French also uses. Keep it short; everything else must be translated.
const SAME_AS_ENGLISH = {
  'code.tag': ['fr'],                   // "Code"
};

// The plural categories each language needs ("other" always; English and French also "one").
const forms = (l) => new Intl.PluralRules(l.locale).resolvedOptions().pluralCategories.filter((c) => ['one', 'other'].includes(c));
const texts = (v) => (typeof v === 'string' ? [v] : Object.values(v));
const params = (v) => [...new Set(texts(v).flatMap((s) => [...s.matchAll(/\{(\w+)\}/g)].map((m) => m[1])))].sort();
const tags = (s) => [...s.matchAll(/<\/?([a-z]+)[^>]*>/g)].map((m) => m[0].replace(/\s.*>/, '>')).sort();
const codes = (s) => [...s.matchAll(/<code>(.*?)<\/code>/g)].map((m) => m[1]).sort();

test('every language has exactly the English keys', () => {
  const keys = Object.keys(en).sort();
  for (const l of others) {
    const k = Object.keys(l.dict).sort();
    assert.deepEqual(keys.filter((x) => !k.includes(x)), [], `${l.code} misses keys`);
    assert.deepEqual(k.filter((x) => !keys.includes(x)), [], `${l.code} has keys English lacks`);
  }
});

test('same parameters, plural forms of the language, same tags and <code> in HTML', () => {
  for (const l of LANGUAGES) {
    for (const [key, v] of Object.entries(l.dict)) {
      assert.ok(typeof v === 'string' || (v && typeof v === 'object'), `${l.code} ${key}: a string or plural forms`);
      assert.ok(texts(v).every((s) => typeof s === 'string' && s.trim() !== ''), `${l.code} ${key}: empty text`);
      assert.deepEqual(params(v), params(en[key]), `${l.code} ${key}: parameters differ from English`);
      if (typeof en[key] === 'object') {
        assert.equal(typeof v, 'object', `${l.code} ${key}: English has plural forms`);
        assert.deepEqual(Object.keys(v).sort(), forms(l).sort(), `${l.code} ${key}: plural forms`);
        assert.ok(params(v).includes('count'), `${l.code} ${key}: plural forms need {count}`);
      } else {
        assert.equal(typeof v, 'string', `${l.code} ${key}: English has one form`);
      }
      if (key.endsWith('Html')) {
        assert.deepEqual(tags(v), tags(en[key]), `${l.code} ${key}: tags differ from English`);
        assert.deepEqual(codes(v), codes(en[key]), `${l.code} ${key}: <code> differs from English`);
      } else {
        assert.ok(!texts(v).some((s) => /<[a-z/]/.test(s)), `${l.code} ${key}: HTML in a text key (name it ...Html)`);
      }
    }
  }
});

test('nothing is left in English outside the allow-list', () => {
  for (const l of others) {
    const same = Object.keys(en).filter((k) => JSON.stringify(l.dict[k]) === JSON.stringify(en[k]));
    const allowed = same.filter((k) => (SAME_AS_ENGLISH[k] || []).includes(l.code));
    assert.deepEqual(same.filter((k) => !allowed.includes(k)), [], `${l.code}: identical to English`);
  }
  // The allow-list itself stays true (an entry that is now translated is removed).
  for (const [k, codesList] of Object.entries(SAME_AS_ENGLISH)) {
    for (const c of codesList) {
      assert.equal(JSON.stringify(LANGUAGES.find((l) => l.code === c).dict[k]), JSON.stringify(en[k]), `allow-list: ${c} ${k}`);
    }
  }
});

// The page's sources that may use keys: the page, its panels, its field checks and the Worker
// (which words the experiments' steps: experiments/chapter.cjs names them, and holds no key and
// no text).
const sources = ['index.html', 'app.js', 'panels.js', 'worker.js', 'inputs.js']
  .map((f) => fs.readFileSync(path.join(web, f), 'utf8')).join('\n');

test('every key is used by the page (written out in full, so that this can check it)', () => {
  const unused = Object.keys(en).filter((k) => !sources.includes(`'${k}'`) && !sources.includes(`"${k}"`));
  assert.deepEqual(unused, []);
});

test('every key the page names exists', () => {
  // Keys are dotted names quoted in the sources: 'E1.title', "header.reload"; the prefixes are ours.
  const prefixes = [...new Set(Object.keys(en).map((k) => k.split('.')[0]))];
  const re = new RegExp(`['"]((?:${prefixes.join('|')})\\.[A-Za-z0-9.]+)['"]`, 'g');
  const named = [...new Set([...sources.matchAll(re)].map((m) => m[1]))];
  assert.ok(named.length > 100, `only ${named.length} keys found in the sources`);
  assert.deepEqual(named.filter((k) => !(k in en)), []);
});

test('index.html has no text of its own: every word comes from a dictionary key', () => {
  const html = fs.readFileSync(path.join(web, 'index.html'), 'utf8');
  const body = html.slice(html.indexOf('<body>'))
    .replace(/<script[\s\S]*?<\/script>/g, '').replace(/<textarea[\s\S]*?<\/textarea>/g, '');
  const text = body.replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ').trim();
  assert.equal(text, '', `text outside the dictionaries: ${text}`);
  for (const m of body.matchAll(/data-i18n(?:-html|-title|-placeholder)?="([^"]+)"/g)) assert.ok(m[1] in en, m[1]);
  // A title= or aria-label= written in the HTML would be untranslated text too.
  assert.doesNotMatch(body, /\s(title|aria-label|placeholder)="/);
});

test('the language: ?lang=, then the remembered choice, then the browser, then English', () => {
  assert.equal(chooseLanguage({ query: 'fr', stored: 'id', preferred: ['zh-CN'] }), 'fr');
  assert.equal(chooseLanguage({ query: 'xx', stored: 'id', preferred: ['zh-CN'] }), 'id');
  assert.equal(chooseLanguage({ query: null, stored: null, preferred: ['de-DE', 'zh-Hans-CN', 'en'] }), 'zh');
  assert.equal(chooseLanguage({ preferred: ['id-ID'] }), 'id');
  assert.equal(chooseLanguage({ preferred: ['de', 'ja'] }), 'en');
  assert.equal(chooseLanguage(), 'en');
  assert.equal(languageOf('FR-ca'), 'fr');
  assert.equal(languageOf(''), null);
});

test('translators: parameters, plurals, HTML escaping, Intl numbers, times and sizes', () => {
  const tr = Object.fromEntries(LANGUAGES.map((l) => [l.code, makeTranslator(l.code)]));
  assert.equal(tr.en.t('graph.ops', { count: 1 }), '1 op');
  assert.equal(tr.en.t('graph.ops', { count: 12000 }), '12,000 ops');
  assert.equal(tr.fr.t('graph.ops', { count: 12000 }), '12\u202f000 opérations');
  assert.equal(tr.fr.t('graph.ops', { count: 0 }), '0 opération');  // French: 0 is singular
  assert.equal(tr.zh.t('graph.ops', { count: 3 }), '3 个操作');
  assert.equal(tr.en.html('E2.resultHtml', { z: '<b>' }), 'The result: z = <code>&lt;b&gt;</code>');
  assert.throws(() => tr.en.html('E1.title'), /not an HTML key/);
  assert.throws(() => tr.en.t('no.such.key'), /no key/);
  assert.throws(() => tr.en.t('panel.doneIn'), /needs \{time\}/);
  assert.equal(tr.en.fmt(0.0123, 's'), '12.3 ms');
  assert.equal(tr.fr.fmt(0.0123, 's'), '12,3\u202fms');
  assert.equal(tr.zh.fmt(1.5, 's'), '1.500秒');
  assert.equal(tr.id.fmt(2.5e7, 'MB'), '25,0 MB');
  assert.equal(tr.fr.fmt(2.5e7, 'MB'), '25,0\u202fMo');
  assert.equal(tr.fr.fmt(3.25e-6, 'us'), '3,25\u202fμs');
  assert.equal(tr.id.fmt(10000, ''), '10.000');
  assert.equal(tr.fr.fmt(2.54, 'x'), '2,5×');
  // Every string a translator returns is recorded (the browser test checks the page against it).
  assert.ok(tr.fr.produced.has('12,3\u202fms') && tr.en.produced.has('1 op'));
});

test("microseconds without Intl's 'microsecond' unit: the same text as with it", (t) => {
  const hasIt = unitSupported('microsecond');
  const values = [0, 3.25, 999.995, 1234.5, 1e6 + 0.5];
  for (const l of LANGUAGES) {
    const without = unitFormatter(l, () => false);  // as on an engine without the unit
    // Other units are Intl's own either way.
    assert.equal(without('millisecond', 12.3, 1), unitFormatter(l)('millisecond', 12.3, 1));
    for (const v of values) {
      const text = without('microsecond', v, 2);
      assert.ok(text.includes(l.us), `${l.code} ${v}: ${text}`);
      if (hasIt) assert.equal(text, unitFormatter(l, () => true)('microsecond', v, 2), `${l.code} ${v}`);
    }
  }
  if (!hasIt) t.diagnostic("this engine's Intl has no 'microsecond' unit: compared only with the expected texts");
  // What each language writes (CLDR, as Node 20 and Chromium format 'microsecond').
  const expect = { en: '1,234.50 μs', fr: '1\u202f234,50\u202fμs', zh: '1,234.50微秒', id: '1.234,50 μd' };
  for (const l of LANGUAGES) assert.equal(unitFormatter(l, () => false)('microsecond', 1234.5, 2), expect[l.code], l.code);
});

// A panel's field, as panels.js declares it: the checks run against the page's real ranges.
const field = (panel, key) => PANELS.find((p) => p.key === panel).params.find((q) => q.key === key);

test('panel fields: their own min, max and step, whole numbers where the step is; empty refused', () => {
  const ok = (text, q, value) => assert.deepEqual(checkParam(text, q), { value }, `${q.key} '${text}'`);
  const refused = (text, q, key) => assert.equal(checkParam(text, q).error?.key, key, `${q.key} '${text}'`);
  const iters = field('E1', 'iters'), n = field('E1', 'n'), N = field('E5', 'N');
  const batches = field('E6', 'batches'), boundMB = field('E6', 'boundMB');
  for (const t of ['-1', '0', '0.5', '21', '0x5', '1e400', 'abc']) refused(t, iters, 'input.rangeInt');
  refused('', iters, 'input.empty');
  refused(' ', iters, 'input.empty');
  assert.equal(checkParam('', iters, true).error.key, 'input.notNumber');  // text a number field cannot read
  ok('1', iters, 1);
  ok(' 20 ', iters, 20);
  ok('1e1', iters, 10);
  for (const t of ['150', '100000', '-100', '0']) refused(t, n, 'input.rangeStep');
  ok('2000', n, 2000);
  for (const t of ['-1000', '0.5', '1500', '51000']) refused(t, N, 'input.rangeStep');
  ok('50000', N, 50000);
  // E6's batches: 2 to the chapter's 100, as README.md says.
  for (const t of ['1', '101', '2.5']) refused(t, batches, 'input.rangeInt');
  ok('2', batches, 2);
  ok('100', batches, 100);
  // A decimal step: on the grid despite binary rounding, off it refused.
  ok('25.2', boundMB, 25.2);
  ok('1024', boundMB, 1024);
  for (const t of ['25.25', '0.05', '1024.1']) refused(t, boundMB, 'input.rangeStep');
  // Every field's own default passes its check.
  for (const p of PANELS) for (const q of p.params || []) ok(String(q.value), q, q.value);
});

test('bound fields: empty is the default, 0 is off, negative or fractional ops refused, MB never 0 by rounding', () => {
  const ok = (text, kind, value) => assert.deepEqual(checkBound(text, kind), { value }, `${kind} '${text}'`);
  const refused = (text, kind) => assert.equal(checkBound(text, kind).error?.key, kind === 'ops' ? 'input.boundOps' : 'input.boundMB',
                                                `${kind} '${text}'`);
  ok('', 'ops', null);
  ok('0', 'ops', 0);
  ok('4', 'ops', 4);
  ok('1e3', 'ops', 1000);
  ok('5000000000', 'ops', MAX_BOUND);  // past a 32-bit size: the largest bound
  for (const t of ['-5', '-1', '-0', '0.5', '1.5', 'abc', '0x50', '1e400']) refused(t, 'ops');
  ok('', 'MB', null);
  ok('0', 'MB', 0);
  ok('25.2', 'MB', 25200000);
  ok('0.5', 'MB', 500000);
  ok('0.0000001', 'MB', 1);  // a tenth of a byte: still a bound, not 0 (off)
  ok('5000', 'MB', MAX_BOUND);
  for (const t of ['-1', '-0.5', 'abc']) refused(t, 'MB');
  assert.equal(checkBound('', 'MB', true).error.key, 'input.notNumber');
});

test('a refused field is named with its value and range, in every language', () => {
  for (const l of LANGUAGES) {
    const tr = makeTranslator(l.code);
    const say = (r, label) => tr.t(r.error.key, { ...r.error.params, field: tr.t(label) });
    const iters = say(checkParam('-1', field('E1', 'iters')), 'param.repeats');
    for (const part of [tr.t('param.repeats'), '-1', tr.number(1), tr.number(20)]) assert.ok(iters.includes(part), `${l.code}: ${iters}`);
    const n = say(checkParam('150', field('E1', 'n')), 'param.size');
    for (const part of ['150', tr.number(100), tr.number(2000)]) assert.ok(n.includes(part), `${l.code}: ${n}`);
    const mb = say(checkParam('0.05', field('E6', 'boundMB')), 'param.boundMB');
    assert.ok(mb.includes(tr.number(0.1)) && mb.includes(tr.number(1024)), `${l.code}: ${mb}`);
    const ops = say(checkBound('-5', 'ops'), 'header.maxOps');
    assert.ok(ops.includes(tr.t('header.maxOps')) && ops.includes('-5'), `${l.code}: ${ops}`);
    assert.ok(say(checkBound('0.5', 'ops'), 'header.maxOps').includes('0.5'), l.code);  // as typed, not 0,5
    assert.ok(say(checkBound('-1', 'MB'), 'header.maxMB').includes(tr.t('header.maxMB')), l.code);
  }
});
