// A key's token limits (auth.keys[]: tokens_per_minute, tokens_per_day, model_limits,
// max_concurrent) hold under concurrency and streaming: a request reserves its estimate before it
// is sent, all or none, so concurrent requests cannot all pass one check; the reservation settles
// on what was used, and is released when the client goes away. A refusal is 429 in the API's own
// shape, with Retry-After and the token X-RateLimit-* headers.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { request, type Dispatcher } from 'undici';
import { keyHash } from '../../../engine/core/keys.js';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, NO_RATE_LIMITS, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

const secret = (name: string) => `gw-${name}-secret-limits`;
const LIMIT = 10_000;

let fake: FakeBackend, gw: Started;
beforeAll(async () => {
  fake = await new FakeBackend({ family: 'pagedengine', name: 'paged', models: [{ name: 'model-a' }, { name: 'model-b' }], reply: 'one two three' }).start();
  gw = await startGateway({
    auth: {
      keys: [
        { name: 'ops', hash: keyHash(secret('ops')) },
        { name: 'minute', hash: keyHash(secret('minute')), tokens_per_minute: LIMIT },
        { name: 'day', hash: keyHash(secret('day')), tokens_per_day: 300 },
        { name: 'one', hash: keyHash(secret('one')), max_concurrent: 1 },
        { name: 'per-model', hash: keyHash(secret('per-model')), model_limits: { 'model-b*': { tokens_per_day: 100 } } },
      ],
      admin: ['ops'],
      reserve_output_tokens: 2048,
    },
    server: { rate_limits: NO_RATE_LIMITS },
    discovery: { static: { endpoints: [endpoint('paged', 'pagedengine', fake.url, { check_interval: '60s' })] } },
  });
  await waitFor(() => (gw.gw.runtime.catalogue.all().length >= 2 ? true : undefined), 'the list discovered');
});
afterAll(() => closeAll(gw, [fake]));
beforeEach(() => fake.reset());

/** The chat requests the backend received (health checks and model lists left out). */
const chats = () => fake.received.filter((r) => r.url.endsWith('/chat/completions'));
const body = (model: string, more: object = {}) => JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], ...more });

function post(name: string, path: string, payload: string, signal?: AbortSignal) {
  return request(`${gw.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret(name)}`, 'content-type': 'application/json' },
    body: payload,
    signal,
  });
}

async function usageOf(name: string) {
  const res = await request(`${gw.url}/internal/usage?key=${name}`, { headers: { authorization: `Bearer ${secret('ops')}` } });
  return (JSON.parse(await res.body.text()) as any).keys[name];
}

describe('token limits', () => {
  it('20 concurrent streams against 10,000 tokens a minute: those admitted reserve at most the limit, the rest 429 with token headers', async () => {
    let release!: () => void;
    fake.behaviour.holdUntil = new Promise((r) => (release = r));
    const payload = body('model-a', { stream: true, max_tokens: 1000 });
    const reservation = Math.ceil(Buffer.byteLength(payload) / 4) + 1000;
    // An admitted stream waits at the backend (its head with it); a refused one is answered at once.
    const refused: Dispatcher.ResponseData[] = [];
    const sent = performance.now();
    const all = Array.from({ length: 20 }, () =>
      post('minute', '/gw/pagedengine/v1/chat/completions', payload).then((r) => {
        if (r.statusCode === 429) refused.push(r);
        return r;
      }),
    );
    await waitFor(() => (refused.length + chats().length === 20 ? true : undefined), 'each request admitted or refused');
    const admitted = chats();
    // The bucket refills (10,000 a minute) while the twenty arrive: what it may have added then counts too.
    const refilled = Math.ceil(((performance.now() - sent) / 60_000) * LIMIT);
    // Held at the backend, the admitted streams are all in flight: their reservations are what the limit holds.
    expect(admitted.length * reservation).toBeLessThanOrEqual(LIMIT + refilled);
    expect(admitted.length).toBeGreaterThanOrEqual(Math.floor(LIMIT / reservation));
    const first = refused[0];
    expect(first.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    expect(first.headers['x-ratelimit-limit-tokens']).toBe(String(LIMIT));
    expect(Number(first.headers['x-ratelimit-remaining-tokens'])).toBeLessThan(reservation);
    const error = (JSON.parse(await first.body.text()) as any).error;
    expect(error).toMatchObject({ type: 'rate_limited', code: 'token_limit_exceeded' });
    expect(error.message).toContain('tokens_per_minute 10000');
    for (const r of refused.slice(1)) await r.body.dump();
    expect((await usageOf('minute')).in_flight).toBe(admitted.length);
    release();
    for (const r of await Promise.all(all)) {
      expect([200, 429]).toContain(r.statusCode);
      if (r.statusCode === 200) await r.body.text();
    }
    // Settled on what they used (a few tokens each): the bucket holds nearly all of it again.
    await waitFor(async () => ((await usageOf('minute')).in_flight === 0 ? true : undefined), 'every stream settled');
    const u = await usageOf('minute');
    expect(u.total.all.requests).toBe(admitted.length);
    expect(u.budget.tokens_per_minute.remaining).toBeGreaterThan(LIMIT - admitted.length * 100);
  });

  it('a client that goes away releases its reservation (max_concurrent: the next request gets in)', async () => {
    let release!: () => void;
    fake.behaviour.holdUntil = new Promise((r) => (release = r));
    const gone = new AbortController();
    const held = post('one', '/gw/pagedengine/v1/chat/completions', body('model-a', { stream: true }), gone.signal).catch((err) => err);
    await waitFor(() => (chats().length > 0 ? true : undefined), 'the first request at the backend');
    const second = await post('one', '/gw/pagedengine/v1/chat/completions', body('model-a'));
    expect(second.statusCode).toBe(429);
    expect((JSON.parse(await second.body.text()) as any).error.message).toContain('max_concurrent');
    gone.abort();
    await held;
    await waitFor(async () => ((await usageOf('one')).in_flight === 0 ? true : undefined), 'the reservation released');
    release();
    const third = await post('one', '/gw/pagedengine/v1/chat/completions', body('model-a'));
    expect(third.statusCode).toBe(200);
    await third.body.dump();
  });

  it('a day budget: spent, the next request is refused until tomorrow (UTC), in the messages API’s own shape', async () => {
    // Each request reserves its prompt and 100 tokens of output, and uses a few: admitted while
    // what was used leaves room for that, then refused.
    let refusedAt = -1;
    const payload = body('model-a', { max_tokens: 100 });
    for (let i = 0; i < 100 && refusedAt < 0; i++) {
      const r = await post('day', '/gw/pagedengine/v1/chat/completions', payload);
      await r.body.dump();
      if (r.statusCode === 429) refusedAt = i;
    }
    expect(refusedAt).toBeGreaterThan(1);
    const u = await usageOf('day');
    expect(u.total.all.requests).toBe(refusedAt);
    expect(u.budget.tokens_per_day).toMatchObject({ limit: 300, used: u.total.all.input_tokens + u.total.all.output_tokens });
    expect(u.budget.tokens_per_day.remaining).toBeLessThan(Math.ceil(Buffer.byteLength(payload) / 4) + 100);
    const r = await post('day', '/gw/msgapi/v1/messages', JSON.stringify({ model: 'model-a', max_tokens: 200, messages: [{ role: 'user', content: 'hi' }] }));
    expect(r.statusCode).toBe(429);
    const reply = JSON.parse(await r.body.text()) as any;
    expect(reply).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
    const tomorrow = new Date();
    tomorrow.setUTCHours(24, 0, 0, 0);
    const wait = Number(r.headers['retry-after']);
    expect(Math.abs(Date.now() + wait * 1000 - tomorrow.getTime())).toBeLessThan(5_000);
    expect(r.headers['x-ratelimit-limit-tokens']).toBe('300');
  });

  it("a model's own limit: spent for the models its pattern matches, the key's other models unaffected", async () => {
    const b1 = await post('per-model', '/gw/pagedengine/v1/chat/completions', body('model-b', { max_tokens: 50 }));
    expect(b1.statusCode).toBe(200);
    await b1.body.dump();
    const b2 = await post('per-model', '/gw/pagedengine/v1/chat/completions', body('model-b', { max_tokens: 100 }));
    expect(b2.statusCode).toBe(429);
    expect((JSON.parse(await b2.body.text()) as any).error.message).toContain('per-model (model-b*)');
    const a = await post('per-model', '/gw/pagedengine/v1/chat/completions', body('model-a', { max_tokens: 100 }));
    expect(a.statusCode).toBe(200);
    await a.body.dump();
  });
});
