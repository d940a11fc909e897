// The series of /internal/metrics read at scrape time from what the status routes already keep:
// Stats (traffic, security counters, models, translators), the endpoints (health, breaker, active
// requests and streams, queues) and the catalogue. Nothing here is counted per request.
import type { Endpoint, HealthState, Runtime, Sample, TranslatorCounters, TurnCounts } from '../../engine/api.js';
import { SYSTEM_WORDS, verdict } from './endpoint-view.js';
import { modelLabel } from './metrics-instruments.js';

const HEALTH: readonly HealthState[] = ['unknown', 'healthy', 'busy', 'warming', 'offline', 'unhealthy'];
const BREAKER = ['closed', 'open', 'half-open'] as const;

const one = (value: number, labels = {}): Sample[] => [{ labels, value }];

export function registerCollected(env: Runtime): void {
  const { metrics: m, stats, endpoints, catalogue } = env;
  const live = () => endpoints.all;
  const perEndpoint = (value: (ep: Endpoint) => number) => () => live().map((ep) => ({ labels: { family: ep.family, endpoint: ep.name }, value: value(ep) }));
  const perQueue = (value: (q: NonNullable<Endpoint['queue']>) => number) => () =>
    live().flatMap((ep) => (ep.queue ? [{ labels: { family: ep.family, endpoint: ep.name }, value: value(ep.queue) }] : []));

  // System.
  m.collected('gw_build_info', 'The gateway version (always 1).', 'gauge', () => one(1, { version: env.version }), 'max');
  // One worker's verdict, not a sum: exactly one state reads 1.
  m.collected(
    'gw_system_status',
    "The system's state as /internal/status reports it: 1 for the current one.",
    'gauge',
    () => {
      const now = SYSTEM_WORDS[verdict(stats, live())];
      return SYSTEM_WORDS.map((status) => ({ labels: { status }, value: status === now ? 1 : 0 }));
    },
    'first',
  );
  m.collected(
    'gw_config_reloads_total',
    'Configuration graphs built since start (1 at start, +1 per successful reload).',
    'counter',
    () => one(env.reload.generation),
    'max',
  );
  m.collected('gw_requests_in_flight', 'Requests of any route being handled now.', 'gauge', () => one(stats.inFlight));
  m.collected('gw_proxied_requests_total', 'Requests counted by /internal/status (proxy and messages-API routes).', 'counter', () => one(stats.requestsTotal));
  m.collected('gw_proxied_requests_failed_total', 'Of those, the failed ones (5xx, timeouts, connection errors, a reply that broke off).', 'counter', () =>
    one(stats.requestsFailed),
  );
  m.collected(
    'gw_proxied_requests_client_errors_total',
    "Of those, the ones answered with a client error (4xx: the request's fault, never a failure).",
    'counter',
    () => one(stats.requestsClientErrors),
  );
  m.collected('gw_connections_open', 'Client connections open now.', 'gauge', () => one(stats.connectionsOpen));
  m.collected('gw_connections_total', 'Client connections accepted since start.', 'counter', () => one(stats.connectionsTotal));

  // Endpoints.
  m.collected(
    'gw_endpoint_health_state',
    "Each endpoint's health state: 1 for the current one.",
    'gauge',
    () => live().flatMap((ep) => HEALTH.map((state) => ({ labels: { family: ep.family, endpoint: ep.name, state }, value: ep.state === state ? 1 : 0 }))),
    'max',
  );
  m.collected(
    'gw_endpoint_up',
    '1 when the endpoint takes traffic (routable), else 0.',
    'gauge',
    perEndpoint((ep) => (ep.routable ? 1 : 0)),
    'max',
  );
  m.collected(
    'gw_endpoint_breaker_state',
    "Each endpoint's circuit breaker: 1 for the current state.",
    'gauge',
    () =>
      live().flatMap((ep) => BREAKER.map((state) => ({ labels: { family: ep.family, endpoint: ep.name, state }, value: ep.breaker.state === state ? 1 : 0 }))),
    'max',
  );
  m.collected(
    'gw_endpoint_requests_total',
    'Requests per endpoint (/internal/status).',
    'counter',
    perEndpoint((ep) => stats.endpoint(ep).requests),
  );
  m.collected(
    'gw_endpoint_errors_total',
    'Failed requests per endpoint (/internal/status): 5xx, timeouts, connection errors, broken replies.',
    'counter',
    perEndpoint((ep) => stats.endpoint(ep).errors),
  );
  m.collected(
    'gw_endpoint_client_errors_total',
    "Requests per endpoint its backend answered with a 4xx (the request's fault, not the endpoint's).",
    'counter',
    perEndpoint((ep) => stats.endpoint(ep).clientErrors),
  );
  m.collected(
    'gw_endpoint_active_requests',
    'Attempts in flight to the endpoint now.',
    'gauge',
    perEndpoint((ep) => ep.active),
  );
  m.collected(
    'gw_active_streams',
    'Replies being relayed to clients as streams now, by endpoint.',
    'gauge',
    perEndpoint((ep) => ep.streams),
  );
  m.collected(
    'gw_upstream_stale_retries_total',
    'Requests sent once more on a fresh connection after a pooled socket failed before any reply.',
    'counter',
    perEndpoint((ep) => ep.staleRetries),
  );
  m.collected(
    'gw_endpoint_health_checks_total',
    'Health checks run per endpoint.',
    'counter',
    perEndpoint((ep) => ep.checksTotal),
    'max',
  );
  m.collected(
    'gw_endpoint_health_checks_passed_total',
    'Health checks passed per endpoint.',
    'counter',
    perEndpoint((ep) => ep.checksPassed),
    'max',
  );
  m.collected(
    'gw_endpoint_models',
    'Models the endpoint serves (its last model list).',
    'gauge',
    perEndpoint((ep) => catalogue.listOf(ep)?.length ?? 0),
    'max',
  );

  // Queues (endpoints with a concurrency limit only).
  m.collected(
    'gw_queue_slots_held',
    'Attempts holding a concurrency slot now.',
    'gauge',
    perQueue((q) => q.held),
  );
  m.collected(
    'gw_queue_waiting',
    'Requests waiting for a concurrency slot now.',
    'gauge',
    perQueue((q) => q.queued),
  );
  m.collected(
    'gw_queue_rejected_full_total',
    'Requests turned away by a full queue (they may have gone to another endpoint).',
    'counter',
    perQueue((q) => q.rejectedFull),
  );
  m.collected(
    'gw_queue_timed_out_total',
    'Requests whose wait passed the queue timeout (429 QUEUE_TIMEOUT).',
    'counter',
    perQueue((q) => q.timedOut),
  );
  m.collected(
    'gw_queue_abandoned_total',
    'Requests whose client went away while they waited.',
    'counter',
    perQueue((q) => q.abandoned),
  );

  // Queues served by model (model_switching): what the engine holds, who waits for which model,
  // the switches made and the longest wait for a model.
  const perTurns = (value: (t: TurnCounts, labels: Record<string, string>) => Sample[]) => () =>
    live().flatMap((ep) => {
      const turns = ep.queue?.turnCounts();
      return turns ? value(turns, { family: ep.family, endpoint: ep.name }) : [];
    });
  m.collected(
    'gw_model_switches_total',
    'Models switched to on an endpoint that holds few at once (model_switching), each a load.',
    'counter',
    perTurns((t, labels) => [{ labels, value: t.switches }]),
  );
  m.collected(
    'gw_model_held',
    'Models an endpoint served by model holds now (1), as last sent or reported.',
    'gauge',
    perTurns((t, labels) => t.held.map((model) => ({ labels: { ...labels, model }, value: 1 }))),
  );
  m.collected(
    'gw_queue_waiting_by_model',
    'Requests waiting now on an endpoint served by model, by the model they ask for.',
    'gauge',
    perTurns((t, labels) => Object.entries(t.waitingByModel).map(([model, n]) => ({ labels: { ...labels, model }, value: n }))),
  );
  m.collected(
    'gw_model_wait_longest_seconds',
    'The longest a request waited for its model on an endpoint served by model.',
    'gauge',
    perTurns((t, labels) => [{ labels, value: t.longestWaitMs / 1000 }]),
    'max',
  );

  // Retries: the fleet's retry budget (proxy.retry.fleet).
  m.collected(
    'gw_retries_total',
    'Attempts made after a backend failed a request (status, stream failure, first-token deadline), taken from the fleet retry budget.',
    'counter',
    () => one(env.retries.taken),
  );
  m.collected(
    'gw_retry_budget_exhausted_total',
    'Retries not made because the fleet retry budget (proxy.retry.fleet) was spent: the backend answer was passed on.',
    'counter',
    () => one(env.retries.exhausted),
  );

  // Security.
  m.collected('gw_rate_limited_total', 'Requests refused with 429 by the rate limiter, by scope.', 'counter', () =>
    Object.entries(stats.rateLimited).map(([scope, value]) => ({ labels: { scope }, value })),
  );
  m.collected(
    'gw_rate_limit_store_failures_total',
    'Rate-limit takes the shared store (server.rate_limits.store: redis) could not answer: those requests passed unlimited.',
    'counter',
    () => one(stats.rateLimitStoreFailures),
  );
  m.collected(
    'gw_refused_requests_total',
    'Requests refused before routing: unsafe_path (400 UNSAFE_PATH), route_not_found (404 ROUTE_NOT_FOUND).',
    'counter',
    () => [
      { labels: { reason: 'unsafe_path' }, value: stats.refused.unsafePath },
      { labels: { reason: 'route_not_found' }, value: stats.refused.routeNotFound },
    ],
  );

  // Models: the per-model counters of /internal/stats/models, folded onto catalogue names.
  const perModel = (pick: (c: { requests: number; errors: number }) => number) => () => {
    const sums = new Map<string, number>();
    for (const [name, c] of stats.perModel) {
      const label = modelLabel(catalogue, name);
      sums.set(label, (sums.get(label) ?? 0) + pick(c));
    }
    return [...sums].map(([model, value]) => ({ labels: { model }, value }));
  };
  m.collected(
    'gw_model_requests_total',
    'Requests per model (catalogue names; other for the rest).',
    'counter',
    perModel((c) => c.requests),
  );
  m.collected(
    'gw_model_errors_total',
    'Failed requests per model (catalogue names; other for the rest).',
    'counter',
    perModel((c) => c.errors),
  );
  m.collected(
    'gw_models_discovered',
    'Models in the catalogue per family.',
    'gauge',
    () => {
      const counts = new Map<string, number>();
      for (const model of catalogue.all()) counts.set(model.family, (counts.get(model.family) ?? 0) + 1);
      return [...counts].map(([family, value]) => ({ labels: { family }, value }));
    },
    'max',
  );

  // Translators: the counters of /internal/stats/translators.
  const perTranslator = (rows: (t: TranslatorCounters) => [Record<string, string>, number][]) => () =>
    [...stats.translators].flatMap(([translator, t]) => rows(t).map(([labels, value]) => ({ labels: { translator, ...labels }, value })));
  m.collected(
    'gw_translator_requests_total',
    'Messages-API requests per translator, by mode (passthrough, translation, none: refused before either).',
    'counter',
    perTranslator((t) => [
      [{ mode: 'passthrough' }, t.passthrough],
      [{ mode: 'translation' }, t.translation],
      [{ mode: 'none' }, t.total - t.passthrough - t.translation],
    ]),
  );
  m.collected(
    'gw_translator_results_total',
    'Messages-API requests per translator, by result.',
    'counter',
    perTranslator((t) => [
      [{ result: 'succeeded' }, t.succeeded],
      [{ result: 'failed' }, t.failed],
    ]),
  );
  m.collected(
    'gw_translator_streaming_requests_total',
    'Messages-API requests per translator that asked for a stream.',
    'counter',
    perTranslator((t) => [[{}, t.streaming]]),
  );
  m.collected(
    'gw_translator_fallbacks_total',
    'Messages-API fallbacks per translator, by reason.',
    'counter',
    perTranslator((t) => [
      [{ reason: 'no_compatible_endpoints' }, t.fallbackNoCompatibleEndpoints],
      [{ reason: 'translator_does_not_support_passthrough' }, t.fallbackTranslatorDoesNotSupportPassthrough],
      [{ reason: 'cannot_passthrough' }, t.fallbackCannotPassthrough],
    ]),
  );
  m.collected(
    'gw_translator_malformed_chunks_total',
    'Backend stream chunks the translator skipped as malformed.',
    'counter',
    perTranslator((t) => [[{}, t.malformedChunks]]),
  );
}
