// i18n/zh.js: the playground in Simplified Chinese (same keys as en.js; the chapter's terms:
// 异步计算, 队列, 前端与后端, 障碍器与阻塞器, 同步函数, 依赖关系图, 小批量).
export default {
  'page.title': 'asyncnd 演练场：异步计算，现场运行',
  'header.brandHtml': 'asyncnd <span>演练场</span>',
  'header.tagline': '在 asyncnd 的 WebAssembly 引擎上现场运行“异步计算”一章，并把引擎做过的事画出来。',
  'header.language': '语言',
  'header.threads': '工作线程',
  'header.reload': '重启 Worker',
  'header.reloadTitle': '用这个数量的引擎线程重新启动 Web Worker',
  'header.maxOps': '最多在途操作数',
  'header.maxOpsTitle': '背压：在途操作达到这个数量时，新的入队要等待（留空表示引擎的默认值 524288；0 表示不限制）',
  'header.maxMB': '最多在途 MB',
  'header.maxMBTitle': '背压：待产生的输出达到这么多 MB 时，新的入队要等待（留空表示引擎的默认值，即 2 GiB 堆的四分之一；0 表示不限制）',
  'header.boundDefault': '默认',
  'header.stop': '停止运行',
  'header.stopTitle': '用所选数量的工作线程重新启动 Web Worker，以结束当前的运行',
  'status.starting': '正在加载模块…',
  'status.loading': { other: '正在以 {count} 个引擎线程加载模块…' },
  'status.ready': { other: '就绪 · {count} 个引擎线程 · {backend} · 可以使用线程（已跨源隔离）' },
  'status.workerFailed': 'Worker 启动失败：{why}',
  'status.unknownError': '未知错误',
  'status.notIsolated': '无法使用线程：页面没有跨源隔离',
  'status.notSecure': '无法使用线程：页面不在安全上下文中（从另一台机器通过普通 http:// 打开）',
  'banner.notIsolatedHtml': '<strong>这里无法使用线程。</strong>本页面没有跨源隔离，浏览器因此不提供 ' +
    'WebAssembly 线程所需的 <code>SharedArrayBuffer</code>，引擎无法启动。' +
    '请用 <code>make playground</code> 启动演练场（它会发送 <code>Cross-Origin-Opener-Policy: same-origin</code> 和 ' +
    '<code>Cross-Origin-Embedder-Policy: require-corp</code> 两个响应头），并打开 <code>http://127.0.0.1:8080/</code>，而不是 file:// 地址；' +
    '其他服务器也必须发送这两个响应头。',
  'banner.notSecureHtml': '<strong>这里无法使用线程。</strong>本页面是从另一台机器通过普通的 <code>http://</code> 打开的，这不是安全上下文：' +
    '无论服务器发送什么响应头，浏览器都不会提供 WebAssembly 线程所需的 <code>SharedArrayBuffer</code>，引擎因此无法启动。' +
    '请通过 HTTPS 打开，或者建立到服务器的 SSH 隧道（<code>ssh -L 8080:127.0.0.1:8080 host</code>，然后打开 ' +
    '<code>http://127.0.0.1:8080/</code>）：<code>localhost</code> 和 <code>127.0.0.1</code> 算作安全上下文。',
  'intro.textHtml': '对引擎的每次调用都只是把一个操作<em>放进队列</em>就返回。引擎的工作线程在操作所读的数据就绪后立即执行它：' +
    '相互独立的操作同时执行，相互依赖的操作按顺序执行。你的代码只在需要数值的地方等待。下面每个面板都在 Web Worker 中' +
    '运行本章的一个实验（本页面从不阻塞），显示测得的数字，以及每个引擎线程执行内容的时间线：滚动滚轮缩放，拖动平移，双击复原。',
  'footer.versions': 'asyncnd（WebAssembly、SIMD128、pthreads）· 本地打包的库：{list}',

  'error.workerRestarted': 'Worker 已重新启动',
  'error.notLoaded': '模块尚未加载',
  'error.notIsolated': '本页面没有跨源隔离：无法使用 SharedArrayBuffer，因此也无法使用 WebAssembly 线程',
  'error.noExperiment': '没有名为 {name} 的实验',
  'error.oomHint': '模块的内存已满。代码单元留下的数组只有在垃圾回收运行时才会释放（delete() 可以立即释放一个）；“重启 Worker”会启动一个拥有全部内存的新引擎。',

  // Fields the page refuses before running (inputs.js); {field} is the field's name
  'input.notNumber': '{field}：输入的内容不是这个字段能容纳的数字',
  'input.empty': '{field} 为空：请输入 {min} 到 {max} 之间的值',
  'input.rangeInt': '{field} = {value} 不被接受：应为 {min} 到 {max} 之间的整数',
  'input.rangeStep': '{field} = {value} 不被接受：应在 {min} 到 {max} 之间，步长为 {step}',
  'input.boundOps': '{field} = {value} 不被接受：应为 0 或更大的整数操作数（留空表示引擎的默认值；0 表示不限制）',
  'input.boundMB': '{field} = {value} 不被接受：应为 0 或更大的 MB 数，可以有小数（留空表示引擎的默认值；0 表示不限制）',

  'panel.run': '运行',
  'panel.running': '运行中…',
  'panel.runAgain': '再次运行',
  'panel.failed': '失败',
  'panel.doneIn': '用时 {time}',
  'panel.timelineHint': '运行实验，看看每个引擎线程执行了什么。',
  'panel.graphTitle': '依赖关系图（来自性能分析器）',
  'timeline.title': '时间线',
  'timeline.resetZoom': '复原缩放',
  'timeline.worker': '线程 {n}',
  'timeline.jsThread': 'JavaScript 线程',
  'timeline.axis': '自第一次入队以来的毫秒数',
  'timeline.tooltip': '{name}：执行 {ran}，此前在队列中等待 {queued}',
  'timeline.opFailed': '（失败）',
  'timeline.opSkipped': '（跳过）',
  'timeline.empty': '这次运行没有记录到引擎操作。',
  'timeline.lost': '这次运行的记录已随运行它的 worker 一起丢失。',
  'timeline.recorded': { other: '记录了 {count} 个操作。' },
  'timeline.drawnOf': '只画出 {total} 个中的前 {shown} 个。',
  'timeline.help': '滚动滚轮缩放，拖动平移，双击复原。',
  'timeline.skew': '这次运行中各线程的时钟至少相差 {time}（某个操作看起来在它所读的、另一线程上的操作结束之前就开始了），' +
    '因此不同行上的条形可能错开这么多。模块用同一个时钟（performance.timeOrigin + now()）为所有线程计时；出现差异说明浏览器的时钟发生了漂移。',
  'graph.truncated': '只画出 {total} 个操作中的前 {shown} 个。',
  'graph.summary': '{ops}，{arrays}。箭头：被读取、被写入。',
  'graph.ops': { other: '{count} 个操作' },
  'graph.arrays': { other: '{count} 个数组' },
  'axis.ms': '毫秒',
  'axis.us': '微秒',

  'progress.starting': '正在开始',
  'progress.done': '完成',
  'progress.warmup': '预热',
  'progress.syncStep': '同步 {i}/{n}',
  'progress.queueing': '引擎：正在入队',
  'progress.e2': '正在计算 z = x * y + 2',
  'progress.calling': '正在调用 {call}',
  'progress.twoDots': '两个乘积，然后 waitAll()',
  'progress.synchronous': '同步',
  'progress.asynchronous': '异步',
  'progress.timingPushes': '正在为入队计时（t1）',
  'progress.profiling': '正在分析性能（t2）',
  'progress.batch': '{mode}：小批量 {i}/{n}',
  'progress.jsAlone': '仅 JavaScript',
  'progress.bothAtOnce': '两者同时',

  'param.size': '大小',
  'param.repeats': '重复次数',
  'param.ops': '操作数',
  'param.batches': '小批量数',
  'param.boundMB': '上限 MB',

  'E1.title': '入队不等于计算',
  'E1.explainHtml': '若干随机矩阵（本章中是十个 1000×1000 的矩阵；“重复次数”和“大小”字段可以改变它们），每个都参与一次矩阵乘法。<b>同步</b>运行在继续之前等待每个结果，和 NumPy 一样。' +
    '<b>引擎</b>运行只把工作放进队列：它的循环几乎立刻返回，真正的开销在 <code>nd.waitAll()</code> 等待工作线程完成时才显现出来。',
  'E1.fig.sync': '同步（每个操作之后都等待）',
  'E1.fig.returned': '引擎：循环返回用时',
  'E1.note.returned': '只是入队',
  'E1.fig.finished': '引擎：waitAll 返回用时',
  'E1.note.finished': '真正的开销',
  'E1.bar.sync': '同步',
  'E1.bar.returned': '引擎：循环返回',
  'E1.bar.finished': '引擎：waitAll 之后',
  'E1.text': '两个循环每一步都生成一个 {n}×{n} 矩阵并让它与自身相乘，和本章的循环一样。',

  'E2.title': 'z = x * y + 2 的依赖关系图',
  'E2.explainHtml': '引擎为每个操作记下它读哪些数组、写哪些数组。这张图只根据这些记录画出，记录由性能分析器在一次真实运行中采集：' +
    '<code>mul</code> 必须等待两个 <code>ones</code>，<code>add</code> 等待 <code>mul</code>；两个 <code>ones</code> 不依赖任何东西，可以同时执行。',
  'E2.fig.ops': '记录的操作数',
  'E2.fig.vars': '读或写的数组数',
  'E2.resultHtml': '结果：z = <code>{z}</code>',

  'E3.title': '障碍器',
  'E3.explainHtml': '两种等待方式：<code>y.waitToRead()</code> 等待写 <code>y</code> 的操作；<code>nd.waitAll()</code> 等待队列中的一切。' +
    '队列中只有一个乘积时，两者用时差不多；有两个时，<code>waitAll</code> 会等待两个，而对第一个调用 <code>y.waitToRead()</code> ' +
    '只等待大约一个（引擎按入队顺序执行它们）：只等待你需要的结果。打印结果同样是一种等待。',
  'E3.fig.queued': 'dot(x, x).sum() 入队用时',
  'E3.fig.printed': '打印和的完成用时',
  'E3.fig.waitToRead': '一个乘积 + y.waitToRead()',
  'E3.fig.waitAll': '一个乘积 + nd.waitAll()',
  'E3.fig.waitAll2': '两个乘积 + nd.waitAll()',
  'E3.bar.waitToRead': '一个乘积 + waitToRead',
  'E3.bar.waitAll': '一个乘积 + waitAll',
  'E3.bar.waitAll2': '两个乘积 + waitAll',
  'E3.fig.waitFirst': '两个乘积 + 对第一个 y.waitToRead()',
  'E3.bar.waitFirst': '两个乘积 + waitToRead（第一个）',
  'E3.textHtml': '{n}×{n} 矩阵的乘积。和 = <code>{sum}</code>',

  'E4.title': '隐式阻塞器',
  'E4.explainHtml': '凡是需要数值的操作都必须等待数值：复制到主机数组（<code>dataSync</code>）、取标量（<code>item</code>）、' +
    '转成文本（<code>toString</code>）。下面每一项都要付出一次完整乘积的代价。JavaScript 的方式 <code>await y.data()</code> ' +
    '等待时不阻塞：其间一个 1 毫秒的定时器照常触发。',
  'E4.fig.dataSync': '乘积 + dataSync()',
  'E4.note.values': { other: '复制出 {count} 个数值' },
  'E4.fig.item': '乘积 + norm().item()',
  'E4.note.norm': '范数 = {norm}',
  'E4.fig.toString': '乘积 + sum().toString()',
  'E4.fig.awaitData': '乘积 + await data()',
  'E4.fig.dataReturned': 'data() 返回 promise 用时',
  'E4.fig.ticks': '等待期间 1 毫秒定时器的触发次数',
  'E4.note.ticks': '次：线程是空闲的',

  'E5.title': '许多小操作：t1、t2、t3',
  'E5.explainHtml': '在 1×2 数组上做 N 次 <code>y = x + 1</code>（本章 MXNet 版中 N = 1000，英文版中为 10000；“操作数”字段可以设置它），每次之后都等待，或只在最后等待一次。本章把一步分成三段：' +
    '<b>t1</b> 前端把操作放进队列，<b>t2</b> 后端线程计算它，<b>t3</b> 结果返回给前端。每次都等待的代价是 N (t1 + t2 + t3)；' +
    '只等待一次，入队和计算就能重叠。',
  'E5.fig.sync': '同步（每次都 waitToRead）',
  'E5.note.perStep': '每步 {time}',
  'E5.fig.async': '异步（只 waitAll 一次）',
  'E5.fig.speedup': '加速比',
  'E5.fig.push': '异步循环中仅入队的用时',
  'E5.note.perPush': '每次入队和删除 {time}',
  'E5.fig.t1': 't1：入队（前端）',
  'E5.note.t1': '围绕每次入队计时',
  'E5.fig.t2': 't2：计算（工作线程）',
  'E5.note.t2': '{count} 个被分析操作的平均值（时钟每 {tick} 跳一次）',
  'E5.fig.t3': 't3：返回 JavaScript',
  'E5.note.t3': '同步的一步 − t1 − t2',
  'E5.fig.chapterModel': '本章对异步循环的模型',
  'E5.note.chapterModel': 't1 + N t2 + t3：假设 N t2 > (N − 1) t1，即由工作线程决定节奏',
  'E5.fig.model': '异步循环的模型',
  'E5.note.model': 'max(t1 + N t2 + t3, N t1 + t2 + t3)：入队更慢时，由入队决定节奏',
  'E5.bar.each': '每个操作之后等待',
  'E5.bar.once': '只等待一次',
  'E5.text.pushBound': '这里 t1 > t2：JavaScript 入队比工作线程计算还慢，所以异步循环的速度取决于入队。',
  'E5.text.workerBound': '这里 t2 ≥ t1：工作线程是瓶颈，异步循环的用时约为 N t2。',

  'E6.title': '内存：不要把队列塞得太满',
  'E6.explainHtml': '本章（MXNet 版）用一个多层感知机（Dense 2048 relu、Dense 512 relu、Dense 1；小批量 1024×512；SGD，学习率 0.005；' +
    'L2 损失）演示了两种训练方式：每个小批量都用同步函数读取损失，以及不读取。这里用四种方式训练它：每个小批量都用同步函数读取一次损失；不读取，并关闭引擎的字节上限（前端抢先跑，队列中的每个小批量都占着自己的内存：' +
    '大约 33 个小批量之后，模块的 2 GiB 内存就会耗尽）；不读取但使用一个较小的背压上限，让入队改为等待；' +
    '不读取，使用默认引擎，它的字节上限（模块堆的四分之一，512 MiB，即 536.9 MB）先让前端抢先跑，然后让它等待。' +
    '上限只计算排队中的工作占着的内存（尚未运行的操作的输出，以及已丢弃但仍被排队操作读取的数组）；图中显示的内存还包括程序自己持有的部分' +
    '（参数、当前小批量、自动求导为反向传播保留的数据），所以峰值可以超过上限。图表按时间采样引擎占用的字节数，因此可能错过表格给出的精确峰值。' +
    '这些上限是 asyncnd 自己的：本章做此测量所用的 MXNet 没有这样的上限，因此在那里，本章“每个小批量都同步”的建议仍然适用。',
  'E6.unavailableHtml': '<strong>这个实验暂时无法运行。</strong>它需要 JavaScript API 中的 <code>nd.nn</code> 和 <code>nd.autograd</code>，' +
    '而这个版本的 WebAssembly 包没有它们（请重新构建：make wasm）。面板宁可不显示数字，也不编造数字；模块一旦提供它们，实验就能运行。',
  'E6.mode.sync': '每个小批量都读取（l.mean().item()）',
  'E6.mode.none': '不读取',
  'E6.mode.bound': '不读取，引擎上限 {size}',
  'E6.mode.default': '不读取，默认引擎',
  'E6.col.peak': '内存峰值增量',
  'E6.col.returned': '循环返回用时',
  'E6.col.perBatch': '每个小批量用时',
  'E6.col.batchesDone': '完成的小批量数',
  'E6.col.bound': '字节上限',
  'E6.col.pushWaits': '等待过的入队次数',
  'E6.source.wasmHeap': '模块的 WebAssembly 堆',
  'E6.boundOff': '关闭',
  'E6.axis.x': '自第一个小批量以来的毫秒数',
  'E6.axis.y': '比开始时多占用的 MB',
  'E6.text.peaks': '不读取时，队列最多多占用了 {none}；读取时为 {sync}。',
  'E6.text.default': { other: '默认引擎最多多占用了 {peak}（它的上限：{bound}，来自 {source}），有 {count} 次入队因它而等待。' },
  'E6.text.stopped': '“{mode}”在 {total} 个小批量中的第 {done} 个之后停止：{error}。',

  'E7.title': '这里没有 GPU：CPU 上的异步',
  'E7.explainHtml': 'WebAssembly 没有 GPU，所以本章 CPU 对比 GPU 的实验无法在浏览器中运行。但它的练习可以：' +
    '<i>在 CPU 上，还能观察到异步吗？</i>引擎的工作线程计算一个乘积，同时本线程做一段用时相近的 JavaScript 工作。' +
    '如果两者重叠，同时做两件事的用时约为两者中较长的那个，而不是两者之和。',
  'E7.fig.dot': '仅乘积',
  'E7.fig.js': '仅 JavaScript 工作',
  'E7.fig.serial': '一个接一个（之和）',
  'E7.fig.overlap': '两者同时（入队、JS 工作、等待）',
  'E7.fig.push': '入队返回用时',
  'E7.bar.dot': '仅乘积',
  'E7.bar.js': '仅 JavaScript',
  'E7.bar.serial': '一个接一个',
  'E7.bar.overlap': '两者同时',
  'E7.text.gpu': 'GPU：无，WebAssembly 只在 CPU 上运行。',
  'E7.text.overlap': '两者同时的用时明显少于之和：CPU 上的引擎同样是异步的。在 asyncnd 中，和 MXNet 一样，CPU 操作也会入队；' +
    'PyTorch 则在调用线程中同步执行 CPU 操作，这正是练习希望你注意到的区别。',
  'E7.text.noOverlap': '这里两者同时的用时约等于之和，但入队仍然立即返回：调用是异步的，两者先后执行只是因为引擎的线程和本线程在争用' +
    '同样的核心。在双核机器上试试只用一个工作线程（右上角）。',

  'code.tag': '代码',
  'code.title': '你自己的实验',
  'code.helpHtml': '针对 API 编写的 JavaScript，在 Worker 中运行：这里允许使用 <code>x.item()</code>、<code>x.waitToRead()</code> 和 ' +
    '<code>nd.waitAll()</code> 等阻塞调用。<code>nd</code> 是已加载的模块，<code>console.log</code> 输出在下方，可以使用 ' +
    '<code>await</code>。依赖关系图显示哪个操作读写了哪个数组；时间线显示每个操作何时运行。' +
    '无休止地分配内存的代码可能耗尽标签页的内存，使标签页崩溃。代码留下的数组只有在垃圾回收运行时才会释放：' +
    '<code>x.delete()</code> 可以立即释放一个数组，“重启 Worker”则从头开始。',
  'code.outputEmpty': '输出显示在这里。',
  'code.graphTitle': '依赖关系图',
  'code.graphHint': '运行代码，看看哪个操作读写了哪个数组。',
  'code.timelineHint': '运行代码，看看每个引擎线程执行了什么。',
  'code.running': '运行中…',
  'code.finished': { other: '用时 {time} · 入队 {count} 个操作' },
  'code.stopped': '因错误而停止；引擎仍在运行',
  'code.restarted': '已停止：Worker 已用新的引擎重新启动（之前创建的数组都已不存在）',
  'code.notRun': '未运行：页头中有一个输入框的值不被接受',
  'code.parseError': '无法解析该代码单元：{message}',
  'code.moreChars': { other: '……还有 {count} 个字符' },
  'code.truncated': '输出在 {count} 行之后被截断',
  'code.error': '错误：{message}',
  'code.errorAt': '错误（第 {line} 行）：{message}',
  'code.thrown': '抛出了一个不是 Error 的值：{value}',
  'code.cannotShow': '（无法显示结果：{message}）',
  'code.unhandled': '未处理的 Promise 拒绝：{message}',
  'code.noOp': '没有记录到操作。',
  'code.example.where': '在演练场的 Web Worker 中运行：这里可以使用阻塞调用。',
  'code.example.independent1': '这两个乘积互不依赖，',
  'code.example.independent2': '可以同时执行',
  'code.example.sum': '在引擎内部等待两者',
  'code.example.pending': '已入队；当前待执行的操作数：',
  'code.example.item': 'item() 会阻塞，直到数值算出',
};
