// localrunner's api/ps, merged from every routable endpoint: sent through each endpoint's
// dispatch path (an open breaker skips it, in-flight counts see it), cancelled when the client
// leaves, each reply read up to a size limit, and a HEAD answered without asking anyone.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { request as httpRequest } from 'node:http';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import type { Endpoint } from '../../../engine/backends/endpoints.js';
import { MERGE_REPLY_LIMIT } from '../../../plugins/catalogue/merged-list.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

let slow: FakeBackend, quick: FakeBackend;
let gw: Started;
const fakes = () => [slow, quick];
const ep = (name: string): Endpoint => gw.gw.runtime.endpoints.all.find((e) => e.name === name)!;

beforeAll(async () => {
  slow = await new FakeBackend({ family: 'localrunner', name: 'slow', models: [{ name: 'llama3:latest', loaded: true }] }).start();
  quick = await new FakeBackend({ family: 'localrunner', name: 'quick', models: [{ name: 'qwen2.5:7b', loaded: true }] }).start();
  gw = await startGateway({
    proxy: { circuit_breaker: { initial_open_timeout: '30s' } }, // an opened breaker stays open while a test looks (no health check closes it either: check_interval below)
    discovery: {
      static: {
        // A check_timeout longer than any wait of these tests: only the client leaving can end a hung request.
        // No periodic checks: a passing one would close a breaker a test opened.
        endpoints: [
          endpoint('slow', 'localrunner', slow.url, { check_timeout: '120s', check_interval: '60s' }),
          endpoint('quick', 'localrunner', quick.url, { check_interval: '60s' }),
        ],
      },
    },
  });
  await waitFor(() => gw.gw.runtime.catalogue.family('localrunner').models.length === 2, 'both endpoints discovered');
});
afterAll(() => closeAll(gw, fakes()));
beforeEach(() => {
  for (const f of fakes()) {
    f.received.length = 0;
    f.aborts = 0;
    f.behaviour.hang = false;
  }
});

const ps = async (method: 'GET' | 'HEAD' = 'GET') => {
  const res = await request(`${gw.url}/gw/localrunner/api/ps`, { method });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text, json: text ? JSON.parse(text) : undefined };
};
const names = (json: any) => json.models.map((m: any) => m.name);

describe('api/ps merged from every endpoint', () => {
  it('is cancelled upstream when its client leaves, and the in-flight count goes back', async () => {
    slow.behaviour.hang = true;
    const req = httpRequest(`${gw.url}/gw/localrunner/api/ps`, { agent: false });
    req.on('error', () => undefined);
    req.end();
    await waitFor(() => slow.proxiedTo('/api/ps').length === 1 && quick.proxiedTo('/api/ps').length === 1, 'both endpoints asked');
    // Counted as in flight on the endpoint, like proxied traffic.
    await waitFor(() => ep('slow').active === 1, 'the hung request counted in flight');
    req.destroy();
    await waitFor(() => slow.aborts === 1, 'the slow endpoint to see its request cancelled');
    await waitFor(() => ep('slow').active === 0, 'the in-flight count back to 0');
    expect(ep('slow').breaker.proxyFailures).toBe(0); // the client leaving is no one's failure
  });

  it('leaves out an endpoint whose reply is larger than the limit', async () => {
    const huge = { name: 'x'.repeat(MERGE_REPLY_LIMIT + 1), loaded: true };
    slow.models.push(huge);
    try {
      const { status, json } = await ps();
      expect(status).toBe(200);
      expect(names(json)).toEqual(['qwen2.5:7b']);
      const left = gw.logs.find((l) => l.msg === 'merged list: an endpoint did not answer; left out' && l.endpoint === 'slow');
      expect(left?.err).toBe(`the /api/ps reply larger than ${MERGE_REPLY_LIMIT} bytes`);
    } finally {
      slow.models.pop();
    }
  });

  it("skips an endpoint whose circuit breaker is open (the endpoint's dispatch path)", async () => {
    const breaker = ep('slow').breaker;
    for (let i = 0; i < 5; i++) breaker.failure({ probe: false });
    try {
      expect(breaker.state).toBe('open');
      const { json } = await ps();
      expect(names(json)).toEqual(['qwen2.5:7b']);
      expect(slow.proxiedTo('/api/ps')).toHaveLength(0);
    } finally {
      breaker.success({ probe: true });
    }
    expect(names((await ps()).json)).toEqual(['llama3:latest', 'qwen2.5:7b']);
  });

  it('answers HEAD with the head of a JSON reply, asking no endpoint', async () => {
    const { status, headers, text } = await ps('HEAD');
    expect(status).toBe(200);
    expect(headers['content-type']).toBe('application/json; charset=utf-8');
    expect(text).toBe('');
    expect(slow.proxiedTo('/api/ps')).toHaveLength(0);
    expect(quick.proxiedTo('/api/ps')).toHaveLength(0);
  });
});
