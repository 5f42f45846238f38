// chapter.mjs: the experiments of the chapter "Asynchronous Computation" in Node.js, on the
// WebAssembly engine (the npm package in wasm/). The JavaScript twin of examples/cpp/chapter.cpp.
//   E1  random matrices and products: synchronous vs asynchronous
//   E2  the dependency graph of z = x * y + 2, from the profiler
//   E3  barriers: waitToRead and waitAll
//   E4  implicit blockers: dataSync, item, toString; and the non-blocking `await data()`
//   E5  10 000 x (y = x + 1), waiting each time vs once, with the chapter's t1/t2/t3 model
//   E6  the memory of training the chapter's MLP: reading the loss each batch, never (byte bound
//       off), never with a small bound, and never with the default engine (examples/node/e6_mlp.mjs)
// Run from the repository root after `make wasm`:
//   node examples/node/chapter.mjs [threads] [E6 batches, default 100]
// (in your own project: `import asyncnd from 'asyncnd'`). Takes about ten seconds, plus about a
// two minutes for E6's 4 x 100 batches on 2 cores.
import asyncnd from '../../wasm/index.mjs';
import { runE6 } from './e6_mlp.mjs';

const threads = Number(process.argv[2] || 2);
const e6Batches = Number(process.argv[3] || 100);
const nd = await asyncnd.load({ threads });
const now = () => performance.now() / 1000;  // seconds
const heading = (t) => console.log(`\n== ${t}`);
const f = (s) => s.toFixed(4).padStart(8);

console.log('asyncnd: the chapter "Asynchronous Computation", in Node.js (WebAssembly)');
console.log(`engine: ${nd.backend}, ${threads} worker thread(s)`);
nd.seed(42);

// ---- E1 -------------------------------------------------------------------------------------
{
  heading('E1  ten random 1000x1000 matrices, each multiplied by itself');
  const iters = 10;
  nd.tidy(() => nd.dot(nd.random.normal([1000, 1000]), nd.random.normal([1000, 1000])).waitToRead());

  let t0 = now();
  for (let i = 0; i < iters; ++i) {
    nd.tidy(() => {
      const a = nd.random.normal([1000, 1000]);
      a.waitToRead();
      nd.dot(a, a).waitToRead();
    });
  }
  const syncS = now() - t0;

  t0 = now();
  for (let i = 0; i < iters; ++i) {
    nd.tidy(() => { nd.dot(nd.random.normal([1000, 1000]), nd.random.normal([1000, 1000])); });
  }
  const returned = now() - t0;
  nd.waitAll();
  const finished = now() - t0;
  console.log(`  synchronous (wait after every op)  ${f(syncS)} s`);
  console.log(`  engine: loop returned after        ${f(returned)} s   <- only queued`);
  console.log(`  engine: waitAll returned after     ${f(finished)} s   <- the real cost`);
  console.log('  (the asynchronous loop makes two matrices per step, the synchronous one; the tidy\n' +
              '  scopes free each step\'s arrays once their ops have run.)');
}

// ---- E2 -------------------------------------------------------------------------------------
{
  heading('E2  the dependency graph of z = x * y + 2');
  nd.profiler.start();
  const x = nd.ones([1, 2]), y = nd.ones([1, 2]);
  const z = nd.tidy(() => x.mul(y).add(2));
  z.waitToRead();
  nd.profiler.stop();
  console.log(`  z = ${z}`);
  const events = nd.profiler.events().sort((a, b) => a.pushUs - b.pushUs);
  // Variables are named by the order they appear: x and y are written by the two `ones`.
  const names = new Map();
  const nameOf = (id) => {
    if (!names.has(id)) names.set(id, ['x', 'y'][names.size] ?? `tmp${names.size - 1}`);
    return names.get(id);
  };
  const lastWriter = new Map(), readers = new Map(), edges = new Set();
  events.forEach((e, i) => {
    const r = e.reads.map(nameOf).join(', '), w = e.writes.map(nameOf).join(', ');
    console.log(`    op${i} ${e.name}(${r}) -> ${w}   [worker ${e.worker}, ran ${e.startUs.toFixed(1)}..${e.endUs.toFixed(1)} us]`);
    for (const v of e.reads) {
      if (lastWriter.has(v)) edges.add(`op${lastWriter.get(v)} ${events[lastWriter.get(v)].name} -> op${i} ${e.name}`);
      readers.set(v, [...(readers.get(v) || []), i]);
    }
    for (const v of e.writes) {
      if (lastWriter.has(v)) edges.add(`op${lastWriter.get(v)} -> op${i}`);
      for (const rd of readers.get(v) || []) edges.add(`op${rd} ${events[rd].name} -> op${i} ${e.name}`);
      readers.set(v, []);
      lastWriter.set(v, i);
    }
  });
  console.log('  dependencies:');
  for (const e of edges) console.log(`    ${e}`);
  console.log(`  (the last temporary, ${nameOf(events[events.length - 1].writes[0])}, is z)`);
  console.log('  The two `ones` have no path between them: they may run at the same time.');
  [x, y, z].forEach((a) => a.delete());
}

// ---- E3 and E4 ------------------------------------------------------------------------------
{
  heading('E3  barriers: waitToRead and waitAll (2000x2000 products)');
  const x = nd.random.uniform([2000, 2000]);
  nd.tidy(() => nd.dot(x, x).waitToRead());  // warm-up
  let t0 = now();
  const s = nd.tidy(() => nd.dot(x, x).sum());
  const queued = now() - t0;
  const text = s.toString();
  const printed = now() - t0;
  console.log(`  sum = ${text}`);
  console.log(`  y = dot(x, x).sum() queued after ${queued.toFixed(4)} s; printing it finished after ${printed.toFixed(4)} s`);
  s.delete();

  t0 = now();
  let y = nd.dot(x, x);
  y.waitToRead();
  const wtr = now() - t0;
  y.delete();
  t0 = now();
  y = nd.dot(x, x);
  nd.waitAll();
  const wall = now() - t0;
  y.delete();
  t0 = now();
  nd.tidy(() => { nd.dot(x, x); nd.dot(x, x); });
  nd.waitAll();
  const wall2 = now() - t0;
  console.log(`  one dot + y.waitToRead()  ${f(wtr)} s`);
  console.log(`  one dot + nd.waitAll()    ${f(wall)} s   (about the same: both wait for the dot)`);
  console.log(`  two dots + nd.waitAll()   ${f(wall2)} s   (waitAll waits for both)`);

  heading('E4  implicit blockers: anything that needs the values waits for them');
  t0 = now();
  const host = nd.tidy(() => nd.dot(x, x).dataSync());
  const tv = now() - t0;
  t0 = now();
  const n = nd.tidy(() => nd.dot(x, x).norm().item());
  const ti = now() - t0;
  t0 = now();
  const str = nd.tidy(() => nd.dot(x, x).sum().toString());
  const tp = now() - t0;
  console.log(`  dot + dataSync()       ${f(tv)} s   (${host.length} values copied out)`);
  console.log(`  dot + norm().item()    ${f(ti)} s   (norm = ${n.toPrecision(6)})`);
  console.log(`  dot + toString() of sum ${f(tp)} s  (${str})`);
  // The JavaScript way: a read that never blocks. The event loop keeps running meanwhile.
  t0 = now();
  const yy = nd.dot(x, x);
  const p = yy.data();
  const returnedAfter = now() - t0;
  let ticks = 0;
  const ticker = setInterval(() => { ++ticks; }, 1);
  const values = await p;
  clearInterval(ticker);
  console.log(`  dot + await data()     ${f(now() - t0)} s   (data() returned after ${(returnedAfter * 1e3).toFixed(3)} ms; ` +
              `a 1 ms timer ran ${ticks} times while waiting; ${values.length} values)`);
  yy.delete();
  x.delete();
  console.log('  Each costs a full dot: converting to host data, to a scalar or to text must wait.');
}

// ---- E5 -------------------------------------------------------------------------------------
{
  heading('E5  10000 x (y = x + 1) on a [1,2] array: waiting each time vs once');
  const N = 10000;
  const x = nd.ones([1, 2]);
  for (let i = 0; i < 1000; ++i) x.add(1).delete();  // warm-up: workers awake, code compiled
  nd.waitAll();

  let t0 = now();
  for (let i = 0; i < N; ++i) {
    const y = x.add(1);
    y.waitToRead();
    y.delete();
  }
  const syncS = now() - t0;

  t0 = now();
  for (let i = 0; i < N; ++i) x.add(1).delete();
  const pushS = now() - t0;
  nd.waitAll();
  const asyncS = now() - t0;

  let t1Total = 0;
  for (let i = 0; i < N; ++i) {
    const a = now();
    const y = x.add(1);
    t1Total += now() - a;
    y.waitToRead();
    y.delete();
  }
  nd.profiler.start();
  for (let i = 0; i < 1000; ++i) x.add(1).delete();
  nd.waitAll();
  nd.profiler.stop();
  const run = nd.profiler.events().filter((e) => e.name === 'add').map((e) => e.endUs - e.startUs).sort((a, b) => a - b);
  const t2 = run.length ? run[run.length >> 1] * 1e-6 : 0;
  const t1 = t1Total / N, t3 = syncS / N - t1 - t2;
  const us = (s) => (s * 1e6).toFixed(2);
  console.log(`  synchronous (waitToRead each time)  ${f(syncS)} s = ${us(syncS / N).padStart(6)} us per step`);
  console.log(`  asynchronous (waitAll once)         ${f(asyncS)} s = ${us(asyncS / N).padStart(6)} us per step`);
  console.log(`  speed-up                            ${(syncS / asyncS).toFixed(1).padStart(8)} x`);
  console.log(`  pushing alone in the asynchronous loop  ${us(pushS / N)} us per step`);
  console.log(`  estimates: t1 (push) ${us(t1)} us, t2 (compute, median of ${run.length} profiled ops) ${us(t2)} us,`);
  console.log(`             t3 (return, = sync/N - t1 - t2) ${us(t3)} us`);
  console.log(`  model: async t1 + N t2 + t3 = ${(t1 + N * t2 + t3).toFixed(4)} s vs measured ${asyncS.toFixed(4)} s`);
  if (t1 > t2) {
    console.log('  Here t1 > t2: JavaScript pushes more slowly than the workers compute, so the\n' +
                '  asynchronous loop runs at the pace of the pushes, about N t1.');
  }
  x.delete();
}

// ---- E6 -------------------------------------------------------------------------------------
{
  heading(`E6  memory: the chapter's MLP, ${e6Batches} batches of 1024x512 (Dense 2048 relu, 512 relu, 1; SGD lr 0.005)`);
  const mb = (b) => `${(b / 1e6).toFixed(1)} MB`.padStart(10);
  const show = (title, r) => {
    console.log(`  ${title}`);
    if (r.error) console.log(`    STOPPED after ${r.batchesDone} of ${r.batches} batches: ${r.error}`);
    console.log(`    engine peak ${mb(r.peakBytes)}   process RSS peak ${mb(r.rssPeakBytes)}   wasm memory ${mb(r.heapPeakBytes)}`);
    console.log(`    time per batch handed out ${(r.batchS * 1e3).toFixed(2).padStart(8)} ms   total ${r.totalS.toFixed(2)} s`);
  };
  // The unbounded run last: the wasm memory grows and never shrinks, so it would inflate the
  // RSS of any run after it.
  const a = runE6(nd, 'sync', { batches: e6Batches });
  const c = runE6(nd, 'bounded', { batches: e6Batches });
  const d = runE6(nd, 'default', { batches: e6Batches });
  const b = runE6(nd, 'nosync', { batches: e6Batches });
  show('(a) read the loss each batch (l.mean().item())', a);
  show('(b) never read it, the byte bound switched off (setMaxInflight({ ops, bytes: 0 }))', b);
  show(`(c) never read it, nd.engine.setMaxInflight({ bytes: ${(c.boundBytes / 1e6).toFixed(1)} MB })`, c);
  show(`(d) never read it, the default engine (byte bound ${(d.boundBytes / 1e6).toFixed(1)} MB from the ${d.boundSource}; pushes that waited: ${d.pushWaits})`, d);
  console.log('  Without a read the frontend queues every batch at once and each holds its activations\n' +
              '  until the workers reach it; a bound makes the pushes wait instead. By default the engine\n' +
              `  bounds the queued bytes at a quarter of the module's heap: (d) completed ${d.batchesDone} of ${d.batches} batches.`);
  if (b.error) {
    console.log('  Unbounded, the queue outgrew the module\'s 2 GiB of WebAssembly memory: the allocation\n' +
                '  failed with an Error, the loop stopped, and the engine kept working (what follows uses\n' +
                '  it).');
  }
}

heading('E7');
console.log('  E7 (CPU vs GPU) needs a GPU: there is none in WebAssembly here.');
nd.waitAll();
const st = nd.engine.stats();
console.log(`\nengine stats at the end: ${st.pushed} ops pushed, ${st.pending} pending, ` +
            `${st.liveArrays} live arrays, ${st.bytesInUse} bytes in use (peak ${(st.bytesPeak / 1e6).toFixed(1)} MB)`);
