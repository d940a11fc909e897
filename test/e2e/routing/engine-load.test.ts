// Load from the engines: each family's report route, replayed from recorded real replies
// (test/fixtures/engine-load: llama.cpp /metrics and /slots recorded from a real llama-server;
// vLLM and SGLang /metrics as their sources write them), read after each passing health check and
// counted by balancing: an endpoint busy for other clients gets fewer requests.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { parseLoad } from '../../../engine/backends/engine-load.js';
import type { Endpoint } from '../../../engine/backends/endpoints.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

const fixture = (name: string) => readFileSync(new URL(`../../fixtures/engine-load/${name}`, import.meta.url), 'utf8');
/** A recorded raw HTTP reply's status and body. */
function recorded(name: string): { status: number; body: string } {
  const text = fixture(name);
  const [head, body] = text.split(/\r?\n\r?\n/, 2);
  return { status: Number(head.split(' ')[1]), body };
}

const LLAMA_METRICS = { path: '/metrics', format: 'prometheus', running: ['llamacpp:requests_processing'], waiting: ['llamacpp:requests_deferred'] } as const;
const SLOTS = { path: '/slots', format: 'llamacpp_slots' } as const;

describe("parsing each engine's report", () => {
  it.each([
    ['llamacpp-metrics-idle.txt', LLAMA_METRICS, 0, 0],
    ['llamacpp-metrics-busy1.txt', LLAMA_METRICS, 1, 0],
    ['llamacpp-metrics-busy2.txt', LLAMA_METRICS, 2, 0],
    ['llamacpp-metrics-deferred.txt', LLAMA_METRICS, 2, 1],
    ['llamacpp-slots-idle.json', SLOTS, 0, 0],
    ['llamacpp-slots-idle-after-use.json', SLOTS, 0, 0],
    ['llamacpp-slots-busy1.json', SLOTS, 1, 0],
    ['llamacpp-slots-busy2.json', SLOTS, 2, 0],
    ['vllm-metrics.txt', { path: '/metrics', format: 'prometheus', running: ['vllm:num_requests_running'], waiting: ['vllm:num_requests_waiting'] }, 3, 2],
    ['sglang-metrics.txt', { path: '/metrics', format: 'prometheus', running: ['sglang:num_running_reqs'], waiting: ['sglang:num_queue_reqs'] }, 4, 1],
  ] as const)('%s', (file, source, running, waiting) => {
    expect(
      parseLoad(
        { ...source, running: 'running' in source ? [...source.running] : undefined, waiting: 'waiting' in source ? [...source.waiting] : undefined },
        fixture(file),
      ),
    ).toEqual({ running, waiting });
  });
  it('a report without the named gauges is an error, not zero', () => {
    expect(() => parseLoad({ path: '/metrics', format: 'prometheus', running: ['vllm:num_requests_running'] }, fixture('llamacpp-metrics-idle.txt'))).toThrow(
      /none of vllm:num_requests_running/,
    );
  });
});

const CHAT = JSON.stringify({
  id: 'c',
  object: 'chat.completion',
  model: 'm',
  choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
});

/** An engine replaying recorded replies: health and a model list, plus its load routes. */
class Replay {
  routes = new Map<string, { status: number; body: string }>();
  private server!: Server;
  url = '';
  async start(family: string): Promise<this> {
    this.server = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      const r =
        this.routes.get(path) ??
        (path === '/health'
          ? { status: 200, body: '{"status":"ok"}' }
          : path === '/v1/models'
            ? { status: 200, body: JSON.stringify({ object: 'list', data: [{ id: 'm', object: 'model' }] }) }
            : path === '/v1/chat/completions'
              ? { status: 200, body: CHAT }
              : { status: 404, body: '{}' });
      res.writeHead(r.status, { 'content-type': r.body.startsWith('#') ? 'text/plain; version=0.0.4' : 'application/json' });
      res.end(r.body);
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    void family;
    return this;
  }
  serve(path: string, file: string): this {
    this.routes.set(path, { status: 200, body: fixture(file) });
    return this;
  }
  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

let gw: Started | null = null;
let replays: Replay[] = [];
afterEach(async () => {
  await closeAll(gw, []);
  for (const r of replays) await r.stop();
  [gw, replays] = [null, []];
});

async function gateway(family: string, engines: Replay[], proxy: Record<string, unknown> = {}): Promise<Endpoint[]> {
  replays = engines;
  gw = await startGateway({
    proxy: { affinity: { enabled: false }, ...proxy },
    discovery: { static: { endpoints: engines.map((e, i) => endpoint(`e${i}`, family, e.url, { check_interval: '60s' })) } },
  });
  return gw.gw.runtime.endpoints.all as Endpoint[];
}

describe('reading the report after each passing health check', () => {
  it("llama.cpp with --metrics: running and deferred; load counts them beside the gateway's own", async () => {
    const engine = await new Replay().start('cppengine');
    engine.serve('/metrics', 'llamacpp-metrics-deferred.txt').serve('/slots', 'llamacpp-slots-idle.json');
    const [ep] = await gateway('cppengine', [engine]);
    const r = await waitFor(() => ep.engineLoad, 'the first load report');
    expect(r).toMatchObject({ running: 2, waiting: 1, others: 3, path: '/metrics' });
    expect(ep.load(performance.now())).toBe(3);
  });

  it('llama.cpp without --metrics (its recorded 501): /slots instead', async () => {
    const engine = await new Replay().start('cppengine');
    engine.routes.set('/metrics', recorded('llamacpp-metrics-disabled.txt'));
    engine.serve('/slots', 'llamacpp-slots-busy1.json');
    const [ep] = await gateway('cppengine', [engine]);
    expect(await waitFor(() => ep.engineLoad, 'the /slots report')).toMatchObject({ running: 1, waiting: 0, path: '/slots' });
  });

  it('vLLM and SGLang /metrics', async () => {
    const vllm = await new Replay().start('pagedengine');
    vllm.serve('/metrics', 'vllm-metrics.txt');
    const [ep] = await gateway('pagedengine', [vllm]);
    expect(await waitFor(() => ep.engineLoad, 'the vLLM report')).toMatchObject({ running: 3, waiting: 2 });
    await closeAll(gw, []);
    const sglang = await new Replay().start('radixengine');
    sglang.serve('/metrics', 'sglang-metrics.txt');
    replays.push(sglang);
    gw = await startGateway({ discovery: { static: { endpoints: [endpoint('s', 'radixengine', sglang.url, { check_interval: '60s' })] } } });
    const s = gw.gw.runtime.endpoints.all[0] as Endpoint;
    expect(await waitFor(() => s.engineLoad, 'the SGLang report')).toMatchObject({ running: 4, waiting: 1 });
  });

  it("a failed or missing report leaves the gateway's own count; none is kept for an endpoint that went down", async () => {
    const engine = await new Replay().start('cppengine');
    engine.serve('/metrics', 'llamacpp-metrics-busy2.txt');
    const [ep] = await gateway('cppengine', [engine]);
    await waitFor(() => ep.engineLoad, 'the first report');
    engine.routes.set('/metrics', { status: 200, body: 'not prometheus' });
    await gw!.gw.runtime.health.check(ep);
    await waitFor(() => ep.engineLoad === null || undefined, 'the report forgotten');
    expect(ep.load(performance.now())).toBe(0);
    engine.routes.set('/metrics', { status: 200, body: fixture('llamacpp-metrics-busy2.txt') });
    await gw!.gw.runtime.health.check(ep);
    await waitFor(() => ep.engineLoad, 'reported again');
    engine.routes.set('/health', { status: 503, body: '{}' });
    await gw!.gw.runtime.health.check(ep);
    await waitFor(() => !ep.routable || undefined, 'down');
    expect(ep.engineLoad).toBeNull();
  });
});

describe('balancing counts what the engines report', () => {
  async function servedBy(n: number): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (let i = 0; i < n; i++) {
      const res = await request(`${gw!.url}/gw/cppengine/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: `hi ${i}` }] }),
      });
      await res.body.dump();
      const e = String(res.headers['x-gw-endpoint']);
      counts[e] = (counts[e] ?? 0) + 1;
    }
    return counts;
  }

  it.each(['least-connections', 'p2c'])('%s: the endpoint busy for other clients gets none while the idle one is free', async (lb) => {
    const busy = await new Replay().start('cppengine');
    busy.serve('/metrics', 'llamacpp-metrics-deferred.txt');
    const idle = await new Replay().start('cppengine');
    idle.serve('/metrics', 'llamacpp-metrics-idle.txt');
    const [b, i] = await gateway('cppengine', [busy, idle], { load_balancer: lb });
    await waitFor(() => (b.engineLoad && i.engineLoad) || undefined, 'both reports');
    expect(await servedBy(10)).toEqual({ e1: 10 });
  });
});

describe('Ollama: no request counts, but what it has loaded (api/ps, recorded shape) steers balancing', () => {
  const PS = JSON.parse(fixture('ollama-ps.json')) as { models: { name: string }[] };
  const ollama = async (loaded: boolean) => {
    const r = await new Replay().start('localrunner');
    r.routes.set('/', { status: 200, body: 'Ollama is running' });
    r.routes.set('/api/tags', { status: 200, body: JSON.stringify({ models: PS.models.map((m) => ({ name: m.name, model: m.name, size: 1, digest: 'd' })) }) });
    r.routes.set('/api/ps', loaded ? { status: 200, body: fixture('ollama-ps.json') } : { status: 200, body: '{"models":[]}' });
    r.routes.set('/api/chat', { status: 200, body: JSON.stringify({ model: 'llama3.2:3b', message: { role: 'assistant', content: 'ok' }, done: true }) });
    return r;
  };
  async function chats(n: number): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (let i = 0; i < n; i++) {
      const res = await request(`${gw!.url}/gw/localrunner/api/chat`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'llama3.2:3b', stream: false, messages: [{ role: 'user', content: `conversation ${i}` }] }),
      });
      await res.body.dump();
      const e = String(res.headers['x-gw-endpoint']);
      counts[e] = (counts[e] ?? 0) + 1;
    }
    return counts;
  }
  const reported = async (eps: Endpoint[]) => {
    const residency = gw!.gw.runtime.residency;
    await waitFor(() => eps.every((e) => residency.isLoaded(e, 'llama3.2:3b') !== undefined) || undefined, 'both api/ps reports');
  };

  it('affinity keeps conversations to the endpoint that has the model loaded', async () => {
    const [cold, warm] = [await ollama(false), await ollama(true)];
    replays = [cold, warm];
    gw = await startGateway({
      discovery: {
        static: {
          endpoints: [
            endpoint('cold', 'localrunner', cold.url, { check_interval: '60s' }),
            endpoint('warm', 'localrunner', warm.url, { check_interval: '60s' }),
          ],
        },
      },
    });
    await reported(gw.gw.runtime.endpoints.all as Endpoint[]);
    expect(await chats(12)).toEqual({ warm: 12 });
  });

  it('p2c: the endpoint that must load the model loses every draw', async () => {
    const [cold, warm] = [await ollama(false), await ollama(true)];
    const eps = await gateway('localrunner', [cold, warm], { load_balancer: 'p2c' });
    await reported(eps);
    expect(await chats(12)).toEqual({ e1: 12 });
  });
});
