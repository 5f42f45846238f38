// bench/machine.mjs: what the JavaScript benchmarks (bench/wasm, bench/browser) record about the
// machine next to their figures.
import fs from 'node:fs';
import path from 'node:path';

// CPU busy over the next second (/proc/stat), while this thread sleeps: well above 0 means
// another process was running and the figures are suspect. -1 where /proc/stat is unreadable.
export function cpuBusyPct() {
  const read = () => fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].split(/\s+/).slice(1).map(Number);
  try {
    const a = read();
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
    const b = read();
    const d = b.map((x, i) => x - a[i]);
    const total = d.reduce((x, y) => x + y, 0), idle = d[3] + d[4];
    return total > 0 ? Math.round(100 * (total - idle) / total) : -1;
  } catch { return -1; }
}

// The conditions before a run, for `machine`: run it before anything of the bench starts.
export function conditionsBefore() {
  const busy = cpuBusyPct();
  return { loadavg_start: fs.readFileSync('/proc/loadavg', 'utf8').trim(), cpu_busy_before_pct: busy };
}

// Writes { ...figures, machine: { ...machine, date } } to `out` as JSON and says so.
export function writeResults(out, figures, machine) {
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const result = { ...figures, machine: { ...machine, date: new Date().toISOString() } };
  fs.writeFileSync(out, JSON.stringify(result, null, 2) + '\n');
  console.log(`\nwrote ${out}`);
}
