// The host's side of gw serve --workers N (host-link.ts is the worker's). The host runs the
// backends' state once for every worker: its health checks, discovery and engine reports are
// passed on as they happen; its rate-limit buckets and concurrency queues are the only ones (the
// workers ask); what one worker's requests saw (breaker counts, openings, pauses) is relayed to
// the others. A worker that dies leaves its queue places and slots behind: they are given back.
import type { Logger } from 'pino';
import type { Backends } from './state.js';
import type { Endpoint } from './endpoints.js';
import type { EndpointQueue, QueueCounts, Waiter } from './queue.js';
import type { HealthObservation, Question, ToHost, ToWorker } from './host-protocol.js';
import type { StatsSnapshot } from './telemetry.js';

/** How the host reaches one worker. */
export interface WorkerChannel {
  readonly id: number;
  send(m: ToWorker): void;
}

interface Joined {
  channel: WorkerChannel;
  /** Its requests waiting in a host queue, by question number. */
  waiting: Map<number, { queue: EndpointQueue; waiter: Waiter }>;
  /** Slots its requests hold, by endpoint id. */
  held: Map<string, number>;
}

/** How long the host waits for every worker's counters before answering with those it has. */
const GATHER_MS = 2_000;

export class HostState {
  private readonly workers = new Map<number, Joined>();
  private gathers = 0;
  private readonly gathering = new Map<number, { got: StatsSnapshot[]; want: number; done: () => void }>();

  /** `metrics`: the host's aggregated exposition (prom-client's AggregatorRegistry). */
  constructor(private readonly backends: Backends, private readonly log: Logger, private readonly metrics: () => Promise<string>) {
    const b = backends;
    b.endpoints.on('state', (ep: Endpoint) => this.broadcast({ gw: 'health', o: healthOf(ep) }));
    b.endpoints.on('checked', (ep: Endpoint, failed: boolean) => this.broadcast({ gw: 'health', o: healthOf(ep, failed ? 'fail' : 'pass') }));
    b.catalogue.onList = (ep) => this.broadcast(this.modelsOf(ep));
    b.residency.onReport = (ep) => this.broadcast({ gw: 'resident', id: ep.id, entries: b.residency.entriesOf(ep) });
    b.engineLoad.onReport = (ep) => this.broadcast(loadOf(ep, this.workers.size));
  }

  join(channel: WorkerChannel): void {
    this.workers.set(channel.id, { channel, waiting: new Map(), held: new Map() });
  }

  /** The worker is gone: its waiters leave their queues and its slots are given back. */
  leave(id: number): void {
    const w = this.workers.get(id);
    if (!w) return;
    this.workers.delete(id);
    for (const { queue, waiter } of w.waiting.values()) queue.leave(waiter);
    for (const [epId, count] of w.held) {
      const queue = this.backends.endpoints.get(epId)?.queue;
      for (let i = 0; i < count; i++) queue?.release(performance.now());
    }
    for (const g of this.gathering.values()) g.want--, g.got.length >= g.want && g.done();
  }

  receive(from: number, m: ToHost): void {
    const w = this.workers.get(from);
    if (!w) return;
    if (m.gw === 'ask') return void this.answer(w, m.n, m.q);
    if (m.gw === 'leave') {
      const entry = w.waiting.get(m.n);
      if (entry) entry.queue.leave(entry.waiter);
      return;
    }
    if (m.gw === 'giveBack') {
      for (const [scope, key, count] of m.tokens) this.backends.buckets.giveBack(scope, key, count);
      return;
    }
    if (m.gw === 'snapshot') {
      const g = this.gathering.get(m.n);
      if (g) g.got.push(m.value), g.got.length >= g.want && g.done();
      return;
    }
    const ep = this.backends.endpoints.get(m.id);
    if (!ep || ep.retired) return;
    const health = this.backends.health;
    switch (m.gw) {
      case 'failed': return health.markFailed(ep, m.reason);
      case 'answered': return health.markAnswered(ep, m.status);
      case 'check': return void health.check(ep);
      case 'release': return this.release(w, ep, m.heldMs);
      case 'count':
      case 'open':
      case 'pause':
        return this.broadcast(m, from);
    }
  }

  /** Everything a worker starting now must know, as the messages that would have told it. */
  private state(): ToWorker[] {
    const out: ToWorker[] = [];
    for (const ep of this.backends.endpoints.all) {
      out.push({ gw: 'health', o: healthOf(ep) }, this.modelsOf(ep), loadOf(ep, this.workers.size));
      out.push({ gw: 'resident', id: ep.id, entries: this.backends.residency.entriesOf(ep) });
    }
    return out;
  }

  private async answer(w: Joined, n: number, q: Question): Promise<void> {
    let value: unknown;
    switch (q.what) {
      case 'state': value = this.state(); break;
      // Tokens lent besides: a share of what is left, split among twice the workers (leased-buckets.ts).
      case 'take': value = this.backends.buckets.takeAll(q.takes, 2 * this.workers.size); break;
      case 'acquire': return this.acquire(w, n, q.id);
      case 'refresh': value = await this.backends.discovery.refresh(); break;
      case 'stats': value = { workers: await this.gather(), queues: this.queues() }; break;
      case 'metrics': value = await this.metrics().catch((err: Error) => {
        this.log.warn({ err: err.message }, 'metrics: the workers\' series could not be gathered');
        return null;
      }); break;
    }
    send(w.channel, { gw: 'answer', n, value });
  }

  private acquire(w: Joined, n: number, id: string): void {
    const reply = (value: unknown) => send(w.channel, { gw: 'answer', n, value });
    const queue = this.backends.endpoints.get(id)?.queue;
    // No limit here (a reload removed it): nothing to hold.
    if (!queue) return reply('admitted');
    if (queue.tryEnter()) {
      hold(w, id, 1);
      return reply('admitted');
    }
    if (queue.full) {
      queue.reject();
      return reply('full');
    }
    const waiter = queue.wait((turn) => {
      w.waiting.delete(n);
      if (turn === 'admitted') hold(w, id, 1);
      reply(turn);
    });
    w.waiting.set(n, { queue, waiter });
  }

  private release(w: Joined, ep: Endpoint, heldMs: number): void {
    if ((w.held.get(ep.id) ?? 0) === 0) return;
    hold(w, ep.id, -1);
    ep.queue?.release(performance.now() - heldMs);
  }

  /** Every worker's counters (those that answer within GATHER_MS). */
  private gather(): Promise<StatsSnapshot[]> {
    const n = ++this.gathers;
    const got: StatsSnapshot[] = [];
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.gathering.delete(n);
        resolve(got.sort((a, b) => a.worker - b.worker));
      };
      const timer = setTimeout(done, GATHER_MS);
      this.gathering.set(n, { got, want: this.workers.size, done });
      for (const w of this.workers.values()) send(w.channel, { gw: 'snapshot', n });
    });
  }

  /** The host's queues' counters by endpoint id (the only queues: the workers ask them for slots). */
  private queues(): [string, QueueCounts][] {
    return this.backends.endpoints.all.filter((ep) => ep.queue).map((ep) => [ep.id, ep.queue!.counts()]);
  }

  private broadcast(m: ToWorker, except?: number): void {
    for (const w of this.workers.values()) if (w.channel.id !== except) send(w.channel, m);
  }

  private modelsOf(ep: Endpoint): ToWorker {
    const entry = this.backends.catalogue.entryOf(ep);
    return { gw: 'models', id: ep.id, list: entry ? { models: entry.models, at: entry.at, stale: entry.stale } : null };
  }
}

function hold(w: Joined, id: string, by: number): void {
  w.held.set(id, (w.held.get(id) ?? 0) + by);
}

/** A worker that exits mid-send is no error here: its exit is handled on its own. */
function send(channel: WorkerChannel, m: ToWorker): void {
  try {
    channel.send(m);
  } catch {
    // the channel closed
  }
}

function healthOf(ep: Endpoint, check?: 'pass' | 'fail'): HealthObservation {
  return {
    id: ep.id, state: ep.state, reason: ep.lastError, lastCheck: ep.lastCheck?.getTime() ?? null, lastLatencyMs: ep.lastLatencyMs,
    consecutiveFailures: ep.consecutiveFailures, checksTotal: ep.checksTotal, checksPassed: ep.checksPassed,
    nextCheckAt: ep.nextCheckAt?.getTime() ?? null, ...(check ? { check } : {}),
  };
}

function loadOf(ep: Endpoint, workers: number): ToWorker {
  const r = ep.engineLoad;
  const now = performance.now();
  return { gw: 'load', id: ep.id, report: r && { running: r.running, waiting: r.waiting, workers, path: r.path, ageMs: now - r.at, ttlMs: r.until - r.at, readAt: r.readAt.getTime() } };
}
