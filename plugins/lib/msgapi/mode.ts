// Per endpoint: does it speak the messages API itself (passthrough), and can it count tokens?
// Both come from the profile's api.msgapi_support, with its min_version checked against the
// endpoint's configured version (an older backend is translated to, and is not asked to count).
import type { Endpoint } from '../../../engine/backends/endpoints.js';

/** Numeric comparison of versions such as 0.11.1 or b4847; undefined when either has no number. */
export function compareVersions(a: string, b: string): number | undefined {
  const pa = a.match(/\d+/g)?.map(Number);
  const pb = b.match(/\d+/g)?.map(Number);
  if (!pa || !pb) return undefined;
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d) return Math.sign(d);
  }
  return 0;
}

/** The endpoint's profile declares native messages-API support and its version is recent enough. */
export function speaksMessagesApi(ep: Endpoint): boolean {
  const support = ep.profile.api.msgapi_support;
  return support?.enabled === true && recentEnough(ep);
}

/** No configured version, or one at least the profile's msgapi min_version. */
function recentEnough(ep: Endpoint): boolean {
  const min = ep.profile.api.msgapi_support?.min_version;
  return !(min && ep.version && (compareVersions(ep.version, min) ?? 0) < 0);
}

/** It also answers <messages_path>/count_tokens (api.msgapi_support.token_count). */
export function countsTokens(ep: Endpoint): boolean {
  return speaksMessagesApi(ep) && ep.profile.api.msgapi_support!.token_count === true;
}

export type Mode = 'passthrough' | 'translation';
export type Fallback = 'cannot' | 'translator';

/** Why an endpoint is translated to: its family has no native support (or its version is too
 *  old), or the translate step has passthrough switched off. */
export function modeFor(ep: Endpoint, passthroughAllowed: boolean): { mode: Mode; fallback?: Fallback } {
  if (!ep.profile.api.msgapi_support?.enabled) return { mode: 'translation', fallback: 'cannot' };
  if (!passthroughAllowed) return { mode: 'translation', fallback: 'translator' };
  return recentEnough(ep) ? { mode: 'passthrough' } : { mode: 'translation', fallback: 'cannot' };
}
