// The one place requests are sent upstream. A terminal step hands the kernel a policy — how to
// build the request for an endpoint, whether it may be sent twice, and how to shape the reply —
// and the kernel tries the candidates in order: it runs the `upstream` hook, sends through the
// endpoint's dispatch path (breaker, counts, health, stale-socket retry: backends/interceptors.ts),
// relays the reply with backpressure, and fails over while no byte reached the client:
// - nothing went out (refused, connect timeout, unreachable, TLS, an open breaker): next endpoint;
// - reset, closed or no reply head in time after the request went out: the next endpoint on a
//   replay-safe route; 502 or 504 otherwise — a request that is not replay-safe never runs twice.
// Each endpoint is tried once, within max_retries. Once the backend's reply head arrived nothing is
// retried, whatever the reply plan: the backend ran the request (a finished generation must not
// run twice). A reply that breaks after that ends with the broken-reply error (UPSTREAM_STREAM_BROKEN):
// in the stream when its head was relayed, as the reply itself when a buffer plan still held it.
// An endpoint with a concurrency limit (Endpoint.queue) admits the attempt first: a free slot at
// once, else a wait in its FIFO queue; a full queue sends the request on to the next candidate.
// The slot is given back exactly once, when the attempt is over. An endpoint with a requests-per-
// minute limit (Endpoint.rateGate) takes a token first: without one it is skipped, like a full queue.
import type { Dispatcher } from 'undici';
import type { Endpoint } from '../backends/endpoints.js';
import { BreakerOpen, ClientGone, connectionFailure, errorCode, StepFailed, unsendable } from '../backends/failures.js';
import { endpointsRateLimited, queueFull, waitForSlot } from './admission.js';
import { brokenReason, endAndClose, endBroken } from './broken-stream.js';
import type { Context, UpstreamRequest } from './context.js';
import { formatDuration } from './duration.js';
import { gwError } from './errors.js';
import type { ReplyHeaders } from './json.js';

type Controller = Dispatcher.DispatchController;

/** How a reply is shaped on its way to the client, decided when the backend's head arrives. */
export type ReplyPlan =
  /** As the backend sent it: status, headers (less hop-by-hop ones) and body, chunk by chunk;
   *  `headers` (flat) are added to the backend's. */
  | { kind: 'pipe'; headers?: string[] }
  /** A translated stream: a head of our own, each backend chunk turned into output as it comes. */
  | { kind: 'stream'; status: number; headers: string[]; first?: string; chunk(data: Buffer): string; end(): string; fail(reason: string): string }
  /** Read whole, then answered: `finish` builds the reply from the backend's status and body.
   *  Past `limit` the request fails, or, given an `overflow` pipe plan, the reply is relayed as
   *  that plan says after all (what was read first, then the rest as it comes). */
  | { kind: 'buffer'; limit: number; overflow?: PipePlan; discard?: false; finish: BufferFinish }
  /** The same, for a reply whose body is never used: read to its end and dropped as it comes
   *  (nothing kept, so no limit); `finish` gets an empty body. */
  | { kind: 'buffer'; discard: true; finish: BufferFinish };

type BufferFinish = (status: number, body: Buffer) => { status: number; headers: string[]; body: string | Buffer };

export type PipePlan = Extract<ReplyPlan, { kind: 'pipe' }>;

/** A terminal step's policy, made once when the step is applied (no allocation per request). */
export interface SendPolicy {
  /** Further endpoints tried after the first. */
  maxRetries: number;
  /** May the request go to the next endpoint after the backend may have read it? */
  replaySafe(ctx: Context, ep: Endpoint): boolean;
  /** Does this request take one of the endpoint's concurrency slots (its queue)? Absent: yes. */
  queued?(ctx: Context, ep: Endpoint): boolean;
  /** The request for this endpoint (the kernel then runs the upstream hook on it). */
  request(ctx: Context, ep: Endpoint): UpstreamRequest;
  /** How the reply is shaped; absent, or undefined for this reply: piped as is. */
  reply?(ctx: Context, status: number, headers: ReplyHeaders): ReplyPlan | undefined;
}

/** How one attempt ended: relayed (fully or cut after the first byte), or failed before any
 *  byte reached the client — `sent` when undici had started the request on a connected socket,
 *  `answered` when the backend's reply head had arrived (a buffer plan was holding the reply). */
type Outcome = { relayed: true } | { relayed: false; error: Error; sent: boolean; answered: boolean };
const RELAYED: Outcome = { relayed: true };
const PIPE: ReplyPlan = { kind: 'pipe' };

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);
const HOP_BY_HOP_AND_LENGTH = new Set([...HOP_BY_HOP, 'content-length']);

/** The backend's headers as a flat list, less hop-by-hop ones; `withLength: false` drops
 *  Content-Length too (a body the kernel measures again: a buffer plan's). */
export function backendHeaders(headers: ReplyHeaders, withLength = true): string[] {
  const skip = withLength ? HOP_BY_HOP : HOP_BY_HOP_AND_LENGTH;
  const out: string[] = [];
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || skip.has(name)) continue;
    if (typeof value === 'string') out.push(name, value);
    else for (const v of value) out.push(name, v);
  }
  return out;
}

/** One attempt: writes the reply into the client's response as it arrives (backpressure both
 *  ways), settles exactly once, and cancels the upstream request if the client goes away. */
class Relay implements Dispatcher.DispatchHandler {
  private controller: Controller | null = null;
  private settled = false;
  private readonly sentAt = performance.now();
  private sent = false;
  private status = 0;
  private headers: ReplyHeaders = {};
  private plan: ReplyPlan = PIPE;
  /** The last chunk relayed: whether a piped stream stopped mid-line decides how it is ended. */
  private lastChunk: Buffer | null = null;
  /** The endpoint whose active-stream count this reply holds, while it streams. */
  private streaming: Endpoint | null = null;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private readonly onClientClose = () => {
    if (!this.ctx.res.writableFinished) this.controller?.abort(new ClientGone());
  };

  constructor(private readonly ctx: Context, private readonly policy: SendPolicy, private readonly resolve: (o: Outcome) => void) {
    ctx.res.once('close', this.onClientClose);
  }

  /** The backend's final reply head arrived: it has run the request. */
  private get answered(): boolean {
    return this.status !== 0;
  }

  private settle(o: Outcome): void {
    if (this.settled) return;
    this.settled = true;
    // Here, not after the await: the done hook may run before sendUpstream resumes.
    this.ctx.upstreamMs += performance.now() - this.sentAt;
    if (this.streaming) this.streaming.streams--;
    this.ctx.res.off('close', this.onClientClose);
    this.resolve(o);
  }

  onRequestStart(controller: Controller): void {
    this.controller = controller;
    this.sent = true;
    if (this.ctx.res.destroyed) controller.abort(new ClientGone());
  }

  onResponseStart(_c: Controller, status: number, headers: ReplyHeaders): void {
    if (status < 200) return; // 1xx informational: the final head follows
    this.status = status;
    this.headers = headers;
    try {
      this.start(status, headers);
    } catch (err) {
      // Ours (a policy or a respond tap threw): undici aborts the request and reports it back.
      throw err instanceof StepFailed ? err : new StepFailed(err);
    }
  }

  private start(status: number, headers: ReplyHeaders): void {
    const plan = (this.plan = this.policy.reply?.(this.ctx, status, headers) ?? PIPE);
    const res = this.ctx.res;
    if (plan.kind === 'buffer') return;
    if (plan.kind === 'stream') {
      res.writeHead(plan.status, [...plan.headers, 'cache-control', 'no-cache']);
      this.streamStarted();
      if (plan.first) res.write(plan.first);
      return;
    }
    this.pipeHead(status, headers, plan.headers);
  }

  private pipeHead(status: number, headers: ReplyHeaders, extra: string[] | undefined): void {
    const out = backendHeaders(headers);
    if (extra) for (const h of extra) out.push(h);
    this.ctx.res.writeHead(status, out);
    // A reply without a length is a stream: send the head now so the client sees it before the first event.
    if (headers['content-length'] === undefined) {
      this.ctx.res.flushHeaders();
      this.streamStarted();
    }
  }

  /** The reply is a stream: counted on its endpoint while it lasts (active streams). */
  private streamStarted(): void {
    const ep = this.ctx.endpoint;
    this.ctx.streamed = true;
    if (ep && !this.streaming) {
      ep.streams++;
      this.streaming = ep;
    }
  }

  /** A buffer plan's reply outgrew its limit: relay it as the backend sent it after all. */
  private overflowToPipe(controller: Controller, pipe: PipePlan): void {
    this.plan = pipe;
    this.pipeHead(this.status, this.headers, pipe.headers);
    const held = Buffer.concat(this.chunks, this.size);
    this.chunks.length = 0;
    this.lastChunk = held;
    if (!this.ctx.res.write(held)) {
      controller.pause();
      this.ctx.res.once('drain', () => controller.resume());
    }
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    const plan = this.plan;
    if (plan.kind === 'buffer') {
      if (plan.discard) return;
      this.size += chunk.length;
      this.chunks.push(chunk);
      if (this.size <= plan.limit) return;
      if (!plan.overflow) {
        controller.abort(new Error(`the backend reply is larger than ${plan.limit} bytes`));
        return;
      }
      try {
        this.overflowToPipe(controller, plan.overflow);
      } catch (err) {
        controller.abort(new StepFailed(err));
      }
      return;
    }
    let out: Buffer | string = chunk;
    if (plan.kind === 'stream') {
      try {
        out = plan.chunk(chunk);
      } catch (err) {
        controller.abort(new StepFailed(err));
        return;
      }
      if (!out) return;
    } else this.lastChunk = chunk;
    if (this.ctx.firstChunkMs === 0) this.ctx.firstChunkMs = this.ctx.elapsedMs();
    if (!this.ctx.res.write(out)) {
      controller.pause();
      this.ctx.res.once('drain', () => controller.resume());
    }
  }

  onResponseEnd(): void {
    try {
      const plan = this.plan;
      const res = this.ctx.res;
      if (plan.kind === 'buffer') {
        const reply = plan.finish(this.status, Buffer.concat(this.chunks, this.size));
        res.writeHead(reply.status, [...reply.headers, 'content-length', String(typeof reply.body === 'string' ? Buffer.byteLength(reply.body) : reply.body.length)]);
        res.end(this.ctx.method === 'HEAD' ? undefined : reply.body);
      } else res.end(plan.kind === 'stream' ? plan.end() : undefined);
      this.settle(RELAYED);
    } catch (err) {
      this.settle({ relayed: false, error: err instanceof StepFailed ? err : new StepFailed(err), sent: true, answered: true });
    }
  }

  /** undici turns a throw from here into an 'error' event nobody listens to (a crash): never throw. */
  onResponseError(_c: Controller, error: Error): void {
    try {
      this.failed(error);
    } catch (err) {
      this.ctx.res.destroy();
      this.settle({ relayed: false, error: new StepFailed(err), sent: this.sent, answered: this.answered });
    }
  }

  private failed(error: Error): void {
    const ctx = this.ctx;
    if (error instanceof ClientGone || ctx.res.destroyed) {
      ctx.error = error;
      this.settle(RELAYED);
    } else if (error instanceof StepFailed || !ctx.res.headersSent) {
      // Nothing reached the client: the kernel fails over or answers with an error.
      this.settle({ relayed: false, error, sent: this.sent, answered: this.answered });
    } else {
      // The head already reached the client: no retry, no splice; end its stream saying why.
      ctx.error = error;
      const reason = brokenReason(error, ctx.endpoint?.timeouts.idleMs ?? 0);
      const plan = this.plan;
      if (plan.kind === 'stream') endAndClose(ctx, plan.fail(`endpoint ${ctx.endpoint?.name} ${reason}; the reply is incomplete`));
      else endBroken(ctx, this.headers, this.lastChunk, reason);
      this.settle(RELAYED);
    }
  }
}

function attempt(ctx: Context, ep: Endpoint, policy: SendPolicy, replaySafe: boolean): Promise<Outcome> {
  const up = policy.request(ctx, ep);
  ctx.hooks.upstream.call(ctx, up);
  return new Promise((resolve) => {
    ep.dispatch({ path: up.path, method: up.method as Dispatcher.HttpMethod, headers: up.headers, body: up.body, replaySafe }, new Relay(ctx, policy, resolve));
  });
}

/** A reply that failed after its head arrived, while a buffer plan held it: the backend ran the
 *  request, so it is not sent again. The backend's failure (a code: reset, closed, idle) is the
 *  broken-reply error a piped reply ends with; one of ours (a reply over the plan's limit) is
 *  UPSTREAM_ERROR, as before. */
function afterHead(ep: Endpoint, error: Error): Error {
  if (errorCode(error) === undefined) return gwError('UPSTREAM_ERROR', { endpoint: ep.name, reason: error.message });
  return gwError('UPSTREAM_STREAM_BROKEN', { endpoint: ep.name, reason: brokenReason(error, ep.timeouts.idleMs) });
}

/** Send the request to ctx.candidates in order (see the top of this file) — or to `candidates`,
 *  a subset a terminal step narrowed them to (those that serve the path, say); resolves once a
 *  reply was relayed, or throws the error the client should get. */
export async function sendUpstream(ctx: Context, policy: SendPolicy, candidates: readonly Endpoint[] = ctx.candidates): Promise<true> {
  const log = ctx.route.log;
  let skipped = 0;
  let failed = 0;
  let last: string | undefined;
  let full: Endpoint[] | null = null;
  let limited: Endpoint[] | null = null;
  for (const ep of candidates) {
    if (ctx.attempts > policy.maxRetries) break;
    // Removed by a reload since the candidates were chosen: it takes no new requests.
    if (ep.retired) continue;
    // A requests-per-minute limit: a token, or the next candidate (given back if not sent).
    const gate = ep.rateGate;
    if (gate && !gate.tryTake()) {
      (limited ??= []).push(ep);
      continue;
    }
    // Decided before any slot is taken: a policy that throws leaves no slot held.
    const safe = policy.replaySafe(ctx, ep);
    // A concurrency limit: a free slot at once (no allocation), else a wait in the queue.
    const queue = ep.queue !== null && (policy.queued === undefined || policy.queued(ctx, ep)) ? ep.queue : null;
    if (queue && !queue.tryEnter()) {
      const waitFrom = performance.now();
      let turn;
      try {
        turn = await waitForSlot(ctx, ep, queue);
      } finally {
        if (turn !== 'admitted') gate?.refund();
      }
      ctx.queueMs += performance.now() - waitFrom;
      if (turn === 'full') {
        (full ??= []).push(ep);
        continue;
      }
      if (turn === 'gone') {
        ctx.error = new ClientGone();
        return true;
      }
      if (turn === 'retired') continue;
    }
    const admittedAt = queue ? performance.now() : 0;
    ctx.endpoint = ep;
    ctx.attempts++;
    let outcome: Outcome;
    try {
      outcome = await attempt(ctx, ep, policy, safe);
    } finally {
      queue?.release(admittedAt);
    }
    if (outcome.relayed) {
      if (ctx.responseStarted && ctx.error && !(ctx.error instanceof ClientGone)) log.warn({ req: ctx.id, endpoint: ep.name, err: ctx.error }, 'the reply broke off after it had started');
      return true;
    }
    const { error, sent, answered } = outcome;
    if (error instanceof BreakerOpen) {
      // Nothing went out: the endpoint's token is given back.
      ep.rateGate?.refund();
      ctx.attempts--;
      ctx.endpoint = null;
      skipped++;
      continue;
    }
    if (error instanceof StepFailed) throw error.failure;
    if (unsendable(error)) throw gwError('BAD_REQUEST', { reason: `the request cannot be forwarded as it is: ${error.message}` });
    if (answered) throw afterHead(ep, error);
    const code = errorCode(error) ?? error.message;
    // Before the request went out anything is a connection failure (a TLS error too).
    const failure = connectionFailure(error) ?? (sent ? undefined : `connect failed (${code})`);
    const timeout = formatDuration(ep.timeouts.responseMs);
    if (!failure) throw gwError('UPSTREAM_ERROR', { endpoint: ep.name, reason: code });
    if (sent && !safe) {
      if (failure === 'timeout') throw gwError('UPSTREAM_TIMEOUT', { endpoint: ep.name, timeout, detail: 'not sent again: this route is not replay-safe (model management)' });
      throw gwError('UPSTREAM_ERROR', {
        endpoint: ep.name,
        reason: `connection ${failure} after the backend may have read the ${ctx.method} request; not sent again, so it never runs twice (model-management routes are not replay-safe)`,
      });
    }
    // Never reached the backend: its requests-per-minute token is given back.
    if (!sent) ep.rateGate?.refund();
    failed++;
    last = failure;
    log.warn({ req: ctx.id, endpoint: ep.name, failure }, 'attempt failed; trying the next endpoint');
  }
  const provider = ctx.family ?? ctx.route.pipeline;
  // Busy, not broken: the client should come back shortly.
  if (full && failed === 0) queueFull(ctx, full);
  if (limited && failed === 0) endpointsRateLimited(ctx, limited);
  if (failed === 0 && skipped > 0) throw gwError('CIRCUIT_BREAKER', { provider, skipped });
  throw gwError('ENDPOINT_UNAVAILABLE', {
    provider,
    reason: `${failed} endpoint${failed === 1 ? '' : 's'} failed${last ? ` (last: ${last})` : ''}, ${skipped} skipped for an open circuit breaker${full ? `, ${full.length} with a full queue` : ''}`,
  });
}
