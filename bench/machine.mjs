// bench/machine.mjs: what the JavaScript benchmarks (bench/wasm, bench/browser) share: their
// command lines, and what they record about the machine next to their figures.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// The CPU's model name, as the native benches record it (bench/bench_util.h, cpu_model): Node's
// where it has one, with /proc/cpuinfo's family and model numbers (a VM may name only the line,
// "AMD EPYC"), else lscpu's vendor and model (64-bit ARM's /proc/cpuinfo has only implementer and
// part numbers, which lscpu names), else 'unknown'.
export function cpuModel() {
  const node = ((os.cpus()[0] || {}).model || '').trim();
  if (node && node !== 'unknown') {
    let info = '';
    try { info = fs.readFileSync('/proc/cpuinfo', 'utf8'); } catch { return node; }
    const family = (info.match(/^cpu family\s*:\s*(\d+)/m) || [])[1];
    const model = (info.match(/^model\s*:\s*(\d+)/m) || [])[1];
    return family && model ? `${node} (family ${family} model ${model})` : node;
  }
  let out = '';
  try { out = execFileSync('lscpu', { env: { ...process.env, LC_ALL: 'C' }, encoding: 'utf8' }); } catch { return 'unknown'; }
  const field = (key) => ((out.match(new RegExp(`^${key}:\\s*(.*)$`, 'm')) || [])[1] || '').trim();
  const vendor = field('Vendor ID'), model = field('Model name');
  if (!model || model === '-') return 'unknown';
  return !vendor || model.startsWith(vendor) ? model : `${vendor} ${model}`;
}

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

// A benchmark's command line, read before anything runs (as bench/bench_util.h does for the
// native ones): the options it knows and at most one plain argument (the output file). `--help`
// or `-h` prints `usage` and exits 0; an unknown option or a second plain argument is an error
// naming it, with the usage, and exits 2. In `known`, a name ending in '=' takes a value. Returns
// { out, options } (out: the plain argument or undefined; options: name -> value, '' for a flag).
export function parseBenchArgs(argv, usage, known = []) {
  const prog = path.basename(argv[1] || 'bench.mjs');
  const fail = (why) => {
    process.stderr.write(`${prog}: ${why}\nusage: ${usage}\n`);
    process.exit(2);
  };
  let out;
  const options = {};
  for (const arg of argv.slice(2)) {
    if (arg === '--help' || arg === '-h') {
      process.stdout.write(`usage: ${usage}\n`);
      process.exit(0);
    }
    if (!arg.startsWith('-')) {
      if (out !== undefined) fail(`unexpected argument '${arg}' (one output file at most)`);
      out = arg;
      continue;
    }
    const name = known.find((k) => (k.endsWith('=') ? arg.startsWith(k) : arg === k));
    if (name === undefined) {
      const bare = known.find((k) => k.endsWith('=') && arg === k.slice(0, -1));
      fail(bare ? `option '${arg}' needs a value: ${bare}VALUE` : `unknown option '${arg}'`);
    }
    options[name] = name.endsWith('=') ? arg.slice(name.length) : '';
  }
  return { out, options };
}
