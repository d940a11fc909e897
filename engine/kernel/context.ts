// One request's state, shared by the steps of its pipeline. A class with a fixed shape so the
// hot path stays monomorphic. Each field has one owner (named beside it): the step that sets it;
// every other step reads it. Plugins keep their own extras in `state`.
import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import type { Endpoint } from '../backends/endpoints.js';
import { ClientGone } from '../backends/failures.js';
import { findModelField, type ModelField } from '../core/body-model.js';
import type { Hooks } from './hooks.js';
import type { Profile } from '../core/profiles.js';
import type { GatewayResponse } from './response.js';
import type { EndpointQueue, Waiter } from '../backends/queue.js';

export interface UpstreamRequest {
  method: string;
  /** Endpoint base path + the request's path and query. */
  path: string;
  /** Flat [name, value, name, value…] list. */
  headers: string[];
  body: Buffer | null;
  /** Client headers not to forward on this attempt (upstream-headers asks per lower-case name):
   *  a terminal step that translated the request to another API sets it, since the client's
   *  API-specific headers (its key among them) mean nothing to that backend. */
  omitClientHeader?: (name: string) => boolean;
}

/** What a compiled route knows at load: its pipeline, hooks and (for proxy routes) family and prefix. */
export interface RouteInfo {
  pipeline: string;
  hooks: Hooks;
  profile?: Profile;
  /** The mount prefix to strip, e.g. "/gw/localrunner". */
  prefix?: string;
  /** How errors are rendered on this route. */
  errorFormat: 'gateway' | 'msgapi';
  /** The quoted body keys the model is read from (the profile's request.model_field_paths); default `"model"`. */
  modelKeys?: readonly Buffer[];
  log: Logger;
}

const CALLER_ID = /^[A-Za-z0-9._:\-]{1,128}$/;
const NOT_PARSED = Symbol('not parsed');

/** One attempt that failed and was followed by another (or by the last answer held back). */
export interface FailedAttempt {
  endpoint: string;
  /** The endpoint's family (metrics label). */
  family: string;
  model: string | undefined;
  /** What happened, short: "503", "reset", "first_token_timeout", "stream_error"… */
  outcome: string;
  /** This attempt's failure is the request's answer (held back, or the last one): it is not a
   *  retry, and counts once against its endpoint. */
  answered?: boolean;
}

/** How model-aware routing decided (X-Gw-Routing-* headers). */
export interface RoutingInfo {
  strategy: string;
  decision: 'routed' | 'fallback' | 'rejected';
  reason: string;
  /** For an alias: the real model name each candidate endpoint serves. */
  aliasTargets?: Map<Endpoint, string>;
}

export class Context {
  readonly start = performance.now();
  readonly id: string;
  /** Path and query as the backend should see them. Owner: match-prefix (the URL until then). */
  path: string;
  /** `path` without the query. Owner: match-prefix. */
  pathname: string;
  /** The request body, whole (replayable for failover). Owner: read-body. */
  body: Buffer | null = null;
  /** How model routing decided. Owners: alias-resolve, select-endpoint. */
  routing: RoutingInfo | null = null;
  /** The endpoints to try, in order. Owner: select-endpoint. */
  candidates: readonly Endpoint[] = [];
  /** By candidate index, the model that candidate is asked for when routing chose a name other
   *  than the body's (an alias's real names, a fallback chain's next models); null: the body's
   *  model everywhere. Owner: select-endpoint. */
  candidateModels: readonly (string | undefined)[] | null = null;
  /** The index of the first candidate that serves a fallback model (candidates.length: none).
   *  Owner: select-endpoint. */
  fallbackFrom = Infinity;
  /** The model the current attempt asks its endpoint for (candidateModels), undefined: the
   *  body's. Owner: the kernel; rewrite-model and translators put it in the body. */
  attemptModel: string | undefined = undefined;
  /** The attempts that failed before the one that answered (access log, metrics); null: none.
   *  Owner: the kernel. */
  tried: FailedAttempt[] | null = null;
  /** The model sent upstream when a step changed it (an alias resolved). Owner: rewrite-model. */
  sentModel: string | undefined = undefined;
  /** The endpoint of the current (or last) attempt. Owner: the kernel. */
  endpoint: Endpoint | null = null;
  /** Endpoints tried. Owner: the kernel. */
  attempts = 0;
  /** Headers every reply head of this request carries. Owners: respond taps (and cors). */
  readonly replyHeaders: string[] = [];
  /** The reply status once its head was written. Owner: the kernel. */
  status = 0;
  /** True once the reply head went to the client: no retry, no error reply after that. Owner: the kernel. */
  responseStarted = false;
  /** What went wrong, if anything (a GatewayError, an upstream error, ClientGone). Owner: the kernel. */
  error: unknown = null;
  /** Milliseconds from arrival to the reply head, and to the end. Owner: the kernel (hooks.ts). */
  headMs = 0;
  totalMs = 0;
  /** Milliseconds spent in upstream attempts (sent to settled), and waiting for an endpoint's
   *  concurrency slot; the rest of totalMs is the gateway's own time. Owner: the kernel. */
  upstreamMs = 0;
  queueMs = 0;
  /** The endpoint queue this request waits in now, if any: the kernel's close listener takes it
   *  out of the queue when its client goes away. Owner: the kernel (admission.ts). */
  waiting: { queue: EndpointQueue; waiter: Waiter } | null = null;
  /** The reply is relayed as a stream (no Content-Length, or translated to events). Owner: the kernel. */
  streamed = false;
  /** Milliseconds from arrival to the first reply body chunk relayed; 0 before it. Owner: the kernel. */
  firstChunkMs = 0;
  /** Tokens the backend reported in its reply's `usage`, where a step read that reply anyway
   *  (never parsed for this alone). Owner: the terminal step (translate). */
  usage: { input?: number; output?: number } | null = null;
  private parsed: unknown = NOT_PARSED;
  private modelField: ModelField | null | typeof NOT_PARSED = NOT_PARSED;
  private extras: Record<string, unknown> | null = null;

  constructor(readonly req: IncomingMessage, readonly res: GatewayResponse, readonly route: RouteInfo) {
    const callerId = req.headers['x-request-id'];
    this.id = typeof callerId === 'string' && CALLER_ID.test(callerId) ? callerId : `req-${randomUUID()}`;
    const url = req.url ?? '/';
    this.path = url;
    const q = url.indexOf('?');
    this.pathname = q < 0 ? url : url.slice(0, q);
  }

  get hooks(): Hooks {
    return this.route.hooks;
  }

  get method(): string {
    return this.req.method ?? 'GET';
  }

  get headers(): IncomingHttpHeaders {
    return this.req.headers;
  }

  /** A request header (lower-case name), the first value when repeated. */
  header(name: string): string | undefined {
    const v = this.req.headers[name];
    return Array.isArray(v) ? v[0] : v;
  }

  /** The backend family of the route (proxy routes), else undefined. */
  get family(): string | undefined {
    return this.route.profile?.name;
  }

  /** The one way to read the model: the name sent upstream if a step changed it, else the
   *  top-level model string of a JSON object body (`model`, or the family's
   *  request.model_field_paths, first present wins). */
  get model(): string | undefined {
    if (this.sentModel !== undefined) return this.sentModel;
    const value = this.modelSpan()?.value;
    return typeof value === 'string' && value ? value : undefined;
  }

  /** The body parsed as JSON, once, on first use; undefined when there is none or it is not JSON. */
  bodyJson(): unknown {
    if (this.parsed === NOT_PARSED) {
      this.parsed = undefined;
      if (this.body && this.body.length > 0 && this.body[0] !== 0x3c /* '<' */) {
        try {
          this.parsed = JSON.parse(this.body.toString('utf8'));
        } catch {
          // Not JSON: the body is forwarded untouched and nothing is read from it.
        }
      }
    }
    return this.parsed;
  }

  /** Where the top-level model string of a JSON object body sits, found once without a full parse. */
  modelSpan(): ModelField | null {
    if (this.modelField === NOT_PARSED) this.modelField = this.body && this.body.length > 0 ? findModelField(this.body, this.route.modelKeys) : null;
    return this.modelField;
  }

  /** Per-request scratch space for plugins (created on first use). */
  get state(): Record<string, unknown> {
    return (this.extras ??= {});
  }

  /** The reply broke off after its head reached the client (an upstream failure, not the client's). */
  get brokeOff(): boolean {
    return this.responseStarted && this.error !== null && !(this.error instanceof ClientGone);
  }

  elapsedMs(): number {
    return performance.now() - this.start;
  }

  clientIp(): string {
    return this.req.socket.remoteAddress ?? '';
  }

  /** Answer with JSON. The head goes through the kernel (respond hook, X-Gw-*, CORS). */
  replyJson(status: number, value: unknown, headers: string[] = []): true {
    return this.reply(status, JSON.stringify(value), ['content-type', 'application/json; charset=utf-8', ...headers]);
  }

  /** Answer with a body (HEAD requests get the head only). */
  reply(status: number, body: string | Buffer | null, headers: string[] = []): true {
    const length = body === null ? 0 : typeof body === 'string' ? Buffer.byteLength(body) : body.length;
    // 204 and 304 carry no body and no length of one.
    this.res.writeHead(status, status === 204 || status === 304 ? headers : [...headers, 'content-length', String(length)]);
    this.res.end(this.method === 'HEAD' || body === null ? undefined : body);
    return true;
  }
}
