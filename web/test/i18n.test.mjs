// i18n.test.mjs: the playground's dictionaries (web/i18n/). Every language has the same keys as
// English with the same {parameters}, plural forms its language uses, the same <tags> and the
// same <code> in HTML keys; no key is unused by the page's code; nothing is left identical to
// English except the short list below; the page's HTML has no text of its own outside the
// dictionaries; the language is chosen as documented; numbers are formatted for the language.
// Run: node --test web/test/i18n.test.mjs  (make test-web)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LANGUAGES, chooseLanguage, languageOf, makeTranslator, unitFormatter, unitSupported } from '../i18n/index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const web = path.join(here, '..');
const en = LANGUAGES.find((l) => l.code === 'en').dict;
const others = LANGUAGES.filter((l) => l.code !== 'en');

// Keys whose text is legitimately the same as English in these languages: a formula, a word
// that French also uses. Keep it short; everything else must be translated.
const SAME_AS_ENGLISH = {
  'E5.note.model': ['fr', 'zh', 'id'],  // max(t1 + N t2 + t3, N t1 + t2 + t3)
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

// The page's sources that may use keys: the page, its panels and the Worker (which words the
// experiments' steps: experiments/chapter.cjs names them, and holds no key and no text).
const sources = ['index.html', 'app.js', 'panels.js', 'worker.js']
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
