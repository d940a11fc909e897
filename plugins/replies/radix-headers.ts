// X-Radix-Spec-Decode and X-Radix-Cache-Hit (profile api.radix_headers: the radixengine family).
// The engine reports neither in headers, so the gateway learns them where the engine does say:
// - speculative decoding: the `speculative_decoding` its model list reports (per model, else any
//   model of the endpoint: it is a server setting), known before the reply, so every reply gets it;
// - the prefix cache: a header the engine sends is kept as it is; otherwise a non-streaming JSON
//   reply of a generation route (the profile's request.generation_paths; embeddings and the rest
//   are piped untouched) with a Content-Length up to CACHE_SCAN_LIMIT is held whole — the header
//   must go before the body — and the last TAIL_BYTES of it are scanned for
//   `batch_meta.avg_radix_cache_hit_rate`, `meta.radix_cache_hit` or
//   `metrics.radix_cache_hit_rate` (a hit when true or above 0). Only the tail: the engine appends
//   these reports after the payload (generate's `meta` after `text`, batch's `batch_meta` after
//   `responses`, the common replies' `metrics` after `choices` and `usage`), so scanning the whole
//   body would only add work that grows with the generated text. A report put elsewhere is not
//   found: the reply then carries no cache header, never a wrong one.
//   Streams are never held back, so they carry no cache header of ours.
import { backendHeaders, type Catalogue, type Context, type Profile, type ReplyHeaders, type ReplyPlan } from '../../engine/api.js';
import { plainJson } from './error-context.js';

/** Larger replies are relayed as they come, without a cache header. */
export const CACHE_SCAN_LIMIT = 1024 * 1024;

/** How much of the end of a reply is scanned: the reports and whatever follows them (usage,
 *  system_fingerprint…), with room to spare. */
export const TAIL_BYTES = 4096;

// A quote right before and after the key: inside a JSON string the quotes would be escaped
// (\"), so generated text can never match; only a real key can — wherever the tail starts.
const REPORT = /"(avg_radix_cache_hit_rate|radix_cache_hit_rate|radix_cache_hit)"\s*:\s*(true|false|-?[0-9][0-9.eE+-]*)/g;
/** When the tail holds several reports, the batch average wins over one reply's flag over a rate. */
const RANK: Record<string, number> = { avg_radix_cache_hit_rate: 3, radix_cache_hit: 2, radix_cache_hit_rate: 1 };

/** Whether the reply body says the prefix cache was hit; undefined when its tail does not say. */
export function cacheHitIn(body: Buffer): boolean | undefined {
  // The keys are ASCII: latin1 needs no decoding, and a tail cut inside a character does no harm.
  const tail = body.toString('latin1', Math.max(0, body.length - TAIL_BYTES));
  let rank = 0;
  let value = '';
  REPORT.lastIndex = 0;
  for (let m = REPORT.exec(tail); m; m = REPORT.exec(tail)) {
    const r = RANK[m[1]];
    if (r > rank) {
      rank = r;
      value = m[2];
    }
  }
  if (rank === 0) return undefined;
  return value === 'true' || (value !== 'false' && Number(value) > 0);
}

function specDecode(ctx: Context, catalogue: Catalogue): boolean | undefined {
  const list = catalogue.listOf(ctx.endpoint!);
  if (!list) return undefined;
  const model = ctx.model;
  const said = (m: { details: Record<string, unknown> } | undefined) =>
    typeof m?.details.speculative_decoding === 'boolean' ? (m.details.speculative_decoding as boolean) : undefined;
  return (model ? said(list.find((m) => m.name === model)) : undefined) ?? said(list.find((m) => said(m) !== undefined));
}

/** The reply plans of one gateway: the generation routes of every profile with
 *  api.radix_headers, compiled once (forward's apply); `plan` then costs a lookup per reply. */
export class RadixHeaders {
  /** Profile name → its generation paths; profiles without radix headers are absent. */
  private readonly generation = new Map<string, ReadonlySet<string>>();

  constructor(
    profiles: readonly Profile[],
    private readonly catalogue: Catalogue,
  ) {
    for (const p of profiles) if (p.api.radix_headers) this.generation.set(p.name, new Set(p.request.generation_paths));
  }

  /** The plan for this reply, or undefined when the endpoint's profile has no radix headers. */
  plan(ctx: Context, status: number, headers: ReplyHeaders): ReplyPlan | undefined {
    const generation = this.generation.get(ctx.endpoint!.profile.name);
    if (!generation) return undefined;
    const extra: string[] = [];
    if (headers['x-radix-spec-decode'] === undefined) {
      const spec = specDecode(ctx, this.catalogue);
      if (spec !== undefined) extra.push('x-radix-spec-decode', String(spec));
    }
    const pipe = { kind: 'pipe' as const, headers: extra };
    const scan =
      status >= 200 &&
      status < 300 &&
      ctx.method !== 'HEAD' &&
      generation.has(ctx.pathname) &&
      headers['x-radix-cache-hit'] === undefined &&
      headers['content-length'] !== undefined &&
      Number(headers['content-length']) <= CACHE_SCAN_LIMIT &&
      plainJson(headers);
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
}
