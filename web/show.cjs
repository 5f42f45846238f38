// show.cjs: how the code cell's values are written in its output (console arguments, the returned
// value, a thrown value that is not an Error). A classic script, so that the Worker loads it with
// importScripts (it defines self.asyncndShow) and Node's tests with require (test/show.test.mjs).
//
// Plain data is written as JSON writes it ({"a":1,"b":[1,2]}), so that what a program prints can be
// pasted back; what JSON gets wrong or refuses is spelled out as a console would: a cycle as
// [Circular], a Map as Map(1) {"a" => 1}, a Set as Set(2) {1, 2}, undefined, NaN, Infinity, -0,
// bigints as 1n, functions as [Function: f], symbols, an empty slot of a sparse array as <empty>,
// a nested Error as [TypeError: text], typed arrays with their type and first 32 elements, and
// NDArrays by their shape (at the top level the caller prints the values). A toJSON method is
// used, as JSON.stringify uses it (a Date writes its ISO text). Bounded work: at most 100 entries
// of an array, object, Map or Set ("... 9900 more"), and 8 levels ([Array], [Object] below).
// Never throws: an object whose getter, Proxy trap or toJSON throws is written as far as it
// could be read, the rest as <unreadable: message>.
'use strict';

(function (root) {
  const MAX_ITEMS = 100;
  const MAX_DEPTH = 8;
  const TYPED_HEAD = 32;

  // A typed array's element: floats to 6 significant digits; integers (and BigInt64Array's
  // bigints) exactly, as toPrecision would round 1234567 to 1234570.
  const element = (x) => (typeof x === 'bigint' ? `${x}n`
    : Number.isInteger(x) ? String(x) : String(Number(x.toPrecision(6))));

  function typed(v) {
    if (v instanceof DataView) return `DataView(${v.byteLength})`;
    const head = Array.from(v.subarray(0, TYPED_HEAD), element);
    return `${v.constructor.name}(${v.length}) [${head.join(', ')}${v.length > TYPED_HEAD ? ', ...' : ''}]`;
  }

  function unreadable(e) {
    let text = '';
    try {
      text = String(e && e.message !== undefined ? e.message : e);
    } catch { /* a thrown value that cannot even be written */ }
    return `<unreadable${text ? `: ${text}` : ''}>`;
  }

  // `opts.ndarray(x)`: whether x is an NDArray; `stack`: the objects being written, outermost
  // first (a cycle leads back to one of them).
  function write(v, opts, stack) {
    switch (typeof v) {
      case 'string': return JSON.stringify(v);
      case 'number': return Object.is(v, -0) ? '-0' : String(v);
      case 'bigint': return `${v}n`;
      case 'undefined': return 'undefined';
      case 'boolean': return String(v);
      case 'symbol': return v.toString();
      case 'function': return `[Function${v.name ? `: ${v.name}` : ' (anonymous)'}]`;
      default: break;
    }
    if (v === null) return 'null';
    if (opts.ndarray(v)) return v.isDeleted ? '<deleted NDArray>' : `<NDArray ${v.shape.length ? v.shape.join('x') : 'scalar'}>`;
    if (stack.includes(v)) return '[Circular]';
    if (ArrayBuffer.isView(v)) return typed(v);
    if (v instanceof Error) return `[${v.name}: ${v.message}]`;
    if (stack.length >= MAX_DEPTH) return Array.isArray(v) ? '[Array]' : '[Object]';
    stack.push(v);
    try {
      if (typeof v.toJSON === 'function') return write(v.toJSON(''), opts, stack);
      const more = (n) => (n > MAX_ITEMS ? [`... ${n - MAX_ITEMS} more`] : []);
      const items = [];
      const each = (fn) => {  // entries written until one cannot be read
        try {
          fn();
        } catch (e) {
          items.push(unreadable(e));
        }
      };
      if (Array.isArray(v)) {
        each(() => {
          const n = Math.min(v.length, MAX_ITEMS);
          for (let i = 0; i < n; ++i) items.push(i in v ? write(v[i], opts, stack) : '<empty>');
          items.push(...more(v.length));
        });
        return `[${items.join(',')}]`;
      }
      if (v instanceof Map) {
        each(() => {
          for (const [k, x] of v) {
            if (items.length === MAX_ITEMS) break;
            items.push(`${write(k, opts, stack)} => ${write(x, opts, stack)}`);
          }
          items.push(...more(v.size));
        });
        return `Map(${v.size}) {${items.join(', ')}}`;
      }
      if (v instanceof Set) {
        each(() => {
          for (const x of v) {
            if (items.length === MAX_ITEMS) break;
            items.push(write(x, opts, stack));
          }
          items.push(...more(v.size));
        });
        return `Set(${v.size}) {${items.join(', ')}}`;
      }
      each(() => {
        const keys = Object.keys(v);
        for (const k of keys.slice(0, MAX_ITEMS)) items.push(`${JSON.stringify(k)}:${write(v[k], opts, stack)}`);
        items.push(...more(keys.length));
      });
      return `{${items.join(',')}}`;
    } finally {
      stack.pop();
    }
  }

  // v as the cell's output shows it. quote: a string is written as a literal (a thrown '' must
  // show as ""), else as it is. opts.ndarray: see write(); at the top level an NDArray is the
  // caller's to print (its values).
  function show(v, { quote = false, ndarray = () => false } = {}) {
    if (typeof v === 'string') return quote ? JSON.stringify(v) : v;
    const opts = {
      ndarray: (x) => {
        try {
          return ndarray(x);
        } catch {
          return false;  // a revoked Proxy throws even for instanceof
        }
      },
    };
    try {
      if (v instanceof Error) return v.stack || String(v);
      return write(v, opts, []);
    } catch (e) {
      try {
        return Object.prototype.toString.call(v);
      } catch {
        return `[${typeof v}]`;  // a revoked Proxy refuses even that
      }
    }
  }

  if (typeof module === 'object' && module.exports) module.exports = { show };
  else root.asyncndShow = show;
})(typeof self !== 'undefined' ? self : globalThis);
