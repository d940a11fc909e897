// The terminal step of the routes that answer an API over every family (the messages API at
// /gw/msgapi/v1/messages, the Responses API at /gw/openai/v1/responses and where a family's engine
// lacks it): per candidate endpoint, natively when its engine speaks the API (the translator's
// way(): the original bytes, nearly, to the engine's path, X-Gw-Mode: passthrough), else
// translated to chat-completions at its chat path, without the API's own headers, and the reply
// translated back. Routing, aliases, balancing, failover and gateway headers are those of the
// proxy routes. What each API needs is its translator's (apis/api-translator.ts).
import {
  ClientGone,
  definePlugin,
  GatewayError,
  retrySettings,
  sendUpstream,
  withModel,
  type Context,
  type Endpoint,
  type PluginEnv,
  type SendPolicy,
  type UpstreamRequest,
} from '../engine/api.js';
import type { ApiTranslator, Fallback, Mode } from './apis/api-translator.js';
import type { ReplyOptions } from './apis/chat-reply-plan.js';
import { msgapiTranslator } from './apis/msgapi/translator.js';
import { responsesTranslator } from './apis/responses/translator.js';
import { INFERENCE_API } from './apis/inference-api.js';
import { continuationApi, continuationKind, continued, type AnswerText } from './apis/continuation/index.js';

type Api = 'msgapi' | 'responses';
interface Options {
  api: Api;
  passthrough?: boolean;
  max_retries?: number;
  name?: string;
}
interface TranslateState {
  mode?: Mode;
  fallback?: Fallback;
  stream?: boolean;
  malformed?: number;
  prepared?: ReplyOptions;
}

const TRANSLATORS: Record<Api, (env: PluginEnv, passthrough: boolean) => ApiTranslator<any>> = { msgapi: msgapiTranslator, responses: responsesTranslator };

export default definePlugin<Options>({
  name: 'translate',
  needs: ['messages-request', 'candidates'],
  uses: ['aliases'],
  terminal: true,
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      api: { enum: ['msgapi', 'responses'], default: 'msgapi', description: 'The API the route answers in: the messages API, or the Responses API' },
      passthrough: {
        type: 'boolean',
        description: 'Send natively to endpoints whose engine speaks the API (false: always translate). Default: translators.<api>.passthrough',
      },
      max_retries: { type: 'integer', minimum: 0, description: 'Default: proxy.max_retries' },
      name: { type: 'string', description: 'Translator name in /internal/stats/translators. Default: the api' },
    },
  },
  apply(hooks, o, env) {
    const maxRetries = o.max_retries ?? env.config.proxy.max_retries;
    const passthrough = o.passthrough ?? env.config.translators[o.api].passthrough;
    const api = TRANSLATORS[o.api](env, passthrough);
    const counters = env.stats.translator(o.name ?? o.api);
    const state = (ctx: { state: Record<string, unknown> }) => (ctx.state.translate ??= {}) as TranslateState;

    /** The first translated attempt checks the request (a 400 naming the field) and fixes what
     *  the reply translation needs; later attempts reuse it. */
    const preparedFor = (ctx: Context, st: TranslateState) =>
      (st.prepared ??= api.prepare(ctx, {
        stream: st.stream === true,
        onMalformed: (n) => (st.malformed = (st.malformed ?? 0) + n),
        onUsage: (usage) => (ctx.usage = usage),
      }));

    /** The chat-completions request for one endpoint; what it drops is logged once, at debug. */
    const chatRequest = (ctx: Context, ep: Endpoint, model: string | undefined, st: TranslateState): UpstreamRequest => {
      const first = !st.prepared;
      const prepared = preparedFor(ctx, st);
      const log = ctx.route.log;
      const dropped = first && log.isLevelEnabled('debug') ? ([] as string[]) : undefined;
      const chat = api.chatBody(ctx, ep, model, prepared, dropped);
      if (dropped?.length) log.debug({ req: ctx.id, endpoint: ep.name, dropped }, 'translation to chat-completions dropped what it cannot carry');
      return {
        method: 'POST',
        path: ep.upstreamPath(chatPath(ep)),
        headers: [],
        body: Buffer.from(JSON.stringify(chat)),
        omitClientHeader: api.omitClientHeader,
      };
    };
    const chatPath = (ep: Endpoint) => ep.profile.request.parsing_rules?.chat_completions_path ?? '/v1/chat/completions';
    /** The path an endpoint is sent this request at: the API's own, or its chat path. */
    const upstreamRoute = (ep: Endpoint) => {
      const way = api.way(ep);
      return way.mode === 'passthrough' ? way.path : chatPath(ep);
    };

    const policy: SendPolicy<Context> = {
      maxRetries,
      retry: retrySettings(env),
      api: INFERENCE_API,
      // Inference: replay-safe on every endpoint.
      replaySafe: () => true,
      streaming: (ctx) => state(ctx).stream === true,
      request: (ctx, ep, model) => {
        const st = state(ctx);
        const way = api.way(ep);
        st.mode = way.mode;
        st.fallback = way.mode === 'translation' ? way.fallback : undefined;
        if (way.mode === 'translation') return chatRequest(ctx, ep, model, st);
        return { method: 'POST', path: ep.upstreamPath(way.path), headers: [], body: withModel(api.nativeBody(ctx, ep), model, ctx) };
      },
      reply: (ctx, status, headers) => {
        const st = state(ctx);
        return st.mode === 'passthrough' ? api.nativeReply(status, headers) : api.reply(st.prepared!, status, headers);
      },
      // A broken stream is continued in the API the endpoint is spoken to in: its own (where the
      // profile says how), or a chat continuation whose events the translation reads on, as if
      // they were the broken stream's.
      continuation: (_ctx, ep) => continuationApi(continuationKind(ep.profile, upstreamRoute(ep))),
      continueRequest: (ctx, ep, model, answer) => {
        const kind = continuationKind(ep.profile, upstreamRoute(ep))!;
        const up = policy.request(ctx, ep, model);
        const c = continued(kind, JSON.parse(up.body!.toString('utf8')), answer as AnswerText, ep.profile);
        if (typeof c === 'string') return c;
        return { ...up, body: Buffer.from(JSON.stringify(c.body)) };
      },
    };

    hooks.dispatch.tapPromise('translate', async (ctx) => {
      state(ctx).stream = (ctx.bodyJson() as { stream?: unknown }).stream === true;
      return sendUpstream(ctx, policy);
    });

    hooks.respond.tap('translate', (ctx) => {
      if (state(ctx).mode === 'passthrough') ctx.replyHeaders.push('x-gw-mode', 'passthrough');
    });

    hooks.done.tap('translate', (ctx) => {
      const st = state(ctx);
      counters.total++;
      counters.totalLatencyMs += ctx.totalMs;
      if (st.stream) counters.streaming++;
      else counters.nonStreaming++;
      if (st.mode === 'passthrough') counters.passthrough++;
      else if (st.mode === 'translation') counters.translation++;
      if (st.fallback === 'cannot') counters.fallbackCannotPassthrough++;
      if (st.fallback === 'translator') counters.fallbackTranslatorDoesNotSupportPassthrough++;
      counters.malformedChunks += st.malformed ?? 0;
      const err = ctx.error;
      if (err instanceof GatewayError && ['ENDPOINT_UNAVAILABLE', 'MODEL_NOT_FOUND', 'MODEL_UNAVAILABLE', 'CIRCUIT_BREAKER'].includes(err.key))
        counters.fallbackNoCompatibleEndpoints++;
      if (ctx.status > 0 && ctx.status < 400 && !(err && !(err instanceof ClientGone))) counters.succeeded++;
      else counters.failed++;
    });
  },
});
