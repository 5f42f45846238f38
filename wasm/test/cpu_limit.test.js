// asyncnd.cpuLimit(): the CPUs load()'s default thread count counts (README, "Thread policy"):
// online CPUs, narrowed by the affinity mask and, on Linux, by the cgroup's CPU quota. Checked in
// this process, then in child processes under `taskset` and, where this test may make them, in
// cgroup v1 and v2 groups with a quota; the cgroup layouts this machine cannot make, on texts.
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

test('the cgroup files are found wherever mountinfo says, in layouts this machine cannot make', (t) => {
  if (process.platform !== 'linux') return t.skip('cgroups are Linux only');
  // A child whose fs.readFileSync answers /proc/self/{mountinfo,cgroup} and the cgroup files from
  // the texts given (any other path there: ENOENT), then reports cpuLimit(): the package's own
  // reading on the layouts of the native test "the cgroup directories from mountinfo and
  // /proc/self/cgroup".
  const preload = path.join(os.tmpdir(), `asyncnd-fake-cgroup-${process.pid}.cjs`);
  fs.writeFileSync(preload, `
const fs = require('fs');
const files = JSON.parse(process.env.ASYNCND_TEST_FILES);
const real = fs.readFileSync;
fs.readFileSync = function (p, ...rest) {
  if (typeof p === 'string' && /^\\/(proc\\/self\\/(mountinfo|cgroup)$|sys\\/fs\\/cgroup|mnt\\/)/.test(p)) {
    if (Object.prototype.hasOwnProperty.call(files, p)) return files[p];
    throw Object.assign(new Error('ENOENT: ' + p), { code: 'ENOENT' });
  }
  return real.call(fs, p, ...rest);
};
`);
  const quotaOf = (files) => {
    const r = spawnSync(process.execPath, ['--require', preload, '-e', report],
      { encoding: 'utf8', env: { ...process.env, ASYNCND_TEST_FILES: JSON.stringify(files) } });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout).quota;
  };
  const hybrid =
    '32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n' +
    '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n';
  const groups = '2:cpu,cpuacct:/jobs/b\n1:name=systemd:/\n0::/u\n';
  try {
    // v1 with cpu and cpuacct mounted together: a quota on the group's parent.
    assert.equal(quotaOf({ '/proc/self/mountinfo': hybrid, '/proc/self/cgroup': groups,
      '/sys/fs/cgroup/cpu,cpuacct/jobs/cpu.cfs_quota_us': '50000\n',
      '/sys/fs/cgroup/cpu,cpuacct/jobs/cpu.cfs_period_us': '100000\n' }), 0.5);
    // A hybrid system's v2 at /sys/fs/cgroup/unified; then v1's smaller quota beside it.
    const v2 = { '/proc/self/mountinfo': hybrid, '/proc/self/cgroup': groups,
      '/sys/fs/cgroup/unified/u/cpu.max': '150000 100000\n' };
    assert.equal(quotaOf(v2), 1.5);
    assert.equal(quotaOf({ ...v2, '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us': '50000\n',
      '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us': '100000\n' }), 0.5);
    // Pure v2: the slice's quota above the session's group ("max" there).
    assert.equal(quotaOf({
      '/proc/self/mountinfo': '30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n',
      '/proc/self/cgroup': '0::/user.slice/session-2.scope\n',
      '/sys/fs/cgroup/user.slice/session-2.scope/cpu.max': 'max 100000\n',
      '/sys/fs/cgroup/user.slice/cpu.max': '200000 100000\n' }), 2);
    // A Docker container without a cgroup namespace: its own files at the mount point.
    assert.equal(quotaOf({
      '/proc/self/mountinfo': '700 690 0:29 /docker/4f2a /sys/fs/cgroup/cpu ro - cgroup cgroup rw,cpu\n',
      '/proc/self/cgroup': '5:cpu:/docker/4f2a\n',
      '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '150000\n', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000\n' }), 1.5);
    // The kernel's octal escape in a mount point.
    assert.equal(quotaOf({
      '/proc/self/mountinfo': '50 31 0:40 / /mnt/my\\040groups rw - cgroup2 none rw\n',
      '/proc/self/cgroup': '0::/a\n', '/mnt/my groups/a/cpu.max': '50000 100000\n' }), 0.5);
    // Files this layout does not name are not read: a v1 mount of another controller.
    assert.equal(quotaOf({
      '/proc/self/mountinfo': '35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n',
      '/proc/self/cgroup': '4:memory:/\n', '/sys/fs/cgroup/memory/cpu.cfs_quota_us': '50000\n',
      '/sys/fs/cgroup/memory/cpu.cfs_period_us': '100000\n' }), 0);
  } finally {
    fs.rmSync(preload, { force: true });
  }
});

// The mount points of the v2 hierarchy (v1Controller null) or of v1's controller, from
// /proc/self/mountinfo: where this test may make its groups.
function cgroupMounts(v1Controller) {
  let text = '';
  try { text = fs.readFileSync('/proc/self/mountinfo', 'utf8'); } catch (e) { return []; }
  const out = [];
  for (const line of text.split('\n')) {
    // "id parent major:minor root mount-point options [optional...] - type source super-options"
    const [head, tail] = line.split(' - ').map((part) => part.split(' '));
    if (!tail || head.length < 5 || tail.length < 3) continue;
    if (v1Controller ? tail[0] === 'cgroup' && tail[2].split(',').includes(v1Controller) : tail[0] === 'cgroup2') {
      out.push(head[4].replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8))));
    }
  }
  return out;
}

// Runs node in `dir` (the child moves itself there first) and returns its cpuLimit(), or a reason
// to skip where it could not join.
function reportIn(dir) {
  const r = spawnSync('sh', ['-c', `echo $$ > ${dir}/cgroup.procs && exec "$0" -e '${report}'`,
    process.execPath], { encoding: 'utf8' });
  if (r.status !== 0 && /cgroup\.procs/.test(r.stderr)) return { skip: `the child could not join ${dir}` };
  assert.equal(r.status, 0, r.stderr);
  return { limit: JSON.parse(r.stdout), stdout: r.stdout };
}

// The child's count in a group with a quota of `quota` CPUs, `cpus` being it rounded up.
function checkQuota({ limit: l, stdout }, quota, cpus, where) {
  assert.equal(l.quota, quota, `${where}: ${stdout}`);
  const expect = Math.min(l.online, l.affinity || l.online, cpus);
  assert.equal(l.cpus, expect, stdout);
  if (expect < Math.min(l.online, l.affinity || l.online)) assert.equal(l.source, 'cgroup');
}

test('in a cgroup v1 group with a CPU quota, or inside one: the quota counts, rounded up', (t) => {
  // Only where this test may make a cgroup: cgroup v1's cpu controller mounted writable (root in
  // a container or VM such as ours). The native tests read the same files the same way.
  const root = cgroupMounts('cpu').find((dir) => {
    try { fs.accessSync(dir, fs.constants.W_OK); return true; } catch (e) { return false; }
  });
  if (!root) return t.skip('no writable cgroup v1 cpu controller here');
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
      const dir = inInner ? inner : group;
      const r = reportIn(dir);
      if (r.skip) return t.skip(r.skip);
      checkQuota(r, quota / 100000, cpus, dir);
    }
  } finally {
    fs.rmdirSync(inner);
    fs.rmdirSync(group);
  }
});

test('in a cgroup v2 group inside one with cpu.max: the smaller quota counts, rounded up', async (t) => {
  // Only where this test may make a v2 group with the cpu controller: root on a machine with
  // cgroup v2 (Debian 12's default). On this project's VMs cpu is v1's, and this test skips.
  const has = (file, word) => {
    try { return fs.readFileSync(file, 'utf8').split(/\s+/).includes(word); } catch (e) { return false; }
  };
  const root = cgroupMounts(null).find((dir) => {
    try { fs.accessSync(dir, fs.constants.W_OK); } catch (e) { return false; }
    return has(path.join(dir, 'cgroup.controllers'), 'cpu');
  });
  if (!root) return t.skip('no writable cgroup v2 hierarchy offering cpu here');
  const rootControl = path.join(root, 'cgroup.subtree_control');
  const enabledHere = !has(rootControl, 'cpu');
  const group = path.join(root, `asyncnd-node-test-${process.pid}`);
  const inner = path.join(group, 'inner');
  try {
    if (enabledHere) fs.writeFileSync(rootControl, '+cpu\n');
    fs.mkdirSync(group);
    fs.writeFileSync(path.join(group, 'cgroup.subtree_control'), '+cpu\n');
    fs.mkdirSync(inner);
  } catch (e) {
    return t.skip(`cannot make ${inner} with the cpu controller: ${e.message}`);
  }
  try {
    // [outer cpu.max, inner cpu.max, expected quota and CPUs]; the child is in the inner group.
    for (const [outer, own, quota, cpus] of [['50000 100000', 'max 100000', 0.5, 1],
      ['150000 100000', '50000 100000', 0.5, 1], ['max 100000', '300000 200000', 1.5, 2]]) {
      fs.writeFileSync(path.join(group, 'cpu.max'), `${outer}\n`);
      fs.writeFileSync(path.join(inner, 'cpu.max'), `${own}\n`);
      const r = reportIn(inner);
      if (r.skip) return t.skip(r.skip);
      checkQuota(r, quota, cpus, `outer ${outer}, inner ${own}`);
    }
  } finally {
    fs.rmdirSync(inner);
    fs.rmdirSync(group);
    // The kernel refuses while the removed groups' state is still being freed: a moment.
    for (let i = 0; enabledHere && i < 50; ++i) {
      try { fs.writeFileSync(rootControl, '-cpu\n'); break; } catch (e) { await new Promise((r) => setTimeout(r, 100)); }
    }
  }
});
