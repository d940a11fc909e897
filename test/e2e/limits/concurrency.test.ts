// Per-endpoint concurrency (item 13 of issue 10): a deskrunner handles one request at a time, so
// the gateway sends it one at a time and queues the rest; full queues, waits past the limit,
// clients that leave, streams, failures, failover to free endpoints and hot reload.
import { writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { stringify } from 'yaml';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started, NO_RATE_LIMITS } from '../../helpers/gateway.js';
import { gate, waitFor } from '../../helpers/wait.js';

let gw: Started | null = null;
let fakes: FakeBackend[] = [];
afterEach(async () => {
  await closeAll(gw, fakes);
  [gw, fakes] = [null, []];
});

const CHAT = JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'hi' }] });

async function chat(path = '/gw/deskrunner/v1/chat/completions', body = CHAT, signal?: AbortSignal) {
  const res = await request(`${gw!.url}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json' }, signal });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, json: text ? JSON.parse(text) : undefined, endpoint: res.headers['x-gw-endpoint'] };
}

async function queueOf(name: string) {
  const res = await request(`${gw!.url}/internal/status/endpoints`);
  const json = (await res.body.json()) as { endpoints: { name: string; queue: Record<string, any> | null; active_requests: number }[] };
  return json.endpoints.find((e) => e.name === name)!.queue;
}

/** Rewrite the running gateway's config file (as startGateway wrote it, with `config` on top) and reload. */
async function reloadWith(config: Record<string, unknown>): Promise<void> {
  writeFileSync(
    gw!.configFile,
    stringify({
      server: { rate_limits: NO_RATE_LIMITS, host: '127.0.0.1', port: 0, shutdown_timeout: '2s' },
      logging: { level: 'debug' },
      proxy: { profiles_dir: '/nonexistent/profiles' },
      pipelines: { dir: '/nonexistent/pipelines', watch: false },
      ...config,
    }),
  );
  expect(await gw!.gw.reload('test')).toBe(true);
}

/** Both endpoints of a two-endpoint family each holding one request until `hold` opens. */
async function holdBoth(): Promise<{ hold: ReturnType<typeof gate>; busy: ReturnType<typeof chat>[] }> {
  const [d0, d1] = fakes;
  const hold = gate();
  d0.behaviour.holdUntil = hold.promise;
  d1.behaviour.holdUntil = hold.promise;
  const busy = [chat(), chat()];
  await waitFor(() => d0.traffic.length === 1 && d1.traffic.length === 1, 'both endpoints busy');
  return { hold, busy };
}

async function desk(count: number, extra: (i: number) => Record<string, unknown> = () => ({}), config: Record<string, unknown> = {}) {
  fakes = await Promise.all(Array.from({ length: count }, (_, i) => new FakeBackend({ family: 'deskrunner', name: `d${i}` }).start()));
  gw = await startGateway({
    ...config,
    discovery: { static: { endpoints: fakes.map((f, i) => endpoint(f.name, 'deskrunner', f.url, { priority: 100 - i * 10, ...extra(i) })) } },
  });
  await waitFor(
    async () => (await request(`${gw!.url}/internal/health`).then((r) => r.body.json() as Promise<any>)).status === 'healthy',
    'the endpoints to be healthy',
  );
}

describe('one request at a time (deskrunner: characteristics.max_concurrent_requests 1)', () => {
  it('sends three concurrent requests one after another, the others waiting in the queue', async () => {
    await desk(1);
    const [fake] = fakes;
    let hold = gate();
    fake.behaviour.holdUntil = hold.promise;
    const replies = [chat(), chat(), chat()];
    for (let n = 1; n <= 3; n++) {
      // n-1 done, one at the backend, the rest queued: the backend never has two at once.
      await waitFor(async () => fake.traffic.length === n && (await queueOf('d0'))?.queued === 3 - n, `request ${n} at the backend and ${3 - n} queued`);
      expect(fake.traffic).toHaveLength(n);
      const held = hold;
      hold = gate();
      fake.behaviour.holdUntil = hold.promise; // the next one admitted waits at the backend again
      held.open();
    }
    hold.open();
    expect((await Promise.all(replies)).map((r) => r.status)).toEqual([200, 200, 200]);
    const q = await queueOf('d0');
    expect(q).toMatchObject({
      max_concurrent_requests: 1,
      in_flight: 0,
      queued: 0,
      max_queued_requests: 100,
      queue_timeout: '2m',
      admitted: 3,
      waited: 2,
      rejected_full: 0,
      timed_out: 0,
      abandoned: 0,
    });
    expect(q!.wait_p95).toMatch(/s$/);
  });

  it('holds the slot for the whole stream', async () => {
    await desk(1);
    const [fake] = fakes;
    const rest = gate();
    fake.behaviour.beforeChunk = (i) => (i >= 2 ? rest.promise : Promise.resolve());
    const stream = await request(`${gw!.url}/gw/deskrunner/v1/chat/completions`, {
      method: 'POST',
      body: CHAT.replace('{', '{"stream":true,'),
      headers: { 'content-type': 'application/json' },
    });
    expect(stream.statusCode).toBe(200); // the head arrived; the stream is open
    const second = chat();
    await waitFor(async () => (await queueOf('d0'))?.queued === 1, 'the second request to queue behind the stream');
    expect(fake.traffic).toHaveLength(1);
    rest.open();
    await stream.body.text();
    expect((await second).status).toBe(200);
    expect(fake.traffic).toHaveLength(2);
  });

  it('gives the slot back exactly once however the attempt ends', async () => {
    await desk(1, () => ({ retry_on_statuses: [] })); // one attempt per request: each ends one way
    const [fake] = fakes;
    fake.behaviour.status = 500; // a backend error passes through
    expect((await chat()).status).toBe(500);
    fake.behaviour.status = 0;
    fake.behaviour.resetAfterChunks = 2; // a stream that breaks after its first content went out
    const broken = await request(`${gw!.url}/gw/deskrunner/v1/chat/completions`, {
      method: 'POST',
      body: CHAT.replace('{', '{"stream":true,'),
      headers: { 'content-type': 'application/json' },
    });
    await broken.body.text().catch(() => undefined);
    fake.behaviour.resetAfterChunks = -1;
    // A client that goes away mid-reply.
    const hold = gate();
    fake.behaviour.holdUntil = hold.promise;
    const abort = new AbortController();
    const gone = chat(undefined, undefined, abort.signal).catch(() => 'aborted');
    await waitFor(() => fake.traffic.length === 3, 'the third request at the backend');
    abort.abort();
    expect(await gone).toBe('aborted');
    await waitFor(async () => (await queueOf('d0'))?.in_flight === 0, 'the slot to come back');
    hold.open();
    fake.behaviour.holdUntil = null;
    expect((await chat()).status).toBe(200);
    // Had a slot been given back twice, in_flight would now be below zero and two requests would pass at once.
    expect(await queueOf('d0')).toMatchObject({ in_flight: 0, queued: 0, admitted: 4 });
  });
});

describe('what takes a slot', () => {
  it('only inference does: a status route answers while a generation holds the only slot', async () => {
    await desk(1, () => ({ queue_timeout: '5s' }));
    const [fake] = fakes;
    fake.behaviour.stallAfterChunks = 1;
    const streaming = new AbortController();
    const stream = chat(
      '/gw/deskrunner/v1/chat/completions',
      JSON.stringify({ model: 'test-model', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      streaming.signal,
    ).catch(() => null);
    await waitFor(async () => (await queueOf('d0'))?.in_flight === 1, 'the stream to hold the only slot');
    const status = await request(`${gw!.url}/gw/deskrunner/api/v1/models/download/status`);
    await status.body.dump();
    expect(status.statusCode).not.toBe(503);
    expect(fake.received.some((r) => r.url === '/api/v1/models/download/status')).toBe(true);
    expect(await queueOf('d0')).toMatchObject({ in_flight: 1, queued: 0, timed_out: 0 });
    streaming.abort();
    await stream;
  });
});

describe('full queues and long waits', () => {
  it("answers 429 QUEUE_FULL with Retry-After once the queue is full, in the route's error format", async () => {
    await desk(1, () => ({ max_queued_requests: 1 }));
    const [fake] = fakes;
    const hold = gate();
    fake.behaviour.holdUntil = hold.promise;
    const first = chat();
    await waitFor(() => fake.traffic.length === 1, 'the first request at the backend');
    const second = chat();
    await waitFor(async () => (await queueOf('d0'))?.queued === 1, 'the second request to queue');
    const third = await chat();
    expect(third.status).toBe(429);
    expect(third.headers['retry-after']).toMatch(/^\d+$/);
    expect(third.json.error).toMatchObject({ code: 'QUEUE_FULL', type: 'queue_full' });
    expect(third.json.error.message).toContain('d0');
    const viaMsgapi = await chat(
      '/gw/msgapi/v1/messages',
      JSON.stringify({ model: 'test-model', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }),
    );
    expect(viaMsgapi.status).toBe(429);
    expect(viaMsgapi.json).toMatchObject({ type: 'error', error: { code: 'QUEUE_FULL' } });
    expect(viaMsgapi.headers['retry-after']).toMatch(/^\d+$/);
    hold.open();
    expect([(await first).status, (await second).status]).toEqual([200, 200]);
    expect(fake.traffic).toHaveLength(2);
    expect(await queueOf('d0')).toMatchObject({ rejected_full: 2 });
  });

  it('answers 429 QUEUE_TIMEOUT with Retry-After when the wait passes queue_timeout (busy, not absent: 503 is for nothing able to serve)', async () => {
    await desk(1, () => ({ queue_timeout: '150ms' }));
    const [fake] = fakes;
    const hold = gate();
    fake.behaviour.holdUntil = hold.promise;
    const first = chat();
    await waitFor(() => fake.traffic.length === 1, 'the first request at the backend');
    const late = await chat();
    expect(late.status).toBe(429);
    expect(late.json.error).toMatchObject({ code: 'QUEUE_TIMEOUT', type: 'queue_timeout' });
    expect(late.headers['retry-after']).toMatch(/^\d+$/);
    hold.open();
    expect((await first).status).toBe(200);
    expect(fake.traffic).toHaveLength(1);
    expect(await queueOf('d0')).toMatchObject({ timed_out: 1, queued: 0 });
  });

  it('lets a waiting request whose client left go at once; it never reaches the backend', async () => {
    await desk(1);
    const [fake] = fakes;
    const hold = gate();
    fake.behaviour.holdUntil = hold.promise;
    const first = chat();
    await waitFor(() => fake.traffic.length === 1, 'the first request at the backend');
    const abort = new AbortController();
    const leaving = chat(undefined, undefined, abort.signal).catch(() => 'aborted');
    await waitFor(async () => (await queueOf('d0'))?.queued === 1, 'the second request to queue');
    abort.abort();
    expect(await leaving).toBe('aborted');
    await waitFor(async () => (await queueOf('d0'))?.abandoned === 1, 'the queue to notice the client left');
    expect(await queueOf('d0')).toMatchObject({ queued: 0 });
    hold.open();
    expect((await first).status).toBe(200);
    expect((await chat()).status).toBe(200);
    expect(fake.traffic).toHaveLength(2); // the first and the last, never the abandoned one
  });
});

describe('failover by capacity', () => {
  it('sends a request to a lower-priority endpoint with a free slot rather than queue at a busy one', async () => {
    await desk(2);
    const [d0, d1] = fakes;
    const hold = gate();
    d0.behaviour.holdUntil = hold.promise;
    d1.behaviour.holdUntil = hold.promise;
    const first = chat();
    await waitFor(() => d0.traffic.length === 1, 'the first request at d0 (the higher priority)');
    const second = chat();
    await waitFor(() => d1.traffic.length === 1, 'the second request at d1, which had a free slot');
    // Both busy now: the next one queues at the first in balancing order.
    const third = chat();
    await waitFor(async () => (await queueOf('d0'))?.queued === 1, 'the third request to queue at d0');
    hold.open();
    const endpoints = (await Promise.all([first, second, third])).map((r) => r.endpoint);
    expect(endpoints).toEqual(['d0', 'd1', 'd0']);
  });

  it('skips an endpoint whose queue is full for one with room', async () => {
    await desk(2, (i) => (i === 0 ? { max_queued_requests: 0 } : {}));
    const { hold, busy } = await holdBoth();
    const third = chat();
    await waitFor(async () => (await queueOf('d1'))?.queued === 1, 'the third request to queue at d1, d0 taking no waiters');
    expect(await queueOf('d0')).toMatchObject({ rejected_full: 1, queued: 0 });
    hold.open();
    expect((await third).endpoint).toBe('d1');
    await Promise.all(busy);
  });
});

describe('limits from config and hot reload', () => {
  it("takes an endpoint's own max_concurrent_requests over its profile (0: no limit)", async () => {
    await desk(2, (i) => ({ max_concurrent_requests: i === 0 ? 2 : 0 }));
    expect(await queueOf('d0')).toMatchObject({ max_concurrent_requests: 2 });
    expect(await queueOf('d1')).toBeNull();
    const [d0] = fakes;
    const hold = gate();
    d0.behaviour.holdUntil = hold.promise;
    const two = [chat(), chat()];
    await waitFor(() => d0.traffic.length === 2, 'two requests at d0 at once');
    hold.open();
    expect((await Promise.all(two)).map((r) => r.endpoint)).toEqual(['d0', 'd0']);
  });

  it('keeps the queue and its waiters across a reload that keeps the endpoint, under the new limit', async () => {
    await desk(1, () => ({}), { pipelines: { watch: false } });
    const [fake] = fakes;
    const hold = gate();
    fake.behaviour.holdUntil = hold.promise;
    const replies = [chat(), chat()];
    await waitFor(async () => fake.traffic.length === 1 && (await queueOf('d0'))?.queued === 1, 'one request at the backend, one queued');
    const config = { discovery: { static: { endpoints: [endpoint('d0', 'deskrunner', fake.url, { priority: 100, max_concurrent_requests: 2 })] } } };
    await reloadWith(config);
    // The waiter was admitted by the raised limit: both requests are at the backend at once.
    await waitFor(() => fake.traffic.length === 2, 'the queued request admitted under the new limit');
    expect(await queueOf('d0')).toMatchObject({ max_concurrent_requests: 2, admitted: 2, waited: 1 });
    hold.open();
    expect((await Promise.all(replies)).map((r) => r.status)).toEqual([200, 200]);
  });

  it('moves a waiter on when a reload retires its endpoint; the request in flight finishes there', async () => {
    await desk(2, (i) => ({ max_queued_requests: i === 0 ? 5 : 0 }), { pipelines: { watch: false } });
    const [, d1] = fakes;
    const { hold, busy } = await holdBoth();
    const waiting = chat();
    await waitFor(async () => (await queueOf('d0'))?.queued === 1, 'a request queued at d0');
    const config = { discovery: { static: { endpoints: [endpoint('d1', 'deskrunner', d1.url, { priority: 90 })] } } };
    await reloadWith(config);
    // d1 has a queue of its own now (the profile's default), and the waiter went there.
    await waitFor(async () => (await queueOf('d1'))?.queued === 1, 'the waiter queued at d1');
    hold.open();
    const all = await Promise.all([...busy, waiting]);
    expect(all.map((r) => [r.status, r.endpoint])).toEqual([
      [200, 'd0'],
      [200, 'd1'],
      [200, 'd1'],
    ]);
  });
});
