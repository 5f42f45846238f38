// ES module entry for browsers (package.json's "browser" condition; an import map's target):
// `import asyncnd from 'asyncnd'` or `import { load } from 'asyncnd'` on a page or in a module
// Worker. The API is index.cjs's, imported in its ES-module form (dist/asyncnd-api.mjs, made from
// index.cjs by `make wasm`); the module's files are found next to this file's URL, not a <script>.
import api from './dist/asyncnd-api.mjs';
import * as emscripten from './dist/asyncnd.js';

// Imported natively, dist/asyncnd.js (a classic script) publishes its factory on globalThis
// (wasm/export_global.js); a bundler turns it into a CommonJS module whose default is the factory.
// index.cjs looks for the global, as after a <script> tag.
if (typeof globalThis.createAsyncndModule !== 'function') {
  globalThis.createAsyncndModule = emscripten.default;
}

// dist/asyncnd.js, with asyncnd.wasm and asyncnd.worker.js beside it (the engine's Web Workers
// load it with importScripts): relative to this module, whatever page or worker imported it.
const defaultModuleUrl = new URL('./dist/asyncnd.js', import.meta.url).href;

// index.cjs's load, with moduleUrl defaulting to this package's dist/asyncnd.js.
export function load(options = {}) {
  return api.load({ ...options, moduleUrl: options.moduleUrl || defaultModuleUrl });
}

export default { load };
