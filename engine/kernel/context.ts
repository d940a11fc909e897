// One request's state, shared by the steps of its pipeline. A class with a fixed shape so the
// hot path stays monomorphic. Each field has one owner (named beside it): the step that sets it;
// every other step reads it. Routing state is two things, each with one writer: the route plan
// (select-endpoint, once) and the attempt record (the attempt loop); steps read both. Plugins keep
// their own extras in `state`. Steps see it as a `Context`: the kernel's fields read-only there,
// and the attempt loop's `track` absent; the kernel holds the `RequestContext` itself.
import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import type { Endpoint } from '../backends/endpoints.js';
import { ClientGone } from '../backends/failures.js';
import { findModelField, type ModelField } from '../core/body-model.js';
import type { ErrorFormatPaths } from '../core/error-formats.js';
import type { ErrorFormat } from '../core/errors.js';
import type { Profile } from '../core/profiles.js';
import { NO_ATTEMPTS, type AttemptState } from '../routing/attempt-state.js';
import type { Exchange, UpstreamRequest } from '../routing/exchange.js';
import type { ModelRoute, RoutePlan, RoutingInfo } from '../routing/plan.js';
import type { Hooks } from './hooks.js';
import type { GatewayResponse } from './response.js';

export type { UpstreamRequest } from '../routing/exchange.js';
export type { FailedAttempt } from '../routing/attempt-state.js';
export type { Candidate, ModelRoute, NameGroup, RoutePlan, RoutingInfo } from '../routing/plan.js';

/** What a compiled route knows at load: its pipeline, hooks and (for proxy routes) family and prefix. */
export interface RouteInfo {
  pipeline: string;
  hooks: Hooks;
  profile?: Profile;
  /** The mount prefix to strip, e.g. "/gw/localrunner". */
  prefix?: string;
  /** How errors are rendered on this route (the pipeline's error_format)... */
  errorFormat: ErrorFormat;
  /** ...but on the paths a family route's profile names (api.error_formats), in that shape. */
  errorFormats?: ErrorFormatPaths;
  /** The quoted body keys the model is read from (the profile's request.model_field_paths); default `"model"`. */
  modelKeys?: readonly Buffer[];
  log: Logger;
}

/** Who is calling: the API key the request came with (the config's auth:). */
export interface Caller {
  /** The key's name (never the key itself). */
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  /** May read the status routes, metrics and the dashboard (auth.admin). */
  readonly admin: boolean;
  /** False when the key may use only some models (its `models`). */
  readonly everyModel: boolean;
  /** May the key use this model, named as a client names it (a model or an alias)? */
  allows(model: string): boolean;
}

const CALLER_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const NOT_PARSED = Symbol('not parsed');

export class RequestContext implements Exchange {
  readonly start = performance.now();
  readonly id: string;
  /** The path the client asked for, without the query, as it came (prefix included): what logs
   *  show, whichever step refused the request. Never changed. */
  readonly requestPath: string;
  /** Path and query as the backend should see them. Owner: match-prefix (the URL until then). */
  path: string;
  /** `path` without the query. Owner: match-prefix. */
  pathname: string;
  /** The request body, whole (replayable for failover). Owner: read-body. */
  body: Buffer | null = null;
  /** What the body's model stands for when it is an alias or has fallbacks (the names tried in
   *  turn); null: just itself. Owner: alias-resolve. */
  requested: ModelRoute | null = null;
  /** Who is calling, by the API key it sent; null while keys are off. Owner: authenticate. */
  caller: Caller | null = null;
  /** Headers every reply head of this request carries. Owners: respond taps (and cors). */
  readonly replyHeaders: string[] = [];
  /** The reply status once its head was written. Owner: the kernel. */
  status = 0;
  /** True once the reply head went to the client: no retry, no error reply after that. Owner: the kernel. */
  responseStarted = false;
  /** What went wrong, if anything (a GatewayError, an upstream error, ClientGone). Owner: the kernel. */
  error: unknown = null;
  /** The error was answered as the reply (its envelope is the head), so it did not break a reply
   *  off. Owner: the kernel (run.ts). */
  errorAnswered = false;
  /** Milliseconds from arrival to the reply head, and to the end. Owner: the kernel (hooks.ts). */
  headMs = 0;
  totalMs = 0;
  /** Tokens the backend reported in its reply's `usage`, where a step read that reply anyway
   *  (never parsed for this alone). Owner: the terminal step (translate). */
  usage: { input?: number; output?: number } | null = null;
  /** The W3C trace id of this request's span while tracing is on (logs carry it). Owner: trace. */
  traceId: string | undefined = undefined;
  private routePlan: RoutePlan | null = null;
  private attempts: AttemptState | null = null;
  private parsed: unknown = NOT_PARSED;
  private modelField: ModelField | null | typeof NOT_PARSED = NOT_PARSED;
  private extras: Record<string, unknown> | null = null;

  constructor(
    readonly req: IncomingMessage,
    readonly res: GatewayResponse,
    readonly route: RouteInfo,
  ) {
    const callerId = req.headers['x-request-id'];
    this.id = typeof callerId === 'string' && CALLER_ID.test(callerId) ? callerId : `req-${randomUUID()}`;
    const url = req.url ?? '/';
    this.path = url;
    const q = url.indexOf('?');
    this.pathname = q < 0 ? url : url.slice(0, q);
    this.requestPath = this.pathname;
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

  /** Tokens are counted (ctx.attempt.usage) for whoever is calling, while keys are on, and for
   *  the request's trace, while one is recorded. */
  get countsUsage(): boolean {
    return this.caller !== null || this.traceId !== undefined;
  }

  /** The backend family of the route (proxy routes), else undefined. */
  get family(): string | undefined {
    return this.route.profile?.name;
  }

  get log() {
    return this.route.log;
  }

  /** The shape of this request's errors: its path's (a family's native routes), else the route's. */
  get errorFormat(): ErrorFormat {
    const { errorFormats, prefix, errorFormat } = this.route;
    return errorFormats?.formatOf(this.requestPath, prefix ?? '') ?? errorFormat;
  }

  /** Where the request may go: written once, by endpoint selection (select-endpoint). */
  get plan(): RoutePlan | null {
    return this.routePlan;
  }

  /** Owner: select-endpoint. The plan is written once; a second write is a pipeline bug. */
  setPlan(plan: RoutePlan): void {
    if (this.routePlan) throw new Error(`pipeline ${this.route.pipeline}: the route plan is written once, by one endpoint-selection step`);
    this.routePlan = plan;
  }

  /** What the attempt loop did: attempts, endpoint and model, failures, timings. Read-only to steps. */
  get attempt(): Readonly<AttemptState> {
    return this.attempts ?? NO_ATTEMPTS;
  }

  /** The attempt loop's (routing/attempt-loop.ts): its record of this request. */
  track(rec: AttemptState): void {
    this.attempts = rec;
  }

  /** The endpoint of the current (or last) attempt. */
  get endpoint(): Endpoint | null {
    return this.attempt.endpoint;
  }

  /** How routing decided: a fallback model answering says so, else the plan's decision. */
  get routing(): RoutingInfo | null {
    return this.attempt.fellBack ?? this.routePlan?.routing ?? null;
  }

  /** The route's upstream hook, on one attempt's request. */
  prepare(up: UpstreamRequest): void {
    this.route.hooks.upstream.call(this, up);
  }

  /** The one way to read the model: the name sent upstream when routing chose one (an alias's
   *  real name, a fallback), else the top-level model string of a JSON object body (`model`, or
   *  the family's request.model_field_paths, first present wins). */
  get model(): string | undefined {
    const sent = this.attempt.model;
    if (sent !== undefined) return sent;
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
    return this.responseStarted && this.error !== null && !this.errorAnswered && !(this.error instanceof ClientGone);
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

  /** Answer a HEAD with the head alone and no length: its body is not known without asking a backend. */
  replyHead(status: number, headers: string[]): true {
    this.res.writeHead(status, headers);
    this.res.end();
    return true;
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

/** The fields only the kernel writes (run.ts, response.ts, hooks.ts). */
type KernelOwned = 'status' | 'responseStarted' | 'error' | 'errorAnswered' | 'headMs' | 'totalMs';

/** One request as a step sees it (every hook's argument): the kernel's fields read-only, and no
 *  `track` (the attempt loop's). Writing a kernel-owned field is a compile error in a step. */
export type Context = Omit<RequestContext, KernelOwned | 'track'> & Readonly<Pick<RequestContext, KernelOwned>>;
