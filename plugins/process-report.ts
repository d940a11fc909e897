// GET /internal/process: the process's vital signs, under the spec's field names. Node has no
// goroutines: `goroutines` counts the event loop's active handles and requests, and `go_version`
// holds the Node.js version. `heap_objects` (an integer, as the spec has it): V8 counts live
// objects only with a full garbage collection that stops the process (about 1 s per 100 MB of
// heap), far too dear for a route dashboards poll; so it is counted only when asked
// (`?heap_objects=count`: v8.queryObjects, the objects whose prototype chain includes
// Object.prototype), at most once a minute (reports/heap-count.ts), and every reply carries the last
// count with `heap_objects_age_seconds` (null, and the count 0, until one was taken).
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import v8 from 'node:v8';
import { definePlugin, HostStats } from '../engine/api.js';
import { workersView } from './reports/workers-view.js';
import { HeapObjectCount } from './reports/heap-count.js';
import { queryOf } from './lib/query.js';

const MB = 1024 * 1024;
const mb = (bytes: number) => Math.round((bytes / MB) * 100) / 100;

type QueryObjects = (ctor: unknown, options: { format: 'count' }) => number;

/** Live objects after a full GC (blocking); 0 where this Node.js lacks v8.queryObjects. The API
 *  is marked experimental: its one-time ExperimentalWarning would land on stderr outside the JSON
 *  log, so it is silenced for this call (docs/reference/status-and-metrics.md says what the count is). */
function countHeapObjects(): number {
  const query = (v8 as unknown as { queryObjects?: QueryObjects }).queryObjects;
  if (typeof query !== 'function') return 0;
  const emitWarning = process.emitWarning;
  process.emitWarning = () => undefined;
  try {
    return query(Object, { format: 'count' });
  } finally {
    process.emitWarning = emitWarning;
  }
}

/** One per process, not per gateway or reload: it is the process's heap. */
const heapObjects = new HeapObjectCount(countHeapObjects);

function osThreads(): number {
  try {
    return Number(/^Threads:\s+(\d+)/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

export default definePlugin<Record<string, never>>({
  name: 'process-report',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const { stats } = env;
    let lastCpu = process.cpuUsage();
    let lastAt = performance.now();
    hooks.dispatch.tapPromise('process-report', async (ctx) => {
      // With workers: this process is one of them; each one's share follows.
      const host = env.worker === null ? null : await env.hostStats();
      const mem = process.memoryUsage();
      const heap = v8.getHeapStatistics();
      const cpu = process.cpuUsage(lastCpu);
      const now = performance.now();
      const cpuPercent = ((cpu.user + cpu.system) / 1000 / Math.max(1, now - lastAt)) * 100;
      lastCpu = process.cpuUsage();
      lastAt = now;
      const objects = heapObjects.read(queryOf(ctx).get('heap_objects') === 'count');
      return ctx.replyJson(200, {
        pid: process.pid,
        started_at: env.startedAt.toISOString(),
        uptime_seconds: Math.round(process.uptime()),
        memory: {
          alloc_mb: mb(mem.heapUsed + mem.external),
          total_alloc_mb: mb(heap.total_heap_size + mem.external),
          sys_mb: mb(mem.rss),
          heap_alloc_mb: mb(mem.heapUsed),
          heap_objects: objects.count,
          heap_objects_age_seconds: objects.ageSeconds,
          gc_runs: stats.gcRuns,
          gc_pause_ms: Math.round(stats.gcPauseMs * 1000) / 1000,
        },
        cpu: {
          goroutines: process.getActiveResourcesInfo().length,
          threads: osThreads(),
          cpu_percent: Math.round(cpuPercent * 100) / 100,
        },
        connections: {
          active: Math.min(stats.connectionsOpen, stats.inFlight),
          idle: Math.max(0, stats.connectionsOpen - stats.inFlight),
          total_created: stats.connectionsTotal,
        },
        runtime: { go_version: process.version, os: process.platform, arch: process.arch, max_procs: availableParallelism() },
        ...(host instanceof HostStats ? { worker: env.worker, workers: workersView(host) } : {}),
      });
    });
  },
});
