// What a key sees of the catalogue: only the models and aliases it may use (auth.keys[].models),
// by the name a client would send; everything while keys are off or the key has no scope. Lists
// built once for everyone are narrowed per request only for a scoped key.
import type { Context } from '../../engine/api.js';

/** The entries of a list the caller may see, by their `id`. */
export function visible<T extends { id: string }>(ctx: Context, list: readonly T[]): readonly T[] {
  const caller = ctx.caller;
  return caller === null || caller.everyModel ? list : list.filter((m) => caller.allows(m.id));
}

/** May the caller see a model asked for by `name` (found as the entry `id`)? */
export function sees(ctx: Context, name: string, id: string = name): boolean {
  const caller = ctx.caller;
  return caller === null || caller.everyModel || caller.allows(name) || caller.allows(id);
}
