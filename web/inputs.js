// inputs.js: the checks on what the reader types in the page's number fields, made before anything
// is sent to the Worker: the panels' parameters and the header's in-flight bounds. Pure (no DOM),
// so that the tests run them in Node (test/i18n.test.mjs). A check returns { value } or
// { error: { key, params } }: a dictionary key (i18n/) and its parameters, among them the value as
// it was typed; the page adds {field}, the field's name in the reader's language.

// A bound is a 32-bit size in WebAssembly (setMaxInflight refuses more): a larger entry, which the
// 2 GiB heap could never reach anyway, is taken as that largest bound.
export const MAX_BOUND = 0xffffffff;

// A decimal number as a number field holds it ('12', '0.5', '.5', '1e3'); anything else is NaN
// (Number() would take '0x50', ' ' and '' too).
const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;
const parse = (s) => (NUMBER.test(s) ? Number(s) : NaN);

// badInput: the field's validity.badInput (a number field reports text it cannot read as '').
const notNumber = { error: { key: 'input.notNumber', params: {} } };

// A panel's parameter q = { min, max, step = 1 }: a number of the grid min + k step inside
// [min, max]. Empty is refused too: no default is sent in its place.
export function checkParam(text, q, badInput = false) {
  if (badInput) return notNumber;
  const value = String(text ?? '').trim();
  const step = q.step || 1;
  const whole = Number.isInteger(q.min) && Number.isInteger(step);
  const { min, max } = q;
  if (value === '') return { error: { key: 'input.empty', params: { min, max } } };
  const v = parse(value);
  const refused = { error: step === 1 && whole
    ? { key: 'input.rangeInt', params: { value, min, max } }
    : { key: 'input.rangeStep', params: { value, min, max, step } } };
  if (!Number.isFinite(v) || v < min || v > max) return refused;
  // On the grid, allowing for the binary rounding of decimal steps: (25.2 - 1) / 0.1 is
  // 242.00000000000003.
  const k = (v - min) / step;
  if (Math.abs(k - Math.round(k)) > 1e-9 * Math.max(1, Math.abs(k))) return refused;
  return { value: v };
}

// A header bound field, kind 'ops' (a whole number of ops) or 'MB' (a number of 10^6-byte MB, a
// fraction allowed): empty keeps the engine's default (null), 0 switches the bound off, a positive
// number replaces it. Negative or fractional ops are refused, not read as 0 (which is "off"); a
// positive MB value is at least one byte, never 0.
export function checkBound(text, kind, badInput = false) {
  if (badInput) return notNumber;
  const value = String(text ?? '').trim();
  if (value === '') return { value: null };
  const v = parse(value);
  const key = kind === 'ops' ? 'input.boundOps' : 'input.boundMB';
  const refused = { error: { key, params: { value } } };
  if (!Number.isFinite(v) || value.startsWith('-')) return refused;
  if (kind === 'ops') return Number.isInteger(v) ? { value: Math.min(v, MAX_BOUND) } : refused;
  return { value: v === 0 ? 0 : Math.min(Math.max(1, Math.round(v * 1e6)), MAX_BOUND) };
}
