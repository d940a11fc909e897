// How endpoints appear on the status routes: sanitised URL and id, never credentials.
import { formatDuration } from '../../engine/kernel/duration.js';
import type { Endpoint } from '../../engine/backends/endpoints.js';
import type { Stats } from '../../engine/backends/telemetry.js';

export const percent = (part: number, whole: number) => `${((part / whole) * 100).toFixed(2)}%`;

export function averageLatency(totalMs: number, count: number): string {
  return formatDuration(count === 0 ? 0 : totalMs / count);
}

/** The endpoint health record of /internal/health. */
export function healthRecord(ep: Endpoint) {
  return {
    id: ep.id,
    name: ep.name,
    url: ep.url,
    status: ep.routable ? 'healthy' : 'unhealthy',
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
    status: ep.state,
    healthy: ep.state === 'healthy',
    routable: ep.routable,
    requests: c.requests,
    errors: c.errors,
    error_rate: c.requests === 0 ? '0.00%' : percent(c.errors, c.requests),
    average_latency: averageLatency(c.totalLatencyMs, c.requests),
    /** Time to the backend's reply head, from the endpoint's own interceptor. */
    average_upstream_latency: averageLatency(ep.upstream.totalMs, ep.upstream.count),
    active_requests: ep.active,
    consecutive_failures: ep.consecutiveFailures,
    circuit_breaker: {
      state: breaker.state,
      consecutive_failures: breaker.proxyFailures,
      health_failures: breaker.healthFailures,
      opened_by: breaker.openedBy,
      opened_at: breaker.openedBy ? new Date(breaker.openedAt).toISOString() : null,
    },
    uptime_percentage: ep.uptimePercentage,
    last_check: ep.lastCheck?.toISOString() ?? null,
    last_latency: formatDuration(ep.lastLatencyMs),
    next_check: ep.nextCheckAt?.toISOString() ?? null,
    ...(ep.lastError ? { error: ep.lastError } : {}),
  };
}

/** Overall state: all routable → healthy, some → degraded, none → unhealthy. */
export function overall(endpoints: readonly Endpoint[]): 'healthy' | 'degraded' | 'unhealthy' {
  const routable = endpoints.filter((e) => e.routable).length;
  if (endpoints.length > 0 && routable === endpoints.length) return 'healthy';
  return routable > 0 ? 'degraded' : 'unhealthy';
}
