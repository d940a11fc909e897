// The public plugin API: what every plugin imports — the built-in steps (plugins/) exactly as a
// third party's plugin does (`inference-gateway`, which resolves to the running gateway wherever
// the plugin is: kernel/plugin-imports.ts). A test fails when a built-in reaches past this file
// into the engine, so a third-party plugin can do whatever a built-in does.
// A plugin is one object { name, schema, apply(hooks, options, env) }: see
// docs/reference/pipelines-and-plugins.md, "Writing a plugin".

// The contract: the plugin, the hooks it taps, and what it is handed when applied (env: the
// configuration and the backends' state, which outlive a reload).
export { definePlugin, type Facts, type Plugin, type PluginEnv } from './kernel/plugin.js';
export type { Hooks } from './kernel/hooks.js';
export type { ReloadStatus, Runtime } from './kernel/runtime.js';

// One request as a step sees it: the kernel's fields read-only, the attempt record read-only.
export type { Caller, Context, FailedAttempt, RouteInfo, UpstreamRequest } from './kernel/context.js';

// The route plan: where a request may go, written once by endpoint selection.
export {
  PlanBuilder,
  planOf,
  rejectedPlan,
  type AffinityNote,
  type Candidate,
  type ModelRoute,
  type NameGroup,
  type RoutePlan,
  type RoutingInfo,
  type Why,
} from './routing/plan.js';

// The one way upstream (the attempt loop: failover, retries, continuation) and a terminal step's
// policy for it; how a reply is shaped on its way back; several endpoints asked at once.
export {
  backendHeaders,
  retrySettings,
  sendUpstream,
  type ApiShape,
  type PipePlan,
  type ReplyPlan,
  type RetrySettings,
  type SendPolicy,
} from './kernel/upstream.js';
export { PIPE } from './routing/reply.js';
export { askEach } from './kernel/fan-out.js';
export { askEndpoint } from './backends/json-reply.js';

// Stream shapes: how an API's events read (first content, terminator, error), and how a stream
// broken after its content is continued elsewhere (SendPolicy.continuation).
export type { EventKind, StreamShape } from './routing/stream-watch.js';
// Token usage: how an API's replies report it (ApiShape.usage), what a request used (ctx.attempt.usage).
export { tokensIn, type Reported, type Usage, type UsageShape } from './routing/usage.js';
export type { StreamEvent } from './routing/stream-events.js';
export type { ContinuationApi, Transcript } from './routing/continuation.js';

// Replies and errors: one table of codes, one renderer (the route's error format).
export { ERROR_CODES, GatewayError, gwError, msgapiErrorType, refuse, type ErrorKey } from './core/errors.js';
export { ClientGone } from './backends/failures.js';
export { clip, echo } from './core/head.js';
export { isObject, type JsonObject, type ReplyHeaders } from './core/json.js';
export { rateLimitHeaders, type Whom } from './routing/admission.js';
export { contextHeaders, type GatewayTracer, type TraceSpan } from './backends/tracing.js';

// The backends' state, as plugins read it: endpoints (a read view), queues, the catalogue, the
// counters and metrics, the rate limits' buckets.
export type { EndpointView as Endpoint, HealthState } from './backends/endpoints.js';
export type { EndpointQueue, QueueCounts } from './backends/queue.js';
export type { TurnCounts } from './backends/model-turns.js';
export type { Placements } from './backends/placements.js';
export { indexModels, type Catalogue, type CatalogueModel } from './backends/catalogue.js';
export type { DiscoveredModel } from './backends/model-lists.js';
export { NameIndex } from './backends/model-names.js';
export { HostStats, type Outcome, type Stats, type TranslatorCounters } from './backends/telemetry.js';
export type { CounterCell, HistogramSeries, Metrics, Sample } from './backends/metrics.js';
export type { LimitScope, Rate, RateBuckets, SharedTake, Take, TakeAnswer, Taker } from './backends/rate-buckets.js';
export type { UsageBooks } from './backends/usage-books.js';
export {
  zeroCounters,
  type Admission,
  type Budget,
  type Counters,
  type KeyReport,
  type LimitName,
  type Refusal,
  type Spent,
  type TokenLimits,
} from './backends/usage-ledger.js';

// Configuration and profiles (loaded, validated and frozen before any plugin sees them).
export { configValue, type GatewayConfig } from './core/config.js';
export { expiryOf, keyHash, type ApiKeyConfig, type KeysConfig, type TokenLimitsConfig } from './core/keys.js';
export type { ContinuationKind, Intercept, Profile } from './core/profiles.js';
export { mountedPrefixes } from './core/profiles.js';
export { globRegExp, nameMatches } from './core/pipelines.js';
export { familyPath } from './core/family-paths.js';

// Small tools the built-ins share: durations, the body's model, hashes, path patterns, addresses.
export { formatDuration, parseDuration } from './core/duration.js';
export { findModelField, modelKeys, replaceModel, topLevelValues, withModel, type ModelField } from './core/body-model.js';
export { fnv1a36 } from './core/hash.js';
export { compilePattern, isPattern, matchPattern, PathSet, type PathPattern } from './core/path-patterns.js';
export { canonicalAddress, compileCidrs, parseCidr } from './core/cidr.js';
export { PACKAGE_ROOT } from './core/paths.js';
export { sourceCommit } from './core/source-commit.js';
