// The backends' state across a reload: reconciled by endpoint id, never rebuilt.
import { afterEach, describe, expect, it } from 'vitest';
import { Backends } from '../../../engine/backends/state.js';
import { planEndpoints } from '../../../engine/backends/endpoint-plans.js';
import { FakeBackend } from '../../../engine/demo/index.js';
import { loadConfig } from '../../../engine/core/config.js';
import { createLogger } from '../../../engine/core/logger.js';
import { loadProfiles } from '../../../engine/core/profiles.js';
import { endpoint, writeConfig } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

const profiles = loadProfiles('/nonexistent');
const chat = JSON.stringify({ model: 'test-model', messages: [], stream: true });
let backends: Backends | null = null;
let fakes: FakeBackend[] = [];
afterEach(async () => {
  await backends?.stop();
  for (const f of fakes) await f.stop();
  [backends, fakes] = [null, []];
});

function configOf(endpoints: Record<string, unknown>[], extra: Record<string, unknown> = {}) {
  const { config, source } = loadConfig(writeConfig({ ...extra, discovery: { static: { endpoints } } }), {});
  return { config, plans: planEndpoints(config, profiles, source).plans };
}

describe('reconcile', () => {
  it('keeps an endpoint whose id stays: same object, pool, health, breaker and model list', async () => {
    fakes = [await new FakeBackend({ family: 'pagedengine' }).start()];
    const first = configOf([endpoint('a', 'pagedengine', fakes[0].url, { check_interval: '60s' })]);
    backends = new Backends(first.config, first.plans, createLogger('silent'));
    await backends.start(first.config);
    const ep = backends.endpoints.all[0];
    await waitFor(() => backends!.catalogue.listOf(ep)?.length, 'the first discovery');
    const pool = ep.pool;
    ep.breaker.failure({ probe: false });
    // Renamed, reprioritised, new headers: the same backend (same URL, so the same id).
    const second = configOf([endpoint('renamed', 'pagedengine', fakes[0].url, { check_interval: '60s', priority: 7, headers: { 'X-Team': 'a' } })]);
    const r = backends.reconcile(second.config, second.plans);
    expect(r.kept).toEqual([ep]);
    expect(backends.endpoints.all[0]).toBe(ep);
    expect(ep).toMatchObject({ name: 'renamed', priority: 7, state: 'healthy' });
    expect(ep.pool).toBe(pool);
    expect(ep.breaker.proxyFailures).toBe(1);
    expect(backends.catalogue.listOf(ep)?.length).toBeGreaterThan(0);
  });

  it('replaces only the pool when connection settings change; the old one closes, finishing what it carries', async () => {
    fakes = [await new FakeBackend({ family: 'pagedengine', reply: 'a b c d e f' }).start()];
    fakes[0].behaviour.chunkDelayMs = 50;
    const first = configOf([endpoint('a', 'pagedengine', fakes[0].url)]);
    backends = new Backends(first.config, first.plans, createLogger('silent'));
    const ep = backends.endpoints.all[0];
    const pool = ep.pool;
    const inFlight = await pool.request({ path: '/v1/chat/completions', method: 'POST', body: chat, headers: { 'content-type': 'application/json' } });
    const second = configOf([endpoint('a', 'pagedengine', fakes[0].url)], { proxy: { connection_timeout: '3s' } });
    backends.reconcile(second.config, second.plans);
    expect(backends.endpoints.all[0]).toBe(ep);
    expect(ep.pool).not.toBe(pool);
    expect(pool.closed).toBe(true);
    // Closed to new requests, the old pool still finishes the stream it carries.
    expect((await inFlight.body.text()).trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  it('checks a new endpoint at once and retires a removed one: out of rotation, its stream finished, its pool closed', async () => {
    fakes = [
      await new FakeBackend({ family: 'pagedengine', name: 'x', reply: 'a b c d e f' }).start(),
      await new FakeBackend({ family: 'pagedengine', name: 'y' }).start(),
    ];
    fakes[0].behaviour.chunkDelayMs = 50;
    const first = configOf([endpoint('x', 'pagedengine', fakes[0].url, { check_interval: '60s' })]);
    backends = new Backends(first.config, first.plans, createLogger('silent'));
    await backends.start(first.config);
    const x = backends.endpoints.all[0];
    const inFlight = await x.pool.request({ path: '/v1/chat/completions', method: 'POST', body: chat, headers: { 'content-type': 'application/json' } });
    const second = configOf([endpoint('y', 'pagedengine', fakes[1].url, { check_interval: '60s' })]);
    const r = backends.reconcile(second.config, second.plans);
    expect(r.removed).toEqual([x]);
    expect(x.retired).toBe(true);
    expect(x.routable).toBe(false);
    expect(x.pool.closed).toBe(true);
    expect(backends.endpoints.routable('pagedengine')).not.toContain(x);
    expect((await inFlight.body.text()).trimEnd().endsWith('data: [DONE]')).toBe(true);
    const y = r.added[0];
    // Checked at once, not after check_interval (60 s).
    await waitFor(() => y.state === 'healthy', 'the new endpoint to be checked');
    expect(backends.endpoints.routable('pagedengine')).toEqual([y]);
  });

  it('treats another family at the same URL as another backend', async () => {
    fakes = [await new FakeBackend({ family: 'pagedengine' }).start()];
    const first = configOf([endpoint('a', 'pagedengine', fakes[0].url)]);
    backends = new Backends(first.config, first.plans, createLogger('silent'));
    const before = backends.endpoints.all[0];
    const second = configOf([endpoint('a', 'radixengine', fakes[0].url)]);
    const r = backends.reconcile(second.config, second.plans);
    expect(r.removed).toEqual([before]);
    expect(r.added[0].family).toBe('radixengine');
    expect(r.added[0].id).toBe(before.id);
  });
});
