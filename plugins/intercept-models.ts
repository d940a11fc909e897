// The model-listing routes a profile declares (api.intercepts) are answered by the gateway, so a
// family with several endpoints gives one stable answer instead of one endpoint's list per
// request. A list comes from the catalogue: the models of the family's routable endpoints,
// deduplicated, in the family's own format (lib/model-formats.ts) plus the per-model fields the
// intercept names; a path with a {model...} segment answers one model of it by the catalogue's
// lookup rule, 404 when there is none. A `merge` intercept (api/ps: what is loaded now, which the catalogue does not know) asks
// every routable endpoint at once, each within its check_timeout, and concatenates their lists.
// Only GET and HEAD are answered; a path the profile lists exactly wins over an intercept pattern.
import { request as undiciRequest } from 'undici';
import { indexModels, type CatalogueModel } from '../engine/backends/catalogue.js';
import type { Endpoint } from '../engine/backends/endpoints.js';
import type { Context } from '../engine/kernel/context.js';
import { gwError } from '../engine/kernel/errors.js';
import { definePlugin, type PluginEnv } from '../engine/kernel/plugin.js';
import type { Intercept } from '../engine/kernel/profiles.js';
import { LiveCache, liveModels } from './lib/live-models.js';
import { decodeModelId } from './lib/model-id.js';
import { renderItem, renderList, type ItemExtras } from './lib/model-formats.js';
import { compilePattern, isPattern, matchPattern, PathSet, type PathPattern } from './lib/path-patterns.js';

type Answer = (ctx: Context, params?: Record<string, string>) => true | Promise<true>;

const JSON_TYPE = ['content-type', 'application/json; charset=utf-8'];

/** The intercept's context_field and fields, added to each item; undefined when it adds none. */
function extrasOf(i: Intercept): ItemExtras | undefined {
  if (!i.context_field && i.fields.length === 0) return undefined;
  return (m: CatalogueModel) => {
    const out: Record<string, unknown> = {};
    if (i.context_field) out[i.context_field] = m.contextWindow;
    const reported = m.servedAs.get(m.endpoints[0])!.details as Record<string, unknown>;
    for (const f of i.fields) if (reported[f] !== undefined) out[f] = reported[f];
    return out;
  };
}

/** Ask one endpoint for `path`; its JSON reply, or undefined (logged) when it failed or timed out. */
async function askOne(env: PluginEnv, ctx: Context, ep: Endpoint, path: string): Promise<Record<string, unknown> | undefined> {
  const headers = [...ep.headers, 'x-gw-request-id', ctx.id];
  const auth = ctx.header('authorization');
  if (auth && !ep.headerNames.has('authorization')) headers.push('authorization', auth);
  try {
    const res = await undiciRequest(`${ep.origin}${ep.upstreamPath(path)}`, { method: 'GET', headers, dispatcher: ep.pool, signal: AbortSignal.timeout(ep.checkTimeoutMs) });
    if (res.statusCode !== 200) {
      await res.body.dump();
      throw new Error(`answered ${res.statusCode}`);
    }
    const body = await res.body.json();
    if (body && typeof body === 'object' && !Array.isArray(body)) return body as Record<string, unknown>;
    throw new Error('the reply is not a JSON object');
  } catch (err) {
    env.log.debug({ req: ctx.id, endpoint: ep.name, path, err: (err as Error).message }, 'merged list: an endpoint did not answer; left out');
    return undefined;
  }
}

const keyOf = (item: unknown): unknown => {
  const o = item as Record<string, unknown> | null;
  return o && typeof o === 'object' ? (o.name ?? o.model ?? o.id ?? JSON.stringify(o)) : item;
};

export default definePlugin<Record<string, never>>({
  name: 'intercept-models',
  needs: ['path'],
  needsProfile: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const profile = env.profile!;
    if (profile.api.intercepts.length === 0) return;
    const family = profile.name;
    const { catalogue, endpoints } = env;
    const live = new LiveCache(env, () => liveModels(catalogue.family(family).models));
    const liveIndex = new LiveCache(env, () => indexModels(live.get()));

    const list = (i: Intercept): Answer => {
      const extras = extrasOf(i);
      const body = new LiveCache(env, () => JSON.stringify(renderList(i.format, live.get(), extras)));
      return (ctx) => ctx.reply(200, body.get(), JSON_TYPE);
    };
    const one = (i: Intercept, param: string): Answer => {
      const extras = extrasOf(i);
      return (ctx, params) => {
        const model = decodeModelId(params![param]);
        const found = liveIndex.get().find(model);
        if (!found) throw gwError('MODEL_NOT_FOUND', { model, provider: family, hint: `GET /gw/${profile.routing.prefixes[0]}${i.path.slice(0, i.path.lastIndexOf('/'))} lists what is served` });
        // Shown by the name it was found under (a second tag of the same weights, llama3:latest for llama3).
        const m = found.value;
        return ctx.replyJson(200, renderItem(i.format, found.name === m.id ? m : { ...m, id: found.name }, extras));
      };
    };
    const merge = (i: Intercept, key: string): Answer => async (ctx) => {
      const eps = endpoints.routable(family);
      const replies = (await Promise.all(eps.map((ep) => askOne(env, ctx, ep, ctx.path)))).filter((r) => r !== undefined);
      if (replies.length === 0) throw gwError('UPSTREAM_ERROR', { endpoint: eps.map((e) => e.name).join(', '), reason: `none answered ${i.path}` });
      const seen = new Set<unknown>();
      const items: unknown[] = [];
      for (const r of replies) {
        for (const item of Array.isArray(r[key]) ? (r[key] as unknown[]) : []) {
          const k = keyOf(item);
          if (!seen.has(k)) {
            seen.add(k);
            items.push(item);
          }
        }
      }
      return ctx.replyJson(200, { ...replies[0], [key]: items });
    };

    // Compiled once: exact paths in a map, patterns tried only when that misses.
    const exact = new Map<string, Answer>();
    const patterns: { pattern: PathPattern; answer: Answer }[] = [];
    let async = false;
    for (const i of profile.api.intercepts) {
      if (i.merge) async = true;
      if (isPattern(i.path)) {
        const pattern = compilePattern(i.path);
        patterns.push({ pattern, answer: i.merge ? merge(i, i.merge) : one(i, pattern.names.at(-1)!) });
      } else exact.set(i.path, i.merge ? merge(i, i.merge) : list(i));
    }
    const listed = new PathSet(profile.api.paths);

    const route = (ctx: Context): true | Promise<true> | undefined => {
      if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return undefined;
      const path = ctx.pathname;
      let answer = exact.get(path);
      let params: Record<string, string> | undefined;
      if (!answer && patterns.length && !listed.hasExact(path)) {
        for (const p of patterns) {
          params = matchPattern(p.pattern, path);
          if (params) {
            answer = p.answer;
            break;
          }
        }
      }
      if (!answer) return undefined;
      if (endpoints.routable(family).length === 0) throw gwError('ENDPOINT_UNAVAILABLE', { provider: family });
      return answer(ctx, params);
    };
    // Only a family with a merged route needs an async step; the others answer synchronously.
    if (async) hooks.request.tapPromise('intercept-models', async (ctx) => route(ctx));
    else hooks.request.tap('intercept-models', (ctx) => route(ctx) as true | undefined);
  },
});
