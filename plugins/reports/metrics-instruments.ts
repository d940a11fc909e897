// The per-request series of /internal/metrics: one definition, shared by the `metrics` step that
// observes them and the report that serves them. Label sets are bounded: families, routes and
// endpoints come from the configuration, status is a class, models are catalogue names or `other`,
// error codes are the gateway's table or `other`.
import type { Catalogue, Metrics } from '../../engine/api.js';

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
/** The gateway's own time is a fraction of a millisecond on a good day. */
const OVERHEAD = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];
export function instruments(m: Metrics) {
  return {
    duration: m.histogram(
      'gw_request_duration_seconds',
      'Requests from arrival to the end of the reply, by family, route (pipeline), endpoint (last tried; none) and status class.',
      ['family', 'route', 'endpoint', 'status'],
      SECONDS,
    ),
    overhead: m.histogram(
      'gw_overhead_seconds',
      "The gateway's own time per request: the whole request less the upstream attempts and any wait for a concurrency slot.",
      ['family', 'route'],
      OVERHEAD,
    ),
    queueWait: m.histogram(
      'gw_queue_wait_seconds',
      "Requests that waited for a slot of an endpoint's concurrency limit: the wait, admitted or not.",
      ['family', 'route'],
      SECONDS,
    ),
    tokens: m.counter(
      'gw_tokens_total',
      "Tokens the backend reported in its reply's usage, where the gateway reads the reply anyway (messages-API translation), and of every reply while API keys are on (estimated where the engine reported none: gw_key_tokens_total says how many).",
      ['family', 'model', 'type'],
    ),
    keyRequests: m.counter(
      'gw_key_requests_total',
      'Requests per API key (its name), model (catalogue names; other) and endpoint (none: no backend answered), while keys are on.',
      ['key', 'model', 'endpoint'],
    ),
    keyTokens: m.counter(
      'gw_key_tokens_total',
      'Tokens per API key, model and endpoint, by type: input (cached included), cached_input, output (reasoning included), reasoning, and estimated (of input and output, those the engine did not report).',
      ['key', 'model', 'endpoint', 'type'],
    ),
    failovers: m.counter('gw_failovers_total', 'Further endpoints tried after the first one for a request (each next attempt counts one).', [
      'family',
      'route',
    ]),
    failedAttempts: m.counter(
      'gw_failed_attempts_total',
      'Attempts that failed and were followed by another (or by the answer held back), by family, endpoint, model (catalogue names; other) and reason (a status, reset, refused, timeout, first_token_timeout, stream_error, stream_incomplete, malformed_event, context_length, budget_spent, stream_broken_midway).',
      ['family', 'endpoint', 'model', 'reason'],
    ),
    affinity: m.counter(
      'gw_affinity_total',
      'Requests placed by conversation affinity, by outcome: hit (its conversation\'s endpoint answered), moved (another did; reason: least_loaded, overloaded, failover, a state such as offline or busy, no_free_slot, retry_after) or none (no key: no session header and no conversation opening in the body; reason "-").',
      ['family', 'route', 'outcome', 'reason'],
    ),
    continuations: m.counter(
      'gw_stream_continuations_total',
      'Streams that broke after their content reached the client, by how it ended: continued (another candidate finished the answer), failed (none could), not_continuable (it broke inside a tool call or its reasoning).',
      ['family', 'route', 'outcome'],
    ),
    fallbacks: m.counter('gw_fallbacks_total', 'Requests answered by a fallback model (model_fallbacks, ordered aliases).', ['family', 'route']),
    errors: m.counter('gw_errors_total', 'Requests answered with a gateway error (or broken off by one), by route and code (table codes; other).', [
      'route',
      'code',
    ]),
    routing: m.counter('gw_routing_decisions_total', 'How model-aware routing decided, by family, strategy and decision (routed, fallback, rejected).', [
      'family',
      'strategy',
      'decision',
    ]),
  };
}

export type Instruments = ReturnType<typeof instruments>;

/** A catalogue name for a label, or `other`: clients choose model names, labels must stay few. */
export function modelLabel(catalogue: Catalogue, model: string | undefined): string {
  if (!model) return 'none';
  return catalogue.find(model)?.value.id ?? 'other';
}

/** modelLabel remembered per name until the catalogue changes (a step that labels every request):
 *  at most MEMO_MAX names, since clients choose them. */
const MEMO_MAX = 1024;
export function modelLabeler(catalogue: Catalogue): (model: string | undefined) => string {
  const memo = new Map<string, string>();
  let version = catalogue.version;
  return (model) => {
    if (!model) return 'none';
    if (catalogue.version !== version) {
      memo.clear();
      version = catalogue.version;
    }
    let label = memo.get(model);
    if (label === undefined) {
      label = modelLabel(catalogue, model);
      if (memo.size < MEMO_MAX) memo.set(model, label);
    }
    return label;
  };
}
