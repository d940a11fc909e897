// Backend error replies annotated as the endpoint's profile declares (api.error_context): the
// hosted families add `gw_context` {endpoint, request_id, timestamp}; the multi-provider gateway
// gets an integer `code` and the `provider`. Only a JSON object body of a reply with status 400 or
// more is touched, read whole up to the rewrite limit (replies/rewrite-body.ts: a larger one is
// relayed as it came); anything else, and every success reply, is relayed untouched and unbuffered.
import { isObject, type Catalogue, type Context, type ReplyHeaders, type ReplyPlan } from '../../engine/api.js';
import { rewritePlan, uncompressed } from './rewrite-body.js';

/** A body that may be JSON and is not compressed (we do not decode to annotate). */
export function plainJson(headers: ReplyHeaders): boolean {
  const type = String(headers['content-type'] ?? 'application/json').toLowerCase();
  return type.includes('json') && uncompressed(headers);
}

/** The provider behind a model: its `provider/` prefix, else the owner its endpoint lists, else the family. */
function providerOf(ctx: Context, catalogue: Catalogue): string {
  const ep = ctx.endpoint!;
  const model = ctx.model;
  if (model?.includes('/')) return model.slice(0, model.indexOf('/'));
  const listed = model ? catalogue.listOf(ep)?.find((m) => m.name === model)?.ownedBy : undefined;
  return listed ?? ep.family;
}

function integerCode(code: unknown, status: number): number {
  if (typeof code === 'number' && Number.isInteger(code)) return code;
  if (typeof code === 'string' && /^\d{1,9}$/.test(code)) return Number(code);
  return status;
}

/** The annotated body, or null to send the backend's bytes as they are (not a JSON object). */
export function annotateError(body: Buffer, status: number, ctx: Context, catalogue: Catalogue): string | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return null;
  }
  if (!isObject(parsed)) return null;
  const want = ctx.endpoint!.profile.api.error_context;
  // The fields go beside the backend's own: in its `error` object when it has one.
  const target = isObject(parsed.error) ? parsed.error : parsed;
  if (want.integer_code) target.code = integerCode(target.code, status);
  if (want.provider && typeof target.provider !== 'string') target.provider = providerOf(ctx, catalogue);
  if (want.gw_context) parsed.gw_context = { endpoint: ctx.endpoint!.name, request_id: ctx.id, timestamp: new Date().toISOString() };
  return JSON.stringify(parsed);
}

/** The plan for a backend reply when the profile asks for error annotations; undefined: relay it. */
export function errorContextPlan(ctx: Context, status: number, headers: ReplyHeaders, catalogue: Catalogue): ReplyPlan | undefined {
  const want = ctx.endpoint!.profile.api.error_context;
  if (status < 400 || ctx.method === 'HEAD' || !(want.gw_context || want.integer_code || want.provider) || !plainJson(headers)) return undefined;
  return rewritePlan(headers, (st, body) => {
    const annotated = annotateError(body, st, ctx, catalogue);
    return annotated === null ? null : { body: annotated };
  });
}
