// How endpoints appear on the status routes: sanitised URL and id, never credentials.
import { formatDuration, type Endpoint, type EndpointQueue, type QueueCounts, type Stats, type TurnCounts } from '../../engine/api.js';

export const percent = (part: number, whole: number) => `${((part / whole) * 100).toFixed(2)}%`;

export function averageLatency(totalMs: number, count: number): string {
  return formatDuration(count === 0 ? 0 : totalMs / count);
}

/** The endpoint health record of /internal/health (the spec's healthy/unhealthy, and the state). */
export function healthRecord(ep: Endpoint) {
  return {
    id: ep.id,
    name: ep.name,
    url: ep.url,
    status: isHealthy(ep) ? 'healthy' : 'unhealthy',
    /** The state behind it (healthy, busy, warming, offline, unhealthy, unknown): as /internal/status says. */
    state: ep.state,
    latency: formatDuration(ep.lastLatencyMs),
    last_check: ep.lastCheck?.toISOString() ?? null,
  };
}

/** The full record of /internal/status/endpoints. */
export function endpointDetail(ep: Endpoint, stats: Stats) {
  const c = stats.endpoint(ep);
  const breaker = ep.breaker;
  return {
    id: ep.id,
    name: ep.name,
    type: ep.family,
    url: ep.url,
    priority: ep.priority,
    weight: ep.weight,
    status: ep.state,
    healthy: isHealthy(ep),
    routable: ep.routable,
    requests: c.requests,
    errors: c.errors,
    /** 4xx answers (the request's fault): counted as requests, never as errors. */
    client_errors: c.clientErrors,
    error_rate: c.requests === 0 ? '0.00%' : percent(c.errors, c.requests),
    average_latency: averageLatency(c.totalLatencyMs, c.requests),
    /** Time to the backend's reply head, from the endpoint's own interceptor. */
    average_upstream_latency: averageLatency(ep.upstream.totalMs, ep.upstream.count),
    active_requests: stats.activeOn(ep),
    /** What balancing counts: this gateway's requests in flight plus those the engine reports
     *  serving for others (engine: its last report, null without a fresh one). */
    load: loadView(ep, stats, performance.now()),
    /** Recent time to the first byte of a reply (peak EWMA, p2c) as of the last reply (it decays
     *  while the endpoint is quiet); null before the first. */
    latency_ewma: ep.latency.samples === 0 ? null : formatDuration(ep.latency.atLastSample),
    queue: ep.queue ? queueView(ep.queue, stats.queueOn(ep) ?? ep.queue.counts()) : null,
    consecutive_failures: ep.consecutiveFailures,
    /** The timeouts and failover settings in force: each value as written, and where it came from
     *  (endpoint, custom profile NAME, proxy.KEY, built-in profile NAME, default). */
    settings: ep.settings,
    /** Its last 429 or 503 asked for a pause (Retry-After) until then: other candidates go first. */
    retry_after_until: ep.cooling(performance.now()) ? new Date(Date.now() + ep.coolingUntil - performance.now()).toISOString() : null,
    circuit_breaker: {
      state: breaker.state,
      consecutive_failures: breaker.proxyFailures,
      health_failures: breaker.healthFailures,
      opened_by: breaker.openedBy,
      opened_at: breaker.openedBy ? new Date(breaker.openedAt).toISOString() : null,
      /** When it lets a test request through (past, once half-open); null when closed. */
      open_until: breaker.openedBy ? new Date(breaker.openUntil).toISOString() : null,
      /** Openings since the last close: each one's period is twice the one before. */
      consecutive_openings: breaker.openings,
      /** Open for the requests that failed only (their answers opened it while health checks
       *  passed): how many; 0 when open for everyone, or closed. */
      refused_requests: breaker.scopeSize,
    },
    uptime_percentage: ep.uptimePercentage,
    last_check: ep.lastCheck?.toISOString() ?? null,
    last_latency: formatDuration(ep.lastLatencyMs),
    next_check: ep.nextCheckAt?.toISOString() ?? null,
    ...(ep.lastError ? { error: ep.lastError } : {}),
  };
}

function loadView(ep: Endpoint, stats: Stats, now: number) {
  const r = ep.engineLoad;
  const fresh = r !== null && r.until >= now;
  const inFlight = stats.activeOn(ep);
  return {
    total: ep.load(now) - ep.active + inFlight,
    in_flight: inFlight,
    engine: fresh ? { running: r.running, waiting: r.waiting, others: r.others, from: r.path, read_at: r.readAt.toISOString() } : null,
  };
}

/** The endpoint's concurrency limit and queue (null on the record when it has no limit). Waits
 *  are those of the requests that had to queue, over the last 1024 of them. */
function queueView(q: EndpointQueue, c: QueueCounts) {
  return {
    max_concurrent_requests: q.maxConcurrent,
    in_flight: c.held,
    queued: c.queued,
    max_queued_requests: q.maxQueued,
    queue_timeout: formatDuration(q.timeoutMs),
    admitted: c.admitted,
    waited: c.waited,
    rejected_full: c.rejectedFull,
    timed_out: c.timedOut,
    abandoned: c.abandoned,
    wait_average: averageLatency(c.waitedMs, c.waited),
    wait_p50: formatDuration(c.waitP50),
    wait_p95: formatDuration(c.waitP95),
    model_switching: c.turns ? turnsView(q, c.turns) : null,
  };
}

/** An engine that holds few models at once: what it holds (as this gateway last sent it, or as
 *  it reported), who waits for which model, the switches made and the longest wait for a model. */
function turnsView(q: EndpointQueue, t: TurnCounts) {
  const s = q.turnSettings!;
  return {
    models_at_once: s.atOnce,
    max_wait: formatDuration(s.maxWaitMs),
    min_dwell: formatDuration(s.minDwellMs),
    held: t.held,
    loading: t.loading,
    switching_to: t.switching,
    waiting_by_model: t.waitingByModel,
    switches: t.switches,
    longest_wait: formatDuration(t.longestWaitMs),
  };
}

/** How one verdict reads on each route (the spec's words): /internal/health says `unhealthy` where
 *  /internal/status (and gw_system_status) says `critical`; the facts behind them are the same. */
export const HEALTH_WORDS = ['healthy', 'degraded', 'unhealthy'] as const;
export const SYSTEM_WORDS = ['healthy', 'degraded', 'critical'] as const;
export type SystemStatus = (typeof SYSTEM_WORDS)[number];

/** 0: every endpoint routable and requests succeed; 1: degraded; 2: down. */
export type Verdict = 0 | 1 | 2;

/** The one verdict of the status routes. Endpoint health first: every endpoint routable → 0, some
 *  → 1, none (or no endpoint at all) → 2. Then the success rate of the recent requests that were
 *  not client errors (a client's 4xx says nothing about the gateway or its backends): under 95%
 *  makes it at least 1, under 50% makes it 2. Before such traffic, endpoint health alone. */
export function verdict(stats: Stats, endpoints: readonly Endpoint[]): Verdict {
  let routable = 0;
  for (const e of endpoints) if (e.routable) routable++;
  if (routable === 0) return 2;
  let level: Verdict = routable === endpoints.length ? 0 : 1;
  const rate = stats.recentSuccessRate();
  if (rate !== null) {
    if (rate < 0.5) level = 2;
    else if (rate < 0.95 && level === 0) level = 1;
  }
  return level;
}

/** An endpoint is healthy on every status route when it takes traffic (routable: healthy, busy or
 *  warming); `status`/`state` beside it says which state, in the spec's words (offline, unhealthy…). */
export const isHealthy = (ep: Endpoint): boolean => ep.routable;
