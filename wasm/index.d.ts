// TypeScript types of the asyncnd package (index.cjs / index.mjs).

/** Dimensions: non-negative integers that a double holds exactly (no undefined, null, strings or
 *  fractions: those throw an Error naming the op). An array holds at most 536870911 float32
 *  elements (2^31 - 4 bytes, wasm32's limit); a larger shape throws "<op>: shape [...] has too
 *  many elements", and at most 64 dimensions. Every other integer argument (axes, seeds, bounds, sizes) is range-checked
 *  before it reaches the module, never wrapped to int32: axes must be int32 and in range. */
export type Shape = number[];
/** What fromArray copies: a typed array of numbers (not a BigInt64Array or a DataView)... */
export type NumberTypedArray = Float32Array | Float64Array | Int8Array | Uint8Array | Uint8ClampedArray |
  Int16Array | Uint16Array | Int32Array | Uint32Array;
/** ...or numbers, flat or nested (nested arrays give their own shape). */
export type NestedNumbers = Array<number | NestedNumbers>;

/** A float32 n-dimensional array computed asynchronously by the engine. */
export interface NDArray {
  /** The dimensions (a copy). Non-blocking. Throws if the array was deleted. */
  readonly shape: Shape;
  /** Number of dimensions. Non-blocking. Throws if the array was deleted. */
  readonly ndim: number;
  /** Number of elements. Non-blocking. Throws if the array was deleted. */
  readonly size: number;
  readonly isDeleted: boolean;

  /** Frees the array now; its storage goes once every queued op using it finishes. Idempotent. */
  delete(): void;

  // Non-blocking ops: each queues work and returns a new array. Bad input throws an Error.
  add(other: NDArray | number): NDArray;
  sub(other: NDArray | number): NDArray;
  mul(other: NDArray | number): NDArray;
  div(other: NDArray | number): NDArray;
  pow(other: NDArray | number): NDArray;
  neg(): NDArray;
  exp(): NDArray;
  log(): NDArray;
  sqrt(): NDArray;
  relu(): NDArray;
  sigmoid(): NDArray;
  tanh(): NDArray;
  abs(): NDArray;
  dot(other: NDArray): NDArray;
  transpose(): NDArray;
  readonly T: NDArray;
  reshape(shape: Shape): NDArray;
  reshape(...shape: number[]): NDArray;
  /** This array broadcast (NumPy rules) to `shape`, as a new array. */
  broadcastTo(shape: Shape): NDArray;
  /** A copy on `device`: the WebAssembly build has one device, the CPU. */
  copyTo(device?: 'cpu' | 'cpu(0)'): NDArray;
  sum(axis?: number, keepdims?: boolean): NDArray;
  mean(axis?: number, keepdims?: boolean): NDArray;
  max(axis?: number, keepdims?: boolean): NDArray;
  norm(): NDArray;

  /** Blocking: waits for this array's queued writes; throws the Error of a failed op (once). */
  waitToRead(): void;
  /** Never blocks: a copy of the values (row-major) once computed; rejects if an op failed. */
  data(): Promise<Float32Array>;
  /** Blocking: a copy of the values, row-major. */
  dataSync(): Float32Array;
  /**
   * Blocking: the values as nested arrays (a number for a 0-d array). An empty array gives empty
   * arrays down to its first 0 dimension; throws past 2^24 of them (`zeros([2**40, 0])`).
   */
  toArray(): any;
  /** Blocking: the value of a one-element array. */
  item(): number;
  /** Blocking: NumPy-style text, e.g. "[[3, 3]] <NDArray 1x2 cpu(0)>". */
  toString(): string;

  // Autograd.
  /** Marks this array as a leaf whose gradient backward() computes; gives it a fresh gradient of
   *  zeros (queued). Throws for an array computed while recording. */
  attachGrad(): void;
  /** The gradient buffer (backward writes into it). Owned by this array: deleted with it, never
   *  by a tidy scope. Throws if attachGrad() was never called. */
  readonly grad: NDArray;
  /** Queues the gradients with respect to every attached leaf this array was recorded from, then
   *  frees the recorded graph (unless retainGraph). Returns at once. Without headGrad the array
   *  must have one element; headGrad has this array's shape. Throws an Error, queuing nothing,
   *  for an array that was not recorded or whose graph was freed. */
  backward(headGrad?: NDArray | null, options?: { retainGraph?: boolean }): void;
}

/** A handle to a C++ nn object. delete() drops this handle only: the values it refers to stay
 *  alive while another handle (a network, a trainer, a Parameter) uses them. tidy never deletes
 *  nn objects. */
export interface NnObject {
  readonly isDeleted: boolean;
  /** Idempotent; never blocks. */
  delete(): void;
}

/** A trainable array with a gradient; its data is created at the first forward pass when the
 *  layer's input size was not given. */
export interface Parameter extends NnObject {
  readonly name: string;
  /** Unknown (deferred) dimensions are 0. */
  readonly shape: Shape;
  readonly initialized: boolean;
  /** A new array handle sharing the values (the caller owns it; tidy may delete it; deleting it
   *  never frees the parameter). Throws if not initialised yet. */
  data(): NDArray;
  /** A new array handle sharing the gradient. Throws if not initialised yet. */
  grad(): NDArray;
  /** Replaces the values (same shape) and attaches a fresh gradient. */
  setData(x: NDArray): void;
}

export interface Block extends NnObject {
  /** Queues the forward pass (recorded inside autograd.record); returns a new array. */
  forward(x: NDArray): NDArray;
  call(x: NDArray): NDArray;
  /** Every parameter in order (Dense: weight, bias) as new handles that the caller owns. */
  parameters(): Parameter[];
}

export interface Dense extends Block {
  /** Owned by the layer's handle (deleted with it). */
  readonly weight: Parameter;
  /** null when useBias is false. */
  readonly bias: Parameter | null;
}

export interface Sequential extends Block {
  /** Appends blocks and takes their handles (the network's delete() deletes them). */
  add(...blocks: Block[]): Sequential;
  readonly size: number;
}

export interface L2Loss {
  weight: number;
  /** 0.5 * weight * (pred - label)^2 averaged over all axes but the first: [batch]. */
  forward(pred: NDArray, label: NDArray): NDArray;
  call(pred: NDArray, label: NDArray): NDArray;
  /** Nothing to free (a plain value). */
  delete(): void;
}

export interface SGD extends NnObject {
  /** Queues w -= learningRate * grad / batchSize for every parameter; returns at once. Throws if
   *  batchSize <= 0 or a parameter is not initialised, and, as Gluon's Trainer, if a parameter's
   *  gradient was not written since the last step (no backward reached it), unless
   *  ignoreStaleGrad: then such parameters are skipped. */
  step(batchSize: number, options?: { ignoreStaleGrad?: boolean }): void;
  learningRate: number;
}

export interface Batch { X: NDArray; y: NDArray; }

/** The chapter's data_iter: batches of X ~ N(0, 1) [batchSize, features] and y = ones
 *  [batchSize], queued when asked for; the caller owns each batch's arrays. */
export interface DataIter extends Iterable<Batch> {
  readonly numBatches: number;
  readonly batchSize: number;
  readonly features: number;
  /** Seconds from the first next() to each batch handed out. */
  readonly handoutS: number[];
  /** The next batch, or null after numBatches. Never blocks. */
  next(): Batch | null;
}

export interface DenseOptions {
  useBias?: boolean;
  /** 0 (default): learnt at the first forward pass. */
  inUnits?: number;
  /** 'uniform' U(-scale, scale) (default, scale 0.07), 'normal' N(0, scale) (scale 0.01), 'xavier'. */
  init?: 'uniform' | 'normal' | 'xavier';
  scale?: number;
}

/** Constructors callable with or without `new`. */
type Ctor<A extends any[], T> = { new (...args: A): T; (...args: A): T };

export interface NN {
  /** For `instanceof` (made by layers, not by `new`). */
  Parameter: abstract new (...args: never[]) => Parameter;
  /** The base of Dense and Sequential, for `instanceof`. */
  Block: abstract new (...args: never[]) => Block;
  /** activation: '' (none), 'relu', 'sigmoid', 'tanh'. */
  Dense: Ctor<[units: number, activation?: string, options?: DenseOptions], Dense>;
  Sequential: Ctor<[], Sequential>;
  L2Loss: Ctor<[weight?: number], L2Loss>;
  /** params: Parameters, or a Block (its parameters). The trainer keeps its own references. */
  SGD: Ctor<[params: Parameter[] | Block, learningRate: number], SGD>;
  DataIter: Ctor<[numBatches?: number, batchSize?: number, features?: number], DataIter>;
  relu(x: NDArray): NDArray;
}

export interface Autograd {
  /** Runs fn while recording (fn must be synchronous); returns what fn returns. */
  record<T>(fn: () => T): T;
  /** Runs fn with recording off. */
  pause<T>(fn: () => T): T;
  isRecording(): boolean;
  backward(y: NDArray, headGrad?: NDArray | null, options?: { retainGraph?: boolean }): void;
}

export interface DeviceStats { device: string; bytesInUse: number; bytesPeak: number; }

export interface EngineStats {
  pushed: number;
  finished: number;
  pending: number;
  inflightBytes: number;
  liveVars: number;
  /** The op bound in force (default 524288; 0 = none). */
  maxInflightOps: number;
  /** The byte bound in force: by default a quarter of the module's maximum heap (512 MiB of 2 GiB); 0 = none. */
  maxInflightBytes: number;
  /** Where the byte bound came from. */
  maxInflightBytesSource: 'wasm heap' | 'env' | 'user' | 'none';
  /** How many pushes have waited on a bound since the module loaded. */
  pushWaits: number;
  bytesInUse: number;
  bytesPeak: number;
  /** Arrays (handles) alive in this module instance. */
  liveArrays: number;
  /** nn handles (layers, parameters, trainers) alive in this module instance. */
  liveNnObjects: number;
  /** The WebAssembly memory's size (grows on demand up to 2 GiB, never shrinks). */
  heapBytes: number;
  workers: number;
  /** How the idle workers take queued ops: 'runs' or 'ops' (LoadOptions.pacing, resolved). */
  pacing: 'runs' | 'ops';
  devices: DeviceStats[];
}

export interface ProfileEvent {
  name: string;
  device: string;
  /** Worker index; -1 when the op ran on the JavaScript thread. */
  worker: number;
  pushUs: number;
  startUs: number;
  endUs: number;
  reads: number[];
  writes: number[];
  failed: boolean;
  skipped: boolean;
}

type Operand = NDArray | number;

/** One loaded module instance: its engine, its arrays. */
export interface Asyncnd {
  readonly threads: number;
  /** e.g. 'cpu (WebAssembly, 128-bit SIMD + relaxed FMA, worker threads)' for the relaxed module. */
  readonly backend: string;
  /** The module that runs: 'relaxed' (dist/asyncnd-relaxed.*, f32x4.relaxed_madd in the GEMM)
   *  or 'simd128' (dist/asyncnd.*). */
  readonly simd: 'relaxed' | 'simd128';
  /** This load's array class, for `x instanceof nd.NDArray` (arrays are made by the ops, not by
   *  `new`; an array of another load is not an instance). */
  readonly NDArray: abstract new (...args: never[]) => NDArray;

  zeros(shape: Shape | number): NDArray;
  ones(shape: Shape | number): NDArray;
  /** Throws an Error naming full when value is not a number. */
  full(shape: Shape | number, value: number): NDArray;
  arange(stop: number): NDArray;
  arange(start: number, stop: number, step?: number): NDArray;
  /**
   * Copies host data: a typed array or numbers with a shape (default 1-D), or nested arrays.
   * Throws a TypeError for a DataView, a BigInt array or a typed array whose buffer was detached.
   */
  fromArray(data: NumberTypedArray | NestedNumbers, shape?: Shape | number): NDArray;
  random: {
    normal(shape: Shape | number, mean?: number, std?: number): NDArray;
    uniform(shape: Shape | number, lo?: number, hi?: number): NDArray;
  };
  seed(seed: number): void;

  add(a: Operand, b: Operand): NDArray;
  sub(a: Operand, b: Operand): NDArray;
  mul(a: Operand, b: Operand): NDArray;
  div(a: Operand, b: Operand): NDArray;
  pow(a: Operand, b: Operand): NDArray;
  neg(a: NDArray): NDArray;
  exp(a: NDArray): NDArray;
  log(a: NDArray): NDArray;
  sqrt(a: NDArray): NDArray;
  relu(a: NDArray): NDArray;
  sigmoid(a: NDArray): NDArray;
  tanh(a: NDArray): NDArray;
  abs(a: NDArray): NDArray;
  dot(a: NDArray, b: NDArray): NDArray;
  transpose(a: NDArray): NDArray;
  reshape(a: NDArray, shape: Shape): NDArray;
  broadcastTo(a: NDArray, shape: Shape): NDArray;
  copyTo(a: NDArray, device?: 'cpu' | 'cpu(0)'): NDArray;
  sum(a: NDArray, axis?: number, keepdims?: boolean): NDArray;
  mean(a: NDArray, axis?: number, keepdims?: boolean): NDArray;
  max(a: NDArray, axis?: number, keepdims?: boolean): NDArray;
  norm(a: NDArray): NDArray;

  /** Blocking: waits for everything queued; throws the first failure nobody has seen yet. */
  waitAll(): void;
  /** Runs fn, then deletes the arrays it made except those it returns (also inside arrays or
   *  plain objects, at any depth; getters are not called) and those passed to keep(). fn must be
   *  synchronous. A result that cannot be looked through (a `then` that throws) deletes them all
   *  and throws. Never deletes nn objects (networks, parameters, trainers) nor an array's x.grad
   *  (it goes with x). */
  tidy<T>(fn: () => T): T;
  keep<T extends NDArray>(x: T): T;

  autograd: Autograd;
  nn: NN;

  engine: {
    stats(): EngineStats;
    /** bytesPeak restarts from the bytes in use now. */
    resetPeak(): void;
    /**
     * Backpressure: a push waits while more ops (or bytes of outputs) are in flight. 0 = none.
     * Replaces both bounds, the defaults included (524288 ops and a quarter of the module's
     * maximum heap, 512 MiB; in Node ASYNCND_MAX_INFLIGHT_OPS / _BYTES replace those at load).
     * Throws for a non-object, an unknown key, or a value that is not an integer from 0 to
     * 2^32 - 1.
     */
    setMaxInflight(bound?: { ops?: number; bytes?: number }): void;
    /** Restores the bounds the engine started with (the defaults, or the environment's). */
    resetMaxInflight(): void;
  };
  /** The public ops of core's op table, by kind, by their C++ names: each unary, binary and
   *  reduce op is an NDArray method and an nd function of the same name; of `other`, the
   *  JavaScript names of broadcast_to and copy_to are broadcastTo and copyTo. */
  readonly ops: {
    readonly unary: readonly string[];
    readonly binary: readonly string[];
    readonly reduce: readonly string[];
    readonly other: readonly string[];
  };
  profiler: {
    start(): void;
    /** Stops recording; returns Chrome trace JSON. Throws where the JSON would be longer than a
     *  string may be (past about 3 million ops in V8); events() still has the recording. */
    stop(): string;
    events(): ProfileEvent[];
  };
}

export interface LoadOptions {
  /** Engine worker threads (Web Workers), 1 to 64; default cpuLimit().cpus - 1, at least 1 and
   *  at most 64. */
  threads?: number;
  /** Browsers: the URL of dist/asyncnd.js (default: next to index.browser.mjs when imported as
   *  an ES module; next to index.cjs on a page with classic scripts; required in a classic Web
   *  Worker). Node: the path (or file: URL) of another build's asyncnd.js (default: dist/). The
   *  relaxed-SIMD module is asyncnd-relaxed.js in the same folder. */
  moduleUrl?: string | URL;
  /** Which module: 'auto' (default; in Node, the ASYNCND_WASM_SIMD variable when set) the
   *  relaxed-SIMD one where the engine runs relaxed SIMD, else SIMD128; 'relaxed' that one, or a
   *  rejection where the engine cannot run it; 'simd128' always SIMD128. Anything else rejects. */
  simd?: 'auto' | 'relaxed' | 'simd128';
  /** How the engine's idle workers take queued ops: 'auto' (default; in Node, the
   *  ASYNCND_CPU_PACING variable when set) runs for one worker and ops one by one for several;
   *  'runs' takes everything queued at each look and runs it in push order, a long run split
   *  between idle workers; 'ops' takes ops one by one as they come. Anything else rejects. */
  pacing?: 'auto' | 'runs' | 'ops';
}

export function load(options?: LoadOptions): Promise<Asyncnd>;
/** Whether this WebAssembly engine runs relaxed SIMD (WebAssembly.validate of f32x4.relaxed_madd). */
export function supportsRelaxedSimd(): boolean;

/** The CPUs this program may use, as load()'s default thread count (cpus - 1, at least 1) sees
 *  them; the native library's program_cpu_limit(). */
export interface CpuLimit {
  /** What the default counts: the smallest of the three below, at least 1. */
  cpus: number;
  /** Online CPUs: os.cpus() in Node, navigator.hardwareConcurrency in a browser. */
  online: number;
  /** CPUs in the affinity mask (Node's os.availableParallelism(): taskset, a cpuset); 0 = unknown. */
  affinity: number;
  /** Node on Linux: the cgroup's CPU quota in CPUs (v2 cpu.max, v1 cpu.cfs_quota_us over
   *  cpu.cfs_period_us), counted rounded up; 0 = none. */
  quota: number;
  /** Which of the three decided. */
  source: 'online' | 'affinity' | 'cgroup';
}
export function cpuLimit(): CpuLimit;

declare const asyncnd: {
  load: typeof load;
  supportsRelaxedSimd: typeof supportsRelaxedSimd;
  cpuLimit: typeof cpuLimit;
};
export default asyncnd;
