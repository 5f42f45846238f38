// asyncnd for JavaScript: loads the WebAssembly module (dist/) and wraps its Embind functions
// (bindings.cpp) in the package's API (README.md): NDArray methods, nd.* creation functions,
// barriers, `await x.data()`, tidy/delete, engine stats, the profiler. Types: index.d.ts.
// One file, though longer than the ~800 lines past which the house style splits one: browsers
// import it as one ES module that esm_wrap.cmake writes from it (require() is Node's alone there),
// so a second file would need a bundling step of its own. Its sections, in order: arguments and
// the CPU limit, makeApi (NDArray, ops, barriers, makeAutograd, makeNN), then loading.
'use strict';

const isNode = typeof process !== 'undefined' && !!(process.versions && process.versions.node);

// A browser page's main thread (not a Worker, not Node): blocking there freezes the page.
function onBrowserMainThread() {
  return typeof window !== 'undefined' && typeof importScripts === 'undefined' &&
         typeof WorkerGlobalScope === 'undefined';
}

const MAX_THREADS = 64;

// JavaScript numbers are doubles, and Embind converts them to C++ int with ToInt32 (2**32 becomes
// 0): every number a caller passes is checked here first, and errors show the value as given.
const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;
function show(v) {
  if (typeof v === 'string') return `'${v}'`;
  if (typeof v === 'bigint') return `${v}n`;
  if (Array.isArray(v)) return `[${v.map(show).join(',')}]`;
  try {
    return String(v);
  } catch (e) {
    return typeof v;  // a Symbol, or an object whose toString throws
  }
}
// Every module's NDArray class carries this mark (Symbol.for: the same in every copy of this file),
// so that an array of another load() is told apart from a value that is no array at all.
const NDARRAY_MARK = Symbol.for('asyncnd.NDArray');
function isForeignNDArray(x) {
  try {
    return typeof x === 'object' && x !== null && x[NDARRAY_MARK] === true;
  } catch {
    return false;  // a revoked Proxy throws even for a property read
  }
}
// Whether an ArrayBuffer was detached (transferred). ArrayBuffer.prototype.detached is newer
// than Node 20; a view of a detached buffer cannot be made.
function isDetached(buffer) {
  if ('detached' in buffer) return buffer.detached;
  try {
    new Uint8Array(buffer, 0, 0);
    return false;
  } catch (e) {
    return true;
  }
}
// An integer from lo to hi (a JavaScript number, not a string or a BigInt).
function intArg(op, what, v, lo, hi) {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < lo || v > hi) {
    throw new Error(`${op}: ${what} must be an integer from ${lo} to ${hi}, got ${show(v)}`);
  }
  return v;
}
// Any JavaScript number (NaN and infinities included: the op decides what it accepts).
function numArg(op, what, v) {
  if (typeof v !== 'number') throw new Error(`${op}: ${what} must be a number, got ${show(v)}`);
  return v;
}
// A float parameter (a random distribution's, an initialiser's scale), checked as given: the
// module takes float32, and rounding first would accept 1 - 1e-9 > 1 as 1 and -1e-50 as -0, or
// report 1e39 as inf. NaN and infinities go through to the module's own check.
function floatParam(op, what, v) {
  numArg(op, what, v);
  if (Number.isFinite(v) && !Number.isFinite(Math.fround(v))) {
    throw new Error(`${op}: ${what} must be within float32's range, got ${v}`);
  }
  return v;
}
// What is wrong with an options object of `op` whose keys may be `allowed` (an Error to throw or
// reject with), or null. A misspelt option would otherwise take its default silently.
function optionsProblem(op, options, allowed) {
  if (options === null || typeof options !== 'object') {
    return new TypeError(`${op}: options must be an object, got ${show(options)}`);
  }
  const unknown = Object.keys(options).filter((k) => !allowed.includes(k));
  if (!unknown.length) return null;
  return new Error(`${op}: unknown option ${unknown.map(show).join(', ')} ` +
                   `(${allowed.length === 1 ? 'the option is' : 'the options are'} ${allowed.join(', ')})`);
}

const nowS = () => (typeof performance !== 'undefined' ? performance.now() : Date.now()) / 1000;

// The directories holding the cgroup files of this process's group and of its ancestors, from the
// texts of /proc/self/mountinfo and /proc/self/cgroup: for each mount of the hierarchy (v2: type
// cgroup2, v1Controller null; v1: type cgroup with v1Controller among its options), the group's
// directory under the mount point, then its ancestors' up to the mount point. A mount of a
// subtree (a container's) maps the group's path below its root; a group outside it gives the
// mount point alone. As the native library's detail::cgroup_dirs_from (core/src/engine/engine.cpp).
function cgroupDirsFrom(mountinfo, procCgroup, v1Controller) {
  let group = null;
  for (const line of procCgroup.split('\n')) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line);
    if (m && (v1Controller ? m[2].split(',').includes(v1Controller) : m[1] === '0' && m[2] === '')) {
      group = m[3];
      break;
    }
  }
  const dirs = [];
  if (group === null) return dirs;
  const unescape = (f) => f.replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)));
  // "id parent major:minor root mount-point options [optional...] - type source super-options"
  for (const line of mountinfo.split('\n')) {
    const dash = line.indexOf(' - ');
    if (dash < 0) continue;
    const head = line.slice(0, dash).split(' '), tail = line.slice(dash + 3).split(' ');
    if (head.length < 5 || tail.length < 3) continue;
    if (v1Controller ? tail[0] !== 'cgroup' || !tail[2].split(',').includes(v1Controller) : tail[0] !== 'cgroup2') continue;
    const root = unescape(head[3]), mount = unescape(head[4]);
    let below = '';
    if (!group.includes('/..')) {
      if (root === '/') below = group;
      else if (group === root || group.startsWith(`${root}/`)) below = group.slice(root.length);
    }
    const base = mount === '/' ? '' : mount;
    for (let p = below; p !== '' && p !== '/'; p = p.slice(0, p.lastIndexOf('/'))) dirs.push(base + p);
    dirs.push(mount);
  }
  return dirs;
}

// Node on Linux: the cgroups' CPU quota in CPUs (v2 cpu.max "<quota> <period>", v1
// cpu.cfs_quota_us / cpu.cfs_period_us), the smallest along the process's group and its ancestors,
// wherever the hierarchies are mounted, or 0 for none. Node 20's os.availableParallelism() counts
// the affinity mask but not a quota (libuv reads one from 1.49 on), so a container started with
// --cpus=2 on a 64-core host would start 63 workers. The same reading as the native library's
// program_cpu_limit() (native/backends.cpp).
function cgroupCpuQuota() {
  const fs = require('fs');
  const read = (p) => { try { return fs.readFileSync(p, 'utf8'); } catch (e) { return null; } };
  const mountinfo = read('/proc/self/mountinfo'), groups = read('/proc/self/cgroup');
  if (mountinfo === null || groups === null) return 0;
  let quota = 0;
  const narrow = (q) => { if (q > 0 && (quota === 0 || q < quota)) quota = q; };
  const count = (t) => (t !== null && /^\d+\s*$/.test(t) ? Number(t) : -1);
  for (const dir of cgroupDirsFrom(mountinfo, groups, null)) {
    const m = /^(\d+) (\d+)\s*$/.exec(read(`${dir}/cpu.max`) || '');  // "max ..." is no quota
    if (m && Number(m[2]) > 0) narrow(Number(m[1]) / Number(m[2]));
  }
  for (const dir of cgroupDirsFrom(mountinfo, groups, 'cpu')) {
    const q = count(read(`${dir}/cpu.cfs_quota_us`)), period = count(read(`${dir}/cpu.cfs_period_us`));
    if (q > 0 && period > 0) narrow(q / period);
  }
  return quota;
}

// The CPUs this program may use, as the default thread count sees them: { cpus, online,
// affinity, quota, source }, as the native library's program_cpu_limit() (engine.h). In Node the
// online CPUs (os.cpus()), narrowed by the affinity mask (os.availableParallelism() counts it) and,
// on Linux, by the cgroups' CPU quota rounded up; in a browser navigator.hardwareConcurrency.
function cpuLimit() {
  let online = 2, affinity = 0, quota = 0;
  if (isNode) {
    const os = require('os');
    online = os.cpus().length || 1;
    if (typeof os.availableParallelism === 'function') affinity = os.availableParallelism();
    if (process.platform === 'linux') quota = cgroupCpuQuota();
  } else if (typeof navigator !== 'undefined' && navigator.hardwareConcurrency) {
    online = navigator.hardwareConcurrency;
  }
  let cpus = Math.max(1, online), source = 'online';
  if (affinity > 0 && affinity < cpus) [cpus, source] = [affinity, 'affinity'];
  const up = Math.max(1, Math.ceil(quota - 1e-9));  // 1.5 CPUs run two threads part of the time
  if (quota > 0 && up < cpus) [cpus, source] = [up, 'cgroup'];
  return { cpus, online, affinity, quota, source };
}

function defaultThreads() {
  // As natively: one worker per CPU but one, which the JavaScript thread keeps; at most
  // MAX_THREADS (on a machine of more than 65 CPUs the default was refused by load's own check).
  return Math.min(MAX_THREADS, Math.max(1, cpuLimit().cpus - 1));
}

// The op codes: an op's index in its list of the module's op table (core's op_table.h, exported
// by glue.cpp), e.g. UNARY.exp.
function opCodes(M) {
  const t = M.opTable();
  const codes = (names) => Object.fromEntries(names.map((n, i) => [n, i]));
  return { table: t, UNARY: codes(t.unary), BINARY: codes(t.binary), REDUCE: codes(t.reduce) };
}

// The module's messages start with the C++ op's name; the two ops JavaScript names otherwise are
// named as the caller wrote them ("broadcastTo: cannot broadcast [2,3] with [4,3]").
const JS_OP_NAMES = { broadcast_to: 'broadcastTo', copy_to: 'copyTo' };
// The module's stored error message: a view of its UTF-8 bytes in the heap (made without
// allocating there, as the heap may be full), decoded from a copy (a view of shared memory cannot
// be decoded directly).
const UTF8 = new TextDecoder();
function takeError(M) {
  const text = UTF8.decode(M.takeError().slice());
  const left = M.asyncndLeftToCollector ? M.asyncndLeftToCollector() : 0;
  if (left === 0 || !text.includes('out of WebAssembly memory')) return text;
  // JavaScript's collector does not see the heap inside WebAssembly, so it is not prompted by it
  // filling: arrays dropped without delete() may all still hold their storage here.
  return `${text} (${left} array${left === 1 ? '' : 's'} not deleted and in no tidy scope, so left ` +
    'to the garbage collector, which the WebAssembly heap filling does not prompt to run: an array ' +
    'dropped without delete() may still hold its storage; delete() or nd.tidy free at once)';
}
function jsOpName(message) {
  const m = /^(\w+):/.exec(message);
  return m && Object.hasOwn(JS_OP_NAMES, m[1]) ? JS_OP_NAMES[m[1]] + message.slice(m[1].length) : message;
}

function makeApi(M, threads, simd) {
  const { table: OP_TABLE, UNARY, BINARY, REDUCE } = opCodes(M);
  const check = (r) => {
    if (r < 0) throw new Error(jsOpName(takeError(M)));
    return r;
  };
  const blocking = (op) => {
    if (onBrowserMainThread()) {
      throw new Error(`${op}: blocking call on the browser's main thread, which would freeze the page; ` +
                      'use the non-blocking `await x.data()` instead, or run asyncnd in a Web Worker');
    }
  };

  // The safety net for arrays nobody deleted: their handle goes when the wrapper is collected.
  // Registering and unregistering at delete() cost V8 about 0.2 us together: a quarter of a tiny
  // op through this API (x.add(1).delete(); bench/notes/wasm.md, "WebAssembly: the
  // FinalizationRegistry at the end of the task"). So a new array is registered at the end of the
  // current task (a microtask), and only if it is still alive then: an array deleted within the
  // task it was made in, as in most loops, never touches the registry. The price: an array dropped
  // without delete() in the task that made it is held in `unregistered` until that task ends, so
  // the collector frees it at its first run after the task, not during it (its finalizer could not
  // run before the task's end anyway). A long synchronous loop registers its live arrays every
  // kRegisterBatch arrays, so that the list (and the deleted wrappers it keeps from the collector)
  // stays short. An array made inside nd.tidy needs no safety net while its scope is open (the
  // scope deletes it, and scopes are synchronous): it is listed only if it leaves every scope alive
  // (returned from the outermost one, or nd.keep).
  let registered = 0;  // arrays in the registry: not deleted, not yet collected
  const registry = new FinalizationRegistry((h) => {
    --registered;
    M.release(h);
  });
  M.asyncndLeftToCollector = () => registered + unregistered.filter((a) => a._h >= 0).length;
  const objectRegistry = new FinalizationRegistry((id) => M.nnRelease(id));
  const scopes = [];  // nd.tidy: one Set of arrays per open scope
  const kRegisterBatch = 4096;
  let unregistered = [];  // arrays made since the last registerNew, in order
  let registerQueued = false;
  function registerNew() {
    const made = unregistered;
    unregistered = [];
    for (const a of made) {
      if (a._h >= 0) {
        registry.register(a, a._h, a);
        a._registered = true;
        ++registered;
      }
    }
  }
  function registerQueuedNew() {
    registerQueued = false;
    registerNew();
  }
  // Lists a live array that is in no tidy scope, to be registered at the end of this task.
  function track(a) {
    if (unregistered.push(a) >= kRegisterBatch) registerNew();
    if (!registerQueued) {
      registerQueued = true;
      queueMicrotask(registerQueuedNew);
    }
  }

  class NDArray {
    // scoped = false: the array belongs to another one (x.grad), never to a tidy scope.
    constructor(h, scoped = true) {
      this._h = h;
      this._shape = null;
      this._grad = null;
      this._registered = false;
      if (scoped && scopes.length) scopes[scopes.length - 1].add(this);
      else track(this);
    }
    _handle(op) {
      if (this._h < 0) throw new Error(`${op}: the array was deleted`);
      return this._h;
    }
    get isDeleted() { return this._h < 0; }
    // The shape (cached after the first read); throws `${op}: the array was deleted` once deleted.
    _shapeOf(op) {
      const h = this._handle(op);
      if (this._shape === null) {
        const s = M.shape(h);
        if (s === null) throw new Error(takeError(M));
        this._shape = Object.freeze(s);
      }
      return this._shape;
    }
    get shape() { return this._shapeOf('shape').slice(); }
    get ndim() { return this._shapeOf('ndim').length; }
    get size() { return this._shapeOf('size').reduce((a, b) => a * b, 1); }

    // Frees the array now (its storage goes once every queued op that uses it has finished).
    // Idempotent. Never blocks.
    delete() {
      if (this._h < 0) return;
      if (this._registered) {
        registry.unregister(this);
        --registered;
      }
      M.release(this._h);
      this._h = -1;
      for (const s of scopes) s.delete(this);
      if (this._grad) this._grad.delete();
      this._grad = null;
    }

    // Autograd. Marks this array as a leaf whose gradient backward() computes, with a fresh
    // gradient of zeros (queued). Throws for an array computed while recording.
    attachGrad() {
      check(M.attachGrad(this._handle('attachGrad')));
      if (this._grad) this._grad.delete();  // the old buffer is no longer this array's gradient
      this._grad = null;
    }
    // The gradient buffer (backward writes into it): one NDArray per array, owned by it (deleted
    // with it, never by a tidy scope). Throws if attachGrad() was never called.
    get grad() {
      if (this._grad === null || this._grad._h < 0) {
        this._grad = new NDArray(check(M.grad(this._handle('grad'))), false);
      }
      return this._grad;
    }
    // Queues the gradients of this array with respect to every attached leaf it was recorded
    // from, then frees the recorded graph; returns at once. Without headGrad the array must have
    // one element; headGrad (dL/dthis) has this array's shape. { retainGraph: true } keeps the
    // graph for another backward.
    backward(headGrad, options = {}) {
      const problem = optionsProblem('backward', options, ['retainGraph']);
      if (problem) throw problem;
      const { retainGraph = false } = options;
      if (typeof retainGraph !== 'boolean') {  // 'false' kept the graph
        throw new TypeError(`backward: retainGraph must be a boolean, got ${show(retainGraph)}`);
      }
      const h = this._handle('backward');
      const head = headGrad === undefined || headGrad === null ? -1 : asArray(headGrad, 'backward');
      check(M.backward(h, head, !!retainGraph));
    }

    add(o) { return binary('add', this, o); }
    sub(o) { return binary('sub', this, o); }
    mul(o) { return binary('mul', this, o); }
    div(o) { return binary('div', this, o); }
    pow(o) { return binary('pow', this, o); }
    neg() { return unary('neg', this); }
    exp() { return unary('exp', this); }
    log() { return unary('log', this); }
    sqrt() { return unary('sqrt', this); }
    relu() { return unary('relu', this); }
    sigmoid() { return unary('sigmoid', this); }
    tanh() { return unary('tanh', this); }
    abs() { return unary('abs', this); }
    dot(o) { return dot(this, o); }
    transpose() { return wrap(M.transpose(this._handle('transpose'))); }
    get T() { return this.transpose(); }
    reshape(...shape) {
      if (shape.length === 1 && Array.isArray(shape[0])) shape = shape[0];
      return wrap(M.reshape(this._handle('reshape'), shapeArg(shape, 'reshape', true)));
    }
    // This array broadcast (NumPy rules) to `shape`, as a new array.
    broadcastTo(shape) {
      return wrap(M.broadcastTo(this._handle('broadcastTo'), shapeArg(shape, 'broadcastTo')));
    }
    // A copy on `device`: the module has one device, the CPU ('cpu' or 'cpu(0)').
    copyTo(device = 'cpu') {
      if (device !== 'cpu' && device !== 'cpu(0)') {
        throw new Error(`copyTo: no device ${show(device)}: the WebAssembly build has only the CPU, 'cpu'`);
      }
      return wrap(M.copyTo(this._handle('copyTo')));
    }
    sum(axis, keepdims = false) { return reduce('sum', this, axis, keepdims); }
    mean(axis, keepdims = false) { return reduce('mean', this, axis, keepdims); }
    max(axis, keepdims = false) { return reduce('max', this, axis, keepdims); }
    norm() { return reduce('norm', this, undefined, false); }

    // What console.log shows in Node: never blocks (the values need toString() or data()).
    [Symbol.for('nodejs.util.inspect.custom')]() {
      return this._h < 0 ? 'NDArray (deleted)' : `NDArray [${this.shape.join(',')}] cpu(0)`;
    }

    // Blocking: waits until every queued write of this array has finished; throws the Error of
    // the op that computed it (once).
    waitToRead() {
      blocking('waitToRead');
      check(M.waitToRead(this._handle('waitToRead')));
    }
    // Never blocks: resolves with a copy of the values (row-major Float32Array) once they are
    // computed, or rejects with the Error of the op that failed.
    data() {
      let h;
      try {
        h = check(M.retain(this._handle('data')));  // keeps the array alive until the read
      } catch (e) {
        return Promise.reject(e);
      }
      return new Promise((resolve, reject) => {
        const token = nextToken++;
        reads.set(token, { h, resolve, reject });
        holdProcess();
        let failed = null;
        try {
          if (M.requestRead(h, token) < 0) failed = new Error(takeError(M));
        } catch (e) {  // whatever it was, the read is off: its token must not hold the process
          failed = e instanceof Error ? e : new Error(`data: ${String(e)}`);
        }
        if (failed) {
          reads.delete(token);
          M.release(h);
          releaseProcess();
          reject(failed);
        }
      });
    }
    // Blocking: a copy of the values, row-major.
    dataSync() {
      blocking('dataSync');
      return copyOut(this._handle('dataSync'));
    }
    // Blocking: the values as nested arrays (a number for a 0-d array).
    toArray() {
      blocking('toArray');
      return nest(copyOut(this._handle('toArray')), this.shape);
    }
    // Blocking: the value of a one-element array.
    item() {
      blocking('item');
      const v = M.item(this._handle('item'));
      if (Number.isNaN(v) && M.hasError()) throw new Error(takeError(M));
      return v;
    }
    // Blocking: NumPy-style text, as the C++ operator<< prints it.
    toString() {
      blocking('toString');
      const s = M.toString(this._handle('toString'));
      if (s === '' && M.hasError()) throw new Error(takeError(M));
      return s;
    }
  }

  Object.defineProperty(NDArray.prototype, NDARRAY_MARK, { value: true });

  function wrap(h) { return new NDArray(check(h)); }

  function asArray(x, op) {
    if (!(x instanceof NDArray)) {
      if (isForeignNDArray(x)) {
        throw new TypeError(`${op}: the NDArray comes from another load() (another module, with its own engine ` +
                            'and heap): arrays of two loads cannot be mixed; copy the values with fromArray(x.dataSync())');
      }
      throw new TypeError(`${op}: expected an NDArray, got ${typeof x}`);
    }
    return x._handle(op);
  }
  function binary(op, a, b) {
    if (typeof a === 'number') {
      if (typeof b === 'number') throw new TypeError(`${op}: at least one argument must be an NDArray`);
      return wrap(M.scalarLeft(BINARY[op], a, asArray(b, op)));
    }
    if (typeof b === 'number') return wrap(M.scalar(BINARY[op], asArray(a, op), b));
    return wrap(M.binary(BINARY[op], asArray(a, op), asArray(b, op)));
  }
  function unary(op, a) { return wrap(M.unary(UNARY[op], asArray(a, op))); }
  function dot(a, b) { return wrap(M.dot(asArray(a, 'dot'), asArray(b, 'dot'))); }
  function reduce(op, a, axis, keepdims) {
    const h = asArray(a, op);
    if (axis === undefined || axis === null) {
      if (!keepdims) return wrap(M.reduceAll(REDUCE[op], h));
      // NumPy's keepdims without an axis: every axis kept, of length 1 (it gave a 0-d array).
      const all = check(M.reduceAll(REDUCE[op], h));
      const kept = M.reshape(all, new Array(a.ndim).fill(1));
      M.release(all);
      return wrap(kept);
    }
    intArg(op, 'axis', axis, INT32_MIN, INT32_MAX);  // the C++ op checks it against the shape
    return wrap(M.reduce(REDUCE[op], h, axis, !!keepdims));
  }

  function copyOut(h) {
    const n = M.size(h);
    const out = new Float32Array(Math.max(n, 0));
    // A fresh array's pages are first touched by the copy below: about 11 µs per 4 KiB page on
    // some VMs (4 MB: 12 ms, where the copy itself takes 0.15). Touched here, before the wait, that
    // work overlaps the computation still running on the engine's workers.
    for (let i = 0; i < n; i += 1024) out[i] = 0;
    const ptr = M.readPtr(h);  // waits
    if (ptr < 0) throw new Error(takeError(M));
    // A fresh view each time: the memory may have grown (and its buffer changed) since the last.
    // Copied with set() into a new array, not slice(): Node 20's V8 slices a view of shared
    // memory (the threaded module's) about 3x slower (4 MB: 1.6 ms against 0.5). In Chromium 156
    // the set() of 4 MB into the touched array takes 0.26-0.31 ms (bench/notes/browser.md,
    // "Results (browser)").
    out.set(new Float32Array(M.wasmMemory.buffer, ptr, n));
    return out;
  }
  // The JavaScript arrays nest() makes for an empty array with this shape: one per index of the
  // dimensions before the first 0.
  const kMaxEmptyNesting = 2 ** 24;
  function nest(flat, shape) {
    if (shape.length === 0) return flat[0];
    if (flat.length === 0) {
      // A non-empty array has fewer arrays than values; an empty one may ask for any number
      // ([2**40, 0]: new Array threw RangeError; [1e9, 0] filled V8's heap, which ends the process).
      let arrays = 1, count = 1;
      for (let d = 0; d < shape.length - 1 && shape[d] > 0; ++d) arrays += (count *= shape[d]);
      if (arrays > kMaxEmptyNesting) {
        throw new Error(`toArray: the empty array ${show(shape)} would be ${arrays} nested JavaScript ` +
                        `arrays (at most ${kMaxEmptyNesting}); its shape says all there is`);
      }
    }
    const build = (off, d) => {
      const out = new Array(shape[d]);
      const stride = shape.slice(d + 1).reduce((a, b) => a * b, 1);
      for (let i = 0; i < shape[d]; ++i) {
        out[i] = d === shape.length - 1 ? flat[off + i] : build(off + i * stride, d + 1);
      }
      return out;
    };
    return build(0, 0);
  }

  // Non-blocking reads: the module calls _asyncndReadDone(token) on this thread once a read's
  // data op has finished; the promise settles in a microtask, outside the module's call stack.
  const reads = new Map();
  let nextToken = 1;
  const done = [];
  let keepAlive = null;
  function holdProcess() {
    // Engine workers do not keep Node alive (they are unref'ed below); a pending read does.
    if (isNode && keepAlive === null) keepAlive = setInterval(() => {}, 1 << 30);
  }
  function releaseProcess() {
    if (keepAlive !== null && reads.size === 0) {
      clearInterval(keepAlive);
      keepAlive = null;
    }
  }
  M._asyncndReadDone = (token) => {
    done.push(token);
    if (done.length === 1) queueMicrotask(settleReads);
  };
  function settleReads() {
    const tokens = done.splice(0, done.length);
    for (const t of tokens) {
      const r = reads.get(t);
      if (!r) continue;
      reads.delete(t);
      try {
        r.resolve(copyOut(r.h));  // the values are ready: this wait does not block
      } catch (e) {
        r.reject(e);
      } finally {
        M.release(r.h);
      }
    }
    releaseProcess();
  }

  // A shape as given (an array of dimensions, or one number): each dimension a non-negative
  // integer that a double holds exactly (-1 too for reshape). The C++ op then checks that the
  // array fits the target (shape_size: at most 536870911 float32 elements in wasm32).
  function shapeArg(shape, op, allowMinusOne = false) {
    if (typeof shape === 'number') shape = [shape];
    if (!Array.isArray(shape)) throw new TypeError(`${op}: shape must be an array of integers, got ${show(shape)}`);
    for (let i = 0; i < shape.length; ++i) {
      const d = shape[i];
      if (typeof d !== 'number' || !Number.isSafeInteger(d) || (d < 0 && !(allowMinusOne && d === -1))) {
        throw new Error(`${op}: bad dimension ${show(d)} at index ${i} of the shape ${show(shape)}`);
      }
    }
    return shape;
  }
  function flatten(data, op) {
    // Nested JS arrays: infer the shape from the first element at each depth, check the rest.
    const shape = [];
    for (let x = data; Array.isArray(x); x = x[0]) shape.push(x.length);
    const out = new Float32Array(shape.reduce((a, b) => a * b, 1));
    let k = 0;
    const walk = (x, d) => {
      if (d === shape.length) {
        if (typeof x !== 'number') throw new TypeError(`${op}: expected numbers, found ${typeof x}`);
        out[k++] = x;
        return;
      }
      if (!Array.isArray(x) || x.length !== shape[d]) {
        throw new Error(`${op}: ragged nested array: expected length ${shape[d]} at depth ${d}`);
      }
      for (const y of x) walk(y, d + 1);
    };
    walk(data, 0);
    return { values: out, shape };
  }

  const nd = {
    NDArray,
    threads,
    backend: M.backendName(),
    // Which module runs: 'relaxed' (dist/asyncnd-relaxed.*, f32x4.relaxed_madd in the GEMM) or
    // 'simd128' (dist/asyncnd.*).
    simd,

    zeros: (shape) => wrap(M.zeros(shapeArg(shape, 'zeros'))),
    ones: (shape) => wrap(M.ones(shapeArg(shape, 'ones'))),
    full: (shape, value) => wrap(M.full(shapeArg(shape, 'full'), numArg('full', 'value', value))),
    arange(start, stop, step = 1) {
      if (stop === undefined) [start, stop] = [0, start];
      for (const [k, v] of [['start', start], ['stop', stop], ['step', step]]) numArg('arange', k, v);
      return wrap(M.arange(start, stop, step));
    },
    // From host data: a Float32Array or array of numbers with a shape (default: 1-D), or nested
    // arrays (shape inferred). The values are copied.
    fromArray(data, shape) {
      let values;
      if (ArrayBuffer.isView(data)) {
        // A DataView read as an empty array, and BigInt arrays failed inside Float32Array.from.
        if (data instanceof DataView || data instanceof BigInt64Array || data instanceof BigUint64Array) {
          throw new TypeError(`fromArray: expected a typed array of numbers, got a ${data.constructor.name}`);
        }
        // A detached array (its buffer transferred to a worker) reads as empty, and Embind's copy
        // then failed with its own TypeError.
        if (data.length === 0 && isDetached(data.buffer)) {
          throw new TypeError(`fromArray: the ${data.constructor.name}'s buffer is detached (transferred ` +
                              'to a worker or by structuredClone): its values are gone');
        }
        // An empty view is copied as a fresh empty array: a view that a shrunk resizable buffer
        // left out of bounds reads as empty too, but Embind's copy of it threw a TypeError that
        // named no op and called the buffer detached.
        values = data.length === 0 ? new Float32Array(0)
          : data instanceof Float32Array ? data : Float32Array.from(data);
      } else if (Array.isArray(data)) {
        // Nested arrays give their own shape; a shape given with them reshapes the values (the
        // sizes must match).
        const flat = flatten(data, 'fromArray');
        values = flat.values;
        if (shape === undefined) shape = flat.shape;
      } else {
        throw new TypeError('fromArray: expected a typed array or an array of numbers');
      }
      if (shape === undefined) shape = [values.length];
      shape = shapeArg(shape, 'fromArray');
      const n = shape.reduce((a, b) => a * b, 1);
      if (n !== values.length) {
        throw new Error(`fromArray: ${values.length} values do not fill shape ${show(shape)} (${n} elements)`);
      }
      return wrap(M.fromArray(values, shape));
    },
    random: {
      normal: (shape, mean = 0, std = 1) => {
        const op = 'random.normal';
        floatParam(op, 'mean', mean);
        if (floatParam(op, 'std', std) < 0) throw new Error(`${op}: std must be >= 0, got ${std}`);
        return wrap(M.randomNormal(shapeArg(shape, op), mean, std));
      },
      uniform: (shape, lo = 0, hi = 1) => {
        const op = 'random.uniform';
        floatParam(op, 'lo', lo);
        if (floatParam(op, 'hi', hi) < lo) throw new Error(`${op}: expects lo <= hi, got lo=${lo} hi=${hi}`);
        return wrap(M.randomUniform(shapeArg(shape, op), lo, hi));
      },
    },
    seed: (s) => { check(M.seed(intArg('seed', 'the seed', s, 0, Number.MAX_SAFE_INTEGER))); },

    add: (a, b) => binary('add', a, b),
    sub: (a, b) => binary('sub', a, b),
    mul: (a, b) => binary('mul', a, b),
    div: (a, b) => binary('div', a, b),
    pow: (a, b) => binary('pow', a, b),
    neg: (a) => unary('neg', a),
    exp: (a) => unary('exp', a),
    log: (a) => unary('log', a),
    sqrt: (a) => unary('sqrt', a),
    relu: (a) => unary('relu', a),
    sigmoid: (a) => unary('sigmoid', a),
    tanh: (a) => unary('tanh', a),
    abs: (a) => unary('abs', a),
    dot,
    // Checked first: nd.transpose(5) said "a.transpose is not a function".
    transpose: (a) => (asArray(a, 'transpose'), a.transpose()),
    reshape: (a, shape) => (asArray(a, 'reshape'), a.reshape(shape)),
    broadcastTo: (a, shape) => (asArray(a, 'broadcastTo'), a.broadcastTo(shape)),
    copyTo: (a, device) => (asArray(a, 'copyTo'), a.copyTo(device)),
    sum: (a, axis, keepdims) => reduce('sum', a, axis, keepdims),
    mean: (a, axis, keepdims) => reduce('mean', a, axis, keepdims),
    max: (a, axis, keepdims) => reduce('max', a, axis, keepdims),
    norm: (a) => reduce('norm', a),

    // Blocking: waits for everything queued so far; throws the first failure not yet reported.
    waitAll() {
      blocking('waitAll');
      check(M.waitAll());
    },

    // Runs fn; deletes every array made inside it except those it returns (an NDArray, or
    // NDArrays inside a returned array or plain object) and those passed to nd.keep.
    tidy(fn) {
      if (typeof fn !== 'function') throw new TypeError('tidy: expected a function');
      scopes.push(new Set());
      let result, ok = false, promise = false, unreadable = null;
      try {
        result = fn();
        ok = true;
      } finally {
        const scope = scopes.pop();
        const keep = new Set();
        // Whatever fn returned, every array of the scope is deleted or kept below: a result that
        // cannot be read (a `then` or prototype that throws) deletes them all and is refused.
        try {
          promise = ok && isThenable(result);
          if (ok && !promise) collect(result, keep);
        } catch (e) {
          unreadable = e;
          keep.clear();
        }
        for (const a of scope) {
          if (keep.has(a)) {
            if (scopes.length) scopes[scopes.length - 1].add(a);
            else track(a);  // out of every scope: the safety net from now on
          } else {
            a.delete();
          }
        }
      }
      if (unreadable) {
        throw new Error(`tidy: could not look for arrays in fn's result (${unreadable}); ` +
                        'the arrays made in fn were deleted', { cause: unreadable });
      }
      if (promise) {
        result.then(null, () => {});  // refused here: its own rejection must not end the process
        throw new Error('tidy: fn returned a Promise; tidy scopes are synchronous (await outside tidy)');
      }
      return result;
    },
    // Takes x out of every open tidy scope; it then lives until x.delete() (or collection).
    keep(x) {
      let scoped = false;
      for (const s of scopes) scoped = s.delete(x) || scoped;
      if (scoped && !x._registered && x._h >= 0) track(x);  // out of every scope: the safety net
      return x;
    },

    autograd: null,  // below
    nn: null,

    engine: {
      // Resets stats().bytesPeak to the bytes in use now (to measure one run's peak).
      resetPeak() { check(M.resetPeak()); },
      // pushed, finished, pending, inflightBytes, liveVars, bytesInUse, bytesPeak, liveArrays,
      // workers, devices[]; the bounds in force: maxInflightOps, maxInflightBytes (0 = none),
      // maxInflightBytesSource ('wasm heap' | 'env' | 'user' | 'none'), and pushWaits (pushes
      // that waited on a bound).
      stats() {
        const s = M.stats();
        if (s === null) throw new Error(takeError(M));
        return s;
      },
      // Bounds the work in flight (0 = no bound): a push over the bound waits (blocks) until the
      // workers catch up. Replaces both bounds, the default ones included (see resetMaxInflight).
      // A bound is a 32-bit size in WebAssembly: at most 2^32 - 1.
      setMaxInflight(bounds = {}) {
        // setMaxInflight(5) destructured to { ops: 0, bytes: 0 }: both bounds silently removed.
        if (typeof bounds !== 'object' || bounds === null) {
          throw new Error(`setMaxInflight: expected an object { ops, bytes }, got ${show(bounds)}`);
        }
        // A misspelt key ({ maxBytes }) read as no bound at all, the default one included.
        const problem = optionsProblem('setMaxInflight', bounds, ['ops', 'bytes']);
        if (problem) throw problem;
        const { ops = 0, bytes = 0 } = bounds;
        intArg('setMaxInflight', 'ops', ops, 0, 0xffffffff);
        intArg('setMaxInflight', 'bytes', bytes, 0, 0xffffffff);
        check(M.setMaxInflight(ops, bytes));
      },
      // Back to the bounds the engine started with: 524288 ops and a quarter of the module's
      // maximum heap (512 MiB of 2 GiB), or ASYNCND_MAX_INFLIGHT_OPS/_BYTES (Node).
      resetMaxInflight() { check(M.resetMaxInflight()); },
    },
    // The public ops of the op table, by kind: { unary, binary, reduce, other: [names] }. Each is
    // a method of NDArray (x.exp()) and a function of nd (nd.exp(x)).
    ops: Object.freeze({
      unary: Object.freeze([...OP_TABLE.unary]),
      binary: Object.freeze([...OP_TABLE.binary]),
      reduce: Object.freeze([...OP_TABLE.reduce]),
      other: Object.freeze([...OP_TABLE.other]),
    }),
    profiler: {
      start() { check(M.profilerStart()); },
      // Stops recording; returns the Chrome trace JSON (open it in Perfetto or chrome://tracing).
      stop() {
        const view = M.profilerStop();  // the text in the heap, freed once copied out
        if (view === null) throw new Error(takeError(M));
        try {
          return UTF8.decode(view.slice());
        } catch (e) {  // V8 makes no string of more than 2^29 - 24 characters (3 M ops or so)
          throw new Error(`profiler.stop: could not make a string of the ${view.length}-byte trace ` +
                          `(${e.message}); profiler.events() has the recording until the next start()`,
                          { cause: e });
        } finally {
          M.profilerTraceRelease();
        }
      },
      // The recorded ops as objects (name, device, worker, pushUs, startUs, endUs, reads, writes,
      // failed, skipped), until the next start().
      events() {
        const e = M.profilerEvents();
        if (e === null) throw new Error(takeError(M));
        return e;
      },
    },
  };
  nd.autograd = makeAutograd();
  nd.nn = makeNN();
  // A module linked with extra bindings (the build tree's hooks module for the package's tests and
  // the benchmarks: wasm/testing/, bench/wasm/) adds its wrappers here; the package's module
  // registers none.
  for (const extend of M.asyncndExtensions || []) extend(nd, { check, wrap, asArray, intArg, numArg, shapeArg });

  function makeAutograd() {
    // Runs fn with this thread's recording flag set to `on`, then restores it (fn must be
    // synchronous: the flag is the JavaScript thread's, and an await would leak it).
    function withRecording(on, fn, op) {
      if (typeof fn !== 'function') throw new TypeError(`${op}: expected a function`);
      const prev = M.setRecording(on);
      let result;
      try {
        result = fn();
      } finally {
        M.setRecording(prev);
      }
      if (result && typeof result.then === 'function') {
        result.then(null, () => {});  // refused here: its own rejection must not end the process
        throw new Error(`${op}: fn returned a Promise; recording is synchronous (await outside it)`);
      }
      return result;
    }
    return {
      // Runs fn while recording the ops on arrays that need gradients; returns what fn returns.
      record: (fn) => withRecording(true, fn, 'autograd.record'),
      // Runs fn without recording (inside a record scope).
      pause: (fn) => withRecording(false, fn, 'autograd.pause'),
      isRecording: () => M.isRecording(),
      backward: (y, headGrad, options) => {
        if (!(y instanceof NDArray)) asArray(y, 'autograd.backward');  // throws, naming another load's arrays
        y.backward(headGrad, options);
      },
    };
  }

  function makeNN() {
    // nn objects live in C++ (glue_nn.cpp) behind ids; a JS object holds one id. delete() drops
    // that handle only: what a network or trainer still uses stays alive in C++ until its last
    // handle goes. tidy never deletes nn objects (they outlive the training loop's scopes).
    class NnObject {
      constructor(id) {
        this._id = check(id);
        objectRegistry.register(this, this._id, this);
      }
      _object(op) {
        if (this._id < 0) throw new Error(`${op}: the ${this.constructor.name} was deleted`);
        return this._id;
      }
      get isDeleted() { return this._id < 0; }
      // Releases this handle now. Idempotent. Never blocks.
      delete() {
        if (this._id < 0) return;
        objectRegistry.unregister(this);
        M.nnRelease(this._id);
        this._id = -1;
      }
    }

    class Parameter extends NnObject {
      _info() {
        const i = M.nnParamInfo(this._object('Parameter'));
        if (i === null) throw new Error(takeError(M));
        return i;
      }
      get name() { return this._info().name; }
      // Dimensions still unknown (deferred initialisation) are 0.
      get shape() { return this._info().shape; }
      get initialized() { return this._info().initialized; }
      // The values / the gradient: a new NDArray handle that shares the parameter's storage (the
      // caller owns the handle; tidy may delete it; deleting it never frees the parameter).
      data() { return wrap(M.nnParamData(this._object('Parameter.data'))); }
      grad() { return wrap(M.nnParamGrad(this._object('Parameter.grad'))); }
      setData(x) { check(M.nnParamSetData(this._object('Parameter.setData'), asArray(x, 'Parameter.setData'))); }
    }

    class Block extends NnObject {
      // Queues the forward pass (recorded inside nd.autograd.record). Returns a new array.
      forward(x) { return wrap(M.nnForward(this._object('forward'), asArray(x, 'forward'))); }
      call(x) { return this.forward(x); }
      // Every parameter in order (Dense: weight, then bias), as new Parameter handles.
      parameters() {
        const ids = M.nnParameters(this._object('parameters'));
        if (ids === null) throw new Error(takeError(M));
        return ids.map((id) => new Parameter(id));
      }
    }

    const INIT = { uniform: 0, normal: 1, xavier: 2 };
    class Dense extends Block {
      // activation: '' (none), 'relu', 'sigmoid', 'tanh'. options: useBias (true), inUnits (0:
      // learnt at the first forward pass), init ('uniform' U(-scale, scale), 'normal' N(0, scale),
      // 'xavier'), scale (0.07 uniform, 0.01 normal).
      constructor(units, activation = '', options = {}) {
        const problem = optionsProblem('nn.Dense', options, ['useBias', 'inUnits', 'init', 'scale']);
        if (problem) throw problem;  // a misspelt useBias kept the bias silently
        const { useBias = true, inUnits = 0, init = 'uniform' } = options;
        let { scale } = options;
        if (!Object.prototype.hasOwnProperty.call(INIT, init)) throw new Error(`nn.Dense: init must be 'uniform', 'normal' or 'xavier', got '${init}'`);
        if (scale === undefined) scale = init === 'normal' ? 0.01 : 0.07;
        intArg('nn.Dense', 'units', units, 1, Number.MAX_SAFE_INTEGER);
        intArg('nn.Dense', 'inUnits', inUnits, 0, Number.MAX_SAFE_INTEGER);
        if (floatParam('nn.Dense', 'scale', scale) < 0 && init !== 'xavier') {
          throw new Error(`nn.Dense: the initialiser's scale must be finite and >= 0, got ${scale}`);
        }
        super(M.nnDense(units, String(activation || ''), !!useBias, inUnits, INIT[init], scale));
        this._params = null;
      }
      _param(bias) {
        if (this._params === null) this._params = {};
        const key = bias ? 'bias' : 'weight';
        const p = this._params[key];
        if (p === undefined || (p !== null && p.isDeleted)) {
          const id = M.nnDenseParam(this._object(`Dense.${key}`), bias);
          this._params[key] = id === -2 ? null : new Parameter(id);  // -2: no bias
        }
        return this._params[key];
      }
      // This layer's Parameters (owned by the layer's handle; null bias when useBias is false).
      get weight() { return this._param(false); }
      get bias() { return this._param(true); }
      delete() {
        if (this._params) Object.values(this._params).forEach((p) => p && p.delete());
        this._params = null;
        super.delete();
      }
    }

    class Sequential extends Block {
      constructor() {
        super(M.nnSequential());
        this._children = [];
      }
      // Appends blocks; returns this. The network takes the blocks' JS handles: its delete()
      // deletes them too (the layers themselves are shared, not copied, so a layer added to two
      // networks keeps working in the other).
      add(...blocks) {
        for (const b of blocks) {
          if (!(b instanceof Block)) throw new TypeError('Sequential.add: expected an nn block (Dense or Sequential)');
          check(M.nnAdd(this._object('Sequential.add'), b._object('Sequential.add')));
          this._children.push(b);
        }
        return this;
      }
      get size() { return check(M.nnSize(this._object('Sequential.size'))); }
      // Networks nested thousands deep are released with a list, not by recursion (V8's stack).
      delete() {
        const pending = [this];
        while (pending.length > 0) {
          const s = pending.pop();
          const children = s._children;
          s._children = [];
          NnObject.prototype.delete.call(s);
          for (const b of children) {
            if (b instanceof Sequential) pending.push(b);
            else b.delete();
          }
        }
      }
    }

    // Gluon's L2Loss: 0.5 * weight * (pred - label)^2 averaged over every axis but the first:
    // one value per example. A plain value (no C++ object): delete() does nothing.
    // A weight must be a finite float32 (NaN gave NaN losses, 1e39 infinite ones).
    const lossWeight = (w) => {
      if (!Number.isFinite(floatParam('nn.L2Loss', 'weight', w))) {
        throw new Error(`nn.L2Loss: weight must be finite, got ${w}`);
      }
      return w;
    };
    class L2Loss {
      constructor(weight = 1) { this.weight = lossWeight(weight); }
      forward(pred, label) {
        // Checked here too: weight is a plain property ('x' gave NaN losses, null zeros).
        const weight = lossWeight(this.weight);
        return wrap(M.nnL2Loss(weight, asArray(pred, 'L2Loss'), asArray(label, 'L2Loss')));
      }
      call(pred, label) { return this.forward(pred, label); }
      delete() {}
    }

    // A learning rate as given, before float32: 1e39 was reported as inf, and 1e-50 became 0, so
    // that nothing trained while the getter said 1e-50.
    const learningRateArg = (op, what, lr) => {
      floatParam(op, what, lr);
      if (lr !== 0 && Math.fround(lr) === 0) {
        throw new Error(`${op}: ${what} ${lr} is 0 in float32: nothing would train`);
      }
      return lr;
    };
    class SGD extends NnObject {
      // params: an array of Parameters (or a Block: its parameters). The trainer keeps its own
      // handles: deleting the Parameter objects afterwards is fine.
      constructor(params, learningRate) {
        let owned = null;
        if (params instanceof Block) params = owned = params.parameters();
        if (!Array.isArray(params)) throw new TypeError('nn.SGD: params must be an array of Parameters or a Block');
        const ids = params.map((p) => {
          if (!(p instanceof Parameter)) throw new TypeError('nn.SGD: params must be Parameters');
          return p._object('nn.SGD');
        });
        try {
          super(M.nnSgd(ids, learningRateArg('nn.SGD', 'learningRate', learningRate)));
        } finally {
          if (owned) owned.forEach((p) => p.delete());
        }
        this._lr = learningRate;
      }
      // Queues w -= lr * grad / batchSize for every parameter; returns at once. A gradient no
      // backward wrote since the last step is refused (Gluon's rule), or skipped with
      // { ignoreStaleGrad: true }.
      step(batchSize, options = {}) {
        intArg('SGD.step', 'batchSize', batchSize, 1, Number.MAX_SAFE_INTEGER);
        const problem = optionsProblem('SGD.step', options, ['ignoreStaleGrad']);
        if (problem) throw problem;
        const ignore = options.ignoreStaleGrad === undefined ? false : options.ignoreStaleGrad;
        if (typeof ignore !== 'boolean') {
          throw new TypeError(`SGD.step: ignoreStaleGrad must be a boolean, got ${show(ignore)}`);
        }
        check(M.nnSgdStep(this._object('SGD.step'), batchSize, ignore));
      }
      get learningRate() { return this._lr; }
      set learningRate(lr) {
        check(M.nnSgdSetLr(this._object('SGD.learningRate'), learningRateArg('SGD.learningRate', 'value', lr)));
        this._lr = lr;
      }
    }

    // The chapter's data_iter: numBatches batches of X ~ N(0, 1) [batchSize, features] and
    // y = ones [batchSize], made (queued) when asked for. The caller owns each batch's arrays.
    // handoutS: seconds from the first next() to each batch handed out.
    class DataIter {
      constructor(numBatches = 100, batchSize = 1024, features = 512) {
        for (const [k, v] of [['numBatches', numBatches], ['batchSize', batchSize], ['features', features]]) {
          if (!Number.isInteger(v) || v < 1) throw new Error(`nn.DataIter: ${k} must be a positive integer, got ${show(v)}`);
        }
        Object.assign(this, { numBatches, batchSize, features, handoutS: [] });
        this._t0 = null;
      }
      // The next batch { X, y }, or null when all were handed out. Never blocks.
      next() {
        const t = nowS();
        if (this._t0 === null) this._t0 = t;
        if (this.handoutS.length >= this.numBatches) return null;
        const X = nd.random.normal([this.batchSize, this.features]);
        let y;
        try {
          y = nd.ones([this.batchSize]);
        } catch (e) {
          X.delete();
          throw e;
        }
        this.handoutS.push(t - this._t0);
        return { X, y };
      }
      [Symbol.iterator]() {
        return { next: () => {
          const b = this.next();
          return b ? { value: b, done: false } : { value: undefined, done: true };
        } };
      }
    }

    // Both `new nd.nn.Dense(...)` and `nd.nn.Dense(...)` work (instanceof too).
    const factory = (C) => {
      const f = function (...args) { return new C(...args); };
      f.prototype = C.prototype;
      Object.defineProperty(f, 'name', { value: C.name });
      return f;
    };
    return {
      Parameter, Block,
      Dense: factory(Dense),
      Sequential: factory(Sequential),
      L2Loss: factory(L2Loss),
      SGD: factory(SGD),
      DataIter: factory(DataIter),
      relu: (x) => wrap(M.nnRelu(asArray(x, 'relu'))),
    };
  }

  function isThenable(x) {
    return x !== null && (typeof x === 'object' || typeof x === 'function') &&
      typeof x.then === 'function';
  }
  // The NDArrays in tidy's result: the result itself, or inside arrays and plain objects at any
  // depth. Each object is looked at once (a result may share parts, or hold itself), without a
  // stack per level, and only data properties are read: a getter is not called.
  function collect(root, keep) {
    const seen = new Set();
    const todo = [root];
    while (todo.length) {
      const x = todo.pop();
      if (x instanceof NDArray) {
        keep.add(x);
      } else if (x !== null && typeof x === 'object' && !seen.has(x)) {
        seen.add(x);
        if (Array.isArray(x)) {
          for (let i = 0; i < x.length; ++i) todo.push(x[i]);
        } else if (Object.getPrototypeOf(x) === Object.prototype) {
          for (const key of Object.keys(x)) {
            const d = Object.getOwnPropertyDescriptor(x, key);
            if (d && 'value' in d) todo.push(d.value);
          }
        }
      }
    }
  }
  return nd;
}

const instances = new Map();

// In a browser page, where this file was loaded from (document.currentScript exists only while a
// classic script first runs): dist/ is next to it.
const scriptUrl = typeof document !== 'undefined' && document.currentScript && document.currentScript.src
  ? document.currentScript.src : null;

// The package has two builds of the module: dist/asyncnd.* (SIMD128) and dist/asyncnd-relaxed.*
// (the same, but its GEMM uses relaxed SIMD's f32x4.relaxed_madd: faster, and its results may
// differ from the SIMD128 module's in the last bits). Each has its own .js, .wasm, .worker.js and
// factory name; the engine's Web Workers load the .js of their module and run the .wasm the main
// thread compiled.
const VARIANTS = {
  simd128: { file: 'asyncnd.js', factory: 'createAsyncndModule' },
  relaxed: { file: 'asyncnd-relaxed.js', factory: 'createAsyncndRelaxedModule' },
};
// load()'s options (index.d.ts, LoadOptions).
const LOAD_OPTIONS = ['threads', 'simd', 'pacing', 'moduleUrl'];
const SIMD_CHOICES = ['auto', 'relaxed', 'simd128'];
const PACING_CHOICES = ['auto', 'runs', 'ops'];

// A module of one function, f32x4.relaxed_madd (fd 85 02) of its three v128 parameters: it
// validates only where the engine runs relaxed SIMD (Chromium 114+, Firefox; Node 20 with
// --experimental-wasm-relaxed-simd).
const RELAXED_PROBE = [0, 97, 115, 109, 1, 0, 0, 0, 1, 8, 1, 96, 3, 123, 123, 123, 1, 123, 3, 2, 1, 0,
                       10, 13, 1, 11, 0, 32, 0, 32, 1, 32, 2, 253, 133, 2, 11];
function supportsRelaxedSimd() {
  try {
    return typeof WebAssembly === 'object' && WebAssembly.validate(new Uint8Array(RELAXED_PROBE));
  } catch (e) {
    return false;
  }
}

// options[name], else (Node) the variable when set, else 'auto'; throws for anything not in
// `allowed`, naming the option or the variable. simd: ASYNCND_WASM_SIMD; pacing (the pool's,
// EngineOptions::cpu_pacing): ASYNCND_CPU_PACING, where 'auto' is runs for one worker and ops one
// by one for several (README, "Thread policy").
function loadChoice(options, name, variable, allowed) {
  let v = options[name], what = name;
  if (v === undefined && isNode && process.env[variable]) {
    v = process.env[variable];
    what = variable;
  }
  if (v === undefined) return 'auto';
  if (!allowed.includes(v)) {
    const list = allowed.map(show);
    throw new Error(`load: ${what} must be ${list.slice(0, -1).join(', ')} or ${list[list.length - 1]}, ` +
                    `got ${show(v)}`);
  }
  return v;
}

// Node: the path of a module's .js: `moduleUrl` (a path or a file: URL) names the SIMD128 build's
// asyncnd.js (default: dist/), and the relaxed build is asyncnd-relaxed.js next to it.
function nodeModulePath(moduleUrl, variant) {
  const path = require('path');
  const base = !moduleUrl ? path.join(__dirname, 'dist', 'asyncnd.js')
    : String(moduleUrl).startsWith('file:') ? require('url').fileURLToPath(moduleUrl) : path.resolve(moduleUrl);
  return variant === 'simd128' ? base : path.join(path.dirname(base), VARIANTS[variant].file);
}

// Browsers: the URL of a module's .js, from moduleUrl (the URL of dist/asyncnd.js; default on a
// page: next to this script), or null when there is none.
function browserModuleUrl(moduleUrl, variant) {
  const base = moduleUrl || (scriptUrl && new URL('dist/asyncnd.js', scriptUrl).href);
  return base ? new URL(VARIANTS[variant].file, base).href : null;
}

// Which module to load: 'relaxed' where asked for, or, with 'auto', where the engine validates
// relaxed SIMD (and, in Node, the relaxed build exists next to moduleUrl); else 'simd128'.
function pickVariant(choice, moduleUrl) {
  if (choice === 'simd128') return 'simd128';
  const supported = supportsRelaxedSimd();
  if (choice === 'relaxed' && !supported) {
    throw new Error("load: simd 'relaxed': this WebAssembly engine does not run relaxed SIMD " +
                    '(f32x4.relaxed_madd does not validate)' +
                    (isNode ? '; Node 20 needs --experimental-wasm-relaxed-simd' : ''));
  }
  if (isNode && supported) {
    const file = nodeModulePath(moduleUrl, 'relaxed');
    if (!require('fs').existsSync(file)) {
      if (choice === 'relaxed') throw new Error(`load: simd 'relaxed': no relaxed-SIMD module at ${file}`);
      return 'simd128';
    }
  }
  return supported ? 'relaxed' : 'simd128';
}

// Browsers without a module system: runs the classic script at `url` (a module's .js), which
// defines its factory as a global.
function loadClassicScript(url) {
  if (typeof importScripts === 'function') {  // a classic Worker: synchronous
    importScripts(url);  // eslint-disable-line no-undef
    return Promise.resolve();
  }
  return new Promise((resolve, reject) => {
    const el = document.createElement('script');
    el.src = url;
    el.onload = () => resolve();
    el.onerror = () => reject(new Error(`load: could not load ${url}`));
    document.head.appendChild(el);
  });
}

// The Emscripten factory of a module: required in Node (and by bundlers); in a browser without a
// module system, the global that the module's classic script defines (dist/asyncnd.js must be
// loaded first, with a <script> tag or importScripts; dist/asyncnd-relaxed.js is loaded here
// when picked and not loaded yet).
async function moduleFactory(variant, moduleUrl) {
  // Literal requires, which a bundler sees and resolves.
  const requireDist = () => (variant === 'relaxed' ? require('./dist/asyncnd-relaxed.js') : require('./dist/asyncnd.js'));
  // module.require for another build: a bundler sees only the literal requires of dist/.
  if (isNode) {
    if (!moduleUrl) return requireDist();
    const file = nodeModulePath(moduleUrl, variant);
    try {
      return module.require(file);
    } catch (e) {
      throw new Error(`load: moduleUrl ${show(moduleUrl)}: cannot load ${file}: ${String(e && e.message).split('\n')[0]}`);
    }
  }
  const name = VARIANTS[variant].factory;
  if (typeof globalThis[name] === 'function') return globalThis[name];
  if (typeof require === 'function') return requireDist();
  const url = browserModuleUrl(moduleUrl, variant);
  if (variant === 'relaxed' && url && (typeof importScripts === 'function' || typeof document !== 'undefined')) {
    await loadClassicScript(url);
    if (typeof globalThis[name] === 'function') return globalThis[name];
  }
  throw new Error(`load: dist/${VARIANTS[variant].file} is not loaded: add it with a <script> tag or ` +
                  'importScripts() before this file');
}

async function instantiate(threads, moduleUrl, variant, pacing) {
  const factory = await moduleFactory(variant, moduleUrl);
  const options = { asyncndPoolSize: threads };
  if (!isNode) {
    // Browsers: the .wasm and the pthread workers' script are found from the URL of the module's
    // .js (the engine's Web Workers load that script too).
    const url = browserModuleUrl(moduleUrl, variant);
    if (!url) {
      throw new Error('load: in a Web Worker, pass moduleUrl (the URL of dist/asyncnd.js), e.g. ' +
                      "asyncnd.load({ threads, moduleUrl: new URL('asyncnd/dist/asyncnd.js', self.location).href })");
    }
    options.mainScriptUrlOrBlob = url;
    options.locateFile = (file) => new URL(file, url).href;
  }
  if (isNode) {
    // Node 20's fetch cannot read a file path: hand the loader the bytes.
    const wasm = nodeModulePath(moduleUrl, variant).replace(/\.js$/, '.wasm');
    try {
      options.wasmBinary = require('fs').readFileSync(wasm);
    } catch (e) {
      throw new Error(`load: cannot read ${wasm} (the module's .wasm, next to its .js): ${e.message}`);
    }
  }
  const M = await factory(options);
  const workers = () => M.PThread.unusedWorkers.concat(M.PThread.runningWorkers);
  if (isNode) {
    // The module has its own environment: hand it the bounds' overrides before the engine starts.
    for (const k of ['ASYNCND_MAX_INFLIGHT_BYTES', 'ASYNCND_MAX_INFLIGHT_OPS']) {
      if (process.env[k] !== undefined) M.setEnv(k, process.env[k]);
    }
  }
  M.setEnv('ASYNCND_CPU_PACING', pacing);  // read with the worker count when the engine starts
  if (M.init(threads) < 0) {
    // A bad ASYNCND_MAX_INFLIGHT_* value, say: the module is dropped, and so are its workers,
    // which kept Node alive after the rejection (and each failed load kept a module's worth).
    const error = new Error(takeError(M));
    for (const w of workers()) w.terminate();
    throw error;
  }
  if (isNode) {
    // The engine's workers live as long as the module; they must not keep the process alive.
    for (const w of workers()) {
      if (typeof w.unref === 'function') w.unref();
    }
  }
  return makeApi(M, threads, variant);
}

// Loads the module with `threads` engine worker threads (default: cpuLimit().cpus - 1, at least
// 1). Resolves with the API object (`nd`). `simd` picks the build: 'auto' (default; in Node,
// ASYNCND_WASM_SIMD when set) the relaxed-SIMD one where the engine runs it, else SIMD128;
// 'relaxed' that one or a rejection; 'simd128' always SIMD128. `pacing` says how the idle
// workers take queued ops: 'auto' (default; in Node, ASYNCND_CPU_PACING when set), 'runs' or 'ops'
// (README, "Thread policy"). In a browser, `moduleUrl` is the URL
// of dist/asyncnd.js, with the rest of dist/ beside it (default on a page: next to this script;
// required in a Web Worker); in Node, the path of another build's asyncnd.js (default: dist/).
// Loading again with the same thread count, moduleUrl, module and pacing gives the same instance;
// otherwise a separate module with its own engine and arrays.
function load(options = {}) {
  // A misspelt option (`thread: 2`) would otherwise load with the default silently.
  const problem = optionsProblem('load', options, LOAD_OPTIONS);
  if (problem) return Promise.reject(problem);
  const threads = options.threads === undefined ? defaultThreads() : options.threads;
  if (!Number.isInteger(threads) || threads < 1 || threads > MAX_THREADS) {
    return Promise.reject(new Error(`load: threads must be an integer from 1 to ${MAX_THREADS}, got ${show(threads)}`));
  }
  let moduleUrl = options.moduleUrl;
  if (moduleUrl !== undefined) {
    if (typeof URL === 'function' && moduleUrl instanceof URL) moduleUrl = moduleUrl.href;
    if (typeof moduleUrl !== 'string' || moduleUrl === '') {
      return Promise.reject(new TypeError('load: moduleUrl must be the path or URL of asyncnd.js (a non-empty ' +
                                          `string or a URL), got ${show(moduleUrl)}`));
    }
  }
  let variant, pacing;
  try {
    variant = pickVariant(loadChoice(options, 'simd', 'ASYNCND_WASM_SIMD', SIMD_CHOICES), moduleUrl);
    pacing = loadChoice(options, 'pacing', 'ASYNCND_CPU_PACING', PACING_CHOICES);
  } catch (e) {
    return Promise.reject(e);
  }
  const key = `${threads} ${moduleUrl || ''} ${variant} ${pacing}`;
  if (!instances.has(key)) {
    const p = instantiate(threads, moduleUrl, variant, pacing);
    instances.set(key, p);
    p.catch(() => instances.delete(key));
  }
  return instances.get(key);
}

const api = { load, supportsRelaxedSimd, cpuLimit };
api.default = api;
// CommonJS (Node, bundlers), or a global `asyncnd` for a classic <script> or importScripts().
if (typeof module === 'object' && module && module.exports) module.exports = api;
else globalThis.asyncnd = api;
