// asyncnd.cpuLimit(): the CPUs load()'s default thread count counts (README, "Thread policy"):
// online CPUs, narrowed by the affinity mask and, on Linux, by the cgroup's CPU quota. Checked in
// this process, then in child processes under `taskset` and, where this test may make one, in a
// cgroup v1 group with a quota.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync, spawnSync } = require('node:child_process');
const asyncnd = require('..');

const pkg = path.join(__dirname, '..');
const report = `console.log(JSON.stringify(require(${JSON.stringify(pkg)}).cpuLimit()))`;

test('cpuLimit(): online, affinity and quota, and the smallest decides', () => {
  const l = asyncnd.cpuLimit();
  assert.equal(l.online, os.cpus().length);
  assert.equal(l.affinity, os.availableParallelism());
  assert.ok(l.cpus >= 1 && l.cpus <= l.online, JSON.stringify(l));
  const expected = Math.min(l.online, l.affinity || l.online, l.quota > 0 ? Math.ceil(l.quota) : Infinity);
  assert.equal(l.cpus, Math.max(1, expected));
  assert.equal(l.source, l.cpus === l.online ? 'online' : l.cpus === l.affinity ? 'affinity' : 'cgroup');
});

test('load() with no thread count starts cpuLimit().cpus - 1 workers (at least 1)', async () => {
  const nd = await asyncnd.load();
  assert.equal(nd.threads, Math.max(1, asyncnd.cpuLimit().cpus - 1));
});

test('under taskset with one CPU: cpus 1, from the affinity mask', (t) => {
  if (os.availableParallelism() < 2) return t.skip('this process may run on one CPU only');
  if (spawnSync('taskset', ['--version']).error) return t.skip('no taskset here (util-linux)');
  const l = JSON.parse(execFileSync('taskset', ['-c', '0', process.execPath, '-e', report], { encoding: 'utf8' }));
  assert.deepEqual([l.cpus, l.affinity, l.source], [1, 1, 'affinity']);
});

test('in a cgroup with a CPU quota, or inside one: the quota counts, rounded up', (t) => {
  // Only where this test may make a cgroup: cgroup v1's cpu controller mounted writable (root in
  // a container or VM such as ours). The native tests read the same files the same way.
  const root = '/sys/fs/cgroup/cpu';
  try {
    fs.accessSync(path.join(root, 'cpu.cfs_period_us'));
    fs.accessSync(root, fs.constants.W_OK);
  } catch (e) {
    return t.skip(`no writable cgroup v1 cpu controller at ${root}`);
  }
  const group = path.join(root, `asyncnd-node-test-${process.pid}`);
  const inner = path.join(group, 'inner');
  try {
    fs.mkdirSync(group);
    fs.mkdirSync(inner);
  } catch (e) {
    return t.skip(`cannot make ${inner}: ${e.message}`);
  }
  try {
    fs.writeFileSync(path.join(group, 'cpu.cfs_period_us'), '100000\n');
    // [outer quota, the child in the inner group (no quota of its own)?, expected CPUs]
    for (const [quota, inInner, cpus] of [[50000, false, 1], [150000, false, 2], [50000, true, 1]]) {
      try {
        fs.writeFileSync(path.join(group, 'cpu.cfs_quota_us'), `${quota}\n`);
      } catch (e) {
        return t.skip(`the kernel refused a quota of ${quota} us: ${e.message}`);
      }
      // The child moves itself into the group, then runs node.
      const dir = inInner ? inner : group;
      const r = spawnSync('sh', ['-c', `echo $$ > ${dir}/cgroup.procs && exec "$0" -e '${report}'`,
        process.execPath], { encoding: 'utf8' });
      if (r.status !== 0 && /cgroup\.procs/.test(r.stderr)) return t.skip(`the child could not join ${dir}`);
      assert.equal(r.status, 0, r.stderr);
      const l = JSON.parse(r.stdout);
      assert.equal(l.quota, quota / 100000, `${dir}: ${r.stdout}`);
      const expect = Math.min(l.online, l.affinity || l.online, cpus);
      assert.equal(l.cpus, expect, r.stdout);
      if (expect < Math.min(l.online, l.affinity || l.online)) assert.equal(l.source, 'cgroup');
    }
  } finally {
    fs.rmdirSync(inner);
    fs.rmdirSync(group);
  }
});
