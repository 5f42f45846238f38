// nd._bench, for bench.mjs: the wrappers of glue_bench.cpp. Linked into the build tree's hooks
// module only (--pre-js, wasm/CMakeLists.txt), where `Module` is the module being made; index.cjs
// calls each function in Module.asyncndExtensions with the API it made and its argument checks.
(Module['asyncndExtensions'] = Module['asyncndExtensions'] || []).push(function (nd, api) {
  const M = Module, INT32_MIN = -(2 ** 31), INT32_MAX = 2 ** 31 - 1;
  nd._bench = {
    benchVars: (n) => api.check(M.benchVars(api.intArg('benchVars', 'n', n, 0, INT32_MAX))),
    pushEmpty: (r, w) => api.check(M.pushEmpty(api.intArg('pushEmpty', 'r', r, INT32_MIN, INT32_MAX),
                                               api.intArg('pushEmpty', 'w', w, INT32_MIN, INT32_MAX))),
    benchVarsFree: () => api.check(M.benchVarsFree()),
    pushEmptyUnchecked: M.pushEmpty,  // the benchmark's raw push: no argument checks, on purpose
    coreAdds: (x, n) => api.check(M.benchCoreAdds(api.asArray(x, 'coreAdds'),
                                                  api.intArg('coreAdds', 'n', n, 0, INT32_MAX))),
  };
});
