// Per endpoint: does it speak the messages API itself (passthrough), and can it count tokens?
// Both come from the profile's api.msgapi_support, its min_version checked against the
// endpoint's configured version once, when the endpoint's settings are applied
// (Endpoint.speaksMessagesApi): an older backend is translated to, and is not asked to count.
import type { Endpoint } from '../../../engine/api.js';
import type { Fallback, Mode } from '../api-translator.js';

/** It also answers <messages_path>/count_tokens (api.msgapi_support.token_count). */
export function countsTokens(ep: Endpoint): boolean {
  return ep.speaksMessagesApi && ep.profile.api.msgapi_support!.token_count === true;
}

/** Why an endpoint is translated to: its family has no native support (or its version is too
 *  old), or passthrough is switched off (translators.msgapi.passthrough, the step's option). */
export function modeFor(ep: Endpoint, passthroughAllowed: boolean): { mode: Mode; fallback?: Fallback } {
  if (!ep.profile.api.msgapi_support?.enabled) return { mode: 'translation', fallback: 'cannot' };
  if (!passthroughAllowed) return { mode: 'translation', fallback: 'translator' };
  return ep.speaksMessagesApi ? { mode: 'passthrough' } : { mode: 'translation', fallback: 'cannot' };
}
