// ES module entry for browsers (package.json's "browser" condition; an import map's target):
// `import asyncnd from 'asyncnd'` or `import { load } from 'asyncnd'` on a page or in a module
// Worker, directly or through a bundler. The API is index.cjs's, imported in its ES-module form
// (dist/asyncnd-api.mjs, made from index.cjs by `make wasm`); the module's files are found next to
// this file's URL, not a <script>.
import api from './dist/asyncnd-api.mjs';

// dist/asyncnd.js, with the rest of dist/ beside it (asyncnd.wasm, asyncnd.worker.js and the
// relaxed-SIMD module's asyncnd-relaxed.*; the engine's Web Workers load the picked module's .js
// with importScripts): relative to this module, whatever page or worker imported it (or, bundled,
// relative to the bundle: copy dist/ next to it).
const defaultModuleUrl = new URL('./dist/asyncnd.js', import.meta.url).href;

// index.cjs's load, with moduleUrl defaulting to this package's dist/asyncnd.js. The Emscripten
// scripts are imported here, by URL, when first needed, not statically: a bundler would otherwise
// bundle them (and fail on their Node-only require() calls), and the page would run a copy next
// to the file its Web Workers load. Imported as a module, dist/asyncnd.js and
// dist/asyncnd-relaxed.js publish their factories on globalThis (wasm/export_global.js), where
// index.cjs looks for them, as after <script> tags. The relaxed one's script is imported only when
// load() may pick it (only the picked module's .wasm is fetched).
export async function load(options = {}) {
  // Options that are not an object, or a moduleUrl that is no URL: index.cjs's load rejects,
  // naming what is wrong, before anything is imported.
  if (options === null || typeof options !== 'object') return api.load(options);
  const given = options.moduleUrl;
  const valid = given === undefined || (typeof given === 'string' && given !== '') || given instanceof URL;
  if (!valid) return api.load(options);
  const moduleUrl = given === undefined ? defaultModuleUrl : String(given);
  const scripts = [['createAsyncndModule', moduleUrl]];
  if (options.simd !== 'simd128' && api.supportsRelaxedSimd()) {
    scripts.push(['createAsyncndRelaxedModule', new URL('asyncnd-relaxed.js', moduleUrl).href]);
  }
  for (const [factory, url] of scripts) {
    if (typeof globalThis[factory] !== 'function') {
      await import(/* webpackIgnore: true */ /* @vite-ignore */ url);
    }
  }
  return api.load({ ...options, moduleUrl });
}

// Whether this engine runs relaxed SIMD (load({ simd: 'auto' }) then picks that module).
export const supportsRelaxedSimd = api.supportsRelaxedSimd;
// The CPUs the default thread count counts (navigator.hardwareConcurrency here).
export const cpuLimit = api.cpuLimit;

export default { load, supportsRelaxedSimd, cpuLimit };
