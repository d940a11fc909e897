// A step's rate-limit tokens taken on the request hook, wherever the gateway keeps them: at once
// (a synchronous tap) from this process's memory, or a round trip (a promise tap) from a store
// shared with other processes — the taker chosen when the step was applied (RateBuckets.takerFor).
import type { Context, Hooks, SharedTake, TakeAnswer, Taker } from '../../engine/api.js';

/** `takesOf`: the request's buckets (null: nothing to take); `settle`: what the answer means
 *  (throw a refusal, keep the binding bucket). */
export function tapTokens(
  hooks: Hooks,
  name: string,
  taker: Taker,
  takesOf: (ctx: Context) => SharedTake[] | null,
  settle: (ctx: Context, takes: readonly SharedTake[], answer: TakeAnswer) => void,
): void {
  if (taker.local) {
    hooks.request.tap(name, (ctx) => {
      const takes = takesOf(ctx);
      if (takes) settle(ctx, takes, taker.take(takes));
    });
  } else {
    hooks.request.tapPromise(name, async (ctx) => {
      const takes = takesOf(ctx);
      if (takes) settle(ctx, takes, await taker.take(takes));
    });
  }
}
