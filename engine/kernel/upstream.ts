// The one way upstream for a terminal step: hand the request and the step's policy to the attempt
// loop (engine/routing), which walks the route plan select-endpoint made. The retry settings a
// step passes come from the configuration and the backends' state, made once when it is applied.
import { parseDuration } from '../core/duration.js';
import { attemptLoop } from '../routing/attempt-loop.js';
import type { RetrySettings, SendPolicy } from '../routing/exchange.js';
import { narrowed, type Candidate } from '../routing/plan.js';
import type { Context, RequestContext } from './context.js';
import type { Runtime } from './runtime.js';

export type { ApiShape, RetrySettings, SendPolicy } from '../routing/exchange.js';
export type { PipePlan, ReplyPlan } from '../routing/reply.js';
export { backendHeaders } from '../routing/reply.js';

/** Send the request along its route plan — or only to the candidates `keep` accepts (a terminal
 *  step that needs what some endpoints have); resolves once a reply was relayed, or throws the
 *  error the client should get. */
export function sendUpstream(ctx: Context, policy: SendPolicy<Context>, keep?: (c: Candidate) => boolean): Promise<true> {
  const plan = ctx.plan;
  // A step's Context is the kernel's RequestContext, whose attempt record the loop keeps.
  return attemptLoop<RequestContext>(ctx as RequestContext, policy, plan && keep ? narrowed(plan, keep) : (plan ?? undefined));
}

/** proxy.retry as a terminal step's retry settings, with what they read of the backends' state. */
export function retrySettings(env: Runtime): RetrySettings {
  const r = env.config.proxy.retry;
  const { catalogue } = env;
  return {
    budgetMs: parseDuration(r.budget),
    backoffMs: parseDuration(r.backoff),
    fleet: env.retries,
    contextWindow: (ep, model) => {
      const m = catalogue.find(model)?.value;
      return m ? (m.servedAs.get(ep)?.context ?? m.contextWindow) : undefined;
    },
    // Not loaded, as the engine reports it, or as its queue served by model knows (a switch).
    cold: (ep, model) => env.residency.isLoaded(ep, model) === false || ep.queue?.coldFor(model) === true,
  };
}
