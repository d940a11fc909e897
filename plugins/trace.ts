// OpenTelemetry spans for a request (tracing on: engine/backends/tracing.ts): one SERVER span for
// the request, continuing the caller's traceparent, and one CLIENT span per upstream attempt,
// named and attributed by the GenAI conventions, each sending its own traceparent to the engine.
// Retries, fallbacks and continuations are attempts of their own, with the reason; a request
// refused before any attempt (a limit, a scope, open breakers) is a SERVER span with error.type.
// Everything is read from what the kernel and the attempt loop keep anyway (ctx.attempt); with
// tracing off this step taps nothing.
import { contextHeaders, definePlugin, GatewayError, type Context, type FailedAttempt, type TraceSpan, type UpstreamRequest } from '../engine/api.js';
import { outcomeKind } from './reports/outcome-kind.js';
import { affinityOutcome } from './routing/affinity.js';
import { operationOf, providerOf, serverOf } from './tracing/genai.js';

/** The common methods as literals: Node's request method is a string V8 may have made a
 *  ThinString, which makes a span's joined text two bytes a character (measured: +8 k
 *  instructions per request). */
const METHODS: Record<string, string> = { GET: 'GET', POST: 'POST', PUT: 'PUT', DELETE: 'DELETE', HEAD: 'HEAD', OPTIONS: 'OPTIONS', PATCH: 'PATCH' };
/** Of a captured prompt, the characters kept on a span. */
const CONTENT_MAX = 16_384;

interface RequestTrace {
  server: TraceSpan;
  /** Sampled: its spans are recorded and exported (else only its context is sent on). */
  recording: boolean;
  /** Not sampled: the context headers every attempt sends, made once. */
  context?: string[];
  /** The attempt under way, its start (performance.now()) and how many failures were known when it began. */
  client: TraceSpan | null;
  clientStart: number;
  failuresBefore: number;
  continued: number;
  firstModel: string | undefined;
}

export default definePlugin<Record<string, never>>({
  name: 'trace',
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const tracer = env.tracer;
    if (!tracer) return;
    const traces = new WeakMap<Context, RequestTrace>();
    const begin = (ctx: Context): RequestTrace => {
      const route = ctx.route.prefix ? `${ctx.route.prefix}/*` : ctx.requestPath;
      const method = METHODS[ctx.method] ?? ctx.method;
      const server = tracer.server(`${method} ${route}`, ctx.start, ctx.headers);
      // A trace the sampler left out still sends its context on, and does nothing more.
      const recording = server.recording;
      if (recording) {
        server.set('http.request.method', method);
        server.set('url.path', ctx.requestPath);
        server.set('http.route', route);
        server.set('gw.request_id', ctx.id);
        ctx.traceId = server.traceId;
      }
      const t: RequestTrace = { server, recording, client: null, clientStart: 0, failuresBefore: 0, continued: 0, firstModel: undefined };
      traces.set(ctx, t);
      return t;
    };

    // First in the request's life that this step sees: the trace id is known to every later step
    // (and to the attempt loop, which counts tokens for the spans while a trace is on).
    hooks.request.tap('trace', (ctx) => void begin(ctx));

    hooks.upstream.tap('trace', (ctx, up) => {
      const t = traces.get(ctx) ?? begin(ctx);
      if (!t.recording) return sendContext(ctx, up, (t.context ??= contextHeaders(t.server)));
      const rec = ctx.attempt;
      if (t.client) endFailed(ctx, t);
      const ep = ctx.endpoint!;
      const model = rec.model ?? ctx.model;
      const op = operationOf(up.path);
      const span = tracer.client(t.server, op ? `${op} ${model ?? ''}`.trimEnd() : up.method);
      const { address, port } = serverOf(ep);
      span.set('gen_ai.provider.name', providerOf(ep.family));
      span.set('server.address', address);
      span.set('server.port', port);
      span.set('gw.endpoint', ep.name);
      span.set('gw.attempt', rec.count);
      // The path the engine was sent, where it is not the client's (a translation, a family's own path).
      if (up.path !== ctx.path) span.set('url.path', up.path);
      if (op) span.set('gen_ai.operation.name', op);
      if (model !== undefined) span.set('gen_ai.request.model', model);
      const reason = reasonOf(t, rec.count, rec.continued, model);
      if (reason) span.set('gw.attempt.reason', reason);
      if (tracer.captureContent && op) captureInput(ctx, span);
      if (t.firstModel === undefined) t.firstModel = model;
      t.continued = rec.continued;
      t.client = span;
      t.clientStart = performance.now();
      t.failuresBefore = rec.tried?.length ?? 0;
      sendContext(ctx, up, contextHeaders(span));
    });

    hooks.done.tap('trace', (ctx) => {
      const t = traces.get(ctx) ?? begin(ctx);
      if (!t.recording) return;
      const end = ctx.start + ctx.totalMs;
      if (t.client) endLast(ctx, t, end);
      finishServer(ctx, t.server);
      t.server.end(end);
    });
  },
});

/** Why an attempt after the first is made: a continuation of a broken stream, another model
 *  (a fallback), or the same model again (a retry or failover). */
function reasonOf(t: RequestTrace, count: number, continued: number, model: string | undefined): string | undefined {
  if (continued > t.continued) return 'continuation';
  if (count <= 1) return undefined;
  return model !== t.firstModel ? 'fallback' : 'retry';
}

/** The attempt before this one failed: its span ends when it did, with how. */
function endFailed(ctx: Context, t: RequestTrace): void {
  const failed = ctx.attempt.tried?.[t.failuresBefore];
  const span = t.client!;
  if (failed) markFailed(span, failed);
  // When it failed (kept in whole milliseconds: never later than now, when the next one begins).
  const now = performance.now();
  span.end(failed ? Math.min(now, Math.max(t.clientStart, ctx.start + failed.atMs)) : now);
  t.client = null;
}

function markFailed(span: TraceSpan, failed: FailedAttempt): void {
  const kind = outcomeKind(failed.outcome);
  span.set('error.type', kind);
  span.set('gw.attempt.outcome', failed.outcome);
  if (/^\d{3}$/.test(kind)) span.set('http.response.status_code', Number(kind));
  span.fail(failed.outcome);
}

/** The last attempt: what it answered (or how it failed), its tokens and its first chunk. */
function endLast(ctx: Context, t: RequestTrace, end: number): void {
  const span = t.client!;
  const rec = ctx.attempt;
  const failed = rec.tried?.[t.failuresBefore];
  if (failed) markFailed(span, failed);
  else {
    if (ctx.status > 0) span.set('http.response.status_code', ctx.status);
    markReplyError(span, ctx);
  }
  if (rec.firstChunkMs > 0 && rec.streamed) span.set('gw.time_to_first_chunk_ms', Math.round(Math.max(0, ctx.start + rec.firstChunkMs - t.clientStart)));
  setUsage(span, ctx);
  if (rec.continuation) span.set('gw.continuation', rec.continuation);
  span.end(Math.max(t.clientStart, end));
}

function setUsage(span: TraceSpan, ctx: Context): void {
  const usage = ctx.attempt.usage;
  const finish = ctx.attempt.finishReasons;
  if (finish) span.set('gen_ai.response.finish_reasons', finish);
  if (usage) {
    span.set('gen_ai.usage.input_tokens', usage.input);
    span.set('gen_ai.usage.output_tokens', usage.output);
    if (usage.cachedInput) span.set('gen_ai.usage.cache_read.input_tokens', usage.cachedInput);
    if (usage.reasoning) span.set('gen_ai.usage.reasoning.output_tokens', usage.reasoning);
    if (usage.estimated) span.set('gw.usage.estimated_tokens', usage.estimated);
    return;
  }
  const read = ctx.usage;
  if (read?.input !== undefined) span.set('gen_ai.usage.input_tokens', read.input);
  if (read?.output !== undefined) span.set('gen_ai.usage.output_tokens', read.output);
}

/** The request's outcome on its SERVER span: status, who called, where routing sent it, and why
 *  it was refused when it was. */
function finishServer(ctx: Context, span: TraceSpan): void {
  const rec = ctx.attempt;
  if (ctx.status > 0) span.set('http.response.status_code', ctx.status);
  if (ctx.caller) span.set('gw.key', ctx.caller.name);
  const model = ctx.requested?.requested ?? ctx.model;
  if (model !== undefined) span.set('gen_ai.request.model', model);
  if (rec.count) span.set('gw.attempts', rec.count);
  // Routing's decision; its strategy and reason when it did more than route (the common case is
  // said by its absence: every attribute is bytes in every export).
  const routing = ctx.routing;
  if (routing) {
    span.set('gw.routing.decision', routing.decision);
    if (routing.decision !== 'routed') {
      span.set('gw.routing.strategy', routing.strategy);
      span.set('gw.routing.reason', routing.reason);
    }
  }
  const affinity = ctx.plan?.affinity;
  if (affinity) span.set('gw.affinity', affinityOutcome(affinity, ctx.endpoint));
  if (ctx.endpoint) span.set('gw.endpoint', ctx.endpoint.name);
  // Tokens and finish reasons are the attempts' (the conventions' GenAI spans); a request that
  // made none reports what a step read itself.
  if (rec.count === 0) setUsage(span, ctx);
  const err = ctx.error;
  if (err instanceof GatewayError) {
    span.set('error.type', err.key);
    span.fail(err.message);
  } else markReplyError(span, ctx);
}

/** A reply that broke off after its head, or a 5xx: the span's error. */
function markReplyError(span: TraceSpan, ctx: Context): void {
  if (ctx.status < 500 && !ctx.brokeOff) return;
  span.set('error.type', ctx.brokeOff ? 'stream_broken' : String(ctx.status));
  span.fail();
}

/** The trace context an attempt sends (its own span's; a trace left out of sampling: the
 *  request's, for every attempt), in place of what the client sent. */
function sendContext(ctx: Context, up: UpstreamRequest, context: readonly string[]): void {
  const h = up.headers;
  // The client's own trace headers, where it sent some (else there is nothing to look for).
  if (ctx.headers.traceparent !== undefined || ctx.headers.tracestate !== undefined)
    for (let i = h.length - 2; i >= 0; i -= 2) {
      const name = h[i].toLowerCase();
      if (name === 'traceparent' || name === 'tracestate') h.splice(i, 2);
    }
  for (let i = 0; i < context.length; i++) h.push(context[i]);
}

/** The prompt, when content capture is on: the body's messages (or prompt/input), as JSON text. */
function captureInput(ctx: Context, span: TraceSpan): void {
  const body = ctx.bodyJson() as Record<string, unknown> | undefined;
  if (!body || typeof body !== 'object') return;
  const input = body.messages ?? body.input ?? body.prompt;
  if (input === undefined) return;
  const text = typeof input === 'string' ? JSON.stringify([{ role: 'user', content: input }]) : JSON.stringify(input);
  span.set('gen_ai.input.messages', text.length > CONTENT_MAX ? text.slice(0, CONTENT_MAX) : text);
  if (typeof body.system === 'string') span.set('gen_ai.system_instructions', body.system.slice(0, CONTENT_MAX));
}
