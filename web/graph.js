// graph.js: the dependency graph of a profiled run, built from what the engine recorded: each
// op's reads and writes (variable ids). Ops and variables are nodes; an edge goes from a variable
// to each op that read it and from an op to each variable it wrote (Cytoscape elements).

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

export function buildGraph(events, names, maxOps = 80) {
  const sorted = [...events].sort((a, b) => a.push - b.push).slice(0, maxOps);
  const nameOf = typeof names === 'function' ? names : (id) => `v${id}`;
  const elements = [];
  const vars = new Set();
  const addVar = (id) => {
    if (vars.has(id)) return;
    vars.add(id);
    elements.push({ group: 'nodes', classes: 'var', data: { id: `v${id}`, label: nameOf(id), kind: 'var' } });
  };
  const palette = ['#4f46e5', '#0ea5e9', '#f59e0b', '#10b981', '#ef4444', '#8b5cf6', '#ec4899', '#14b8a6'];
  const colors = new Map();
  sorted.forEach((e, i) => {
    if (!colors.has(e.name)) colors.set(e.name, palette[colors.size % palette.length]);
    elements.push({ group: 'nodes', classes: 'op', data: { id: `op${i}`, label: e.name, kind: 'op', color: colors.get(e.name), worker: e.worker } });
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
