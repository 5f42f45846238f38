// graph.js: the dependency graph of a profiled run, built from what the engine recorded: each
// op's reads and writes (variable ids). Ops and variables are nodes; an edge goes from a variable
// to each op that read it and from an op to each variable it wrote (Cytoscape elements). Also
// the check behind the timelines' note on clocks that differ between threads.

// Names for E2's variables, z = x * y + 2: the first two variables written are x and y, the one
// the last op wrote is z, the others are temporaries.
export function e2Names(events) {
  const order = [];
  for (const e of events) for (const v of [...e.reads, ...e.writes]) if (!order.includes(v)) order.push(v);
  const last = events.length ? events[events.length - 1].writes[0] : undefined;
  const names = new Map();
  let tmp = 0;
  order.forEach((v, i) => {
    if (v === last) names.set(v, 'z');
    else if (i < 2) names.set(v, i === 0 ? 'x' : 'y');
    else names.set(v, `t${++tmp}`);
  });
  return (id) => names.get(id) ?? `v${id}`;
}

// names(id) labels a variable (default: a1, a2, ... in order of first use); colorOf(opName) colours
// an op as the timeline does.
export function buildGraph(events, names, maxOps = 80, colorOf = () => '#4f46e5') {
  const sorted = [...events].sort((a, b) => a.push - b.push).slice(0, maxOps);
  const seen = new Map();
  const nameOf = typeof names === 'function' ? names : (id) => {
    if (!seen.has(id)) seen.set(id, `a${seen.size + 1}`);
    return seen.get(id);
  };
  const elements = [];
  const vars = new Set();
  const addVar = (id) => {
    if (vars.has(id)) return;
    vars.add(id);
    elements.push({ group: 'nodes', classes: 'var', data: { id: `v${id}`, label: nameOf(id), kind: 'var' } });
  };
  sorted.forEach((e, i) => {
    elements.push({ group: 'nodes', classes: 'op', data: { id: `op${i}`, label: e.name, kind: 'op', color: colorOf(e.name), worker: e.worker } });
    for (const v of e.reads) {
      addVar(v);
      elements.push({ group: 'edges', classes: 'read', data: { id: `r${i}_${v}`, source: `v${v}`, target: `op${i}` } });
    }
    for (const v of e.writes) {
      addVar(v);
      elements.push({ group: 'edges', classes: 'write', data: { id: `w${i}_${v}`, source: `op${i}`, target: `v${v}` } });
    }
  });
  return { elements, ops: sorted.length, vars: vars.size, truncated: events.length > sorted.length };
}

// The largest amount (µs) by which an op seems to start before an op it depends on (a write it
// reads) ended, on another thread. In a browser each engine thread's clock is set from another
// thread's by a message (Emscripten 3.1.6), so clocks can differ by that message's latency.
export function clockSkewUs(events) {
  const sorted = [...events].sort((a, b) => a.push - b.push);
  const writer = new Map();
  let worst = 0;
  for (const e of sorted) {
    for (const v of e.reads) {
      const w = writer.get(v);
      if (w && w.worker !== e.worker && !e.skipped && !w.skipped) worst = Math.max(worst, w.end - e.start);
    }
    for (const v of e.writes) writer.set(v, e);
  }
  return worst;
}
