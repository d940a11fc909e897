// X-Radix-Spec-Decode and X-Radix-Cache-Hit (profile api.radix_headers: the radixengine family).
// The engine reports neither in headers, so the gateway learns them where the engine does say:
// - speculative decoding: the `speculative_decoding` its model list reports (per model, else any
//   model of the endpoint: it is a server setting), known before the reply, so every reply gets it;
// - the prefix cache: a header the engine sends is kept as it is; otherwise a non-streaming JSON
//   reply (it has a Content-Length, up to CACHE_SCAN_LIMIT) is read whole and scanned for
//   `batch_meta.avg_radix_cache_hit_rate`, `meta.radix_cache_hit` or `metrics.radix_cache_hit_rate`
//   (a hit when true or above 0). Streams are never held back, so they carry no cache header of ours.
import type { Catalogue } from '../../engine/backends/catalogue.js';
import type { Context } from '../../engine/kernel/context.js';
import { backendHeaders, type ReplyPlan } from '../../engine/kernel/upstream.js';
import { plainJson } from './error-context.js';

type Headers = Record<string, string | string[] | undefined>;

/** Larger replies are relayed as they come, without a cache header. */
export const CACHE_SCAN_LIMIT = 1024 * 1024;

// A quote right before and after the key: inside a JSON string the quotes would be escaped
// (\"), so generated text can never match; only a real key can.
const AVG_RATE = /"avg_radix_cache_hit_rate"\s*:\s*(-?[0-9][0-9.eE+-]*)/;
const HIT = /"radix_cache_hit"\s*:\s*(true|false)/;
const RATE = /"radix_cache_hit_rate"\s*:\s*(-?[0-9][0-9.eE+-]*)/;

/** Whether the reply body says the prefix cache was hit; undefined when it does not say. */
export function cacheHitIn(body: Buffer): boolean | undefined {
  const text = body.toString('latin1'); // the keys are ASCII; no decoding needed to find them
  const avg = AVG_RATE.exec(text);
  if (avg) return Number(avg[1]) > 0;
  const hit = HIT.exec(text);
  if (hit) return hit[1] === 'true';
  const rate = RATE.exec(text);
  return rate ? Number(rate[1]) > 0 : undefined;
}

function specDecode(ctx: Context, catalogue: Catalogue): boolean | undefined {
  const list = catalogue.listOf(ctx.endpoint!);
  if (!list) return undefined;
  const model = ctx.model;
  const said = (m: { details: Record<string, unknown> } | undefined) => (typeof m?.details.speculative_decoding === 'boolean' ? (m.details.speculative_decoding as boolean) : undefined);
  return (model ? said(list.find((m) => m.name === model)) : undefined) ?? said(list.find((m) => said(m) !== undefined));
}

export function radixPlan(ctx: Context, status: number, headers: Headers, catalogue: Catalogue): ReplyPlan {
  const extra: string[] = [];
  if (headers['x-radix-spec-decode'] === undefined) {
    const spec = specDecode(ctx, catalogue);
    if (spec !== undefined) extra.push('x-radix-spec-decode', String(spec));
  }
  const pipe = { kind: 'pipe' as const, headers: extra };
  const scan = status >= 200 && status < 300 && ctx.method !== 'HEAD' && headers['x-radix-cache-hit'] === undefined
    && headers['content-length'] !== undefined && Number(headers['content-length']) <= CACHE_SCAN_LIMIT && plainJson(headers);
  if (!scan) return pipe;
  return {
    kind: 'buffer',
    limit: CACHE_SCAN_LIMIT,
    overflow: pipe,
    finish(st, body) {
      const out = backendHeaders(headers, false);
      for (const h of extra) out.push(h);
      const hit = cacheHitIn(body);
      if (hit !== undefined) out.push('x-radix-cache-hit', String(hit));
      return { status: st, headers: out, body };
    },
  };
}
