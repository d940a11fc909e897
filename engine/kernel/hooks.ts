// The request's lifecycle: the one set of hooks every plugin taps. Each compiled pipeline gets
// its own frozen instance; the taps run in the order of the pipeline's YAML steps. The kernel
// calls every hook itself: run.ts the request, dispatch and done hooks, the attempt loop (through
// Context.prepare) the upstream hook before each send, response.ts the respond hook before any
// head is written.
import { AsyncSeriesBailHook, SyncHook } from 'tapable';
import type { UpstreamRequest } from '../routing/exchange.js';
import type { Context, RequestContext } from './context.js';

export type Hooks = Readonly<{
  /** Decide where the request goes: match, allowlist, body, aliases, candidates. A step that
   *  answered the request itself (ctx.reply…: a preflight, an intercept) returns true to stop;
   *  a step that refuses it throws (refuse() or a gateway error). */
  request: AsyncSeriesBailHook<[Context], true | void>;
  /** Once per attempt, for ctx.endpoint, before the kernel sends: shape the path, headers, body. */
  upstream: SyncHook<[Context, UpstreamRequest]>;
  /** The terminal step (exactly one per pipeline): answer the request (sendUpstream, a report). */
  dispatch: AsyncSeriesBailHook<[Context], true | void>;
  /** Just before any reply head is written: add response headers to ctx.replyHeaders. */
  respond: SyncHook<[Context, number]>;
  /** After the response finished or the client went away: stats, logs. */
  done: SyncHook<[Context]>;
}>;

/** The hooks in the order their taps run for a request, with the phase names messages use. */
export const HOOK_PHASES = [
  { hook: 'request', name: 'request' },
  { hook: 'upstream', name: 'upstream (when the terminal step sends)' },
  { hook: 'dispatch', name: 'terminal' },
  { hook: 'respond', name: 'reply head' },
  { hook: 'done', name: 'done' },
] as const;

export function createHooks(): Hooks {
  const hooks = {
    request: new AsyncSeriesBailHook<[Context], true | void>(['ctx']),
    upstream: new SyncHook<[Context, UpstreamRequest]>(['ctx', 'upstream']),
    dispatch: new AsyncSeriesBailHook<[Context], true | void>(['ctx']),
    respond: new SyncHook<[Context, number]>(['ctx', 'status']),
    done: new SyncHook<[Context]>(['ctx']),
  };
  // The request's timings, taken once here for every step that reports them (headers, stats,
  // logs, metrics): when the reply head went out, and when the request was over.
  // (The kernel's own fields: every hook is called with the kernel's RequestContext.)
  hooks.respond.intercept({ call: (ctx: Context) => void ((ctx as RequestContext).headMs = ctx.elapsedMs()) });
  hooks.done.intercept({ call: (ctx: Context) => void ((ctx as RequestContext).totalMs = ctx.elapsedMs()) });
  return Object.freeze(hooks);
}
