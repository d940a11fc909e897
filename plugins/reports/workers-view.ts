// Each worker's share of the host (gw serve --workers N), for /internal/status and
// /internal/process: which process it is, what it is serving, what it holds.
import type { HostStats } from '../../engine/api.js';

const mb = (bytes: number) => Math.round((bytes / 1048576) * 100) / 100;

export function workersView(stats: HostStats) {
  return stats.workers.map((w) => ({
    worker: w.worker,
    pid: w.pid,
    uptime_seconds: w.uptimeS,
    requests_total: w.counters.requestsTotal,
    requests_in_flight: w.counters.inFlight,
    connections_open: w.counters.connectionsOpen,
    sys_mb: mb(w.rssBytes),
    heap_alloc_mb: mb(w.heapUsedBytes),
  }));
}
