// i18n/en.js: the playground's English text, the reference for the other languages (same keys).
// {name} is a parameter; { one, other } are plural forms chosen by {count}; keys ending in "Html"
// are HTML (their parameters are escaped).
export default {
  // The page and its header
  'page.title': 'asyncnd playground: asynchronous computation, live',
  'header.brandHtml': 'asyncnd <span>playground</span>',
  'header.tagline': 'The chapter “Asynchronous Computation”, run live on asyncnd’s WebAssembly engine, with what the engine did drawn for you.',
  'header.language': 'Language',
  'header.threads': 'Worker threads',
  'header.reload': 'Reload worker',
  'header.reloadTitle': 'Restart the Web Worker with this many engine threads',
  'header.maxOps': 'Max ops in flight',
  'header.maxOpsTitle': 'Backpressure: a push waits while this many ops are in flight (empty = the engine’s default, 524288; 0 = no bound)',
  'header.maxMB': 'Max MB in flight',
  'header.maxMBTitle': 'Backpressure: a push waits while this many MB of outputs are pending (empty = the engine’s default, a quarter of the 2 GiB heap; 0 = no bound)',
  'header.boundDefault': 'default',
  'header.stop': 'Stop run',
  'header.stopTitle': 'Ends the current run by restarting the Web Worker, with the number of worker threads selected',
  'status.starting': 'loading the module…',
  'status.loading': { one: 'loading the module with {count} engine thread…', other: 'loading the module with {count} engine threads…' },
  'status.ready': { one: 'ready · {count} engine thread · {backend} · threads available (cross-origin isolated)',
                    other: 'ready · {count} engine threads · {backend} · threads available (cross-origin isolated)' },
  'status.workerFailed': 'the worker failed to start: {why}',
  'status.unknownError': 'unknown error',
  'status.notIsolated': 'threads unavailable: the page is not cross-origin isolated',
  'status.notSecure': 'threads unavailable: the page is not in a secure context (plain http:// to another machine)',
  'banner.notIsolatedHtml': '<strong>Threads are not available here.</strong> This page is not cross-origin isolated, so the browser ' +
    'withholds <code>SharedArrayBuffer</code>, which WebAssembly threads need, and the engine cannot start. ' +
    'Serve the playground with <code>make playground</code> (it sends the <code>Cross-Origin-Opener-Policy: same-origin</code> and ' +
    '<code>Cross-Origin-Embedder-Policy: require-corp</code> headers) and open <code>http://127.0.0.1:8080/</code>, not a file:// URL; ' +
    'another server must send the same two headers.',
  'banner.notSecureHtml': '<strong>Threads are not available here.</strong> This page was opened over plain <code>http://</code> from ' +
    'another machine, which is not a secure context: whatever headers the server sends, the browser then withholds ' +
    '<code>SharedArrayBuffer</code>, which WebAssembly threads need, and the engine cannot start. Open it over HTTPS, or ' +
    'through an SSH tunnel to the server (<code>ssh -L 8080:127.0.0.1:8080 host</code>, then <code>http://127.0.0.1:8080/</code>): ' +
    '<code>localhost</code> and <code>127.0.0.1</code> count as secure.',
  'intro.textHtml': 'Every call to the engine only <em>queues</em> an operation and returns. Worker threads run the queued ' +
    'operations as soon as what they read is ready: independent ones at the same time, dependent ones in ' +
    'order. Your code waits only where it needs values. Each panel below runs one of the chapter’s experiments ' +
    'inside a Web Worker (this page never blocks), shows the measured figures, and a timeline of what each ' +
    'engine thread ran: scroll to zoom, drag to pan, double-click to reset.',
  'footer.versions': 'asyncnd (WebAssembly, SIMD128, pthreads) · libraries bundled locally: {list}',

  // Errors the page and its Worker write
  'error.workerRestarted': 'the worker was restarted',
  'error.notLoaded': 'the module is not loaded',
  'error.notIsolated': 'this page is not cross-origin isolated: SharedArrayBuffer, and so WebAssembly threads, are unavailable',
  'error.noExperiment': 'no experiment named {name}',
  'error.oomHint': 'The module’s memory is full. Arrays a code cell left behind are freed only when the garbage collector runs (delete() frees one at once); Reload worker starts a new engine with all its memory.',

  // Fields the page refuses before running (inputs.js); {field} is the field's name
  'input.notNumber': '{field}: what was typed is not a number this field can hold',
  'input.empty': '{field} is empty: give a value from {min} to {max}',
  'input.rangeInt': '{field} = {value} is refused: a whole number from {min} to {max}',
  'input.rangeStep': '{field} = {value} is refused: from {min} to {max} in steps of {step}',
  'input.boundOps': '{field} = {value} is refused: a whole number of ops, 0 or more (empty: the engine’s default; 0: no bound)',
  'input.boundMB': '{field} = {value} is refused: a number of MB, 0 or more, fractions allowed (empty: the engine’s default; 0: no bound)',

  // What every panel has
  'panel.run': 'Run',
  'panel.running': 'Running…',
  'panel.runAgain': 'Run again',
  'panel.failed': 'failed',
  'panel.doneIn': 'done in {time}',
  'panel.timelineHint': 'Run the experiment to see what each engine thread ran.',
  'panel.graphTitle': 'Dependency graph (from the profiler)',
  'timeline.title': 'Timeline',
  'timeline.resetZoom': 'reset zoom',
  'timeline.worker': 'worker {n}',
  'timeline.jsThread': 'JavaScript thread',
  'timeline.axis': 'milliseconds since the first push',
  'timeline.tooltip': '{name}: ran {ran}, queued {queued} before',
  'timeline.opFailed': '(failed)',
  'timeline.opSkipped': '(skipped)',
  'timeline.empty': 'No engine op was recorded in this run.',
  'timeline.lost': 'What this run recorded was lost with the worker it ran on.',
  'timeline.recorded': { one: '{count} op recorded.', other: '{count} ops recorded.' },
  'timeline.drawnOf': 'The first {shown} of {total} are drawn.',
  'timeline.help': 'Scroll to zoom, drag to pan, double-click to reset.',
  'timeline.skew': 'The threads’ clocks disagree by at least {time} in this run (an op appears to start before an op ' +
    'it reads finished, on another thread), so bars on different rows may be shifted by that much. The module times ' +
    'every thread with one clock (performance.timeOrigin + now()); a disagreement means the browser’s clocks drifted.',
  'graph.truncated': 'The first {shown} of {total} ops are drawn.',
  'graph.summary': '{ops}, {arrays}. Arrows: read by, written by.',
  'graph.ops': { one: '{count} op', other: '{count} ops' },
  'graph.arrays': { one: '{count} array', other: '{count} arrays' },
  'axis.ms': 'milliseconds',
  'axis.us': 'microseconds',

  // Progress, as the Worker words the experiments' steps (worker.js, PROGRESS_KEYS)
  'progress.starting': 'starting',
  'progress.done': 'done',
  'progress.warmup': 'warm-up',
  'progress.syncStep': 'synchronous {i}/{n}',
  'progress.queueing': 'engine: queueing',
  'progress.e2': 'running z = x * y + 2',
  'progress.calling': 'calling {call}',
  'progress.twoDots': 'two products, then waitAll()',
  'progress.synchronous': 'synchronous',
  'progress.asynchronous': 'asynchronous',
  'progress.timingPushes': 'timing the pushes (t1)',
  'progress.profiling': 'profiling (t2)',
  'progress.batch': '{mode}: batch {i}/{n}',
  'progress.jsAlone': 'JavaScript alone',
  'progress.bothAtOnce': 'both at once',

  // Parameters
  'param.size': 'size',
  'param.repeats': 'repeats',
  'param.ops': 'ops',
  'param.batches': 'batches',
  'param.boundMB': 'bound MB',

  // E1
  'E1.title': 'Queueing is not computing',
  'E1.explainHtml': 'Random matrices (ten of 1000×1000 in the chapter; the repeats and size fields change them), each used in a matrix product. The <b>synchronous</b> run waits for every ' +
    'result before going on, as NumPy does. The <b>engine</b> run only queues the work: its loop returns almost at ' +
    'once, and the real cost shows up when <code>nd.waitAll()</code> waits for the workers to finish.',
  'E1.fig.sync': 'synchronous (wait after every op)',
  'E1.fig.returned': 'engine: the loop returned after',
  'E1.note.returned': 'only queued',
  'E1.fig.finished': 'engine: waitAll returned after',
  'E1.note.finished': 'the real cost',
  'E1.bar.sync': 'synchronous',
  'E1.bar.returned': 'engine: loop returned',
  'E1.bar.finished': 'engine: after waitAll',
  'E1.text': 'Both loops make one {n}×{n} matrix per step and multiply it by itself, as the chapter’s loop does.',

  // E2
  'E2.title': 'The dependency graph of z = x * y + 2',
  'E2.explainHtml': 'The engine records, for every op, which arrays it reads and which it writes. From those records alone, ' +
    'taken by the profiler during a real run, this graph is drawn: <code>mul</code> must wait for both <code>ones</code>, ' +
    '<code>add</code> for <code>mul</code>; the two <code>ones</code> depend on nothing and may run at the same time.',
  'E2.fig.ops': 'ops recorded',
  'E2.fig.vars': 'arrays read or written',
  'E2.resultHtml': 'The result: z = <code>{z}</code>',

  // E3
  'E3.title': 'Barriers',
  'E3.explainHtml': 'Two ways to wait: <code>y.waitToRead()</code> waits for the ops that write <code>y</code>; ' +
    '<code>nd.waitAll()</code> waits for everything queued. With one product queued they take about the same; with two, ' +
    '<code>waitAll</code> waits for both, while <code>y.waitToRead()</code> on the first waits for about one ' +
    '(the engine runs them in the order pushed): wait only for what you need. Printing a result is a wait too.',
  'E3.fig.queued': 'dot(x, x).sum() queued after',
  'E3.fig.printed': 'printing the sum finished after',
  'E3.fig.waitToRead': 'one product + y.waitToRead()',
  'E3.fig.waitAll': 'one product + nd.waitAll()',
  'E3.fig.waitAll2': 'two products + nd.waitAll()',
  'E3.bar.waitToRead': 'one product + waitToRead',
  'E3.bar.waitAll': 'one product + waitAll',
  'E3.bar.waitAll2': 'two products + waitAll',
  'E3.fig.waitFirst': 'two products + y.waitToRead() on the first',
  'E3.bar.waitFirst': 'two products + waitToRead (first)',
  'E3.textHtml': 'Products of {n}×{n} matrices. sum = <code>{sum}</code>',

  // E4
  'E4.title': 'Implicit blockers',
  'E4.explainHtml': 'Anything that needs the values must wait for them: copying to a host array (<code>dataSync</code>), ' +
    'a scalar (<code>item</code>), text (<code>toString</code>). Each one below costs a full product. ' +
    'The JavaScript way, <code>await y.data()</code>, waits without blocking: a 1 ms timer keeps firing meanwhile.',
  'E4.fig.dataSync': 'product + dataSync()',
  'E4.note.values': { one: '{count} value copied out', other: '{count} values copied out' },
  'E4.fig.item': 'product + norm().item()',
  'E4.note.norm': 'norm = {norm}',
  'E4.fig.toString': 'product + sum().toString()',
  'E4.fig.awaitData': 'product + await data()',
  'E4.fig.dataReturned': 'data() returned its promise after',
  'E4.fig.ticks': 'a 1 ms timer fired while awaiting',
  'E4.note.ticks': 'times: the thread was free',

  // E5
  'E5.title': 'Many small ops: t1, t2, t3',
  'E5.explainHtml': 'N <code>y = x + 1</code> on a 1×2 array (N = 10,000 in the chapter; the ops field sets it), waiting after each one vs once at the end. The chapter splits ' +
    'a step in three: <b>t1</b> the frontend pushes the op, <b>t2</b> a worker computes it, <b>t3</b> the result is handed back. ' +
    'Waiting each time costs N (t1 + t2 + t3); waiting once lets pushing and computing overlap.',
  'E5.fig.sync': 'synchronous (waitToRead each time)',
  'E5.note.perStep': '{time} per step',
  'E5.fig.async': 'asynchronous (waitAll once)',
  'E5.fig.speedup': 'speed-up',
  'E5.fig.push': 'pushing alone, in the asynchronous loop',
  'E5.note.perPush': '{time} per push and delete',
  'E5.fig.t1': 't1: push (frontend)',
  'E5.note.t1': 'timed around each push',
  'E5.fig.t2': 't2: compute (worker)',
  'E5.note.t2': 'mean of {count} profiled ops (the clock ticks every {tick})',
  'E5.fig.t3': 't3: return to JavaScript',
  'E5.note.t3': 'a synchronous step − t1 − t2',
  'E5.fig.chapterModel': 'the chapter’s model for the asynchronous loop',
  'E5.note.chapterModel': 't1 + N t2 + t3: it assumes N t2 > (N − 1) t1, that the workers set the pace',
  'E5.fig.model': 'model for the asynchronous loop',
  'E5.note.model': 'max(t1 + N t2 + t3, N t1 + t2 + t3): where the pushes are slower, they set the pace',
  'E5.bar.each': 'wait after each op',
  'E5.bar.once': 'wait once',
  'E5.text.pushBound': 'Here t1 > t2: JavaScript pushes more slowly than a worker computes, so the asynchronous loop goes at the pace of the pushes.',
  'E5.text.workerBound': 'Here t2 ≥ t1: the workers are the bottleneck, and the asynchronous loop costs about N t2.',

  // E6 (one 'E6.mode.*' key per training mode: panels.js, E6_MODES)
  'E6.title': 'Memory: do not overfill the queue',
  'E6.explainHtml': 'The chapter warns against overfilling the queue; its Chinese MXNet edition trains an MLP (Dense 2048 relu, Dense 512 relu, Dense 1; batches of 1024×512; SGD, learning rate 0.005; ' +
    'L2 loss) with a synchronising read of the loss each batch and without one. Here that MLP is trained four ways: with a synchronising read of the loss each batch; with none and the engine’s byte bound switched off ' +
    '(the frontend races ahead and every queued batch holds its memory: past about 33 batches the module’s 2 GiB run out); ' +
    'with none but a small backpressure bound, which makes a push wait instead; and with none on the default engine, whose ' +
    'byte bound (a quarter of the module’s heap, 512 MiB, that is 536.9 MB) lets the frontend run ahead, then waits. ' +
    'A bound counts what queued work keeps alive (the outputs of ops not yet run, and arrays dropped while queued ops still ' +
    'read them); the memory shown also holds what the program holds itself (the parameters, the batch, what autograd keeps ' +
    'for backward), so a peak can pass the bound. The chart samples the engine’s bytes in use over time, so it can miss ' +
    'the exact peak the table gives. These bounds are asyncnd’s own: MXNet, where the chapter measures this, has none, ' +
    'so there its advice to synchronise each minibatch stands.',
  'E6.unavailableHtml': '<strong>This experiment cannot run yet.</strong> It needs <code>nd.nn</code> and <code>nd.autograd</code> in the ' +
    'JavaScript API, which this build of the WebAssembly package does not have (rebuild it: make wasm). ' +
    'The panel shows no figures rather than made-up ones; it runs as soon as the module provides them.',
  'E6.mode.sync': 'read each batch (l.mean().item())',
  'E6.mode.none': 'no read',
  'E6.mode.bound': 'no read, engine bound {size}',
  'E6.mode.default': 'no read, default engine',
  'E6.col.peak': 'peak memory increase',
  'E6.col.returned': 'the loop returned after',
  'E6.col.perBatch': 'time per batch',
  'E6.col.batchesDone': 'batches done',
  'E6.col.bound': 'byte bound',
  'E6.col.pushWaits': 'pushes that waited',
  'E6.source.wasmHeap': 'module’s WebAssembly heap',
  'E6.boundOff': 'off',
  'E6.axis.x': 'milliseconds since the first batch',
  'E6.axis.y': 'MB in use above the start',
  'E6.text.peaks': 'Without a read the queue held up to {none} more; with one, {sync}.',
  'E6.text.default': { one: 'The default engine held at most {peak} more (its bound: {bound}, from the {source}), and {count} push waited on it.',
                      other: 'The default engine held at most {peak} more (its bound: {bound}, from the {source}), and {count} pushes waited on it.' },
  'E6.text.stopped': '“{mode}” stopped after {done} of {total} batches: {error}.',

  // E7
  'E7.title': 'No GPU here: asynchrony on the CPU',
  'E7.explainHtml': 'WebAssembly has no GPU, so the chapter’s CPU-vs-GPU comparison cannot run in a browser. Its exercise can: ' +
    '<i>on the CPU, can you still observe asynchrony?</i> The engine’s workers compute a product while this thread does ' +
    'its own JavaScript work of about the same length. If the two overlap, doing both takes about the longer of the two, ' +
    'not their sum.',
  'E7.fig.dot': 'the product alone',
  'E7.fig.js': 'the JavaScript work alone',
  'E7.fig.serial': 'one after the other (sum)',
  'E7.fig.overlap': 'both at once (push, JS work, wait)',
  'E7.fig.push': 'the push returned after',
  'E7.bar.dot': 'product alone',
  'E7.bar.js': 'JavaScript alone',
  'E7.bar.serial': 'one after the other',
  'E7.bar.overlap': 'both at once',
  'E7.text.gpu': 'GPU: none, WebAssembly runs on the CPU only.',
  'E7.text.overlap': 'Both at once took clearly less than the sum: the CPU engine is asynchronous too. In asyncnd, as ' +
    'in MXNet, CPU ops are queued as well; PyTorch runs CPU ops in the calling thread, which is the contrast the exercise ' +
    'asks you to notice.',
  'E7.text.noOverlap': 'Both at once took about the sum here, yet the push still returned at once: the call was ' +
    'asynchronous, and the two ran one after the other only because the engine’s threads and this one compete for the ' +
    'same cores. Try one worker thread (top right) on a two-core machine.',

  // The code cell
  'code.tag': 'Code',
  'code.title': 'Your own experiment',
  'code.helpHtml': 'JavaScript against the API, run in the Worker: blocking calls such as <code>x.item()</code>, ' +
    '<code>x.waitToRead()</code> and <code>nd.waitAll()</code> are allowed here. <code>nd</code> is the loaded module, ' +
    '<code>console.log</code> prints below, <code>await</code> works. The graph shows which operation read and wrote which ' +
    'array; the timeline when each ran.' +
    ' A cell that allocates without end can fill the tab’s memory and crash the tab. Arrays a cell leaves ' +
    'behind are freed only when the garbage collector runs: <code>x.delete()</code> frees one at once, and Reload worker starts afresh.',
  'code.outputEmpty': 'Output appears here.',
  'code.graphTitle': 'Dependency graph',
  'code.graphHint': 'Run the code to see which op read and wrote which array.',
  'code.timelineHint': 'Run the code to see what each engine thread ran.',
  'code.running': 'running…',
  'code.finished': { one: 'finished in {time} · {count} op pushed', other: 'finished in {time} · {count} ops pushed' },
  'code.stopped': 'stopped with an error; the engine keeps running',
  'code.restarted': 'stopped: the worker was restarted with a new engine (the arrays made so far are gone)',
  'code.notRun': 'not run: a field in the header is refused',
  'code.parseError': 'The cell could not be parsed: {message}',
  'code.moreChars': { one: '… and {count} more character', other: '… and {count} more characters' },
  'code.truncated': 'output truncated after {count} lines',
  'code.error': 'Error: {message}',
  'code.errorAt': 'Error (line {line}): {message}',
  'code.thrown': 'a value that is not an Error was thrown: {value}',
  'code.cannotShow': '(cannot show the result: {message})',
  'code.unhandled': 'unhandled rejection: {message}',
  'code.noOp': 'No op was recorded.',
  // The comments and the printed label of the code cell's first example
  'code.example.where': 'Runs in the playground’s Web Worker: blocking calls are fine here.',
  'code.example.independent1': 'these two products do not depend',
  'code.example.independent2': 'on each other: they may run at once',
  'code.example.sum': 'waits for both, inside the engine',
  'code.example.pending': 'queued; ops pending now:',
  'code.example.item': 'item() blocks until the value exists',
};
