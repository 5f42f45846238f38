// TypeScript types of the asyncnd package (index.cjs / index.mjs).

export type Shape = number[];

/** A float32 n-dimensional array computed asynchronously by the engine. */
export interface NDArray {
  /** The dimensions (a copy). Non-blocking. Throws if the array was deleted. */
  readonly shape: Shape;
  readonly ndim: number;
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
  dot(other: NDArray): NDArray;
  transpose(): NDArray;
  readonly T: NDArray;
  reshape(shape: Shape): NDArray;
  reshape(...shape: number[]): NDArray;
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
  /** Blocking: the values as nested arrays (a number for a 0-d array). */
  toArray(): any;
  /** Blocking: the value of a one-element array. */
  item(): number;
  /** Blocking: NumPy-style text, e.g. "[[3, 3]] <NDArray 1x2 cpu(0)>". */
  toString(): string;
}

export interface DeviceStats { device: string; bytesInUse: number; bytesPeak: number; }

export interface EngineStats {
  pushed: number;
  finished: number;
  pending: number;
  inflightBytes: number;
  liveVars: number;
  bytesInUse: number;
  bytesPeak: number;
  /** Arrays (handles) alive in this module instance. */
  liveArrays: number;
  workers: number;
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
  readonly backend: string;

  zeros(shape: Shape | number): NDArray;
  ones(shape: Shape | number): NDArray;
  full(shape: Shape | number, value: number): NDArray;
  arange(stop: number): NDArray;
  arange(start: number, stop: number, step?: number): NDArray;
  /** Copies host data: a typed array or numbers with a shape (default 1-D), or nested arrays. */
  fromArray(data: ArrayLike<number> | any[], shape?: Shape): NDArray;
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
  dot(a: NDArray, b: NDArray): NDArray;
  transpose(a: NDArray): NDArray;
  reshape(a: NDArray, shape: Shape): NDArray;
  sum(a: NDArray, axis?: number, keepdims?: boolean): NDArray;
  mean(a: NDArray, axis?: number, keepdims?: boolean): NDArray;
  max(a: NDArray, axis?: number, keepdims?: boolean): NDArray;
  norm(a: NDArray): NDArray;

  /** Blocking: waits for everything queued; throws the first failure nobody has seen yet. */
  waitAll(): void;
  /** Runs fn, then deletes the arrays it made except those it returns (also inside arrays or
   *  plain objects) and those passed to keep(). fn must be synchronous. */
  tidy<T>(fn: () => T): T;
  keep<T extends NDArray>(x: T): T;

  engine: {
    stats(): EngineStats;
    /** Backpressure: a push waits while more ops (or bytes of outputs) are in flight. 0 = none. */
    setMaxInflight(bound: { ops?: number; bytes?: number }): void;
  };
  profiler: {
    start(): void;
    /** Stops recording; returns Chrome trace JSON. */
    stop(): string;
    events(): ProfileEvent[];
  };
}

export interface LoadOptions {
  /** Engine worker threads (Web Workers); default hardware threads - 1, at least 1. */
  threads?: number;
  /** Browsers only: the URL of dist/asyncnd.js (default on a page: next to index.cjs; required in
   *  a Web Worker). */
  moduleUrl?: string;
}

export function load(options?: LoadOptions): Promise<Asyncnd>;

declare const asyncnd: { load: typeof load };
export default asyncnd;
