// Appended to dist/asyncnd.js (--extern-post-js). As a classic script (a <script> tag,
// importScripts in the engine's Web Workers) its `var createAsyncndModule` is already a global,
// and in CommonJS it is module.exports; evaluated as an ES module (index.browser.mjs imports it)
// it is neither: publish the factory on globalThis, where index.cjs looks for it.
if (typeof module !== 'object' && typeof define !== 'function') {
  globalThis.createAsyncndModule = createAsyncndModule;
}
