// JSON replies the gateway reads itself, never past a size limit: model details during discovery
// (model-info.ts) and the lists a merged model-list route asks every endpoint for (api/ps).
// askEndpoint sends through the endpoint's dispatch path like proxied traffic (breaker admission
// and outcome, in-flight counts, health, stale-socket retry: interceptors.ts), gives up after its
// own time limit, and is cancelled by the caller's signal (its client left).
import type { Dispatcher } from 'undici';
import type { Endpoint } from './endpoints.js';

type Controller = Dispatcher.DispatchController;

/** A body collected in memory up to `limit` bytes; add() throws past it. */
export class BoundedBody {
  private readonly chunks: Buffer[] = [];
  private size = 0;

  constructor(
    private readonly limit: number,
    private readonly what: string,
  ) {}

  add(chunk: Buffer): void {
    this.size += chunk.length;
    if (this.size > this.limit) throw new Error(`${this.what} larger than ${this.limit} bytes`);
    this.chunks.push(chunk);
  }

  text(): string {
    return Buffer.concat(this.chunks, this.size).toString('utf8');
  }

  /** The body parsed as JSON (a SyntaxError when it is not). */
  json(): unknown {
    return JSON.parse(this.text());
  }
}

/** A reply body (undici's, read as it streams) parsed as JSON, refused past `limit` bytes. */
export async function readJson(body: AsyncIterable<unknown>, limit: number, what: string): Promise<unknown> {
  const into = new BoundedBody(limit, what);
  for await (const chunk of body) into.add(chunk as Buffer);
  return into.json();
}

export interface AskOptions {
  /** Flat [name, value…] list, sent as they are. */
  headers: string[];
  /** Aborts the request; the promise rejects with the signal's reason (ClientGone: no one's failure). */
  signal: AbortSignal;
  timeoutMs: number;
  /** The most bytes of reply read. */
  limit: number;
  /** Named in the error past the limit ("the api/ps reply"). */
  what: string;
}

/** GET `path` (the request's path and query; the endpoint's base path is added) of one
 *  endpoint: its reply parsed as JSON when it answered 200, else a rejection saying why. */
export function askEndpoint(ep: Endpoint, path: string, o: AskOptions): Promise<unknown> {
  return new Promise((resolve, reject) => {
    if (o.signal.aborted) {
      reject(o.signal.reason);
      return;
    }
    const handler = new JsonReply(o, resolve, reject);
    try {
      ep.dispatch({ path: ep.upstreamPath(path), method: 'GET', headers: o.headers, body: null, replaySafe: true }, handler);
    } catch (err) {
      handler.onResponseError(null, err as Error);
    }
  });
}

/** One attempt's handler: settles its promise once, at the reply head for a status other than
 *  200 (that body is read on and dropped, so the breaker sees how the reply ended) or at the end. */
class JsonReply implements Dispatcher.DispatchHandler {
  private controller: Controller | null = null;
  /** Why it was cancelled, kept for an attempt not started yet. */
  private reason: Error | null = null;
  private body: BoundedBody | null = null;
  /** Bytes of a reply that is not read (not a 200): past the limit, the attempt is cancelled. */
  private dropped = 0;
  private settled = false;
  private over = false;
  private readonly timer: NodeJS.Timeout;
  private readonly onAbort = () => this.abort(this.o.signal.reason as Error);

  constructor(
    private readonly o: AskOptions,
    private readonly resolve: (v: unknown) => void,
    private readonly reject: (e: Error) => void,
  ) {
    o.signal.addEventListener('abort', this.onAbort, { once: true });
    this.timer = setTimeout(() => this.abort(new Error(`no reply within ${o.timeoutMs} ms`)), o.timeoutMs);
  }

  private settle(err: Error | null, value?: unknown): void {
    if (this.settled) return;
    this.settled = true;
    if (err) this.reject(err);
    else this.resolve(value);
  }

  private abort(reason: Error): void {
    if (this.over) return;
    this.reason = reason;
    this.settle(reason);
    this.controller?.abort(reason);
  }

  private finish(): void {
    this.over = true;
    clearTimeout(this.timer);
    this.o.signal.removeEventListener('abort', this.onAbort);
  }

  onRequestStart(controller: Controller): void {
    this.controller = controller;
    if (this.reason) controller.abort(this.reason);
  }

  onResponseStart(_c: Controller, status: number): void {
    if (status < 200) return;
    if (status === 200) this.body = new BoundedBody(this.o.limit, this.o.what);
    else this.settle(new Error(`answered ${status}`));
  }

  onResponseData(_c: Controller, chunk: Buffer): void {
    try {
      if (this.body) this.body.add(chunk);
      else if ((this.dropped += chunk.length) > this.o.limit) throw new Error(`${this.o.what} larger than ${this.o.limit} bytes`);
    } catch (err) {
      this.abort(err as Error);
    }
  }

  onResponseEnd(): void {
    this.finish();
    if (!this.body) return this.settle(new Error('no reply'));
    let value: unknown;
    try {
      value = this.body.json();
    } catch {
      return this.settle(new Error('the reply is not JSON'));
    }
    this.settle(null, value);
  }

  onResponseError(_c: Controller | null, error: Error): void {
    this.finish();
    this.settle(error);
  }
}
