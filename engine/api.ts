// The plugin API: what a third-party plugin imports from the package (`inference-gateway`), which
// resolves to the running gateway wherever the plugin is (kernel/plugin-imports.ts).
// A plugin is one object { name, schema, apply(hooks, options, env) }; see README "Writing a plugin".
export { definePlugin, type Facts, type Plugin, type PluginEnv } from './kernel/plugin.js';
export type { Hooks } from './kernel/hooks.js';
export type { Candidate, Context, RouteInfo, RoutePlan, RoutingInfo, UpstreamRequest } from './kernel/context.js';
export { GatewayError, refuse } from './core/errors.js';
export { isObject, type JsonObject, type ReplyHeaders } from './core/json.js';
export { sendUpstream, type ReplyPlan, type SendPolicy } from './kernel/upstream.js';
export type { Endpoint } from './backends/endpoints.js';
// A terminal step whose streams may be continued elsewhere after a break (SendPolicy.continuation).
export type { ContinuationApi, Transcript } from './routing/continuation.js';
export type { StreamEvent } from './routing/stream-events.js';
