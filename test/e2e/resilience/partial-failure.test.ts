// Backends that fail partially, as real ones do: an inference route that fails while the health
// route passes, one endpoint answering 500 under concurrent load, an open breaker met by a client
// that sends one request at a time, and a transient answer with a fallback model configured. The
// failover layer must hold as one: no request lost while a healthy endpoint is there, an open
// breaker refusing at once with its Retry-After, and the requested model tried again before the
// fallback.
import OpenAI from 'openai';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway } from '../../helpers/gateway.js';
import { afterEach, describe, expect, it } from 'vitest';
import { rig, send, type Reply, type Rig } from '../../helpers/resilience.js';
import { waitFor } from '../../helpers/wait.js';

let r: Rig | null = null;
afterEach(async () => {
  await r?.close();
  r = null;
});

/** `total` requests made by `concurrency` clients, each sending its next once the last is answered. */
async function clients(total: number, concurrency: number, one: () => Promise<Reply>): Promise<Reply[]> {
  const replies: Reply[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        next++;
        replies.push(await one());
      }
    }),
  );
  return replies;
}

async function breakerOf(r: Rig, name = 'primary'): Promise<any> {
  const res = await request(`${r.gw.url}/internal/status/endpoints`);
  const body = (await res.body.json()) as any;
  return body.endpoints.find((e: any) => e.name === name).circuit_breaker;
}

const isBreakerRefusal = (x: Reply) => x.status === 503 && x.json?.error?.type === 'circuit_breaker';

describe('a primary whose inference route fails while its health route passes', () => {
  for (const failure of ['reset', 'close'] as const) {
    it(`${failure}: 150 requests at concurrency 8 are all answered while the second endpoint is healthy`, async () => {
      r = await rig('two endpoints');
      r.primary.always(failure);
      const replies = await clients(150, 8, () => send(r!));
      const failed = replies.filter((x) => x.status !== 200);
      expect(failed.map((x) => `${x.status} ${x.text}`).slice(0, 3)).toEqual([]);
      expect(replies.every((x) => x.headers['x-gw-endpoint'] === 'secondary')).toBe(true);
      // Once the breaker had seen enough, the primary was left alone: far fewer tries than requests.
      expect(r.primary.generations.length).toBeLessThan(75);
      expect((await breakerOf(r)).state).not.toBe('closed');
    });
  }
});

describe('the fleet retry budget limits retries, never the failover to a healthy endpoint', () => {
  it('spent to nothing: a connection failure still goes to the other endpoint; a failure status is passed on', async () => {
    r = await rig('two endpoints', { proxy: { retry: { fleet: { ratio: 0, min_per_second: 0 } } } });
    for (const failure of ['reset', 'close'] as const) {
      r.primary.always(failure);
      const x = await send(r);
      expect(x.status).toBe(200);
      expect(x.headers['x-gw-endpoint']).toBe('secondary');
    }
    r.primary.always({ ok: {} });
    await waitFor(async () => (await send(r!)).headers['x-gw-endpoint'] === 'primary', 'the primary to serve again');
    r.primary.script({ status: 500 });
    const passed = await send(r);
    expect(passed.status).toBe(500);
    expect(passed.headers['x-gw-attempts']).toBe('1');
  });
});

describe('one endpoint failing with 500', () => {
  it('8 concurrent clients: the breaker refuses with 503 circuit_breaker while open; no request runs more than twice', async () => {
    r = await rig('one endpoint', { proxy: { retry: { backoff: '20ms' }, circuit_breaker: { initial_open_timeout: '30s', open_timeout: '30s' } } });
    r.primary.always({ status: 500 });
    const replies = await clients(120, 8, () => send(r!));
    for (const x of replies) {
      expect([500, 503]).toContain(x.status);
      if (x.status === 503) {
        expect(x.json.error).toMatchObject({ type: 'circuit_breaker', code: 503 });
        expect(Number(x.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      }
      expect(Number(x.headers['x-gw-attempts'] ?? 0)).toBeLessThanOrEqual(2);
    }
    const answered = replies.filter((x) => x.status === 500).length;
    expect(replies.filter(isBreakerRefusal).length).toBeGreaterThan(100);
    expect(r.primary.generations.length).toBeLessThanOrEqual(2 * answered);
  });

  it('sequential requests to an open breaker are refused at once and never reach the backend', async () => {
    r = await rig('one endpoint', { proxy: { retry: { backoff: '20ms' }, circuit_breaker: { initial_open_timeout: '30s', open_timeout: '30s' } } });
    r.primary.always({ status: 500 });
    let refused: Reply | undefined;
    for (let i = 0; i < 10 && !refused; i++) {
      const x = await send(r);
      if (isBreakerRefusal(x)) refused = x;
    }
    expect(refused, 'the breaker to open within 10 requests').toBeDefined();
    const executed = r.primary.generations.length;
    for (let i = 0; i < 7; i++) {
      const x = await send(r);
      expect(isBreakerRefusal(x)).toBe(true);
      const wait = Number(x.headers['retry-after']);
      expect(wait).toBeGreaterThanOrEqual(1);
      expect(wait).toBeLessThanOrEqual(30);
    }
    expect(r.primary.generations.length).toBe(executed);
  });

  it('one test request per open period: of concurrent requests to a half-open breaker, one reaches the backend', async () => {
    r = await rig('one endpoint', {
      proxy: { retry: { backoff: '20ms' }, circuit_breaker: { initial_open_timeout: '300ms', open_timeout: '30s', jitter: 0 } },
    });
    r.primary.always({ status: 500 });
    for (let i = 0; i < 10 && (await breakerOf(r)).state === 'closed'; i++) await send(r);
    await waitFor(async () => (await breakerOf(r!)).state === 'half-open', 'the breaker to let a test request through');
    const executed = r.primary.generations.length;
    const replies = await Promise.all(Array.from({ length: 6 }, () => send(r!)));
    expect(r.primary.generations.length).toBe(executed + 1);
    expect(replies.filter((x) => x.status === 500)).toHaveLength(1);
    expect(replies.filter(isBreakerRefusal)).toHaveLength(5);
    // The test failed: open again, for longer.
    expect(await breakerOf(r)).toMatchObject({ state: 'open', consecutive_openings: 2 });
  });

  it('a test request closes the breaker when its answer starts: a long stream does not hold the others off', async () => {
    r = await rig('one endpoint', {
      proxy: { retry: { backoff: '20ms' }, circuit_breaker: { initial_open_timeout: '200ms', open_timeout: '30s', jitter: 0 } },
    });
    r.primary.always({ status: 500 });
    for (let i = 0; i < 10 && (await breakerOf(r)).state === 'closed'; i++) await send(r);
    await waitFor(async () => (await breakerOf(r!)).state === 'half-open', 'the breaker to let a test request through');
    // The test request: a stream that takes its time (released at the end of the test).
    r.primary.script({ ok: { chunkDelayMs: 60_000 } });
    r.primary.always({ ok: {} });
    const test = await request(`${r.gw.url}${r.path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'primary-model', messages: [{ role: 'user', content: 'hi' }], stream: true }),
    });
    expect(test.statusCode).toBe(200);
    // While it streams, the others are served.
    expect((await send(r)).status).toBe(200);
    expect((await breakerOf(r)).state).toBe('closed');
    r.primary.release();
    await test.body.text().catch(() => undefined);
  });

  it('a test request that succeeds closes the breaker; passing health checks alone do not', async () => {
    r = await rig('one endpoint', {
      proxy: { retry: { backoff: '20ms' }, circuit_breaker: { initial_open_timeout: '200ms', open_timeout: '30s', jitter: 0 } },
      endpointExtra: { check_interval: '100ms' },
    });
    r.primary.always({ status: 500 });
    for (let i = 0; i < 10 && (await breakerOf(r)).state === 'closed'; i++) await send(r);
    expect((await breakerOf(r)).opened_by).toBe('proxy');
    const checks = r.primary.requests.filter((q) => q.path === '/v1/models').length;
    // Health checks pass meanwhile (the inference route is what fails): they do not close it.
    await waitFor(() => r!.primary.requests.filter((q) => q.path === '/v1/models').length >= checks + 3, 'three more passing health checks');
    expect((await breakerOf(r)).state).toBe('half-open');
    r.primary.always({ ok: {} });
    expect((await send(r)).status).toBe(200);
    expect((await breakerOf(r)).state).toBe('closed');
  });
});

describe('the requested model first, the fallback model after', () => {
  it('a 429 with Retry-After: 2 is followed by the requested model again after the wait, not by the fallback', async () => {
    r = await rig('fallback chain');
    r.primary.script({ status: 429, headers: { 'retry-after': '2' } });
    const reply = await send(r);
    expect(reply.status).toBe(200);
    expect(reply.headers['x-gw-endpoint']).toBe('primary');
    expect(reply.headers['x-gw-routing-decision']).not.toBe('fallback');
    expect(r.other!.generations).toHaveLength(0);
    const [first, second] = r.primary.generations;
    expect(second.model).toBe('primary-model');
    expect(second.at - first.at).toBeGreaterThanOrEqual(1990);
  });

  it('a single 500 is followed by the requested model again after a backoff, not by the fallback', async () => {
    r = await rig('fallback chain');
    r.primary.script({ status: 500 });
    const reply = await send(r);
    expect(reply.status).toBe(200);
    expect(reply.headers['x-gw-endpoint']).toBe('primary');
    expect(r.other!.generations).toHaveLength(0);
    expect(r.primary.generations.map((g) => g.model)).toEqual(['primary-model', 'primary-model']);
  });

  it('one endpoint serving the model and its fallback: a 5xx is retried on it once per request, whatever the model', async () => {
    r = await rig('one endpoint', {
      proxy: { retry: { backoff: '20ms' } },
      primaryModels: [{ name: 'primary-model' }, { name: 'fallback-model' }],
      config: { model_fallbacks: { 'primary-model': ['fallback-model'] } },
    });
    r.primary.always({ status: 500 });
    const reply = await send(r);
    expect(reply.status).toBe(500);
    expect(r.primary.generations.map((g) => g.model)).toEqual(['primary-model', 'primary-model', 'fallback-model']);
  });

  it('an ordered alias of one model routes to it', async () => {
    r = await rig('one endpoint', { config: { model_aliases: { fast: { models: ['primary-model'], ordered: true } } } });
    const reply = await send(r, { model: 'fast', messages: [{ role: 'user', content: 'hi' }], stream: false });
    expect(reply.status).toBe(200);
    expect(r.primary.generations.map((g) => g.model)).toEqual(['primary-model']);
  });

  it('a second 500 goes to the fallback model: a 5xx is retried on the same endpoint once', async () => {
    r = await rig('fallback chain', { proxy: { retry: { backoff: '20ms' } } });
    r.primary.script({ status: 500 }, { status: 500 });
    const reply = await send(r);
    expect(reply.status).toBe(200);
    expect(reply.headers['x-gw-endpoint']).toBe('fallback');
    expect(reply.headers['x-gw-routing-decision']).toBe('fallback');
    expect(r.primary.generations).toHaveLength(2);
    expect(r.other!.generations).toHaveLength(1);
  });
});

describe("one client's requests failing on their content (a lone healthy endpoint)", () => {
  it('refuse that request only: the other clients keep being served, and their success closes the breaker', async () => {
    // llama-server answering 500 to a tool call it cannot parse, and 200 to everything else.
    const engine = await new FakeBackend({ family: 'cppengine', name: 'llama' }).start();
    engine.behaviour.status = 500;
    engine.behaviour.statusFor = 'get_weather';
    const gw = await startGateway({ discovery: { static: { endpoints: [endpoint('llama', 'cppengine', engine.url, { check_interval: '60s' })] } } });
    try {
      const client = new OpenAI({ baseURL: `${gw.url}/gw/cppengine/v1`, apiKey: 'unused', maxRetries: 2 });
      const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } }];
      const asks = { model: 'test-model', messages: [{ role: 'user' as const, content: 'Weather?' }], tools };
      // Its SDK tries three times, the gateway each of those twice: six failures in a row.
      await expect(client.chat.completions.create(asks)).rejects.toMatchObject({ status: expect.any(Number) });
      const status = async () => ((await (await fetch(`${gw.url}/internal/status/endpoints`)).json()) as any).endpoints[0].circuit_breaker;
      expect(await status()).toMatchObject({ state: 'open', refused_requests: 1 });
      const executed = engine.received.length;
      const again = await request(`${gw.url}/gw/cppengine/v1/chat/completions`, { method: 'POST', body: JSON.stringify(asks) });
      expect([again.statusCode, ((await again.body.json()) as any).error.type]).toEqual([503, 'circuit_breaker']);
      expect(engine.received.length).toBe(executed);
      // Another client's plain request is served, and closes the breaker.
      const plain = await client.chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'Hello' }] });
      expect(plain.choices[0].message.content).toBeTruthy();
      expect(await status()).toMatchObject({ state: 'closed', refused_requests: 0 });
    } finally {
      await closeAll(gw, [engine]);
    }
  });
});
