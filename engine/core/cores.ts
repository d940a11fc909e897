// The cores this process may use: what the scheduler lets it run on (availableParallelism), and
// no more than a container's CPU quota (cgroup v2 cpu.max, or v1 cfs_quota_us / cfs_period_us):
// a container limited to 2 CPUs on a 64-core host gets 2 workers from `workers: auto`, not 64.
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

export function availableCores(read: (file: string) => string | null = readOrNull): number {
  const cpus = availableParallelism();
  const quota = cgroupQuota(read);
  return Math.max(1, quota === null ? cpus : Math.min(cpus, Math.ceil(quota)));
}

/** CPUs the cgroup may use (quota / period), or null when it is unlimited or unknown. */
export function cgroupQuota(read: (file: string) => string | null): number | null {
  const v2 = read('/sys/fs/cgroup/cpu.max');
  if (v2 !== null) {
    const [quota, period] = v2.trim().split(/\s+/);
    return ratio(quota, period);
  }
  return ratio(read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us')?.trim(), read('/sys/fs/cgroup/cpu/cpu.cfs_period_us')?.trim());
}

function ratio(quota: string | undefined, period: string | undefined): number | null {
  const q = Number(quota);
  const p = Number(period);
  return Number.isFinite(q) && q > 0 && Number.isFinite(p) && p > 0 ? q / p : null;
}

function readOrNull(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}
