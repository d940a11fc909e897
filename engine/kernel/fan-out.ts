// One request asking several endpoints at once (a merged model list): each through its send
// path, all cancelled together when the client leaves. The kernel's, so a step never wires the
// client's connection itself.
import type { Endpoint } from '../backends/endpoints.js';
import { ClientGone } from '../backends/failures.js';
import type { Context } from './context.js';

/** `ask` every endpoint at once (with a signal that aborts with ClientGone when the client
 *  leaves); their answers in order, or null when the client left before they were in. */
export async function askEach<T>(ctx: Context, endpoints: readonly Endpoint[], ask: (ep: Endpoint, signal: AbortSignal) => Promise<T>): Promise<T[] | null> {
  const gone = new AbortController();
  const onClose = () => {
    if (!ctx.res.writableFinished) gone.abort(new ClientGone());
  };
  ctx.res.once('close', onClose);
  try {
    const answers = await Promise.all(endpoints.map((ep) => ask(ep, gone.signal)));
    return gone.signal.aborted ? null : answers;
  } finally {
    ctx.res.off('close', onClose);
  }
}
