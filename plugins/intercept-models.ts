// The model-listing routes a profile declares (api.intercepts) are answered by the gateway, so a
// family with several endpoints gives one stable answer instead of one endpoint's list per
// request. A list comes from the catalogue: the models of the family's routable endpoints,
// deduplicated, and the aliases they serve (catalogue/alias-entries.ts), in the family's own format
// (catalogue/model-formats.ts) plus the per-model fields the intercept names; a path with a {model...}
// segment answers one model or alias of it by the catalogue's lookup rule, 404 when there is
// none. A `merge` intercept (api/ps) asks every routable endpoint (catalogue/merged-list.ts).
// An intercepted path belongs to the gateway for every method: GET and HEAD are answered, any
// other method gets 405 and never reaches a backend (the allowlist lists `/v1/models/{model...}`
// for these answers; on a hosted service a DELETE there would delete a fine-tuned model). A path
// the profile lists exactly (mlxmulti's /v1/models/status) wins over an intercept pattern.
import {
  compilePattern,
  definePlugin,
  gwError,
  indexModels,
  isPattern,
  matchPattern,
  type CatalogueModel,
  type Context,
  type Intercept,
  type PathPattern,
} from '../engine/api.js';
import { sees, visible } from './access/visible.js';
import { withAliases } from './catalogue/alias-entries.js';
import { LiveCache, liveModels } from './catalogue/live-models.js';
import { answerMerged } from './catalogue/merged-list.js';
import { modelNames } from './routing/model-chains.js';
import { noneRoutableError } from './routing/unavailable-hint.js';
import { decodeModelId } from './catalogue/model-id.js';
import { renderItem, renderList, type ItemExtras } from './catalogue/model-formats.js';

type Answer = (ctx: Context, params?: Record<string, string>) => true | Promise<true>;

const JSON_TYPE = ['content-type', 'application/json; charset=utf-8'];
const ALLOWED = 'GET, HEAD';
const ALLOW_HEADER = ['allow', ALLOWED];

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
    const aliases = modelNames(env.config).all;
    const live = new LiveCache(env, () => withAliases(liveModels(catalogue.family(family).models), aliases));
    const liveIndex = new LiveCache(env, () => indexModels(live.get()));

    const list = (i: Intercept): Answer => {
      const extras = extrasOf(i);
      const body = new LiveCache(env, () => JSON.stringify(renderList(i.format, live.get(), extras)));
      // One body for everyone; a key scoped to some models gets its own.
      return (ctx) =>
        ctx.caller === null || ctx.caller.everyModel
          ? ctx.reply(200, body.get(), JSON_TYPE)
          : ctx.replyJson(200, renderList(i.format, visible(ctx, live.get()), extras));
    };
    const one = (i: Intercept, param: string): Answer => {
      const extras = extrasOf(i);
      return (ctx, params) => {
        const model = decodeModelId(params![param]);
        const found = liveIndex.get().find(model);
        if (!found || !sees(ctx, model, found.value.id))
          throw gwError('MODEL_NOT_FOUND', {
            model,
            provider: family,
            hint: `GET /gw/${profile.routing.prefixes[0]}${i.path.slice(0, i.path.lastIndexOf('/'))} lists what is served`,
          });
        // Shown by the name it was found under (a second tag of the same weights, llama3:latest for llama3).
        const m = found.value;
        return ctx.replyJson(200, renderItem(i.format, found.name === m.id ? m : { ...m, id: found.name }, extras));
      };
    };

    // Compiled once: exact paths in a map, patterns tried only when that misses.
    const exact = new Map<string, Answer>();
    const patterns: { pattern: PathPattern; answer: Answer }[] = [];
    let anyMerged = false;
    for (const i of profile.api.intercepts) {
      const mergeKey = i.merge;
      const answer = mergeKey ? (ctx: Context) => answerMerged(env, ctx, family, mergeKey) : undefined;
      if (answer) anyMerged = true;
      if (isPattern(i.path)) {
        const pattern = compilePattern(i.path);
        patterns.push({ pattern, answer: answer ?? one(i, pattern.names.at(-1)!) });
      } else exact.set(i.path, answer ?? list(i));
    }
    const listedExactly = new Set(profile.api.paths.filter((p) => !isPattern(p)));

    /** The answer for this request (the gateway's: true, or a promise for a merged route), or
     *  undefined when the path is not intercepted. */
    const route = (ctx: Context): true | Promise<true> | undefined => {
      const path = ctx.pathname;
      let answer = exact.get(path);
      let params: Record<string, string> | undefined;
      if (!answer && patterns.length && !listedExactly.has(path)) {
        for (const p of patterns) {
          params = matchPattern(p.pattern, path);
          if (params) {
            answer = p.answer;
            break;
          }
        }
      }
      if (!answer) return undefined;
      const method = ctx.method;
      if (method !== 'GET' && method !== 'HEAD') throw gwError('METHOD_NOT_ALLOWED', { method, path, allowed: ALLOWED }, ALLOW_HEADER);
      // The same 503 as the family's other routes: which endpoints are down, where, and the fix.
      if (endpoints.routable(family).length === 0)
        throw noneRoutableError(
          { provider: family },
          endpoints.all.filter((e) => e.family === family && !e.retired),
          env.source,
        ).error;
      return answer(ctx, params);
    };

    if (!anyMerged) {
      hooks.request.tap('intercept-models', (ctx) => route(ctx) as true | undefined);
      return;
    }
    // A family with a merged route: a callback tap, called back at once (synchronously, so the
    // rest of the request goes on in the same tick) unless the answer is the merge's promise.
    hooks.request.tapAsync('intercept-models', (ctx, done) => {
      let answered: true | Promise<true> | undefined;
      try {
        answered = route(ctx);
      } catch (err) {
        return done(err as Error);
      }
      if (answered === undefined || answered === true) return done(null, answered);
      answered.then(
        (r) => done(null, r),
        (err: Error) => done(err),
      );
    });
  },
});
