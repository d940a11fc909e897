// One request's state, shared by the steps of its pipeline. A class with a fixed shape so the
// hot path stays monomorphic; plugins keep their own extras in `state`.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { findModelField, type ModelField } from './body-model.js';
import type { Endpoint } from './endpoints.js';
import type { Hooks } from './hooks.js';
import type { Profile } from './profiles.js';

export interface UpstreamRequest {
  method: string;
  /** Endpoint base path + the request's path and query. */
  path: string;
  /** Flat [name, value, name, value…] list. */
  headers: string[];
  body: Buffer | null;
}

/** What a compiled route knows at load: its pipeline, hooks and (for proxy routes) family and prefix. */
export interface RouteInfo {
  pipeline: string;
  hooks: Hooks;
  profile?: Profile;
  /** The mount prefix to strip, e.g. "/gw/localrunner". */
  prefix?: string;
  /** How errors are rendered on this route. */
  errorFormat?: 'gateway' | 'msgapi';
}

const CALLER_ID = /^[A-Za-z0-9._:\-]{1,128}$/;
const NOT_PARSED = Symbol('not parsed');

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
  /** Path and query as the backend should see them (set by prefix matching; the URL until then). */
  path: string;
  pathname: string;
  body: Buffer | null = null;
  /** The model actually sent upstream, once a step decided it (alias rewrite). */
  model: string | undefined = undefined;
  routing: RoutingInfo | null = null;
  candidates: Endpoint[] = [];
  endpoint: Endpoint | null = null;
  attempts = 0;
  /** Flat header list written with the response head (gateway headers, CORS). */
  readonly replyHeaders: string[] = [];
  status = 0;
  /** True once the response head went to the client: no retry, no error envelope after that. */
  responseStarted = false;
  error: unknown = null;
  private parsed: unknown = NOT_PARSED;
  private modelField: ModelField | null | typeof NOT_PARSED = NOT_PARSED;
  private extras: Record<string, unknown> | null = null;

  constructor(readonly req: IncomingMessage, readonly res: ServerResponse, readonly route: RouteInfo) {
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

  /** The body parsed as JSON, once, on first use; undefined when there is none or it is not JSON. */
  json(): unknown {
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

  /** Where the top-level `model` string of a JSON object body sits, found once without a full parse. */
  modelSpan(): ModelField | null {
    if (this.modelField === NOT_PARSED) this.modelField = this.body && this.body.length > 0 ? findModelField(this.body) : null;
    return this.modelField;
  }

  /** The `model` named by a JSON object body, if any. */
  bodyModel(): string | undefined {
    const value = this.modelSpan()?.value;
    return typeof value === 'string' && value ? value : undefined;
  }

  /** Per-request scratch space for plugins (created on first use). */
  get state(): Record<string, unknown> {
    return (this.extras ??= {});
  }

  elapsedMs(): number {
    return performance.now() - this.start;
  }

  clientIp(): string {
    return this.req.socket.remoteAddress ?? '';
  }
}
