// The one place a response head is written. The server creates every response as a
// GatewayResponse, so whatever a step does — ctx.reply…, res.writeHead, or just res.end — the
// head goes through writeHead below: the route's respond hook runs (CORS, X-Gw-* and the rest
// cannot be skipped), its headers win over the step's, and values Node would refuse are encoded
// instead of throwing.
import { ServerResponse, type IncomingMessage, type OutgoingHttpHeader, type OutgoingHttpHeaders } from 'node:http';
import { StepFailed } from '../backends/failures.js';
import type { RequestContext } from './context.js';
import { sanitizedHeaders } from '../core/head.js';

type HeadersArg = OutgoingHttpHeaders | OutgoingHttpHeader[] | undefined;

function isHeaderError(err: unknown): boolean {
  const code = (err as { code?: string })?.code;
  return code === 'ERR_INVALID_CHAR' || code === 'ERR_HTTP_INVALID_HEADER_VALUE' || code === 'ERR_INVALID_HTTP_TOKEN';
}

/** A flat [name, value, …] list from any form Node's writeHead takes. */
function flat(headers: HeadersArg): string[] {
  if (!headers) return [];
  // The kernel's own callers pass a flat list already: read it as it is (never written to).
  if (Array.isArray(headers) && (headers.length === 0 || typeof headers[0] === 'string')) return headers as string[];
  const out: string[] = [];
  if (Array.isArray(headers)) {
    for (const [k, v] of headers as unknown as [string, string][]) out.push(k, String(v));
    return out;
  }
  for (const name in headers) {
    const v = headers[name];
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const x of v) out.push(name, String(x));
    else out.push(name, String(v));
  }
  return out;
}

function listed(flatList: string[], name: string): boolean {
  for (let i = 0; i < flatList.length; i += 2) if (flatList[i] === name) return true;
  return false;
}

export class GatewayResponse<Req extends IncomingMessage = IncomingMessage> extends ServerResponse<Req> {
  /** Set by the runner when a route takes the request; null for answers before routing. */
  ctx: RequestContext | null = null;

  override writeHead(status: number, a?: string | HeadersArg, b?: HeadersArg): this {
    // An informational head (1xx) is not the reply's: no respond hook, nothing recorded.
    if (this.headersSent || status < 200) return super.writeHead(status, a as never, b as never);
    const given = flat(typeof a === 'string' ? b : a);
    const ctx = this.ctx;
    if (!ctx) return this.rawWriteHead(status, given);
    const ours = ctx.replyHeaders;
    const mark = ours.length;
    try {
      ctx.status = status;
      ctx.responseStarted = true;
      ctx.hooks.respond.call(ctx, status);
      if (ours.length === 0) return this.rawWriteHead(status, given);
      // Lower-case names (as the steps write them): ours win over a backend's or a step's.
      const out: string[] = [];
      for (let i = 0; i < given.length; i += 2) {
        const name = given[i].toLowerCase();
        if (!listed(ours, name)) out.push(name, given[i + 1]);
      }
      for (let i = 0; i < ours.length; i++) out.push(ours[i]);
      return this.rawWriteHead(status, out);
    } catch (err) {
      // Nothing went out: undo what this head added, so an error reply starts clean.
      ours.length = mark;
      ctx.status = 0;
      ctx.responseStarted = false;
      throw err instanceof StepFailed ? err : new StepFailed(err);
    }
  }

  /** Write the head without the respond hook (an error reply after that hook itself threw). A value
   *  Node refuses is encoded (a name it refuses dropped) and the head written again: Node checks
   *  every header before it stores any, so nothing was half-written. */
  rawWriteHead(status: number, headers: string[]): this {
    try {
      return super.writeHead(status, headers);
    } catch (err) {
      if (!isHeaderError(err)) throw err;
      return super.writeHead(status, sanitizedHeaders(headers));
    }
  }
}
