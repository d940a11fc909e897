// One attempt at one endpoint: an undici dispatch whose handler writes the reply straight into
// the client's response. Chunks go out as they arrive (no buffering), with backpressure both
// ways, and a client that goes away cancels the upstream request.
import type { Dispatcher } from 'undici';
import type { Context, UpstreamRequest } from '../../engine/context.js';
import { writeHead } from '../../engine/head.js';
import { brokenReason, endBroken } from './broken-stream.js';

/** How an attempt ended: relayed (fully or cut after the first byte), or failed before any
 *  byte — `sent` when the request had begun to go out on a connected socket (so the backend may
 *  have read it), whatever the error's code says. */
export type Outcome = { relayed: true } | { relayed: false; error: Error; sent: boolean };
const RELAYED: Outcome = { relayed: true };

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

export class ClientGone extends Error {
  constructor() {
    super('client closed the connection');
  }
}

/** A step of ours failed while the reply head was being written (a respond tap that threw): a
 *  gateway bug for a 500, not a failure of the endpoint. */
export class StepFailed extends Error {
  constructor(readonly failure: unknown) {
    super('a step failed while writing the reply head');
  }
}

/** The reply is about to start: run the respond hook, whose throw is ours (nothing was sent yet);
 *  the caller then writes the head with ctx.replyHeaders. */
export function startReply(ctx: Context, status: number): void {
  ctx.status = status;
  ctx.responseStarted = true;
  try {
    ctx.hooks.respond.call(ctx, status);
  } catch (err) {
    ctx.responseStarted = false;
    throw new StepFailed(err);
  }
}

function listed(flat: string[], name: string): boolean {
  for (let i = 0; i < flat.length; i += 2) if (flat[i] === name) return true;
  return false;
}

export type Controller = Parameters<NonNullable<Dispatcher.DispatchHandler['onRequestStart']>>[0];

/** What every attempt handler shares: a client that leaves cancels the upstream request, and
 *  the attempt settles exactly once. */
export abstract class AttemptHandler implements Dispatcher.DispatchHandler {
  private controller: Controller | null = null;
  private settled = false;
  /** undici starts a request only on a connected socket, just before writing it. */
  protected sent = false;
  private readonly onClientClose = () => {
    if (!this.ctx.res.writableFinished) this.controller?.abort(new ClientGone());
  };

  constructor(protected readonly ctx: Context, private readonly resolve: (o: Outcome) => void) {
    ctx.res.once('close', this.onClientClose);
  }

  protected settle(o: Outcome): void {
    if (this.settled) return;
    this.settled = true;
    this.ctx.res.off('close', this.onClientClose);
    this.resolve(o);
  }

  onRequestStart(controller: Controller): void {
    this.controller = controller;
    this.sent = true;
    if (this.ctx.res.destroyed) controller.abort(new ClientGone());
  }

  /** undici turns a throw from here into an 'error' event nobody listens to (a crash): never throw. */
  onResponseError(controller: Controller, error: Error): void {
    if (error instanceof StepFailed) {
      this.settle({ relayed: false, error, sent: this.sent });
      return;
    }
    try {
      this.failed(controller, error);
    } catch (err) {
      this.ctx.res.destroy();
      this.settle({ relayed: false, error: new StepFailed(err), sent: this.sent });
    }
  }

  /** The attempt failed (before the reply, or while relaying it). */
  protected abstract failed(controller: Controller, error: Error): void;
}

/** Send one attempt through the dispatcher with the given handler. */
export function dispatchAttempt(dispatcher: Dispatcher, up: UpstreamRequest, handler: AttemptHandler): void {
  try {
    dispatcher.dispatch({ path: up.path, method: up.method, headers: up.headers, body: up.body }, handler);
  } catch (err) {
    handler.onResponseError(null as unknown as Controller, err as Error);
  }
}

class RelayHandler extends AttemptHandler {
  private headers: Record<string, string | string[] | undefined> = {};
  /** The last chunk relayed: whether the stream stopped mid-line decides how it is ended. */
  private lastChunk: Buffer | null = null;

  onResponseStart(_c: Controller, status: number, headers: Record<string, string | string[] | undefined>): void {
    if (status < 200) return; // 1xx informational: the final head follows
    const ctx = this.ctx;
    this.headers = headers;
    startReply(ctx, status);
    const ours = ctx.replyHeaders;
    const out: string[] = [];
    for (const name in headers) {
      const value = headers[name];
      if (value === undefined || HOP_BY_HOP.has(name) || listed(ours, name)) continue;
      if (typeof value === 'string') out.push(name, value);
      else for (const v of value) out.push(name, v);
    }
    for (let i = 0; i < ours.length; i++) out.push(ours[i]);
    writeHead(ctx.res, status, out);
    // A reply without a length is a stream: send the head now so the client sees it before the first event.
    if (headers['content-length'] === undefined) ctx.res.flushHeaders();
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    this.lastChunk = chunk;
    if (!this.ctx.res.write(chunk)) {
      controller.pause();
      this.ctx.res.once('drain', () => controller.resume());
    }
  }

  onResponseEnd(): void {
    this.ctx.res.end();
    this.settle(RELAYED);
  }

  protected failed(_c: Controller, error: Error): void {
    const ctx = this.ctx;
    if (error instanceof ClientGone || ctx.res.destroyed) {
      ctx.error = error;
      this.settle(RELAYED);
    } else if (ctx.responseStarted) {
      // The head already reached the client: no retry, no splice; end its stream saying why.
      ctx.error = error;
      endBroken(ctx, this.headers, this.lastChunk, brokenReason(error, ctx.endpoint?.timeouts.idleMs ?? 0));
      this.settle(RELAYED);
    } else {
      this.settle({ relayed: false, error, sent: this.sent });
    }
  }
}

export function relay(ctx: Context, dispatcher: Dispatcher, up: UpstreamRequest): Promise<Outcome> {
  return new Promise((resolve) => dispatchAttempt(dispatcher, up, new RelayHandler(ctx, resolve)));
}

/**
 * What a connection-level failure was, in words (whether the request was sent is the outcome's
 * `sent`, not the code's business: a timeout can hit a connected socket too):
 * - refused, connect timeout, unreachable: typically before the request went out;
 * - reset, closed: the connection died without a reply;
 * - timeout: no reply head within the endpoint's response timeout.
 */
export type ConnectionFailure = 'refused' | 'connect timeout' | 'unreachable' | 'reset' | 'closed' | 'timeout';

const CONNECTION_CODES = new Map<string, ConnectionFailure>([
  ['ECONNREFUSED', 'refused'],
  ['ECONNRESET', 'reset'],
  ['EPIPE', 'reset'],
  ['UND_ERR_SOCKET', 'closed'],
  ['UND_ERR_CONNECT_TIMEOUT', 'connect timeout'],
  ['ETIMEDOUT', 'connect timeout'],
  ['EHOSTUNREACH', 'unreachable'],
  ['ENETUNREACH', 'unreachable'],
  ['EHOSTDOWN', 'unreachable'],
  ['ENOTFOUND', 'unreachable'],
  ['EAI_AGAIN', 'unreachable'],
  ['EADDRNOTAVAIL', 'unreachable'],
  ['UND_ERR_HEADERS_TIMEOUT', 'timeout'],
]);

/** A connection-level failure (the request may go to another endpoint), or undefined. */
export function connectionFailure(err: unknown): ConnectionFailure | undefined {
  const e = err as { code?: string; errors?: { code?: string }[]; cause?: { code?: string } };
  const code = e?.code ?? e?.errors?.[0]?.code ?? e?.cause?.code;
  return code ? CONNECTION_CODES.get(code) : undefined;
}

/** undici refused to send the request as it is (a header it cannot forward, say): the client's
 *  request is the problem, not the endpoint. */
export function unsendable(err: unknown): boolean {
  const code = (err as { code?: string })?.code;
  return code === 'UND_ERR_INVALID_ARG' || code === 'UND_ERR_NOT_SUPPORTED' || code === 'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH';
}

/** The reply broke after its head reached the client (a failure of the endpoint, not the client's). */
export function brokeAfterStart(ctx: Context): boolean {
  return ctx.responseStarted && ctx.error !== null && !(ctx.error instanceof ClientGone);
}
