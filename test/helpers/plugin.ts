// Apply one plugin to fresh hooks and drive it with a stub request, for plugin unit tests.
import { Readable } from 'node:stream';
import { RequestContext, type Context } from '../../engine/kernel/context.js';
import { createHooks, type Hooks } from '../../engine/kernel/hooks.js';
import { loadConfig } from '../../engine/core/config.js';
import type { Plugin, PluginEnv } from '../../engine/kernel/plugin.js';
import { PluginRegistry } from '../../engine/kernel/plugin.js';
import { loadProfiles } from '../../engine/core/profiles.js';
import { Metrics } from '../../engine/backends/metrics.js';
import { Placements } from '../../engine/backends/placements.js';
import { RateBuckets } from '../../engine/backends/rate-buckets.js';
import { Fleet } from '../../engine/backends/sharing/fleet.js';
import { RetryBudget } from '../../engine/backends/retry-budget.js';
import { Stats } from '../../engine/backends/telemetry.js';
import { LocalBooks } from '../../engine/backends/usage-books.js';
import { UsageLedger } from '../../engine/backends/usage-ledger.js';
import { memoryLogs } from './gateway.js';
import { createLogger } from '../../engine/core/logger.js';
import { AttemptState } from '../../engine/routing/attempt-state.js';

export const profiles = loadProfiles('/nonexistent');

export function testEnv(extra: Partial<PluginEnv> = {}): PluginEnv & { logs: Record<string, any>[] } {
  const { logs, destination } = memoryLogs();
  const log = createLogger('debug', destination);
  const env: PluginEnv & { logs: Record<string, any>[] } = {
    hostStats: () => Promise.resolve(env.stats),
    worker: null,
    config: loadConfig(null, {}).config,
    source: 'test',
    profiles,
    endpoints: undefined as never,
    health: undefined as never,
    catalogue: undefined as never,
    discovery: undefined as never,
    residency: undefined as never,
    placements: new Placements(),
    stats: new Stats(),
    metrics: new Metrics(),
    tracer: null,
    usage: new LocalBooks(new UsageLedger()),
    buckets: new RateBuckets(
      1000,
      () => performance.now(),
      null,
      new Fleet(
        log,
        () => undefined,
        () => undefined,
      ),
    ),
    retries: new RetryBudget({ ratio: 0.2, minPerSecond: 5, windowMs: 10_000 }),
    log,
    version: '0.0.0-test',
    startedAt: new Date(),
    reload: { generation: 1, last_attempt: null, ok: true, error: null },
    pipeline: 'test',
    logs,
    ...extra,
  };
  return env;
}

/** Hooks with the plugin applied, its options validated and defaulted as the compiler does. */
export function applyPlugin(plugin: Plugin, options: Record<string, unknown> = {}, env: PluginEnv = testEnv()): Hooks {
  const registry = new PluginRegistry([]);
  const problem = registry.add(plugin, 'test');
  if (problem) throw new Error(problem);
  const opts = structuredClone(options);
  if (!registry.get(plugin.name)!.validate(opts)) throw new Error(JSON.stringify(registry.get(plugin.name)!.validate.errors));
  const hooks = createHooks();
  plugin.apply(hooks, opts, env);
  return hooks;
}

export interface StubResponse {
  status: number;
  headers: string[];
  body: string;
  ended: boolean;
  headersSent: boolean;
  writeHead(status: number, headers: string[]): void;
  end(body?: string): void;
  once(): void;
  on(): void;
  off(): void;
}

export function stubResponse(): StubResponse {
  return {
    status: 0,
    headers: [],
    body: '',
    ended: false,
    headersSent: false,
    writeHead(status, headers) {
      this.status = status;
      this.headers = headers;
      this.headersSent = true;
    },
    end(body) {
      this.body = body ?? '';
      this.ended = true;
    },
    once() {},
    on() {},
    off() {},
  };
}

/** The request's attempt record, as the attempt loop would leave it (set what a test needs). */
export function attemptOf(ctx: Context): AttemptState {
  const rec = new AttemptState();
  (ctx as RequestContext).track(rec);
  return rec;
}

export function stubContext(
  hooks: Hooks,
  opts: { method?: string; url?: string; headers?: Record<string, string>; body?: string | Buffer[]; profile?: string; prefix?: string } = {},
) {
  const chunks = typeof opts.body === 'string' ? [Buffer.from(opts.body)] : (opts.body ?? []);
  const req = Object.assign(Readable.from(chunks), {
    method: opts.method ?? 'GET',
    url: opts.url ?? '/',
    headers: Object.fromEntries(Object.entries(opts.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v])),
    rawHeaders: Object.entries(opts.headers ?? {}).flat(),
    socket: { remoteAddress: '127.0.0.1' },
  });
  const res = stubResponse();
  // As the kernel's head writer does: the respond hook runs, and its headers come with the head.
  const write = res.writeHead.bind(res);
  res.writeHead = (status: number, headers: string[]) => {
    ctx.status = status;
    ctx.responseStarted = true;
    hooks.respond.call(ctx, status);
    write(status, [...headers, ...ctx.replyHeaders]);
  };
  const ctx = new RequestContext(req as never, res as never, {
    pipeline: 'test',
    hooks,
    profile: opts.profile ? profiles.byName.get(opts.profile) : undefined,
    prefix: opts.prefix,
    errorFormat: 'gateway',
    log: createLogger('silent'),
  });
  return { ctx, res, req };
}

/** The value of a header in a flat list. */
export function header(flat: string[], name: string): string | undefined {
  for (let i = 0; i < flat.length; i += 2) if (flat[i] === name) return flat[i + 1];
  return undefined;
}
