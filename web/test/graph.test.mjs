// graph.test.mjs: the dependency graph the page draws from profiler events (graph.js), on events
// of the shape the worker sends: E2's names and edges, default names, truncation, and the
// cross-thread clock check that the timeline note uses.
// Run: node --test web/test/graph.test.mjs  (make test-web)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildGraph, e2Names, clockSkewUs } from '../graph.js';

const ev = (name, worker, push, start, end, reads, writes) =>
  ({ name, worker, push, start, end, reads, writes, failed: false, skipped: false });
// z = x * y + 2 as the profiler records it (variable ids 7, 8, 9, 10).
const E2 = [ev('ones', 0, 0, 10, 12, [], [7]), ev('ones', 1, 1, 11, 13, [], [8]),
            ev('mul', 0, 2, 14, 15, [7, 8], [9]), ev('add', 1, 3, 16, 17, [9], [10])];

function edges(g) {
  const label = new Map(g.elements.filter((e) => e.group === 'nodes').map((e) => [e.data.id, e.data.label]));
  return g.elements.filter((e) => e.group === 'edges')
    .map((e) => `${label.get(e.data.source)}->${label.get(e.data.target)}`).sort();
}

test('E2: x and y into mul, a temporary into add, add into z', () => {
  const g = buildGraph(E2, e2Names(E2));
  assert.equal(g.ops, 4);
  assert.equal(g.vars, 4);
  assert.deepEqual(edges(g), ['add->z', 'mul->t1', 'ones->x', 'ones->y', 't1->add', 'x->mul', 'y->mul']);
});

test('default names follow first use; large runs are cut at maxOps', () => {
  const g = buildGraph(E2, null);
  const vars = g.elements.filter((e) => e.classes === 'var').map((e) => e.data.label);
  assert.deepEqual(vars, ['a1', 'a2', 'a3', 'a4']);
  const many = Array.from({ length: 100 }, (_, i) => ev('add', 0, i, i, i + 1, [1], [i + 2]));
  const cut = buildGraph(many, null, 10);
  assert.equal(cut.ops, 10);
  assert.equal(cut.truncated, true);
});

test('clock skew: none when every reader starts after its writer, the gap when one does not', () => {
  assert.equal(clockSkewUs(E2), 0);
  const skewed = E2.map((e) => ({ ...e }));
  skewed[2] = { ...skewed[2], worker: 1, start: 11.5, end: 12.5 };  // mul on worker 1 "before" ones on 0 ended
  assert.equal(clockSkewUs(skewed), 0.5);
  // The same thread runs ops in order: no clock to compare, nothing reported.
  const same = E2.map((e) => ({ ...e, worker: 0 }));
  same[2] = { ...same[2], start: 5 };
  assert.equal(clockSkewUs(same), 0);
});
