// Appended to dist/asyncnd.js and dist/asyncnd-relaxed.js (--extern-post-js). As a classic
// script (a <script> tag, importScripts in the engine's Web Workers) the module's
// `var createAsyncndModule` (createAsyncndRelaxedModule for the relaxed one) is already a global,
// and in CommonJS it is module.exports; evaluated as an ES module (index.browser.mjs imports
// both) it is neither: publish the factory on globalThis, where index.cjs looks for it.
if (typeof module !== 'object' && typeof define !== 'function') {
  if (typeof createAsyncndModule === 'function') globalThis.createAsyncndModule = createAsyncndModule;
  if (typeof createAsyncndRelaxedModule === 'function') {
    globalThis.createAsyncndRelaxedModule = createAsyncndRelaxedModule;
  }
}
