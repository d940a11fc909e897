// workers: auto counts the cores a process may use: the scheduler's, capped by a container's CPU
// quota (cgroup v2 cpu.max, else v1's cfs quota and period).
import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { availableCores, cgroupQuota } from '../../../engine/core/cores.js';

const files = (map: Record<string, string>) => (file: string) => map[file] ?? null;

describe('cores available to the process', () => {
  it('reads a cgroup v2 quota, rounding a fraction of a CPU up', () => {
    expect(cgroupQuota(files({ '/sys/fs/cgroup/cpu.max': '150000 100000\n' }))).toBe(1.5);
    expect(availableCores(files({ '/sys/fs/cgroup/cpu.max': '150000 100000\n' }))).toBe(Math.min(2, availableParallelism()));
  });

  it('takes no quota ("max") as the scheduler\'s count', () => {
    expect(cgroupQuota(files({ '/sys/fs/cgroup/cpu.max': 'max 100000\n' }))).toBeNull();
    expect(availableCores(files({ '/sys/fs/cgroup/cpu.max': 'max 100000\n' }))).toBe(availableParallelism());
  });

  it('reads cgroup v1 where v2 is absent; -1 is unlimited', () => {
    expect(cgroupQuota(files({ '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '100000', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000' }))).toBe(1);
    expect(cgroupQuota(files({ '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '-1', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000' }))).toBeNull();
    expect(availableCores(files({}))).toBe(availableParallelism());
  });

  it('never says less than one', () => {
    expect(availableCores(files({ '/sys/fs/cgroup/cpu.max': '1000 100000' }))).toBe(1);
  });
});
