// One attempt at one endpoint: an undici dispatch whose handler writes the reply straight into
// the client's response. Chunks go out as they arrive (no buffering), with backpressure both
// ways, and a client that goes away cancels the upstream request.
import type { Dispatcher } from 'undici';
import type { Context, UpstreamRequest } from '../../engine/context.js';

/** How an attempt ended: relayed (fully or cut after the first byte), or failed before any byte. */
export type Outcome = { relayed: true } | { relayed: false; error: Error };
const RELAYED: Outcome = { relayed: true };

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

export class ClientGone extends Error {
  constructor() {
    super('client closed the connection');
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
    if (this.ctx.res.destroyed) controller.abort(new ClientGone());
  }

  abstract onResponseError(controller: Controller, error: Error): void;
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

  onResponseStart(_c: Controller, status: number, headers: Record<string, string | string[] | undefined>): void {
    if (status < 200) return; // 1xx informational: the final head follows
    const ctx = this.ctx;
    ctx.status = status;
    ctx.responseStarted = true;
    ctx.hooks.respond.call(ctx, status);
    const ours = ctx.replyHeaders;
    const out: string[] = [];
    for (const name in headers) {
      const value = headers[name];
      if (value === undefined || HOP_BY_HOP.has(name) || listed(ours, name)) continue;
      if (typeof value === 'string') out.push(name, value);
      else for (const v of value) out.push(name, v);
    }
    for (let i = 0; i < ours.length; i++) out.push(ours[i]);
    ctx.res.writeHead(status, out);
    // A reply without a length is a stream: send the head now so the client sees it before the first event.
    if (headers['content-length'] === undefined) ctx.res.flushHeaders();
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    if (!this.ctx.res.write(chunk)) {
      controller.pause();
      this.ctx.res.once('drain', () => controller.resume());
    }
  }

  onResponseEnd(): void {
    this.ctx.res.end();
    this.settle(RELAYED);
  }

  onResponseError(_c: Controller, error: Error): void {
    const ctx = this.ctx;
    if (error instanceof ClientGone || ctx.res.destroyed) {
      ctx.error = error;
      this.settle(RELAYED);
    } else if (ctx.responseStarted) {
      // Bytes already reached the client: no retry, no splice; end its stream.
      ctx.error = error;
      ctx.res.destroy(error);
      this.settle(RELAYED);
    } else {
      this.settle({ relayed: false, error });
    }
  }
}

export function relay(ctx: Context, dispatcher: Dispatcher, up: UpstreamRequest): Promise<Outcome> {
  return new Promise((resolve) => dispatchAttempt(dispatcher, up, new RelayHandler(ctx, resolve)));
}

/**
 * How an attempt failed before any response byte:
 * - refused, connect timeout, unreachable: the request never reached a backend;
 * - reset: the connection was reset (RST), so the backend did not take the whole request;
 * - closed: the backend closed the connection cleanly after taking the request — it may have run it.
 */
export type ConnectionFailure = 'refused' | 'reset' | 'closed' | 'connect timeout' | 'unreachable';

const CONNECTION_CODES: Record<string, ConnectionFailure> = {
  ECONNREFUSED: 'refused',
  ECONNRESET: 'reset',
  EPIPE: 'reset',
  UND_ERR_SOCKET: 'closed',
  UND_ERR_CONNECT_TIMEOUT: 'connect timeout',
  ETIMEDOUT: 'connect timeout',
  EHOSTUNREACH: 'unreachable',
  ENETUNREACH: 'unreachable',
  EHOSTDOWN: 'unreachable',
  ENOTFOUND: 'unreachable',
  EAI_AGAIN: 'unreachable',
  EADDRNOTAVAIL: 'unreachable',
};

/** A connection error (the request can go to another endpoint), or undefined. */
export function connectionFailure(err: unknown): ConnectionFailure | undefined {
  const e = err as { code?: string; errors?: { code?: string }[]; cause?: { code?: string } };
  const code = e?.code ?? e?.errors?.[0]?.code ?? e?.cause?.code;
  return code ? CONNECTION_CODES[code] : undefined;
}
