// Resilience, part 1: failures before any byte reached the client (statuses, resets, silence,
// context-length errors, a fallback that refuses, a primary that flaps), each with one endpoint
// and with a fallback chain (primary-model → fallback-model on a second provider) or a second
// endpoint serving the same model. For each: rescued when a candidate can answer, passed through
// honestly when none can (the backend's own status and body), never held past the budget.
// The fake provider is test/fakes/scripted-provider.ts (its own tests: scripted-provider.test.ts).
import { afterEach, describe, expect, it } from 'vitest';
import { CONTEXT_ERROR_LLAMACPP, CONTEXT_ERROR_OPENAI } from '../../fakes/scripted-provider.js';
import { customProfiles } from '../../helpers/profiles.js';
import { accessLines, chatBody, metricsText, rig, send, servedAfterOpenBreaker, type Rig } from '../../helpers/resilience.js';
import { sampleSum } from '../../helpers/prom.js';
import { waitFor } from '../../helpers/wait.js';

let r: Rig | null = null;
afterEach(async () => {
  await r?.close();
  r = null;
});

const RA_FITS = { status: 429, headers: { 'retry-after': '1' } } as const;
const RA_LONG = { status: 429, headers: { 'retry-after': '60' } } as const;

describe('429 with Retry-After', () => {
  it('one endpoint, a wait that fits the budget: waits as told, retries once, and answers', async () => {
    r = await rig('one endpoint');
    r.primary.script(RA_FITS);
    const reply = await send(r);
    expect(reply.status).toBe(200);
    expect(reply.json.choices[0].message.content).toBe('Hello from primary');
    const [first, second] = r.primary.generations;
    expect(r.primary.generations).toHaveLength(2);
    // The Retry-After was honoured (a timer may fire a few ms short of its delay in Date.now terms).
    expect(second.at - first.at).toBeGreaterThanOrEqual(990);
    expect(reply.headers['x-gw-attempts']).toBe('2');
  });

  it('one endpoint, a wait longer than the budget: the 429 passes through with its Retry-After at once', async () => {
    r = await rig('one endpoint', { proxy: { retry: { budget: '3s' } } });
    r.primary.script(RA_LONG);
    const reply = await send(r);
    expect(reply.status).toBe(429);
    expect(reply.headers['retry-after']).toBe('60');
    expect(reply.json.error.message).toBe('scripted primary failing with 429');
    expect(r.primary.generations).toHaveLength(1);
  });

  it('fallback chain, a wait longer than the budget: moves on to the fallback model at once', async () => {
    r = await rig('fallback chain', { proxy: { retry: { budget: '3s' } } });
    r.primary.script(RA_LONG);
    const reply = await send(r);
    expect(reply.status).toBe(200);
    expect(reply.json.choices[0].message.content).toBe('Hello from fallback');
    expect(reply.headers['x-gw-model']).toBe('fallback-model');
    expect(reply.headers['x-gw-routing-decision']).toBe('fallback');
    // The body's model was rewritten for the fallback's attempt.
    expect(r.other!.generations.map((g) => g.model)).toEqual(['fallback-model']);
  });

  it('two endpoints: the other endpoint answers, and the Busy one is passed over while it waits', async () => {
    r = await rig('two endpoints');
    r.primary.script(RA_LONG);
    const first = await send(r);
    expect(first.status).toBe(200);
    expect(first.headers['x-gw-endpoint']).toBe('secondary');
    const second = await send(r);
    expect(second.status).toBe(200);
    expect(second.headers['x-gw-endpoint']).toBe('secondary');
    expect(r.primary.generations).toHaveLength(1);
  });
});

describe('persistent 429', () => {
  it('one endpoint with Retry-After: one wait and retry, then the 429 passes through with its Retry-After', async () => {
    r = await rig('one endpoint');
    r.primary.always(RA_FITS);
    const reply = await send(r);
    expect(reply.status).toBe(429);
    expect(reply.headers['retry-after']).toBe('1');
    expect(reply.json.error.message).toBe('scripted primary failing with 429');
    expect(r.primary.generations).toHaveLength(2);
  });

  it('one endpoint without Retry-After: at most max_retries further attempts, then the 429 passes through', async () => {
    r = await rig('one endpoint', { proxy: { max_retries: 2 } });
    r.primary.always({ status: 429 });
    const reply = await send(r);
    expect(reply.status).toBe(429);
    expect(reply.json.error.message).toBe('scripted primary failing with 429');
    expect(r.primary.generations.length).toBeLessThanOrEqual(3);
    expect(reply.headers['x-gw-attempts']).toBe(String(r.primary.generations.length));
  });

  it('fallback chain, both rate-limited: the last backend’s 429 passes through with its Retry-After', async () => {
    // A budget no Retry-After fits: nothing is waited for.
    r = await rig('fallback chain', { proxy: { retry: { budget: '3s' } } });
    r.primary.always(RA_LONG);
    r.other!.always({ status: 429, headers: { 'retry-after': '45' } });
    const reply = await send(r);
    expect(reply.status).toBe(429);
    expect(r.other!.generations.length).toBeGreaterThanOrEqual(1);
    // The backend's own answer, with its own Retry-After (whichever was asked last).
    const who = /^scripted (primary|fallback) failing with 429$/.exec(reply.json.error.message)?.[1];
    expect(who).toBeDefined();
    expect(reply.headers['retry-after']).toBe(who === 'fallback' ? '45' : '60');
  });
});

describe('one 500', () => {
  it('one endpoint: tried again, and answers', async () => {
    r = await rig('one endpoint');
    r.primary.script({ status: 500 });
    const reply = await send(r);
    expect(reply.status).toBe(200);
    expect(reply.json.choices[0].message.content).toBe('Hello from primary');
    expect(r.primary.generations).toHaveLength(2);
  });

  it('fallback chain: the requested model once more after a backoff; it answers, the fallback is never asked', async () => {
    r = await rig('fallback chain');
    r.primary.script({ status: 500 });
    const reply = await send(r);
    expect(reply.status).toBe(200);
    expect(reply.json.choices[0].message.content).toBe('Hello from primary');
    expect(reply.headers['x-gw-model']).toBe('primary-model');
    expect(r.other!.generations).toHaveLength(0);
  });

  it('two endpoints: the other endpoint answers', async () => {
    r = await rig('two endpoints');
    r.primary.script({ status: 500 });
    const reply = await send(r);
    expect(reply.status).toBe(200);
    expect(reply.headers['x-gw-endpoint']).toBe('secondary');
    expect(r.other!.generations.map((g) => g.model)).toEqual(['primary-model']);
  });
});

describe('persistent 503', () => {
  it('one endpoint: the backend’s 503 and body pass through after at most max_retries further attempts', async () => {
    r = await rig('one endpoint', { proxy: { max_retries: 2 } });
    r.primary.always({ status: 503 });
    const reply = await send(r);
    expect(reply.status).toBe(503);
    expect(reply.json.error.message).toBe('scripted primary failing with 503');
    expect(r.primary.generations.length).toBeLessThanOrEqual(3);
    expect(reply.headers['x-gw-attempts']).toBe(String(r.primary.generations.length));
  });

  it('fallback chain: the fallback model answers', async () => {
    r = await rig('fallback chain');
    r.primary.always({ status: 503 });
    const reply = await send(r);
    expect(reply.status).toBe(200);
    expect(reply.json.choices[0].message.content).toBe('Hello from fallback');
  });

  it('fallback chain, both down: the last backend’s 503 and body pass through', async () => {
    r = await rig('fallback chain');
    r.primary.always({ status: 503 });
    r.other!.always({ status: 503 });
    const reply = await send(r);
    expect(reply.status).toBe(503);
    // The last backend's own answer, not a gateway envelope.
    expect(reply.json.error.message).toMatch(/^scripted (primary|fallback) failing with 503$/);
    expect(r.other!.generations.length).toBeGreaterThanOrEqual(1);
  });
});

describe('reset before the headers', () => {
  it('one endpoint, once: sent again (the route is replay-safe), and answers', async () => {
    r = await rig('one endpoint');
    r.primary.script('reset');
    const reply = await send(r);
    expect(reply.status).toBe(200);
    expect(r.primary.generations).toHaveLength(2);
  });

  it('one endpoint, always: an honest gateway error within max_retries further attempts', async () => {
    r = await rig('one endpoint', { proxy: { max_retries: 2 } });
    r.primary.always('reset');
    const reply = await send(r);
    expect([502, 503]).toContain(reply.status);
    expect(reply.json.error.message).toEqual(expect.any(String));
    // 1 + max_retries attempts, each of which a reset may send once more on a fresh connection
    // (the stale-socket retry: a pooled socket the backend closed while idle fails the same way).
    expect(r.primary.generations.length).toBeLessThanOrEqual(2 * 3);
  });

  it('two endpoints: the other endpoint answers', async () => {
    r = await rig('two endpoints');
    r.primary.always('reset');
    const reply = await send(r);
    expect(reply.status).toBe(200);
    expect(reply.headers['x-gw-endpoint']).toBe('secondary');
  });

  it('fallback chain: the fallback model answers', async () => {
    r = await rig('fallback chain');
    r.primary.always('reset');
    const reply = await send(r);
    expect(reply.status).toBe(200);
    expect(reply.json.choices[0].message.content).toBe('Hello from fallback');
  });
});

describe('no response at all', () => {
  // The family's reply timeout well past the budget: the budget is what ends the wait (and a
  // gateway without one fails on its answer, not on the test's timeout).
  const REPLY_TIMEOUT_20S = () => customProfiles({ 'hosted-compatible': (p) => (p.characteristics.timeout = '20s') });

  it('one endpoint: 504 BUDGET_EXCEEDED naming the budget, and the attempt cancelled upstream', async () => {
    r = await rig('one endpoint', { proxy: { retry: { budget: '3s' }, profiles_dir: REPLY_TIMEOUT_20S() } });
    r.primary.always('hang');
    const reply = await send(r);
    expect(reply.status).toBe(504);
    expect(reply.json.error.code).toBe('BUDGET_EXCEEDED');
    expect(reply.json.error.message).toContain('3s');
    expect(reply.json.error.message).toContain('proxy.retry.budget');
    await waitFor(() => r!.primary.aborted >= 1, 'the hung attempt to be cancelled upstream');
  });

  it('one endpoint, a stream: the same 504 (no head was ever sent)', async () => {
    r = await rig('one endpoint', { proxy: { retry: { budget: '3s' }, profiles_dir: REPLY_TIMEOUT_20S() } });
    r.primary.always('hang');
    const reply = await send(r, chatBody(true));
    expect(reply.status).toBe(504);
    expect(reply.json.error.code).toBe('BUDGET_EXCEEDED');
    expect(reply.json.error.message).toContain('proxy.retry.budget');
  });

  it('fallback chain: past the family’s reply timeout the fallback model answers', async () => {
    r = await rig('fallback chain', {
      proxy: { retry: { budget: '60s' }, profiles_dir: customProfiles({ 'hosted-compatible': (p) => (p.characteristics.timeout = '1s') }) },
    });
    r.primary.always('hang');
    const reply = await send(r);
    expect(reply.status).toBe(200);
    expect(reply.json.choices[0].message.content).toBe('Hello from fallback');
    await waitFor(() => r!.primary.aborted >= 1, 'the hung attempt to be cancelled upstream');
  });

  it('fallback chain, both silent: 504 naming the budget', async () => {
    r = await rig('fallback chain', { proxy: { retry: { budget: '3s' }, profiles_dir: REPLY_TIMEOUT_20S() } });
    r.primary.always('hang');
    r.other!.always('hang');
    const reply = await send(r);
    expect(reply.status).toBe(504);
    expect(reply.json.error.code).toBe('BUDGET_EXCEEDED');
    expect(reply.json.error.message).toContain('proxy.retry.budget');
  });
});

describe('a context-length error', () => {
  it('one endpoint: the backend’s 400 passes through as it was, not retried', async () => {
    r = await rig('one endpoint');
    r.primary.always({ status: 400, body: CONTEXT_ERROR_OPENAI });
    const reply = await send(r);
    expect(reply.status).toBe(400);
    expect(reply.json.error).toMatchObject(CONTEXT_ERROR_OPENAI.error);
    expect(r.primary.generations).toHaveLength(1);
  });

  it('fallback chain with a larger context window: the fallback answers (OpenAI and llama.cpp wordings)', async () => {
    r = await rig('fallback chain');
    r.primary.always({ status: 400, body: CONTEXT_ERROR_OPENAI });
    const a = await send(r);
    expect(a.status).toBe(200);
    expect(a.json.choices[0].message.content).toBe('Hello from fallback');
    expect(a.headers['x-gw-model']).toBe('fallback-model');
    expect(a.headers['x-gw-routing-decision']).toBe('fallback');
    r.primary.always({ status: 400, body: CONTEXT_ERROR_LLAMACPP });
    const b = await send(r);
    expect(b.status).toBe(200);
    expect(b.json.choices[0].message.content).toBe('Hello from fallback');
  });

  it('fallback chain whose fallback has no larger window: the 400 passes through, the fallback never asked', async () => {
    r = await rig('fallback chain', { fallbackModels: [{ name: 'fallback-model', context: 4096 }] });
    r.primary.always({ status: 400, body: CONTEXT_ERROR_OPENAI });
    const reply = await send(r);
    expect(reply.status).toBe(400);
    expect(reply.json.error.code).toBe('context_length_exceeded');
    expect(r.other!.generations).toHaveLength(0);
  });

  it('any other 400 is the client’s error: passed through, the fallback never asked', async () => {
    r = await rig('fallback chain');
    r.primary.always({ status: 400, body: { error: { message: 'messages: field required', type: 'invalid_request_error' } } });
    const reply = await send(r);
    expect(reply.status).toBe(400);
    expect(reply.json.error.message).toBe('messages: field required');
    expect(r.other!.generations).toHaveLength(0);
  });
});

describe('a fallback that rejects what the primary accepted', () => {
  const REJECT = { status: 400, body: { error: { message: "Unsupported parameter: 'messages[0].content'", type: 'invalid_request_error' } } };

  it('one endpoint: the primary’s 503 passes through (the baseline a direct call gets)', async () => {
    r = await rig('one endpoint', { proxy: { max_retries: 1 } });
    r.primary.always({ status: 503 });
    const reply = await send(r);
    expect(reply.status).toBe(503);
    expect(reply.json.error.message).toBe('scripted primary failing with 503');
  });

  it('fallback chain: the client gets the primary’s failure, never the fallback’s 400', async () => {
    r = await rig('fallback chain');
    r.primary.always({ status: 503 });
    r.other!.always(REJECT);
    const reply = await send(r);
    expect(reply.status).toBe(503);
    expect(reply.json.error.message).toBe('scripted primary failing with 503');
    expect(r.other!.generations.length).toBeGreaterThanOrEqual(1);
  });

  it('fallback chain after a 429: the 429 and its Retry-After, never the fallback’s 400', async () => {
    // A budget the Retry-After does not fit: the fallback is asked at once.
    r = await rig('fallback chain', { proxy: { retry: { budget: '3s' } } });
    r.primary.always(RA_LONG);
    r.other!.always(REJECT);
    const reply = await send(r);
    expect(reply.status).toBe(429);
    expect(reply.headers['retry-after']).toBe('60');
    expect(reply.json.error.message).toBe('scripted primary failing with 429');
  });
});

describe('a primary that flaps', () => {
  it('one endpoint: honest errors while it is down, served again by the very next request once it is back', async () => {
    r = await rig('one endpoint', { proxy: { retry: { budget: '5s' } } });
    expect((await send(r)).status).toBe(200);
    await r.primary.setDown(true);
    for (let i = 0; i < 3; i++) {
      const down = await send(r);
      expect(down.status).toBeGreaterThanOrEqual(502);
      expect(down.status).toBeLessThanOrEqual(504);
      expect(down.json.error).toBeDefined();
    }
    await r.primary.setDown(false);
    // Health checks are a minute apart: only a request can find it back — the breaker's test
    // request at the end of its open period, which the 503s before it name as Retry-After.
    const back = await servedAfterOpenBreaker(r);
    expect(back.json.choices[0].message.content).toBe('Hello from primary');
  });

  it('fallback chain: served by the fallback while the primary is down, by the primary again once it is back', async () => {
    r = await rig('fallback chain', { endpointExtra: { check_interval: '200ms' } });
    expect((await send(r)).headers['x-gw-model']).toBe('primary-model');
    await r.primary.setDown(true);
    for (let i = 0; i < 5; i++) {
      const reply = await send(r);
      expect(reply.status).toBe(200);
      expect(reply.json.choices[0].message.content).toBe('Hello from fallback');
      expect(reply.headers['x-gw-model']).toBe('fallback-model');
    }
    await r.primary.setDown(false);
    await waitFor(async () => (await send(r!)).headers['x-gw-model'] === 'primary-model', 'the recovered primary to serve again');
  });
});

describe('an alias marked ordered is a fallback chain too', () => {
  it('the request names the alias; the first model fails, the next answers, with the fallback headers', async () => {
    r = await rig('fallback chain', {
      config: { model_fallbacks: {}, model_aliases: { smart: { models: ['primary-model', 'fallback-model'], ordered: true } } },
    });
    r.primary.always({ status: 503 });
    const reply = await send(r, chatBody(false, 'smart'));
    expect(reply.status).toBe(200);
    expect(reply.json.choices[0].message.content).toBe('Hello from fallback');
    expect(reply.headers['x-gw-model']).toBe('fallback-model');
    expect(reply.headers['x-gw-routing-decision']).toBe('fallback');
    // The requested model's one retry first.
    expect(r.primary.generations.map((g) => g.model)).toEqual(['primary-model', 'primary-model']);
    expect(r.other!.generations.map((g) => g.model)).toEqual(['fallback-model']);
  });
});

describe('retry settings', () => {
  it("an endpoint's retry_on_statuses wins over the proxy's: its own status is retried, a default one passed on", async () => {
    r = await rig('one endpoint', { proxy: { retry: { backoff: '10ms' } }, endpointExtra: { retry_on_statuses: [520] } });
    r.primary.script({ status: 520 });
    const rescued = await send(r);
    expect(rescued.status).toBe(200);
    expect(rescued.headers['x-gw-attempts']).toBe('2');
    r.primary.script({ status: 503 });
    const passed = await send(r);
    expect(passed.status).toBe(503);
    expect(passed.headers['x-gw-attempts']).toBe('1');
  });

  it('a spent fleet retry budget passes the failure on after one attempt, and the metrics say why', async () => {
    r = await rig('one endpoint', { proxy: { retry: { fleet: { ratio: 0, min_per_second: 0 } } } });
    r.primary.script({ status: 500 });
    const reply = await send(r);
    expect(reply.status).toBe(500);
    expect(reply.headers['x-gw-attempts']).toBe('1');
    expect(r.primary.generations).toHaveLength(1);
    const text = await metricsText(r);
    expect(sampleSum(text, 'gw_retry_budget_exhausted_total')).toBe(1);
    expect(sampleSum(text, 'gw_retries_total')).toBe(0);
  });
});

describe('accounting', () => {
  it('one endpoint: the attempts in X-Gw-Attempts, the failed one in the access log’s tried list and the metrics', async () => {
    r = await rig('one endpoint');
    r.primary.script({ status: 500 });
    const reply = await send(r);
    expect(reply.status).toBe(200);
    expect(reply.headers['x-gw-attempts']).toBe('2');
    expect(reply.headers['x-gw-model']).toBe('primary-model');
    expect(reply.headers['x-gw-routing-decision']).not.toBe('fallback');
    const line = await waitFor(() => accessLines(r!).at(-1), 'the access log line');
    expect(line.status).toBe(200);
    expect(line.tried).toHaveLength(1);
    expect(line.tried[0]).toMatchObject({ endpoint: 'primary', model: 'primary-model' });
    expect(String(line.tried[0].outcome)).toContain('500');
    const text = await metricsText(r);
    expect(sampleSum(text, 'gw_endpoint_errors_total', { endpoint: 'primary' })).toBeGreaterThanOrEqual(1);
  });

  it('fallback chain: X-Gw-Attempts, X-Gw-Routing-Decision: fallback, X-Gw-Routing-Reason, X-Gw-Model, tried, metrics', async () => {
    r = await rig('fallback chain', { proxy: { retry: { backoff: '20ms' } } });
    r.primary.script({ status: 500 }, { status: 500 });
    const reply = await send(r);
    expect(reply.status).toBe(200);
    expect(reply.headers['x-gw-attempts']).toBe('3');
    expect(reply.headers['x-gw-routing-decision']).toBe('fallback');
    expect(String(reply.headers['x-gw-routing-reason'])).toMatch(/^model_fallback/);
    expect(reply.headers['x-gw-model']).toBe('fallback-model');
    expect(reply.headers['x-gw-endpoint']).toBe('fallback');
    const line = await waitFor(() => accessLines(r!).at(-1), 'the access log line');
    expect(line.tried).toEqual([
      expect.objectContaining({ endpoint: 'primary', model: 'primary-model' }),
      expect.objectContaining({ endpoint: 'primary', model: 'primary-model' }),
    ]);
    expect(String(line.tried[0].outcome)).toContain('500');
    expect(line.endpoint).toBe('fallback');
    const text = await metricsText(r);
    expect(sampleSum(text, 'gw_routing_decisions_total', { decision: 'fallback' })).toBe(1);
    expect(sampleSum(text, 'gw_failovers_total', { family: 'hosted-compatible' })).toBe(2);
    expect(sampleSum(text, 'gw_endpoint_errors_total', { endpoint: 'primary' })).toBeGreaterThanOrEqual(1);
  });
});
