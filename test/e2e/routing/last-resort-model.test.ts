// A model's only endpoint restarts while the rest of its family stays up: the first request for it
// after the restart is answered, however far its health-check backoff has grown (a last-resort
// request to the endpoint, which makes it Healthy at once); while it is down, one request at a
// time tries it, the others get the 503 with Retry-After, and a failed try leaves it as it was.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import type { Endpoint } from '../../../engine/backends/endpoints.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

let llama: FakeBackend, other: FakeBackend, gw: Started;

beforeEach(async () => {
  llama = await new FakeBackend({ family: 'cppengine', name: 'llama', reply: 'llama is back', models: [{ name: 'only-here' }] }).start();
  other = await new FakeBackend({ family: 'cppengine', name: 'other', models: [{ name: 'other-model' }] }).start();
  // Checks 5 s apart: the backoff grows to 60 s, as on a default setup.
  gw = await startGateway({
    discovery: {
      static: {
        endpoints: [endpoint('llama', 'cppengine', llama.url, { check_interval: '5s' }), endpoint('other', 'cppengine', other.url, { check_interval: '5s' })],
      },
    },
  });
});
afterEach(() => closeAll(gw, [llama, other]));

const ask = (model: string) =>
  request(`${gw.url}/gw/cppengine/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
  });

/** Stop the backend and let its health checks fail until the next one is far away (each failed
 *  check doubles the wait: 5, 10, 20, 40, 60 s). */
async function longOutage(): Promise<Endpoint> {
  const ep = gw.gw.runtime.endpoints.all.find((e) => e.name === 'llama')!;
  await llama.stop();
  for (let i = 0; i < 5; i++) await gw.gw.runtime.health.check(ep);
  expect(ep.state).toBe('offline');
  expect(ep.nextCheckAt!.getTime() - Date.now()).toBeGreaterThan(30_000);
  return ep;
}

describe("a model's only endpoint, back after a long outage", () => {
  it('answers the first request after it is up again, and is Healthy from that answer with its backoff reset', async () => {
    const ep = await longOutage();
    await llama.start();
    const res = await ask('only-here');
    const reply = (await res.body.json()) as any;
    expect(res.statusCode).toBe(200);
    expect(reply.choices[0].message.content).toBe('llama is back');
    expect(res.headers['x-gw-routing-reason']).toBe('last_resort');
    expect(ep.state).toBe('healthy');
    expect(ep.consecutiveFailures).toBe(0);
    expect(ep.nextCheckAt!.getTime() - Date.now()).toBeLessThanOrEqual(5_000);
    expect(ep.breaker.state).toBe('closed');
    // The next request is an ordinary one.
    const next = await ask('only-here');
    await next.body.dump();
    expect([next.statusCode, next.headers['x-gw-routing-reason']]).toEqual([200, 'model_found']);
    expect(gw.logs.some((l) => l.msg === 'endpoint recovered' && l.endpoint === 'llama' && /answered a request/.test(l.reason))).toBe(true);
  });

  it('while it is down: the try fails with a 503 naming what to start, and leaves the endpoint as it was', async () => {
    const ep = await longOutage();
    const before = { failures: ep.consecutiveFailures, next: ep.nextCheckAt!.getTime(), checks: ep.checksTotal };
    const res = await ask('only-here');
    const err = (await res.body.json()) as any;
    expect(res.statusCode).toBe(503);
    expect(err.error.message).toContain(`nothing answered at ${llama.url}: start the backend there`);
    expect(ep.state).toBe('offline');
    expect({ failures: ep.consecutiveFailures, next: ep.nextCheckAt!.getTime(), checks: ep.checksTotal }).toEqual(before);
    // A backend that fails fast is not tried at the clients' rate: the next try waits an initial
    // breaker period after the failed one, which the 503 meanwhile names as Retry-After.
    const soon = await ask('only-here');
    const wait = (await soon.body.json()) as any;
    expect([soon.statusCode, soon.headers['retry-after']]).toEqual([503, '1']);
    expect(wait.error.message).toContain('the last try failed moments ago: retry in 1s');
    // The other model of the family was never in question.
    const fine = await ask('other-model');
    await fine.body.dump();
    expect(fine.statusCode).toBe(200);
  });

  it('one try at a time: a request that comes while the try is out gets 503 with Retry-After, not a second try', async () => {
    await longOutage();
    let release!: () => void;
    llama.behaviour.holdUntil = new Promise<void>((r) => (release = r));
    await llama.start();
    const first = ask('only-here');
    await waitFor(() => llama.proxiedTo('/v1/chat/completions').length === 1, 'the try to reach the backend');
    const second = await ask('only-here');
    const err = (await second.body.json()) as any;
    expect(second.statusCode).toBe(503);
    expect(second.headers['retry-after']).toBe('1');
    expect(err.error.message).toMatch(
      /model only-here is served only by cppengine endpoints that are not routable now \(llama at http:\/\/127\.0\.0\.1:\d+ \(offline: ECONNREFUSED\)\); start the backend at .*; a request is testing it now: retry in 1s/,
    );
    expect(llama.proxiedTo('/v1/chat/completions')).toHaveLength(1);
    release();
    const res = await first;
    await res.body.dump();
    expect(res.statusCode).toBe(200);
  });
});

describe('what brings an endpoint back', () => {
  it('a reply to an ordinary request sent before its health check failed does not: only a last resort does', async () => {
    const ep = gw.gw.runtime.endpoints.all.find((e) => e.name === 'llama')!;
    let release!: () => void;
    llama.behaviour.holdUntil = new Promise<void>((r) => (release = r));
    const inFlight = ask('only-here');
    await waitFor(() => llama.proxiedTo('/v1/chat/completions').length === 1, 'the request to reach the backend');
    llama.behaviour.healthStatus = 500;
    await gw.gw.runtime.health.check(ep);
    expect(ep.state).toBe('unhealthy');
    release();
    const res = await inFlight;
    await res.body.dump();
    expect(res.statusCode).toBe(200);
    expect(ep.state).toBe('unhealthy');
    expect(gw.logs.some((l) => l.msg === 'endpoint recovered' && l.endpoint === 'llama')).toBe(false);
  });

  it('an ordered alias whose names are all served only by an endpoint out of rotation: one of them is tried', async () => {
    await closeAll(gw, []);
    gw = await startGateway({
      model_aliases: { smart: { models: ['only-here', 'also-missing'], ordered: true } },
      discovery: {
        static: {
          endpoints: [endpoint('llama', 'cppengine', llama.url, { check_interval: '5s' }), endpoint('other', 'cppengine', other.url, { check_interval: '5s' })],
        },
      },
    });
    const ep = gw.gw.runtime.endpoints.all.find((e) => e.name === 'llama')!;
    llama.behaviour.healthStatus = 500;
    await gw.gw.runtime.health.check(ep);
    expect(ep.state).toBe('unhealthy');
    const res = await ask('smart');
    const reply = (await res.body.json()) as any;
    expect([res.statusCode, res.headers['x-gw-routing-reason'], res.headers['x-gw-model']]).toEqual([200, 'last_resort', 'only-here']);
    expect(reply.choices[0].message.content).toBe('llama is back');
  });
});
