// The attempt loop on its own: a fake exchange (a real ServerResponse of a tiny front server), a
// SendPolicy written here, real endpoints (registry, interceptors, pools, breakers) in front of
// FakeBackends. No Gateway, no pipeline, no plugin.
import { describe, expect, it } from 'vitest';
import type { Endpoint } from '../../../engine/backends/endpoints.js';
import { GatewayError } from '../../../engine/core/errors.js';
import { PlanBuilder, planOf } from '../../../engine/routing/plan.js';
import { FLOOR_MS } from '../../../engine/backends/first-tokens.js';
import { policy, routingHarness, type Reply } from '../../helpers/exchange.js';
import { waitFor } from '../../helpers/wait.js';

const { start, send, endpoints, fake } = routingHarness();

const answerOf = (r: Reply) => JSON.parse(r.text).choices[0].message.content;
/** Until the fake has the request (the attempt is under way there). */
const arrived = (f: { received: unknown[] }) => waitFor(() => f.received.length > 0, 'the request to reach the fake');
/** Past the tick on which Endpoint.foundDown tells the attempts under way. */
const told = () => new Promise((r) => setImmediate(r));
const openBreaker = (ep: Endpoint) => {
  for (let i = 0; i < 3; i++) ep.breaker.healthFailure();
};

describe('attemptLoop', () => {
  it('the first candidate answers: one attempt, recorded as such, the others never asked', async () => {
    const [fa, fb] = [await fake('a'), await fake('b')];
    const [a, b] = endpoints(fa.url, fb.url);
    const r = await send(policy(), planOf([a, b], null, 'test-model', 'requested', 'real-name'));
    expect([r.status, answerOf(r)]).toEqual([200, 'Hello from a']);
    expect(r.rec).toMatchObject({ count: 1, endpoint: a, model: 'real-name', tried: null, fellBack: null });
    expect(fb.received).toHaveLength(0);
  });

  it.each([true, false])('a refused connection goes to the next endpoint, replay-safe or not (%s)', async (safe) => {
    const [down, fb] = [await fake('a', true), await fake('b')];
    const [a, b] = endpoints(down.url, fb.url);
    const r = await send(policy({ replaySafe: () => safe }), planOf([a, b], null));
    expect(answerOf(r)).toBe('Hello from b');
    expect(r.rec).toMatchObject({ count: 2, endpoint: b, tried: [{ endpoint: 'a', outcome: 'refused' }] });
  });

  it('a reset after the request went out: the next endpoint on a replay-safe route, else 502 and never sent twice', async () => {
    const [fa, fb] = [await fake('a'), await fake('b')];
    fa.behaviour.resetBeforeResponse = true;
    const [a, b] = endpoints(fa.url, fb.url);
    const unsafe = await send(policy({ replaySafe: () => false }), planOf([a, b], null));
    expect(unsafe.error).toMatchObject({ key: 'UPSTREAM_ERROR', status: 502 });
    expect(unsafe.status).toBe(502);
    expect([fa.executions, fb.received.length]).toEqual([1, 0]);

    const safe = await send(policy(), planOf([a, b], null));
    expect(answerOf(safe)).toBe('Hello from b');
    expect(safe.rec.tried).toEqual([expect.objectContaining({ endpoint: 'a', outcome: expect.stringMatching(/^(closed|reset)$/) })]);
  });

  it('a retry status is held back and the next candidate answers; without retry settings it is the answer', async () => {
    const [fa, fb] = [await fake('a'), await fake('b')];
    fa.behaviour.status = 503;
    const [a, b] = endpoints(fa.url, fb.url);
    const r = await send(policy(), planOf([a, b], null));
    expect([r.status, answerOf(r)]).toEqual([200, 'Hello from b']);
    expect(r.rec).toMatchObject({ count: 2, endpoint: b, tried: [{ endpoint: 'a', outcome: '503' }] });

    fb.reset();
    const plain = await send(policy({ retry: undefined }), planOf([a, b], null));
    expect(plain.status).toBe(503);
    expect(plain.text).toContain('fake a failing with 503');
    expect(fb.received).toHaveLength(0);
  });

  it('every attempt failed: the backend answer held back is relayed, not an error of ours', async () => {
    const [fa, down] = [await fake('a'), await fake('b', true)];
    fa.behaviour.status = 503;
    fa.behaviour.errorBody = { contentType: 'application/json', body: '{"error":"a is overloaded"}' };
    const [a, b] = endpoints(fa.url, down.url);
    // One retry: the walk ends at b's refusal, with a's 503 still held.
    const r = await send(policy({ maxRetries: 1 }), planOf([a, b], null));
    expect([r.status, r.text, r.error]).toEqual([503, '{"error":"a is overloaded"}', null]);
    expect(fa.received).toHaveLength(1);
    expect(r.rec).toMatchObject({
      count: 2,
      endpoint: a,
      tried: [
        { endpoint: 'a', outcome: '503', answered: true },
        { endpoint: 'b', outcome: 'refused' },
      ],
    });
  });

  it('nothing answered and nothing held: the gateway error is thrown, naming where nothing listened', async () => {
    const [da, db] = [await fake('a', true), await fake('b', true)];
    const r = await send(policy(), planOf(endpoints(da.url, db.url), null));
    expect(r.error).toBeInstanceOf(GatewayError);
    expect(r.error).toMatchObject({ key: 'ENDPOINT_UNAVAILABLE', status: 503, detail: { hint: expect.stringContaining(da.url) } });
    expect(r.rec.count).toBe(2);
  });

  it('maxRetries bounds the attempts', async () => {
    const [da, db, fc] = [await fake('a', true), await fake('b', true), await fake('c')];
    const one = await send(policy({ maxRetries: 1 }), planOf(endpoints(da.url, db.url, fc.url), null));
    expect(one.error).toMatchObject({ key: 'ENDPOINT_UNAVAILABLE' });
    expect([one.rec.count, fc.received.length]).toEqual([2, 0]);
    const two = await send(policy({ maxRetries: 2 }), planOf(endpoints(da.url, db.url, fc.url), null));
    expect([two.rec.count, answerOf(two)]).toEqual([3, 'Hello from c']);
  });

  it('an open breaker is skipped with nothing sent; all open is 503 circuit_breaker with Retry-After', async () => {
    const [fa, fb] = [await fake('a'), await fake('b')];
    const [a, b] = endpoints(fa.url, fb.url);
    openBreaker(a);
    const r = await send(policy(), planOf([a, b], null));
    expect(answerOf(r)).toBe('Hello from b');
    expect(r.rec).toMatchObject({ count: 1, endpoint: b, tried: null });
    expect(fa.received).toHaveLength(0);

    openBreaker(b);
    fb.reset();
    const all = await send(policy(), planOf([a, b], null));
    expect(all.error).toMatchObject({ key: 'CIRCUIT_BREAKER', status: 503, headers: ['retry-after', '1'] });
    expect([all.status, all.headers['retry-after'], all.rec.count]).toEqual([503, '1', 0]);
    expect([fa.received.length, fb.received.length]).toEqual([0, 0]);
  });

  it("policy.request is handed each candidate's model, and that is what the backend is asked for", async () => {
    const [fa, fb] = [await fake('a'), await fake('b')];
    fa.behaviour.status = 503;
    const [a, b] = endpoints(fa.url, fb.url);
    const builder = new PlanBuilder();
    builder.add(0, [a, b], (ep) => `real-${ep.name}`, 'alias');
    const asked: [string, string | undefined][] = [];
    const p = policy();
    const r = await send(
      {
        ...p,
        request: (ex, ep, model) => {
          asked.push([ep.name, model]);
          return p.request(ex, ep, model);
        },
      },
      builder.build(null, 'test-model'),
    );
    expect(asked).toEqual([
      ['a', 'real-a'],
      ['b', 'real-b'],
    ]);
    expect([fa.received[0].json.model, fb.received[0].json.model]).toEqual(['real-a', 'real-b']);
    expect(r.rec.model).toBe('real-b');
  });

  it('prepare runs once per attempt, never for a candidate skipped before sending', async () => {
    const [fa, down, fc, fd] = [await fake('a'), await fake('b', true), await fake('c'), await fake('d')];
    fc.behaviour.status = 503;
    const eps = endpoints(fa.url, down.url, fc.url, fd.url);
    openBreaker(eps[0]);
    const r = await send(policy(), planOf(eps, null));
    expect(answerOf(r)).toBe('Hello from d');
    expect(r.rec.count).toBe(3);
    expect(r.ex.prepared).toHaveLength(3);
    expect(r.rec.tried!.map((t) => t.endpoint)).toEqual(['b', 'c']);
  });

  it('a fallback group answers: the record says it fell back, and why', async () => {
    const [fa, fb] = [await fake('a'), await fake('b')];
    fa.behaviour.status = 503;
    const [a, b] = endpoints(fa.url, fb.url);
    const builder = new PlanBuilder();
    builder.add(0, [a], () => undefined, 'requested');
    builder.add(1, [b], () => 'fb-model', 'fallback');
    const r = await send(policy(), builder.build(null, 'test-model'));
    expect(answerOf(r)).toBe('Hello from b');
    expect(r.rec).toMatchObject({ endpoint: b, model: 'fb-model', fellBack: { decision: 'fallback', reason: 'model_fallback (test-model: 503 from a)' } });
  });

  describe('an endpoint found down while an attempt waits on it (Endpoint.foundDown)', () => {
    const reply = async (p: ReturnType<typeof start>) => {
      const { res, job } = await p;
      const text = await res.body.text();
      await job.done;
      return { status: res.statusCode, text, rec: job.ex!.rec! };
    };

    it.each([
      ['taken out of rotation', (a: Endpoint) => a.foundDown('offline: timed out')],
      ['its breaker opening', (a: Endpoint) => openBreaker(a)],
    ])('%s: the attempt without a reply head moves to the next endpoint at once', async (_, evidence) => {
      const [fa, fb] = [await fake('a'), await fake('b')];
      fa.behaviour.hang = true;
      const [a, b] = endpoints(fa.url, fb.url);
      const pending = reply(start(policy(), planOf([a, b], null)));
      await arrived(fa);
      evidence(a);
      const r = await pending;
      expect([r.status, JSON.parse(r.text).choices[0].message.content]).toEqual([200, 'Hello from b']);
      expect(r.rec).toMatchObject({ count: 2, endpoint: b, tried: [{ endpoint: 'a', outcome: expect.stringMatching(/^abandoned \(endpoint /) }] });
      expect(a.underWay.size).toBe(0);
    });

    it('not replay-safe, or no other candidate: it waits for its answer there', async () => {
      const [fa, fb] = [await fake('a'), await fake('b')];
      const [a, b] = endpoints(fa.url, fb.url);
      for (const [over, plan] of [
        [{ replaySafe: () => false }, planOf([a, b], null)],
        [{}, planOf([a], null)],
      ] as const) {
        let release!: () => void;
        fa.reset();
        fa.behaviour.holdUntil = new Promise<void>((r) => (release = r));
        const pending = reply(start(policy(over), plan));
        await arrived(fa);
        a.foundDown('offline: timed out');
        await told();
        release();
        const r = await pending;
        expect([r.status, JSON.parse(r.text).choices[0].message.content, r.rec.tried]).toEqual([200, 'Hello from a', null]);
      }
      expect(fb.received).toHaveLength(0);
    });

    it('an answer under way is left to finish', async () => {
      const [fa, fb] = [await fake('a'), await fake('b')];
      const [a, b] = endpoints(fa.url, fb.url);
      let next: (() => void) | undefined;
      fa.behaviour.beforeChunk = (i) => (i === 3 ? new Promise<void>((r) => (next = r)) : Promise.resolve());
      const pending = reply(start(policy(), planOf([a, b], null), true));
      await waitFor(() => next !== undefined, 'the stream to reach its fourth piece');
      a.foundDown('offline: timed out');
      await told();
      next!();
      const r = await pending;
      expect([r.status, r.rec.tried, r.rec.endpoint]).toEqual([200, null, a]);
      expect(r.text).toContain('[DONE]');
      expect(fb.received).toHaveLength(0);
    });
  });

  describe("a first-token deadline learned from the endpoint's recent streams", () => {
    it('a first token far later than usual is given up for a candidate that has the model loaded', async () => {
      const [fa, fb] = [await fake('a'), await fake('b')];
      const [a, b] = endpoints(fa.url, fb.url);
      for (let i = 0; i < 3; i++) a.firstTokens.record('test-model', 100, 20);
      expect(a.firstTokens.deadline('test-model', 100)).toBe(FLOOR_MS);
      let release!: () => void;
      const stalled = new Promise<void>((r) => (release = r));
      fa.behaviour.beforeChunk = (i) => (i === 1 ? stalled : Promise.resolve());
      const started = performance.now();
      const r = await send(policy({ streaming: () => true }), planOf([a, b], null), true);
      release();
      expect(r.status).toBe(200);
      expect(r.rec).toMatchObject({ endpoint: b, tried: [{ endpoint: 'a', outcome: `first_token_timeout (${FLOOR_MS / 1000}s, learned)` }] });
      expect(performance.now() - started).toBeGreaterThanOrEqual(FLOOR_MS - 5);
    });

    it('learns from the streams it relays', async () => {
      const [fa, fb] = [await fake('a'), await fake('b')];
      const [a, b] = endpoints(fa.url, fb.url);
      for (let i = 0; i < 3; i++) await send(policy({ streaming: () => true }), planOf([a, b], null), true);
      expect(a.firstTokens.deadline('test-model', 100)).toBe(FLOOR_MS);
      expect(b.firstTokens.deadline('test-model', 100)).toBe(0);
      expect(a.firstTokens.deadline('another-model', 100)).toBe(FLOOR_MS);
    });
  });
});
