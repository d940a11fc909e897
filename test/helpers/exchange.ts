// The routing layer driven on its own (test/engine/routing/attempt-loop and relay): a front server
// whose every request runs the attempt loop over a fake exchange (a real ServerResponse), a
// SendPolicy shaped like forward.ts's, fresh endpoints (registry, interceptors, pools, breakers)
// and fake backends. No Gateway, no pipeline, no plugin.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { request, type Dispatcher } from 'undici';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { stringify } from 'yaml';
import { planEndpoints } from '../../engine/backends/endpoint-plans.js';
import type { Endpoint } from '../../engine/backends/endpoints.js';
import { EndpointRegistry } from '../../engine/backends/registry.js';
import { RetryBudget } from '../../engine/backends/retry-budget.js';
import { loadConfig } from '../../engine/core/config.js';
import { GatewayError, renderError } from '../../engine/core/errors.js';
import { loadProfiles } from '../../engine/core/profiles.js';
import { FakeBackend } from '../../engine/demo/index.js';
import { attemptLoop } from '../../engine/routing/attempt-loop.js';
import type { AttemptState } from '../../engine/routing/attempt-state.js';
import type { Exchange, SendPolicy, UpstreamRequest } from '../../engine/routing/exchange.js';
import type { RoutePlan } from '../../engine/routing/plan.js';
import { INFERENCE_API } from '../../plugins/apis/inference-api.js';

const profiles = loadProfiles('/nonexistent');
const BREAKER = { healthFailures: 3, proxyFailures: 5, initialOpenMs: 1000, maxOpenMs: 30_000, jitter: 0 };
const NAMES = ['a', 'b', 'c', 'd'];

/** One client request as the loop sees it; `rec` is the attempt record it tracks. */
export class FakeExchange implements Exchange {
  readonly start = performance.now();
  readonly log = pino({ level: 'silent' });
  readonly errorFormat = 'gateway' as const;
  readonly family = 'test';
  readonly model = 'test-model';
  readonly plan = null;
  error: unknown = undefined;
  /** Tests of the usage count turn it on. */
  countsUsage = false;
  rec: AttemptState | null = null;
  /** What each attempt sent (prepare sees every one). */
  readonly prepared: UpstreamRequest[] = [];
  constructor(
    readonly id: string,
    readonly method: string,
    private readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly body: Buffer,
  ) {}
  header(name: string): string | undefined {
    const v = this.req.headers[name];
    return Array.isArray(v) ? v[0] : v;
  }
  elapsedMs(): number {
    return performance.now() - this.start;
  }
  track(rec: AttemptState): void {
    this.rec = rec;
  }
  prepare(up: UpstreamRequest): void {
    this.prepared.push(up);
    // What the kernel's hook adds: the fakes count a request carrying it as proxied traffic.
    up.headers.push('x-gw-request-id', this.id);
  }
}

export type Policy = SendPolicy<FakeExchange>;
export interface Job {
  policy: Policy;
  plan: RoutePlan;
  /** The request's tokens are counted (Exchange.countsUsage). */
  counted?: boolean;
  ex?: FakeExchange;
  done?: Promise<unknown>;
}
export interface Reply {
  status: number;
  headers: Record<string, unknown>;
  body: Buffer;
  text: string;
  error: unknown;
  rec: AttemptState;
  ex: FakeExchange;
}

const servers: Server[] = [];

export async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

export const closeServer = (s: Server) => {
  s.closeAllConnections();
  return new Promise((r) => s.close(r));
};

/** The front server, the endpoints and fakes each test makes, and their cleanup: call once per file. */
export function routingHarness() {
  const jobs = new Map<string, Job>();
  const registries: EndpointRegistry[] = [];
  const fakes: FakeBackend[] = [];
  let url = '';

  beforeAll(async () => {
    // The front: runs the loop for the job the request names; a thrown error is rendered as the kernel would.
    const front = createServer(async (req, res) => {
      const id = req.headers['x-job'] as string;
      const job = jobs.get(id)!;
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const ex = (job.ex = new FakeExchange(id, req.method!, req, res, Buffer.concat(chunks)));
      ex.countsUsage = job.counted === true;
      job.done = attemptLoop(ex, job.policy, job.plan).then(
        () => null,
        (err: unknown) => {
          if (err instanceof GatewayError) renderError(res, err);
          else res.destroy();
          return err;
        },
      );
    });
    servers.push(front);
    url = await listen(front);
  });
  afterAll(() => Promise.all(servers.splice(0).map(closeServer)));
  afterEach(async () => {
    await Promise.all(registries.splice(0).map((r) => r.close()));
    await Promise.all(fakes.splice(0).map((f) => f.stop()));
  });

  /** Start one request through the front (the reply head is in; the body is the caller's to read). */
  async function start(policy: Policy, plan: RoutePlan, stream = false, counted = false): Promise<{ res: Dispatcher.ResponseData; job: Job }> {
    const id = `job-${jobs.size + 1}`;
    const job: Job = { policy, plan, counted };
    jobs.set(id, job);
    const body = JSON.stringify({ model: 'test-model', ...(stream ? { stream } : {}), messages: [{ role: 'user', content: 'hi' }] });
    const res = await request(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'x-job': id, 'content-type': 'application/json' }, body });
    return { res, job };
  }

  return {
    jobs,
    start,
    /** One request through the front: what the client got, what the loop threw, its record. */
    async send(policy: Policy, plan: RoutePlan, stream = false, counted = false): Promise<Reply> {
      const { res, job } = await start(policy, plan, stream, counted);
      const body = Buffer.from(await res.body.arrayBuffer());
      const error = await job.done;
      return { status: res.statusCode, headers: res.headers, body, text: body.toString(), error, rec: job.ex!.rec!, ex: job.ex! };
    },
    /** Fresh endpoints a, b, c… (pagedengine) at these URLs: breakers and pools of this test only. */
    endpoints(...urls: string[]): Endpoint[] {
      const file = join(mkdtempSync(join(tmpdir(), 'gw-routing-')), 'config.yaml');
      writeFileSync(file, stringify({ discovery: { static: { endpoints: urls.map((u, i) => ({ name: NAMES[i], type: 'pagedengine', url: u })) } } }));
      const registry = new EndpointRegistry({ markFailed() {}, markAnswered() {} });
      registries.push(registry);
      registry.reconcile(planEndpoints(loadConfig(file, {}).config, profiles, file).plans, BREAKER);
      return [...registry.all];
    },
    /** A running fake; `down`: started then stopped, so its port refuses. */
    async fake(name: string, down = false): Promise<FakeBackend> {
      const f = await new FakeBackend({ family: 'pagedengine', name }).start();
      if (down) await f.stop();
      else fakes.push(f);
      return f;
    },
    /** A backend whose every reply is written by `script`: exact bytes. */
    async scripted(script: (req: IncomingMessage, res: ServerResponse) => void | Promise<void>): Promise<string> {
      const server = createServer((req, res) => {
        req.resume();
        req.once('end', () => void script(req, res));
      });
      servers.push(server);
      return listen(server);
    },
  };
}

/** The request's body asking for `model` (what forward does with the name the plan gives). */
const withModel = (body: Buffer, model: string | undefined) =>
  model === undefined ? body : Buffer.from(JSON.stringify({ ...JSON.parse(body.toString()), model }));

/** Retries on (1 ms backoff, a fleet budget that never runs out here), replay-safe, the inference
 *  API's streams: what forward.ts hands the loop. */
export function policy(over: Partial<Policy> = {}): Policy {
  return {
    maxRetries: 3,
    retry: {
      budgetMs: 60_000,
      backoffMs: 1,
      fleet: new RetryBudget({ ratio: 0.2, minPerSecond: 1000, windowMs: 10_000 }),
      contextWindow: () => undefined,
      cold: () => false,
    },
    api: INFERENCE_API,
    replaySafe: () => true,
    request: (ex, ep, model) => ({
      method: 'POST',
      path: ep.upstreamPath('/v1/chat/completions'),
      headers: ['content-type', 'application/json'],
      body: withModel(ex.body, model),
    }),
    ...over,
  };
}
