// The three balancing strategies (and their snake_case synonyms) as the spec describes them.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

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

describe('Busy and Warming endpoints (reduced and limited traffic)', () => {
  async function degraded(family: string, healthStatus: number, state: string, n: number, extra: Record<string, unknown> = {}) {
    const [top, ok] = await Promise.all(['top', 'ok'].map((name) => new FakeBackend({ family, name }).start()));
    top.behaviour.healthStatus = healthStatus;
    const gw = await startGateway({
      ...extra,
      discovery: { static: { endpoints: [endpoint('top', family, top.url, { priority: 100 }), endpoint('ok', family, ok.url, { priority: 50 })] } },
    });
    try {
      await waitFor(async () => {
        const s = (await (await request(`${gw.url}/internal/status/endpoints`)).body.json()) as any;
        return s.endpoints.map((e: any) => e.status).join() === `${state},healthy`;
      }, `top ${state} and ok healthy`);
      const counts: Record<string, number> = {};
      for (let i = 0; i < n; i++) {
        // A GET the backend answers (the model lists are answered from the catalogue).
        const res = await request(`${gw.url}/gw/${family}/${family === 'turboengine' ? 'is_sleeping' : 'metrics'}`);
        await res.body.dump();
        const name = String(res.headers['x-gw-endpoint']);
        counts[name] = (counts[name] ?? 0) + 1;
      }
      return counts;
    } finally {
      await gw.close();
      await Promise.all([top.stop(), ok.stop()]);
    }
  }

  it('a Busy endpoint (health 429) at the top priority gets 1 in 4 requests, not none', async () => {
    expect(await degraded('pagedengine', 429, 'busy', 40)).toEqual({ top: 10, ok: 30 });
  });

  it('a Warming endpoint (a transient status: a sleeping turboengine) gets 1 in 10', async () => {
    expect(await degraded('turboengine', 503, 'warming', 40)).toEqual({ top: 4, ok: 36 });
  });

  it('proxy.degraded_traffic sets the shares', async () => {
    expect(await degraded('pagedengine', 429, 'busy', 12, { proxy: { degraded_traffic: { busy_one_in: 2 } } })).toEqual({ top: 6, ok: 6 });
  });
});
