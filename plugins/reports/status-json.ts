// Status JSON with a weak ETag over its stable fields (timestamps, uptimes and check latencies
// left out), and 304 for a matching If-None-Match.
import { fnv1a36, type Context } from '../../engine/api.js';

const VOLATILE = new Set(['timestamp', 'uptime', 'uptime_seconds', 'last_check', 'last_latency', 'latency', 'next_check', 'read_at']);
const stable = (key: string, value: unknown) => (VOLATILE.has(key) ? undefined : value);

export function etagOf(body: unknown): string {
  return `W/"${fnv1a36(JSON.stringify(body, stable))}"`;
}

/** Weak comparison: W/ prefixes are ignored, a list or "*" may match. */
export function etagMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  const bare = etag.replace(/^W\//, '');
  return header.split(',').some((t) => {
    const tag = t.trim();
    return tag === '*' || tag.replace(/^W\//, '') === bare;
  });
}

export function replyStatus(ctx: Context, body: unknown): true {
  const etag = etagOf(body);
  const headers = ['etag', etag, 'cache-control', 'no-cache'];
  if (etagMatches(ctx.header('if-none-match'), etag)) return ctx.reply(304, null, headers);
  return ctx.replyJson(200, body, headers);
}
