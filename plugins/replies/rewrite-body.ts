// The one way the gateway rewrites a backend reply's body (an error put in the messages API's
// shape or annotated with gw_context, a count_tokens reply completed): read whole, up to
// REWRITE_LIMIT, and rebuilt. A body it cannot rewrite — compressed, larger than the limit, not
// what `rewrite` expects — is relayed as the backend sent it (status, headers, bytes): the client
// always gets the backend's answer, never a gateway error in its place.
import { backendHeaders, type PipePlan, type ReplyHeaders, type ReplyPlan } from '../../engine/api.js';

/** Bodies worth rewriting are small (errors, counts); a larger one goes on as it came. */
export const REWRITE_LIMIT = 64 * 1024;

/** The new body, and its content type when that changes (else the backend's stays); null: the
 *  backend's bytes as they are. */
export type Rewritten = { body: string; contentType?: string } | null;
export type Rewrite = (status: number, body: Buffer) => Rewritten;

const PIPE: PipePlan = { kind: 'pipe' };

/** Not compressed: the gateway does not decode bodies to rewrite them. */
export function uncompressed(headers: ReplyHeaders): boolean {
  const encoding = headers['content-encoding'];
  return encoding === undefined || String(encoding).toLowerCase() === 'identity';
}

/** The backend's headers with `type` as the only Content-Type. */
function withContentType(headers: string[], type: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < headers.length; i += 2) if (headers[i].toLowerCase() !== 'content-type') out.push(headers[i], headers[i + 1]);
  out.push('content-type', type);
  return out;
}

/** The plan for a reply whose body `rewrite` may rebuild (see the top of this file). */
export function rewritePlan(headers: ReplyHeaders, rewrite: Rewrite): ReplyPlan {
  if (!uncompressed(headers)) return PIPE;
  return {
    kind: 'buffer',
    limit: REWRITE_LIMIT,
    overflow: PIPE,
    finish(status, body) {
      const kept = backendHeaders(headers, false);
      let out: Rewritten;
      try {
        out = rewrite(status, body);
      } catch (err) {
        // JSON nested too deep to serialise again (the parser copes; JSON.stringify recurses).
        if (!(err instanceof RangeError)) throw err;
        out = null;
      }
      if (!out) return { status, headers: kept, body };
      return { status, headers: out.contentType ? withContentType(kept, out.contentType) : kept, body: out.body };
    },
  };
}
