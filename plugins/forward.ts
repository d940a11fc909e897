// The terminal step of the proxy routes, as a policy for the attempt loop: the request goes as it
// came (prefix stripped), the reply comes back as the backend sent it. Failover and what may be
// sent twice (the profile's api.replay_safe_paths) are the routing layer's: engine/routing/.
// Inference streams are watched by what apis/inference-api.ts says of them.
// Two profile-declared touches to the reply, both off unless the endpoint's profile asks:
// api.error_context annotates JSON error bodies (replies/error-context.ts); api.radix_headers adds
// the X-Radix-* headers (replies/radix-headers.ts). Success bodies are never changed.
import { definePlugin, familyPath, PIPE, retrySettings, sendUpstream, withModel, type Context, type Endpoint, type SendPolicy } from '../engine/api.js';
import { continuationApi, continuationKind, continued, type AnswerText } from './apis/continuation/index.js';
import { errorContextPlan } from './replies/error-context.js';
import { INFERENCE_API } from './apis/inference-api.js';
import { bodyAskingUsage, dropUsageEvent, usageAsked } from './apis/stream-usage.js';
import { RadixHeaders } from './replies/radix-headers.js';

interface Options {
  max_retries?: number;
  family_paths: boolean;
}

/** The body asks for a stream (`"stream": true`), or says nothing on a route that streams by
 *  default. Parses the body: asked only when a first-token deadline applies. */
function streamRequested(ctx: Context, streamDefault: ReadonlySet<string>): boolean {
  const stream = (ctx.bodyJson() as { stream?: unknown } | undefined)?.stream;
  return stream === undefined ? streamDefault.has(ctx.pathname) : stream === true;
}

export default definePlugin<Options>({
  name: 'forward',
  needs: ['path', 'body', 'candidates'],
  terminal: true,
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      max_retries: { type: 'integer', minimum: 0, description: 'Default: proxy.max_retries' },
      family_paths: {
        type: 'boolean',
        default: false,
        description:
          "The path is an OpenAI route, sent to each endpoint where its family serves it (engine/core/family-paths.ts; with select-endpoint's by_route: /gw/openai/v1)",
      },
    },
  },
  apply(hooks, o, env) {
    const { catalogue } = env;
    // By the endpoint's profile: the generic proxy route reaches every family.
    const radix = new RadixHeaders(env.profile ? [env.profile] : env.profiles.list, catalogue);
    const policy: SendPolicy<Context> = {
      maxRetries: o.max_retries ?? env.config.proxy.max_retries,
      retry: retrySettings(env),
      api: INFERENCE_API,
      streaming: (ctx) => streamRequested(ctx, streamDefault),
      replaySafe: (ctx, ep) => ep.replaySafe(ctx.method, sentPathname(ctx, ep)),
      queued: (ctx, ep) => ep.takesSlot(sentPathname(ctx, ep)),
      // Inference streams are watched; a model pull's progress is piped as it comes.
      watched: (ctx, ep) => ep.takesSlot(sentPathname(ctx, ep)),
      // Sent as it came, asking for the model routing chose for this endpoint (an alias's real name, a fallback).
      // While tokens are counted, a chat stream is asked for its usage where the engine can report it.
      request: (ctx, ep, model) => ({
        method: ctx.method,
        path: ep.upstreamPath(sentPath(ctx, ep)),
        headers: [],
        body: bodyAskingUsage(ctx, ep, sentPathname(ctx, ep), model) ?? withModel(ctx.body, model, ctx),
      }),
      reply: (ctx, status, headers) => {
        const plan = errorContextPlan(ctx, status, headers, catalogue) ?? radix.plan(ctx, status, headers);
        if (status !== 200 || !usageAsked(ctx, ctx.endpoint)) return plan;
        return plan === undefined || plan.kind === 'pipe' ? dropUsageEvent(plan ?? PIPE) : plan;
      },
      // A stream that breaks after its content: the route's API per the endpoint's profile.
      continuation: (ctx, ep) => continuationApi(continuationKind(ep.profile, sentPathname(ctx, ep))),
      continueRequest: (ctx, ep, model, answer) => {
        const c = continued(continuationKind(ep.profile, sentPathname(ctx, ep))!, ctx.bodyJson(), answer as AnswerText, ep.profile);
        if (typeof c === 'string') return c;
        return {
          method: ctx.method,
          path: ep.upstreamPath(c.path ?? sentPath(ctx, ep)),
          headers: [],
          body: withModel(Buffer.from(JSON.stringify(c.body)), model),
        };
      },
    };
    const streamDefault = new Set(env.profile?.request.stream_default_paths);
    /** The path an endpoint is sent: as it came, or (family_paths) where its family serves the
     *  route — select-endpoint's by_route left out the endpoints whose family does not. */
    const sentPathname = (ctx: Context, ep: Endpoint): string => (o.family_paths ? (familyPath(ep.profile, ctx.pathname) ?? ctx.pathname) : ctx.pathname);
    const sentPath = (ctx: Context, ep: Endpoint): string => (o.family_paths ? sentPathname(ctx, ep) + ctx.path.slice(ctx.pathname.length) : ctx.path);
    hooks.dispatch.tapPromise('forward', (ctx) => sendUpstream(ctx, policy));
  },
});
