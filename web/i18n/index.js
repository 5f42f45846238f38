// i18n/index.js: the playground's languages. One dictionary per language (en.js, fr.js, zh.js,
// id.js), all with the same keys; this file picks the language (?lang=, then the remembered
// choice, then the browser's preference) and makes a translator: t(key, params) for text,
// html(key, params) for the few keys whose names end in "Html", and number, time and size
// formatting through Intl for that language. Every string a translator returns is recorded in
// `produced`, so the browser test can check that each piece of text on the page came from here.
import en from './en.js';
import fr from './fr.js';
import zh from './zh.js';
import id from './id.js';

// code: what ?lang= takes; locale: the BCP 47 tag for Intl and <html lang>; name: the language's
// own name, shown in the switch in every language; us: its short symbol for a microsecond, as
// Intl writes it (CLDR), for engines whose Intl has no 'microsecond' unit (unitFormatter below).
export const LANGUAGES = [
  { code: 'en', locale: 'en', name: 'English', dict: en, us: 'μs' },
  { code: 'fr', locale: 'fr', name: 'Français', dict: fr, us: 'μs' },
  { code: 'zh', locale: 'zh-CN', name: '简体中文', dict: zh, us: '微秒' },
  { code: 'id', locale: 'id', name: 'Bahasa Indonesia', dict: id, us: 'μd' },
];
export const STORAGE_KEY = 'asyncnd.playground.lang';

const byCode = new Map(LANGUAGES.map((l) => [l.code, l]));

// The language of a BCP 47 tag ('fr-CA' -> 'fr', 'zh-Hant-TW' -> 'zh'), or null if we have none.
export function languageOf(tag) {
  if (typeof tag !== 'string') return null;
  const primary = tag.trim().toLowerCase().split(/[-_]/)[0];
  return byCode.has(primary) ? primary : null;
}

// query: the page's ?lang= value; stored: the remembered choice; preferred: navigator.languages.
export function chooseLanguage({ query = null, stored = null, preferred = [] } = {}) {
  for (const c of [query, stored]) if (languageOf(c)) return languageOf(c);
  for (const tag of preferred || []) {
    const l = languageOf(tag);
    if (l) return l;
  }
  return 'en';
}

const escapeHtml = (s) => String(s).replace(/[&<>"']/g,
  (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);

// A short-unit formatter: (unit, value, digits) -> text. 'microsecond' became one of
// Intl.NumberFormat's units only in ECMA-402's 2023 edition; where the engine lacks it (a
// RangeError: Node 18, browsers from before 2023 that run the module's SIMD128 build), a value in
// microseconds is written as Intl writes milliseconds, with the unit's symbol replaced by the
// language's `us`. `hasUnit` is for tests, which check the two ways against each other.
export function unitFormatter(lang, hasUnit = unitSupported) {
  const nf = (u, digits) => new Intl.NumberFormat(lang.locale, { style: 'unit', unit: u,
    unitDisplay: 'short', minimumFractionDigits: digits, maximumFractionDigits: digits });
  return (u, v, digits) => {
    if (u !== 'microsecond' || hasUnit(u)) return nf(u, digits).format(v);
    return nf('millisecond', digits).formatToParts(v)
      .map((p) => (p.type === 'unit' ? lang.us : p.value)).join('');
  };
}

// Whether this engine's Intl.NumberFormat knows the unit; asked once per unit.
const unitKnown = new Map();
export function unitSupported(u) {
  if (!unitKnown.has(u)) {
    try {
      new Intl.NumberFormat('en', { style: 'unit', unit: u });
      unitKnown.set(u, true);
    } catch (e) {
      if (!(e instanceof RangeError)) throw e;
      unitKnown.set(u, false);
    }
  }
  return unitKnown.get(u);
}

export function makeTranslator(code) {
  const lang = byCode.get(code) || byCode.get('en');
  const dict = lang.dict;
  const plural = new Intl.PluralRules(lang.locale);
  const produced = new Set();
  const note = (s) => { produced.add(s); return s; };

  function lookup(key, params) {
    let v = dict[key];
    if (v === undefined) throw new Error(`i18n: no key '${key}' in ${lang.code}`);
    // Plural forms: { one, other } (French counts 0 as "one"; Chinese and Indonesian have only "other").
    if (typeof v === 'object') v = v[plural.select(Number(params.count))] ?? v.other;
    return v;
  }

  const nf = (opts) => new Intl.NumberFormat(lang.locale, opts);
  const unit = unitFormatter(lang);
  // A number for people: integers grouped (10 000 in French), others to 6 significant digits.
  const number = (v, opts) => (Number.isInteger(v) && !opts ? nf().format(v)
    : nf(opts || { maximumSignificantDigits: 6 }).format(v));

  // A measured value with its unit: 's' seconds (shown in s or ms), 'us' seconds shown in µs,
  // 'x' a ratio, 'MB' bytes shown in 10^6-byte megabytes (as the native demo), '' a plain number.
  function fmt(value, u) {
    if (typeof value !== 'number' || !Number.isFinite(value)) return note(String(value));
    switch (u) {
      case 's': return note(value >= 1 ? unit('second', value, 3) : unit('millisecond', value * 1e3, value < 0.01 ? 3 : 1));
      case 'us': return note(unit('microsecond', value * 1e6, 2));
      case 'x': return note(`${number(value, { minimumFractionDigits: 1, maximumFractionDigits: 1 })}×`);
      case 'MB': return note(unit('megabyte', value / 1e6, 1));
      default: return note(number(value));
    }
  }

  // Parameters: numbers are formatted for the language (pass a string to keep one as it is).
  const fill = (s, params, esc) => s.replace(/\{(\w+)\}/g, (m, name) => {
    if (!(name in params)) throw new Error(`i18n: '${s}' needs {${name}}`);
    const v = params[name];
    return esc(typeof v === 'number' ? number(v) : v);
  });

  return {
    code: lang.code,
    locale: lang.locale,
    produced,
    has: (key) => key in dict,
    t: (key, params = {}) => note(fill(lookup(key, params), params, String)),
    // HTML from our own dictionary; the parameters are escaped.
    html: (key, params = {}) => {
      if (!key.endsWith('Html')) throw new Error(`i18n: '${key}' is not an HTML key`);
      return note(fill(lookup(key, params), params, escapeHtml));
    },
    // Text that is the same in every language on purpose (E1, an op's name, a language's own name).
    raw: (s) => note(String(s)),
    // Sentences joined as the language writes them: a space after a Latin full stop, none after
    // a Chinese one (。).
    sentences: (...parts) => {
      const [first = '', ...rest] = parts.filter(Boolean);
      return note(rest.reduce((a, b) => a + (/[。！？：；）]$/.test(a) ? '' : ' ') + b, first));
    },
    fmt,
    number: (v, opts) => note(number(v, opts)),
  };
}
