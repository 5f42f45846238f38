// chapter.mjs: the experiments of the chapter "Asynchronous Computation" in Node.js, on the
// WebAssembly engine (the npm package in wasm/). The JavaScript twin of examples/cpp/chapter.cpp.
//   E1  random matrices and products: synchronous vs asynchronous
//   E2  the dependency graph of z = x * y + 2, from the profiler
//   E3  barriers: waitToRead and waitAll
//   E4  implicit blockers: dataSync, item, toString; and the non-blocking `await data()`
//   E5  10 000 x (y = x + 1), waiting each time vs once, with the chapter's t1/t2/t3 model
//   E6  the memory of training the chapter's MLP: reading the loss each batch, never (byte bound
//       off), never with a small bound, and never with the default engine
//   E7  no GPU in WebAssembly: the chapter's exercise instead, asynchrony on the CPU
// The experiments themselves are in experiments/chapter.cjs, which the playground and the
// benchmarks share; this file is the chapter's text around their figures.
// Run from the repository root after `make wasm`:
//   node examples/node/chapter.mjs [threads] [E6 batches, default 100]
// (in your own project: `import asyncnd from 'asyncnd'`). Takes about ten seconds, plus about
// two minutes for E6's 4 x 100 batches on 2 cores.
import asyncnd from '../../wasm/index.mjs';
import chapter from '../../experiments/chapter.cjs';

const threads = Number(process.argv[2] || 2);
const e6Batches = Number(process.argv[3] || 100);
// Checked before anything runs (load checks the thread count): a bad count failed only at E6.
if (!Number.isInteger(e6Batches) || e6Batches < 1) {
  console.error(`chapter.mjs: E6 batches must be a whole number, 1 or more, got '${process.argv[3]}'\n` +
                'usage: node examples/node/chapter.mjs [threads] [E6 batches, default 100]');
  process.exit(2);
}
const nd = await asyncnd.load({ threads });
const heading = (t) => console.log(`\n== ${t}`);
const f = (s) => s.toFixed(4).padStart(8);

console.log('asyncnd: the chapter "Asynchronous Computation", in Node.js (WebAssembly)');
console.log(`engine: ${nd.backend}, ${threads} worker thread(s)`);
nd.seed(42);

// ---- E1 -------------------------------------------------------------------------------------
{
  heading('E1  ten random 1000x1000 matrices, each multiplied by itself');
  const r = chapter.e1(nd);
  console.log(`  synchronous (wait after every op)  ${f(r.syncS)} s`);
  console.log(`  engine: loop returned after        ${f(r.returnedS)} s   <- only queued`);
  console.log(`  engine: waitAll returned after     ${f(r.finishedS)} s   <- the real cost`);
  console.log('  (the tidy scopes free each step\'s arrays once their ops have run.)');
}

// ---- E2 -------------------------------------------------------------------------------------
{
  heading('E2  the dependency graph of z = x * y + 2');
  const { z, events, edges } = chapter.e2(nd);
  console.log(`  z = ${z}`);
  // Variables are named by the order they appear: x and y are written by the two `ones`.
  const names = new Map();
  const nameOf = (id) => {
    if (!names.has(id)) names.set(id, ['x', 'y'][names.size] ?? `tmp${names.size - 1}`);
    return names.get(id);
  };
  events.forEach((e, i) => {
    const r = e.reads.map(nameOf).join(', '), w = e.writes.map(nameOf).join(', ');
    console.log(`    op${i} ${e.name}(${r}) -> ${w}   [worker ${e.worker}, ran ${e.startUs.toFixed(1)}..${e.endUs.toFixed(1)} us]`);
  });
  console.log('  dependencies:');
  for (const [a, b] of edges) console.log(`    op${a} ${events[a].name} -> op${b} ${events[b].name}`);
  console.log(`  (the last temporary, ${nameOf(events[events.length - 1].writes[0])}, is z)`);
  console.log('  The two `ones` have no path between them: they may run at the same time.');
}

// ---- E3 and E4 ------------------------------------------------------------------------------
{
  heading('E3  barriers: waitToRead and waitAll (2000x2000 products)');
  const r = chapter.e3(nd);
  console.log(`  sum = ${r.sum}`);
  console.log(`  y = dot(x, x).sum() queued after ${r.queuedS.toFixed(4)} s; printing it finished after ${r.printedS.toFixed(4)} s`);
  console.log(`  one dot + y.waitToRead()  ${f(r.waitToReadS)} s`);
  console.log(`  one dot + nd.waitAll()    ${f(r.waitAllS)} s   (about the same: both wait for the dot)`);
  console.log(`  two dots + nd.waitAll()   ${f(r.waitAll2S)} s   (waitAll waits for both)`);
  console.log(`  two dots + y.waitToRead() ${f(r.waitFirstOfTwoS)} s   (on the first: about one dot, as they run in the order pushed; wait only for what you need)`);

  heading('E4  implicit blockers: anything that needs the values waits for them');
  const r4 = await chapter.e4(nd);
  console.log(`  dot + dataSync()         ${f(r4.dataSyncS)} s   (${r4.values} values copied out)`);
  console.log(`  dot + norm().item()      ${f(r4.itemS)} s   (norm = ${r4.norm.toPrecision(6)})`);
  console.log(`  dot + sum().toString()   ${f(r4.toStringS)} s   (${r4.text})`);
  // The JavaScript way: a read that never blocks. The event loop keeps running meanwhile.
  console.log(`  dot + await data()       ${f(r4.awaitDataS)} s   (data() returned after ${(r4.dataReturnedS * 1e3).toFixed(3)} ms; ` +
              `a 1 ms timer ran ${r4.ticks} times while waiting; ${r4.values} values)`);
  console.log('  Each costs a full dot: converting to host data, to a scalar or to text must wait.');
}

// ---- E5 -------------------------------------------------------------------------------------
{
  heading('E5  10000 x (y = x + 1) on a [1,2] array: waiting each time vs once');
  const r = chapter.e5(nd);
  const { N, t1, t2, t3 } = r;
  const us = (s) => (s * 1e6).toFixed(2);
  console.log(`  synchronous (waitToRead each time)  ${f(r.syncS)} s = ${us(r.syncS / N).padStart(6)} us per step`);
  console.log(`  asynchronous (waitAll once)         ${f(r.asyncS)} s = ${us(r.asyncS / N).padStart(6)} us per step`);
  console.log(`  speed-up                            ${r.speedup.toFixed(1).padStart(8)} x`);
  console.log(`  pushing alone in the asynchronous loop  ${us(r.pushS / N)} us per step`);
  console.log(`  estimates: t1 (push) ${us(t1)} us, t2 (compute, mean of ${r.t2Samples} profiled ops) ${us(t2)} us,`);
  console.log(`             t3 (return, = sync/N - t1 - t2) ${us(t3)} us`);
  console.log(`  model: async t1 + N t2 + t3 = ${r.chapterModelAsyncS.toFixed(4)} s vs measured ${r.asyncS.toFixed(4)} s`);
  if (r.pushS > N * t2) {
    // The pace of the pushes as the asynchronous loop measured it (pushS), not N t1: t1 is timed
    // in the synchronous loop, where each push follows a wait, and differs 2-8x from it.
    console.log(`  Here the pushes are slower than the workers (${us(r.pushS / N)} us per push against t2 = ${us(t2)} us):\n` +
                `  the asynchronous loop runs at the pace of the pushes, about ${r.pushS.toFixed(4)} s for all N.`);
  }
}

// ---- E6 -------------------------------------------------------------------------------------
{
  heading(`E6  memory: the chapter's MLP, ${e6Batches} batches of 1024x512 (Dense 2048 relu, 512 relu, 1; SGD lr 0.005)`);
  const mb = (b) => `${(b / 1e6).toFixed(1)} MB`.padStart(10);
  const show = (title, r) => {
    console.log(`  ${title}`);
    if (r.error) console.log(`    STOPPED after ${r.batchesDone} of ${r.batches} batches: ${r.error}`);
    console.log(`    engine peak ${mb(r.peakBytes)}   process RSS peak ${mb(r.rssPeakBytes)}   wasm memory ${mb(r.heapPeakBytes)}`);
    // batchS is NaN for one batch (no interval between two handed out).
    const perBatch = Number.isFinite(r.batchS) ? `${(r.batchS * 1e3).toFixed(2).padStart(8)} ms` : '     n/a (one batch)';
    console.log(`    time per batch handed out ${perBatch}   total ${r.totalS.toFixed(2)} s`);
  };
  // The unbounded run last: the wasm memory grows and never shrinks, so it would inflate the
  // RSS of any run after it.
  const run = (mode) => chapter.e6Run(nd, mode, { batches: e6Batches });
  const a = run('sync'), c = run('bounded'), d = run('default'), b = run('nosync');
  show('(a) read the loss each batch (l.mean().item())', a);
  show('(b) never read it, the byte bound switched off (setMaxInflight({ ops, bytes: 0 }))', b);
  show(`(c) never read it, nd.engine.setMaxInflight({ bytes: ${(c.boundBytes / 1e6).toFixed(1)} MB })`, c);
  show(`(d) never read it, the default engine (byte bound ${(d.boundBytes / 1e6).toFixed(1)} MB from the ${d.boundSource}; pushes that waited: ${d.pushWaits})`, d);
  console.log('  Without a read the frontend queues every batch at once and each holds its activations\n' +
              '  until the workers reach it; a bound makes the pushes wait instead. By default the engine\n' +
              `  bounds the queued bytes at a quarter of the module's heap: (d) completed ${d.batchesDone} of ${d.batches} batches.\n` +
              '  These bounds are asyncnd\'s own: MXNet, where the chapter measures this, has none, so\n' +
              '  there its advice to synchronise each minibatch stands.');
  if (b.error) {
    console.log('  Unbounded, the queue outgrew the module\'s 2 GiB of WebAssembly memory: the allocation\n' +
                '  failed with an Error, the loop stopped, and the engine kept working (what follows uses\n' +
                '  it).');
  }
}

// ---- E7 -------------------------------------------------------------------------------------
{
  heading('E7  no GPU in WebAssembly; the exercise instead: on the CPU, can you still observe asynchrony?');
  const r = chapter.e7(nd);
  console.log(`  one ${r.n}x${r.n} dot alone          ${f(r.dotS)} s`);
  console.log(`  JavaScript work alone          ${f(r.jsS)} s`);
  console.log(`  the two one after the other    ${f(r.serialS)} s`);
  console.log(`  dot queued, then the work, then waitToRead  ${f(r.overlapS)} s   (the push returned after ${(r.pushS * 1e3).toFixed(3)} ms)`);
  console.log(r.overlapS < 0.8 * r.serialS
    ? '  Yes: the engine\'s workers computed the product while this thread ran its own code. In asyncnd,\n' +
      '  as in MXNet, CPU ops are queued too; PyTorch runs CPU ops in the calling thread, which is the\n' +
      '  contrast the exercise asks you to notice.'
    : '  Not on this run: together they took about as long as one after the other. The push still\n' +
      '  returned at once, so the call was asynchronous; the two ran one after the other only because\n' +
      '  the engine\'s threads and this one share the cores.');
}

nd.waitAll();
const st = nd.engine.stats();
console.log(`\nengine stats at the end: ${st.pushed} ops pushed, ${st.pending} pending, ` +
            `${st.liveArrays} live arrays, ${st.bytesInUse} bytes in use (peak ${(st.bytesPeak / 1e6).toFixed(1)} MB)`);
