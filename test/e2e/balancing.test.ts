// The three balancing strategies (and their snake_case synonyms) as the spec describes them.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../engine/demo/index.js';
import { endpoint, startGateway, type Started } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

let a: FakeBackend, b: FakeBackend, c: FakeBackend;
beforeAll(async () => {
  [a, b, c] = await Promise.all(['a', 'b', 'c'].map((n) => new FakeBackend({ family: 'pagedengine', name: n }).start()));
});
afterAll(async () => {
  for (const f of [a, b, c]) await f.stop();
});
beforeEach(() => [a, b, c].forEach((f) => f.reset()));

async function served(gw: Started, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await request(`${gw.url}/gw/pagedengine/metrics`);
    await res.body.dump();
    out.push(String(res.headers['x-gw-endpoint']));
  }
  return out;
}

async function withGateway(lb: string, priorities: number[], fn: (gw: Started) => Promise<void>) {
  const gw = await startGateway({
    proxy: { load_balancer: lb },
    discovery: { static: { endpoints: [a, b, c].map((f, i) => endpoint(f.name, 'pagedengine', f.url, { priority: priorities[i] })) } },
  });
  try {
    await fn(gw);
  } finally {
    await gw.close();
  }
}

describe('priority', () => {
  it('sends everything to the highest priority', () =>
    withGateway('priority', [50, 100, 10], async (gw) => {
      expect(await served(gw, 5)).toEqual(['b', 'b', 'b', 'b', 'b']);
    }));

  it('takes turns among endpoints sharing the top priority', () =>
    withGateway('priority', [100, 100, 10], async (gw) => {
      const names = await served(gw, 4);
      expect(names.filter((n) => n === 'a')).toHaveLength(2);
      expect(names.filter((n) => n === 'b')).toHaveLength(2);
      expect(names).not.toContain('c');
    }));
});

describe.each(['round-robin', 'round_robin'])('%s', (lb) => {
  it('rotates through every routable endpoint', () =>
    withGateway(lb, [100, 50, 10], async (gw) => {
      const names = await served(gw, 6);
      expect(names.slice(0, 3).sort()).toEqual(['a', 'b', 'c']);
      expect(names.slice(3)).toEqual(names.slice(0, 3));
    }));
});

describe.each(['least-connections', 'least_conn'])('%s', (lb) => {
  it('sends the next request to the endpoint with fewer requests in flight', () =>
    withGateway(lb, [100, 50, 10], async (gw) => {
      // a holds its request until the quick one was served: it is in flight for certain.
      let release!: () => void;
      a.behaviour.holdUntil = new Promise<void>((r) => (release = r));
      const slow = request(`${gw.url}/gw/pagedengine/v1/chat/completions`, { method: 'POST', body: '{"model":"test-model"}' });
      await waitFor(() => a.traffic.length === 1, 'the slow request to reach a');
      const quick = await request(`${gw.url}/gw/pagedengine/metrics`);
      await quick.body.dump();
      expect(quick.headers['x-gw-endpoint']).toBe('b');
      release();
      const first = await slow;
      await first.body.dump();
      expect(first.headers['x-gw-endpoint']).toBe('a');
      // Idle again: ties go to the higher priority.
      a.behaviour.holdUntil = null;
      expect(await served(gw, 2)).toEqual(['a', 'a']);
    }));
});
