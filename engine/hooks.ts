// The request's lifecycle: the one set of hooks every plugin taps. Each compiled pipeline gets
// its own frozen instance; the taps run in the order of the pipeline's YAML steps.
import { AsyncSeriesBailHook, SyncHook } from 'tapable';
import type { Context, UpstreamRequest } from './context.js';

export type Hooks = Readonly<{
  /** Decide where the request goes: match, allowlist, body, aliases, candidates. A step that
   *  answered the request itself (a preflight, an intercept) returns true to stop; errors are thrown. */
  request: AsyncSeriesBailHook<[Context], true | void>;
  /** Once per attempt, for ctx.endpoint: shape what is sent upstream (path, headers, body). */
  upstream: SyncHook<[Context, UpstreamRequest]>;
  /** The terminal step (exactly one per pipeline): send the request and relay the reply. */
  dispatch: AsyncSeriesBailHook<[Context], true | void>;
  /** Just before the response head is written: add response headers to ctx.replyHeaders. */
  respond: SyncHook<[Context, number]>;
  /** After the response finished or the client went away: stats, logs. */
  done: SyncHook<[Context]>;
}>;

export function createHooks(): Hooks {
  return Object.freeze({
    request: new AsyncSeriesBailHook<[Context], true | void>(['ctx']),
    upstream: new SyncHook<[Context, UpstreamRequest]>(['ctx', 'upstream']),
    dispatch: new AsyncSeriesBailHook<[Context], true | void>(['ctx']),
    respond: new SyncHook<[Context, number]>(['ctx', 'status']),
    done: new SyncHook<[Context]>(['ctx']),
  });
}
