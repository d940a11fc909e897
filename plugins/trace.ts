// OpenTelemetry spans for a request (tracing on: engine/backends/tracing.ts): one SERVER span for
// the request, continuing the caller's traceparent, and one CLIENT span per upstream attempt,
// named and attributed by the GenAI conventions, each sending its own traceparent to the engine.
// Retries, fallbacks and continuations are attempts of their own, with the reason; a request
// refused before any attempt (a limit, a scope, open breakers) is a SERVER span with error.type.
// Everything is read from what the kernel and the attempt loop keep anyway (ctx.attempt); with
// tracing off this step taps nothing.
import type { Span } from '@opentelemetry/api';
import { definePlugin, GatewayError, type Context, type FailedAttempt, type UpstreamRequest } from '../engine/api.js';
import { outcomeKind } from './reports/outcome-kind.js';
import { affinityOutcome } from './routing/affinity.js';
import { operationOf, providerOf, serverOf } from './tracing/genai.js';

/** SpanStatusCode.ERROR (the API's enum, not imported: with tracing off no OpenTelemetry code loads). */
const ERROR = 2;
/** Of a captured prompt, the characters kept on a span. */
const CONTENT_MAX = 16_384;

interface RequestTrace {
  server: Span;
  /** Sampled: its spans are recorded and exported (else only its context is sent on). */
  recording: boolean;
  /** Not sampled: the context headers every attempt sends, made once. */
  context?: string[];
  /** The attempt under way, its start (performance.now()) and how many failures were known when it began. */
  client: Span | null;
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
      const server = tracer.server(`${ctx.method} ${route}`, ctx.start, ctx.headers);
      // A trace the sampler left out still sends its context on, and does nothing more.
      const recording = server.isRecording();
      if (recording) {
        server.setAttributes({ 'http.request.method': ctx.method, 'url.path': ctx.requestPath, 'http.route': route, 'gw.request_id': ctx.id });
        ctx.traceId = server.spanContext().traceId;
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
      if (!t.recording) return sendContext(up, (t.context ??= tracer.contextHeaders(t.server)));
      const rec = ctx.attempt;
      if (t.client) endFailed(ctx, t);
      const ep = ctx.endpoint!;
      const model = rec.model ?? ctx.model;
      const op = operationOf(up.path);
      const span = tracer.client(t.server, op ? `${op} ${model ?? ''}`.trimEnd() : up.method);
      const { address, port } = serverOf(ep);
      span.setAttributes({
        'gen_ai.provider.name': providerOf(ep.family),
        'server.address': address,
        'server.port': port,
        'gw.endpoint': ep.name,
        'gw.attempt': rec.count,
      });
      // The path the engine was sent, where it is not the client's (a translation, a family's own path).
      if (up.path !== ctx.path) span.setAttribute('url.path', up.path);
      if (op) span.setAttribute('gen_ai.operation.name', op);
      if (model !== undefined) span.setAttribute('gen_ai.request.model', model);
      const reason = reasonOf(t, rec.count, rec.continued, model);
      if (reason) span.setAttribute('gw.attempt.reason', reason);
      if (tracer.captureContent && op) captureInput(ctx, span);
      if (t.firstModel === undefined) t.firstModel = model;
      t.continued = rec.continued;
      t.client = span;
      t.clientStart = performance.now();
      t.failuresBefore = rec.tried?.length ?? 0;
      sendContext(up, tracer.contextHeaders(span));
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
  span.end(failed ? Math.max(t.clientStart, ctx.start + failed.atMs) : performance.now());
  t.client = null;
}

function markFailed(span: Span, failed: FailedAttempt): void {
  const kind = outcomeKind(failed.outcome);
  span.setAttributes({ 'error.type': kind, 'gw.attempt.outcome': failed.outcome });
  if (/^\d{3}$/.test(kind)) span.setAttribute('http.response.status_code', Number(kind));
  span.setStatus({ code: ERROR, message: failed.outcome });
}

/** The last attempt: what it answered (or how it failed), its tokens and its first chunk. */
function endLast(ctx: Context, t: RequestTrace, end: number): void {
  const span = t.client!;
  const rec = ctx.attempt;
  const failed = rec.tried?.[t.failuresBefore];
  if (failed) markFailed(span, failed);
  else {
    if (ctx.status > 0) span.setAttribute('http.response.status_code', ctx.status);
    markReplyError(span, ctx);
  }
  if (rec.firstChunkMs > 0 && rec.streamed)
    span.setAttribute('gw.time_to_first_chunk_ms', Math.round(Math.max(0, ctx.start + rec.firstChunkMs - t.clientStart)));
  setUsage(span, ctx);
  if (rec.continuation) span.setAttribute('gw.continuation', rec.continuation);
  span.end(Math.max(t.clientStart, end));
}

function setUsage(span: Span, ctx: Context): void {
  const usage = ctx.attempt.usage;
  const finish = ctx.attempt.finishReasons;
  if (finish) span.setAttribute('gen_ai.response.finish_reasons', finish);
  if (usage) {
    span.setAttributes({ 'gen_ai.usage.input_tokens': usage.input, 'gen_ai.usage.output_tokens': usage.output });
    if (usage.cachedInput) span.setAttribute('gen_ai.usage.cache_read.input_tokens', usage.cachedInput);
    if (usage.reasoning) span.setAttribute('gen_ai.usage.reasoning.output_tokens', usage.reasoning);
    if (usage.estimated) span.setAttribute('gw.usage.estimated_tokens', usage.estimated);
    return;
  }
  const read = ctx.usage;
  if (read?.input !== undefined) span.setAttribute('gen_ai.usage.input_tokens', read.input);
  if (read?.output !== undefined) span.setAttribute('gen_ai.usage.output_tokens', read.output);
}

/** The request's outcome on its SERVER span: status, who called, where routing sent it, and why
 *  it was refused when it was. */
function finishServer(ctx: Context, span: Span): void {
  const rec = ctx.attempt;
  if (ctx.status > 0) span.setAttribute('http.response.status_code', ctx.status);
  if (ctx.caller) span.setAttribute('gw.key', ctx.caller.name);
  const model = ctx.requested?.requested ?? ctx.model;
  if (model !== undefined) span.setAttribute('gen_ai.request.model', model);
  if (rec.count) span.setAttribute('gw.attempts', rec.count);
  // Routing's decision; its strategy and reason when it did more than route (the common case is
  // said by its absence: every attribute is bytes in every export).
  const routing = ctx.routing;
  if (routing) {
    span.setAttribute('gw.routing.decision', routing.decision);
    if (routing.decision !== 'routed') span.setAttributes({ 'gw.routing.strategy': routing.strategy, 'gw.routing.reason': routing.reason });
  }
  const affinity = ctx.plan?.affinity;
  if (affinity) span.setAttribute('gw.affinity', affinityOutcome(affinity, ctx.endpoint));
  if (ctx.endpoint) span.setAttribute('gw.endpoint', ctx.endpoint.name);
  // Tokens and finish reasons are the attempts' (the conventions' GenAI spans); a request that
  // made none reports what a step read itself.
  if (rec.count === 0) setUsage(span, ctx);
  const err = ctx.error;
  if (err instanceof GatewayError) {
    span.setAttribute('error.type', err.key);
    span.setStatus({ code: ERROR, message: err.message });
  } else markReplyError(span, ctx);
}

/** A reply that broke off after its head, or a 5xx: the span's error. */
function markReplyError(span: Span, ctx: Context): void {
  if (ctx.status < 500 && !ctx.brokeOff) return;
  span.setAttribute('error.type', ctx.brokeOff ? 'stream_broken' : String(ctx.status));
  span.setStatus({ code: ERROR });
}

/** The trace context an attempt sends (its own span's; a trace left out of sampling: the
 *  request's, for every attempt), in place of what the client sent. */
function sendContext(up: UpstreamRequest, context: readonly string[]): void {
  const h = up.headers;
  for (let i = h.length - 2; i >= 0; i -= 2) {
    const name = h[i].toLowerCase();
    if (name === 'traceparent' || name === 'tracestate') h.splice(i, 2);
  }
  for (let i = 0; i < context.length; i++) h.push(context[i]);
}

/** The prompt, when content capture is on: the body's messages (or prompt/input), as JSON text. */
function captureInput(ctx: Context, span: Span): void {
  const body = ctx.bodyJson() as Record<string, unknown> | undefined;
  if (!body || typeof body !== 'object') return;
  const input = body.messages ?? body.input ?? body.prompt;
  if (input === undefined) return;
  const text = typeof input === 'string' ? JSON.stringify([{ role: 'user', content: input }]) : JSON.stringify(input);
  span.setAttribute('gen_ai.input.messages', text.length > CONTENT_MAX ? text.slice(0, CONTENT_MAX) : text);
  if (typeof body.system === 'string') span.setAttribute('gen_ai.system_instructions', body.system.slice(0, CONTENT_MAX));
}
