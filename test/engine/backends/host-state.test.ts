// The host's state and its workers' links (gw serve --workers N), in one process: the messages
// go through JSON and a turn of the event loop, as over the cluster's IPC channel. What the
// host keeps once — queue slots, rate-limit buckets, breaker counts, health — holds across the
// workers, and a worker that dies gives back what it held.
import { afterEach, describe, expect, it } from 'vitest';
import { Backends } from '../../../engine/backends/state.js';
import { planEndpoints } from '../../../engine/backends/endpoint-plans.js';
import { HostState } from '../../../engine/backends/sharing/host-state.js';
import { WorkerLink } from '../../../engine/backends/sharing/host-link.js';
import type { Turn } from '../../../engine/backends/queue.js';
import { loadConfig } from '../../../engine/core/config.js';
import { createLogger } from '../../../engine/core/logger.js';
import { loadProfiles } from '../../../engine/core/profiles.js';
import { endpoint, writeConfig } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

const profiles = loadProfiles('/nonexistent');
const log = createLogger('silent');
const wire = <T>(m: T): T => JSON.parse(JSON.stringify(m));
let all: Backends[] = [];
afterEach(async () => {
  for (const b of all) await b.stop();
  all = [];
});

/** A host and `n` workers on one configuration (an endpoint on a port nobody listens on). */
async function host(n: number, extra: Record<string, unknown> = {}, ep: Record<string, unknown> = {}, leaseMs?: number) {
  const { config, source } = loadConfig(
    writeConfig({ ...extra, discovery: { static: { endpoints: [endpoint('engine', 'pagedengine', 'http://127.0.0.1:9', { check_interval: '1h', ...ep })] } } }),
    {},
  );
  const plans = planEndpoints(config, profiles, source).plans;
  const hostBackends = new Backends(config, plans, log);
  const state = new HostState(hostBackends, log);
  const asked: Record<number, number> = {};
  all.push(hostBackends);
  const addWorker = async (id: number) => {
    asked[id] = 0;
    const link = new WorkerLink(
      (m) => {
        if (m.gw === 'ask') asked[id]++;
        setImmediate(() => state.receive(id, wire(m)));
      },
      id,
      leaseMs,
    );
    const backends = new Backends(config, plans, log, undefined, link);
    all.push(backends);
    state.join({ id, send: (m) => setImmediate(() => link.receive(wire(m))) });
    await backends.start(config);
    return { id, link, backends, ep: backends.endpoints.all[0] };
  };
  const workers = [];
  for (let id = 1; id <= n; id++) workers.push(await addWorker(id));
  return { hostBackends, state, workers, asked, addWorker, hostEp: hostBackends.endpoints.all[0] };
}

describe('host state', () => {
  it("a concurrency slot is the host's: a second worker waits for it, and gets it when the first worker dies", async () => {
    const { state, workers, hostEp } = await host(2, {}, { max_concurrent_requests: 1, max_queued_requests: 1, queue_timeout: '60s' });
    const [w1, w2] = workers;
    const turn = (w: (typeof workers)[0]) => new Promise<Turn>((r) => w.ep.queue!.wait(r));
    expect(await turn(w1)).toBe('admitted');
    let second: Turn | null = null;
    void turn(w2).then((t) => (second = t));
    await waitFor(() => hostEp.queue!.queued === 1 || undefined, 'worker 2 waits in the host queue');
    // A third request, anywhere, finds the queue full.
    expect(await turn(w1)).toBe('full');
    expect(second).toBeNull();
    state.leave(w1.id); // worker 1 died holding the slot
    await waitFor(() => second, 'worker 2 admitted');
    expect(second).toBe('admitted');
    expect(hostEp.queue!.held).toBe(1);
    w2.ep.queue!.release(performance.now());
    await waitFor(() => hostEp.queue!.held === 0 || undefined, 'the slot given back to the host');
  });

  it('a waiter that leaves leaves the host queue; a slot granted as it left is given back', async () => {
    const { workers, hostEp } = await host(2, {}, { max_concurrent_requests: 1, max_queued_requests: 4, queue_timeout: '60s' });
    const [w1, w2] = workers;
    await new Promise<Turn>((r) => w1.ep.queue!.wait(r));
    let ended: Turn | null = null;
    const waiter = w2.ep.queue!.wait((t) => (ended = t));
    await waitFor(() => hostEp.queue!.queued === 1 || undefined, 'worker 2 waits');
    w2.ep.queue!.leave(waiter);
    expect(ended).toBe('gone');
    await waitFor(() => hostEp.queue!.queued === 0 || undefined, 'it left the host queue');
    // Leaving just as the slot is granted: the grant is given back, not lost.
    const late = w2.ep.queue!.wait(() => undefined);
    await waitFor(() => hostEp.queue!.queued === 1 || undefined, 'worker 2 waits again');
    w1.ep.queue!.release(performance.now());
    w2.ep.queue!.leave(late);
    await waitFor(() => hostEp.queue!.held === 0 || undefined, 'no slot held by a request that left');
  });

  it("rate-limit takes come from the host's buckets, all or none", async () => {
    const { workers, hostBackends } = await host(2);
    const rate = { perMinute: 1, burst: 2 };
    const takes = [
      { scope: 'ip', key: '10.0.0.1', rate },
      { scope: 'global', key: '', rate: { perMinute: 1, burst: 10 } },
    ];
    const global = () => hostBackends.buckets.stores.global.peek('', { perMinute: 1, burst: 10 }).remaining;
    const r1 = await workers[0].link.buckets.take(takes);
    const r2 = await workers[1].link.buckets.take(takes);
    const before = global();
    const r3 = await workers[0].link.buckets.take(takes);
    expect([r1.refused, r2.refused, r3.refused]).toEqual([-1, -1, 0]);
    // The refused request took nothing from the global bucket.
    expect(global()).toBe(before);
  });

  it('lends a worker tokens while the bucket is far from empty, none near the limit, and takes back what it did not use', async () => {
    // Leases kept for a minute: nothing goes back while the takes run, however slow the machine.
    const { workers, hostBackends, asked } = await host(2, {}, {}, 60_000);
    const [w1] = workers;
    const rate = { perMinute: 1, burst: 100 };
    const ip = () => hostBackends.buckets.stores.ip.peek('10.0.0.2', rate).remaining;
    const take = () => w1.link.buckets.take([{ scope: 'ip', key: '10.0.0.2', rate }]);
    const before = asked[w1.id];
    expect((await take()).refused).toBe(-1);
    // One token taken, a quarter of the 99 left lent (two workers, shared by twice as many).
    expect(ip()).toBe(100 - 1 - 24);
    for (let i = 0; i < 24; i++) expect((await take()).refused).toBe(-1);
    expect(asked[w1.id] - before).toBe(1);
    // Taken down to the last tokens, every take asks the host: it never lets more through than the bucket.
    let passed = 25;
    for (let i = 0; i < 100; i++) if ((await take()).refused === -1) passed++;
    expect(passed).toBe(100);
  });

  it('takes back a lease left unused, and every lease when the worker stops', async () => {
    const { workers, hostBackends } = await host(2, {}, {}, 50);
    const [w1, w2] = workers;
    const rate = { perMinute: 1, burst: 100 };
    const left = (key: string) => hostBackends.buckets.stores.ip.peek(key, rate).remaining;
    await w1.link.buckets.take([{ scope: 'ip', key: '10.0.0.3', rate }]);
    await waitFor(() => left('10.0.0.3') === 99 || undefined, 'the unused lease given back');
    await w2.link.buckets.take([{ scope: 'ip', key: '10.0.0.4', rate }]);
    w2.link.buckets.close();
    await waitFor(() => left('10.0.0.4') === 99 || undefined, "the stopping worker's lease given back");
  });

  it("a slot taken before a reload replaced the endpoint's queue goes back to that queue, not the new one", async () => {
    const { workers, hostEp, hostBackends } = await host(1, {}, { max_concurrent_requests: 1, max_queued_requests: 0 });
    const [w1] = workers;
    const old = hostEp.queue!;
    expect(await new Promise<Turn>((r) => w1.ep.queue!.wait(r))).toBe('admitted');
    // The limit is lifted, then set again: a new queue object on the host.
    hostEp.queue = null;
    const { EndpointQueue } = await import('../../../engine/backends/queue.js');
    hostEp.queue = new EndpointQueue({ maxConcurrent: 1, maxQueued: 0, timeoutMs: 60_000 });
    w1.ep.queue!.release(performance.now());
    await waitFor(() => old.held === 0 || undefined, 'the slot given back to the queue it came from');
    expect(hostEp.queue.held).toBe(0);
    expect(hostBackends.endpoints.all[0].queue!.tryEnter()).toBe(true);
  });

  it('counts breaker failures across workers: three on one and two on the other open it in both', async () => {
    const { workers } = await host(2, { proxy: { circuit_breaker: { proxy_failures: 5 } } });
    const [w1, w2] = workers;
    for (const w of [w1, w2, w1, w2, w1]) w.ep.breaker.failure({ probe: false });
    await waitFor(() => (w1.ep.breaker.state === 'open' && w2.ep.breaker.state === 'open') || undefined, 'open in both workers');
  });

  it('a worker that starts later finds the breaker the others opened open', async () => {
    const { workers, addWorker } = await host(1, { proxy: { circuit_breaker: { proxy_failures: 1, initial_open_timeout: '60s', open_timeout: '60s' } } });
    workers[0].ep.breaker.failure({ probe: false });
    expect(workers[0].ep.breaker.state).toBe('open');
    // A replacement joins: the host's state carries the opening, for what is left of it.
    const late = await addWorker(2);
    expect(late.ep.breaker.state).toBe('open');
  });

  it("one request's failing answers, counted on two workers, open the breaker for that request alone in both", async () => {
    const { workers } = await host(2, { proxy: { circuit_breaker: { proxy_failures: 5 } } });
    const [w1, w2] = workers;
    const opened: number[] = [];
    for (const w of [w1, w2]) w.ep.breaker.onOpened = () => opened.push(w.id);
    for (const w of [w1, w2, w1, w2, w1]) w.ep.breaker.failure({ probe: false }, 'the same request');
    await waitFor(() => (w1.ep.breaker.scoped && w2.ep.breaker.scoped) || undefined, 'scoped in both workers');
    expect([w1.ep.breaker.admits, w2.ep.breaker.admits, opened]).toEqual([true, true, []]);
  });

  it("a success anywhere resets the host's count", async () => {
    const { workers } = await host(2, { proxy: { circuit_breaker: { proxy_failures: 3 } } });
    const [w1, w2] = workers;
    w1.ep.breaker.failure({ probe: false });
    w1.ep.breaker.failure({ probe: false });
    await waitFor(() => w2.ep.breaker.proxyFailures === 2 || undefined, 'worker 2 counted them');
    w2.ep.breaker.success({ probe: false });
    await waitFor(() => w1.ep.breaker.proxyFailures === 0 || undefined, 'worker 1 reset');
    w1.ep.breaker.failure({ probe: false });
    expect(w1.ep.breaker.state).toBe('closed');
  });

  it('a connection failure one worker saw takes the endpoint out of rotation in the others, and the host re-checks it', async () => {
    const { workers, hostEp } = await host(2);
    const [w1, w2] = workers;
    for (const b of [w1, w2]) b.backends.endpoints.setState(b.ep, 'healthy');
    hostEp.state = 'healthy';
    w1.backends.health.markFailed(w1.ep, 'ECONNREFUSED');
    await waitFor(() => !w2.ep.routable || undefined, 'worker 2 no longer routes to it');
    // The host's re-check (nothing listens there) reaches both workers as a check's verdict.
    await waitFor(() => (w2.ep.state === 'offline' && w2.ep.checksTotal === 1) || undefined, 'the re-check reached worker 2');
    expect(w2.ep.breaker.healthFailures).toBe(1);
  });

  it('a conversation placed by one worker is where the others send it; back at its home, forgotten by all', async () => {
    const { workers } = await host(3);
    const [w1, w2, w3] = workers;
    w1.backends.placements.place(12345, w1.ep, false);
    await waitFor(() => (w2.backends.placements.get(12345) === w2.ep && w3.backends.placements.get(12345) === w3.ep) || undefined, 'placed in workers 2 and 3');
    w2.backends.placements.place(12345, w2.ep, true);
    await waitFor(
      () => (w1.backends.placements.get(12345) === undefined && w3.backends.placements.get(12345) === undefined) || undefined,
      'forgotten by 1 and 3',
    );
  });
});
