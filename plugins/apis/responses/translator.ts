// The Responses API over chat-completions engines (apis/api-translator.ts): natively to an
// endpoint whose engine serves /v1/responses (where engine/core/family-paths.ts finds it), else
// translated to chat-completions and back. `previous_response_id` is the bounded store's
// (store.ts, translators.responses.store): with it off, a translated request that names one is
// a 400 saying what to do; a native one goes to the engine as sent, unless the id is one this
// gateway stored, whose conversation is then sent as the input.
import { familyPath, gwError, parseDuration, PIPE, type Context, type PluginEnv } from '../../../engine/api.js';
import type { ApiTranslator } from '../api-translator.js';
import { chatReplyPlan, type ReplyOptions } from '../chat-reply-plan.js';
import { errorReply } from './errors.js';
import { estimateInputTokens, inputItems, requestProblem, toChatRequest } from './request.js';
import { shellOf, toResponse, type Shell } from './response.js';
import { ResponseStore, type StoreSettings } from './store.js';
import { eventsForResponse, ResponsesStreamTranslator } from './stream.js';
import type { InputItem, OutputItem, ResponsesRequest } from './types.js';

export interface ResponsesPrepared extends ReplyOptions {
  req: ResponsesRequest;
  /** The conversation's items: the stored ones before it, then the request's input. */
  items: InputItem[];
  shell: Shell;
  /** The stored response it continues. */
  parent: string | undefined;
}

// One store per gateway process, kept across config reloads (its limits follow the config).
const stores = new WeakMap<object, ResponseStore>();

function storeFor(env: PluginEnv): ResponseStore {
  const c = env.config.translators.responses.store;
  const settings: StoreSettings = { max_responses: c.max_responses, max_bytes: c.max_bytes, ttl: parseDuration(c.ttl) };
  let store = stores.get(env.stats);
  if (!store) stores.set(env.stats, (store = new ResponseStore(settings)));
  else store.configure(settings);
  return store;
}

const RESPONSES = '/v1/responses';

export function responsesTranslator(env: PluginEnv, passthrough: boolean): ApiTranslator<ResponsesPrepared> {
  const store = storeFor(env);
  /** The stored conversation a request continues, or undefined. */
  const previous = (ctx: Context): readonly InputItem[] | undefined => {
    const id = (ctx.bodyJson() as ResponsesRequest).previous_response_id;
    return typeof id === 'string' && store.enabled ? store.get(id) : undefined;
  };
  return {
    way(ep) {
      const path = familyPath(ep.profile, RESPONSES);
      if (path === undefined) return { mode: 'translation', fallback: 'cannot' };
      return passthrough ? { mode: 'passthrough', path } : { mode: 'translation', fallback: 'translator' };
    },
    nativeBody(ctx) {
      const before = previous(ctx);
      if (!before) return ctx.body;
      const { previous_response_id: _, ...req } = ctx.bodyJson() as ResponsesRequest;
      return Buffer.from(JSON.stringify({ ...req, input: [...before, ...inputItems(req as ResponsesRequest)] }));
    },
    nativeReply: () => PIPE,
    prepare(ctx, reply) {
      const req = ctx.bodyJson() as ResponsesRequest;
      const why = requestProblem(req as unknown as Record<string, unknown>);
      if (why) throw gwError('BAD_REQUEST', { reason: why });
      let before: readonly InputItem[] = [];
      let parent: string | undefined;
      if (typeof req.previous_response_id === 'string') {
        if (!store.enabled)
          throw gwError('BAD_REQUEST', {
            reason:
              'previous_response_id: this gateway keeps no responses (translators.responses.store.max_responses is 0); send the whole conversation as input, or enable the store',
          });
        const found = previous(ctx);
        if (!found)
          throw gwError('BAD_REQUEST', {
            reason: `previous_response_id: no stored response ${req.previous_response_id} (unknown, expired or evicted; responses are kept in this process only)`,
          });
        before = found;
        parent = req.previous_response_id;
      }
      const items = [...before, ...inputItems(req)];
      const stored = store.enabled && req.store !== false;
      return { ...reply, req, items, parent, shell: shellOf(req, () => estimateInputTokens(req, items), stored) };
    },
    chatBody(_ctx, ep, model, p, dropped) {
      return toChatRequest(p.req, p.items, {
        model: model ?? p.req.model,
        streamUsage: ep.profile.request.stream_usage,
        effortLevels: ep.profile.request.reasoning_effort,
        reasoningHistory: !ep.profile.characteristics.hosted_service,
        dropped,
      });
    },
    reply(p, status, headers) {
      const save = p.shell.stored ? (output: readonly OutputItem[]) => store.put(p.shell.id, p.parent, inputItems(p.req), output) : undefined;
      return chatReplyPlan(
        p,
        {
          stream: () => new ResponsesStreamTranslator(p.shell, save),
          whole: (reply, usage) => {
            const { json, output } = toResponse(reply as never, p.shell, usage);
            if (save && status < 300) save(output);
            return json;
          },
          eventsFor: (json) => eventsForResponse(JSON.parse(json)),
          error: errorReply,
        },
        status,
        headers,
      );
    },
  };
}
