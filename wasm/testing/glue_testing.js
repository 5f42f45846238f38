// nd._testing, for the package's own tests (wasm/test/): the wrappers of glue_testing.cpp. Linked
// into the build tree's hooks module only (--pre-js, wasm/CMakeLists.txt), where `Module` is the
// module being made; index.cjs calls each function in Module.asyncndExtensions with the API it
// made and its argument checks. Not a stable API.
(Module['asyncndExtensions'] = Module['asyncndExtensions'] || []).push(function (nd, api) {
  const M = Module;
  nd._testing = {
    // An array that a queued op fails to compute, with `message`, when it runs.
    failingOp: (x, message) => api.wrap(M.failingOp(api.asArray(x, 'failingOp'), String(message))),
    // An array whose op stays pending until open(value) fills it: { array, open(value) }.
    gate(shape) {
      const array = api.wrap(M.gateOp(api.shapeArg(shape, 'gate')));
      const id = array._h;
      return { array, open: (value) => { api.check(M.openGate(id, api.numArg('gate.open', 'value', value))); } };
    },
  };
});
