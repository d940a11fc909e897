// Claude Code opens `system` with a block of its own, `x-anthropic-billing-header: cc_version=…;
// cc_entrypoint=…; cch=…;`, that differs on every request. It sits before everything else, so a
// local engine finds no common prefix with the previous request and evaluates the whole prompt
// again each time. The gateway drops that block toward local backends
// (translators.msgapi.strip_billing_header, on by default); hosted services (profiles with
// characteristics.hosted_service) get it as sent.
import type { Profile } from '../../../engine/api.js';

const BILLING_PREFIX = 'x-anthropic-billing-header:';

/** An engine you run (the block is dropped toward it), not a hosted service that may want the
 *  header (the profile's characteristics.hosted_service). */
export const isLocalFamily = (profile: Profile): boolean => !profile.characteristics.hosted_service;

export function isBillingBlock(b: unknown): boolean {
  if (typeof b !== 'object' || b === null) return false;
  const { type, text } = b as { type?: unknown; text?: unknown };
  return type === 'text' && typeof text === 'string' && text.trimStart().startsWith(BILLING_PREFIX);
}

/** The request without billing blocks in its `system` array (key order kept; an emptied `system`
 *  removed), or undefined when it has none: then the original bytes go as they came. */
export function withoutBillingHeader(body: unknown): Record<string, unknown> | undefined {
  const system = (body as { system?: unknown } | null)?.system;
  if (!Array.isArray(system) || !system.some(isBillingBlock)) return undefined;
  const out: Record<string, unknown> = { ...(body as Record<string, unknown>) };
  const kept = system.filter((b) => !isBillingBlock(b));
  if (kept.length) out.system = kept;
  else delete out.system;
  return out;
}
