// The host's side of gw serve --workers N (host-link.ts is the worker's). The host runs the
// backends' state once for every worker: its health checks, discovery and engine reports are
// passed on as they happen; its rate-limit buckets and concurrency queues are the only ones (the
// workers ask); what one worker's requests saw (breaker counts, openings, pauses) is relayed to
// the others. A worker that dies leaves its queue places and slots behind: they are given back.
import type { Logger } from 'pino';
import type { Backends } from '../state.js';
import type { Endpoint } from '../endpoints.js';
import type { EndpointQueue, QueueCounts, Waiter } from '../queue.js';
import type { HealthObservation, Question, ToHost, ToWorker } from './host-protocol.js';
import type { Admission } from '../usage-ledger.js';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from 'prom-client';

/** How the host reaches one worker. */
export interface WorkerChannel {
  readonly id: number;
  send(m: ToWorker): void;
}

interface Joined {
  channel: WorkerChannel;
  /** It has its state and serves (it asked for the host's state): it answers gatherings. */
  attached: boolean;
  /** Its requests waiting in a host queue, by question number. */
  waiting: Map<number, { queue: EndpointQueue; waiter: Waiter }>;
  /** Slots its requests hold, by endpoint id: the queue each was taken from, oldest first (a
   *  reload may have replaced the endpoint's queue since: a slot goes back where it came from). */
  /** Slots held, by endpoint, with the model each was taken for. */
  held: Map<string, { queue: EndpointQueue; model: string }[]>;
  /** Token reservations its requests hold (the usage ledger's ids). */
  reserved: Set<number>;
}

/** How long the host waits for every worker's counters or series before answering with those it has. */
const GATHER_MS = 2_000;

/** A gathering under way: what came, and the workers yet to answer. */
type Gathering = { got: unknown[]; pending: Set<number>; done: () => void };

export class HostState {
  private readonly workers = new Map<number, Joined>();
  private gathers = 0;
  private readonly gathering = new Map<number, Gathering>();
  /** Breaker openings relayed, by endpoint id: until when (epoch ms), for workers that start later. */
  private readonly opened = new Map<string, number>();

  constructor(
    private readonly backends: Backends,
    private readonly log: Logger,
  ) {
    const b = backends;
    b.endpoints.on('state', (ep: Endpoint) => this.broadcast({ gw: 'health', o: healthOf(ep) }));
    b.endpoints.on('checked', (ep: Endpoint, failed: boolean) => this.broadcast({ gw: 'health', o: healthOf(ep, failed ? 'fail' : 'pass') }));
    b.catalogue.onList = (ep) => this.broadcast(this.modelsOf(ep));
    b.residency.onReport = (ep) => this.broadcast({ gw: 'resident', id: ep.id, entries: b.residency.entriesOf(ep) });
    b.engineLoad.onReport = (ep) => this.broadcast(loadOf(ep, this.workers.size));
  }

  join(channel: WorkerChannel): void {
    this.workers.set(channel.id, { channel, attached: false, waiting: new Map(), held: new Map(), reserved: new Set() });
  }

  /** The worker is gone: its waiters leave their queues and its slots are given back. */
  leave(id: number): void {
    const w = this.workers.get(id);
    if (!w) return;
    this.workers.delete(id);
    for (const { queue, waiter } of w.waiting.values()) queue.leave(waiter);
    for (const slots of w.held.values()) for (const { queue, model } of slots) queue.release(performance.now(), model);
    for (const g of this.gathering.values()) this.gathered(g, id, null);
    for (const r of w.reserved) this.backends.usage.settle(r, null);
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
    if (m.gw === 'settle') {
      w.reserved.delete(m.id);
      return this.backends.usage.settle(m.id, m.spent);
    }
    if (m.gw === 'gathered') {
      const g = this.gathering.get(m.n);
      if (g) this.gathered(g, from, m.value);
      return;
    }
    // A slot goes back to the queue it came from, whether or not its endpoint is still configured.
    if (m.gw === 'release') return this.release(w, m.id, m.heldMs, m.model);
    const ep = this.backends.endpoints.get(m.id);
    if (!ep || ep.retired) return;
    const health = this.backends.health;
    switch (m.gw) {
      case 'failed':
        return health.markFailed(ep, m.reason);
      case 'answered':
        return health.markAnswered(ep, m.status);
      case 'check':
        return void health.check(ep);
      case 'open':
        this.opened.set(m.id, Date.now() + m.ms);
        return this.broadcast(m, from);
      case 'count':
      case 'pause':
      case 'place':
        return this.broadcast(m, from);
    }
  }

  /** Everything a worker starting now must know, as the messages that would have told it. */
  private state(): ToWorker[] {
    const out: ToWorker[] = [];
    const now = Date.now();
    for (const ep of this.backends.endpoints.all) {
      out.push({ gw: 'health', o: healthOf(ep) }, this.modelsOf(ep), loadOf(ep, this.workers.size));
      out.push({ gw: 'resident', id: ep.id, entries: this.backends.residency.entriesOf(ep) });
      // A breaker the other workers' requests opened is open here too, for what is left of it.
      const until = this.opened.get(ep.id) ?? 0;
      if (until > now) out.push({ gw: 'open', id: ep.id, ms: until - now });
      else this.opened.delete(ep.id);
    }
    return out;
  }

  /** Every question is answered, an error included (undefined: the worker's fallback), so that
   *  no worker waits for ever. */
  private async answer(w: Joined, n: number, q: Question): Promise<void> {
    let value: unknown;
    try {
      switch (q.what) {
        case 'state':
          w.attached = true;
          value = this.state();
          break;
        // Tokens lent besides: a share of what is left, split among twice the workers (leased-buckets.ts).
        case 'take':
          value = this.backends.buckets.takeAll(q.takes, 2 * this.workers.size);
          break;
        case 'acquire':
          return this.acquire(w, n, q.id, q.model);
        case 'refresh':
          value = await this.backends.discovery.refresh();
          break;
        case 'stats':
          value = { workers: await this.gather('snapshot'), queues: this.queues() };
          break;
        case 'metrics':
          value = await this.metrics();
          break;
        case 'admit': {
          const admission: Admission = await this.backends.usage.admit(q.budget, q.tokens);
          if (admission.ok) w.reserved.add(admission.id);
          value = admission;
          break;
        }
        case 'usage':
          value = await this.backends.usage.report(q.budgets, q.only);
          break;
      }
    } catch (err) {
      this.log.error({ err, question: q.what }, 'the host could not answer a worker');
      value = undefined;
    }
    send(w.channel, { gw: 'answer', n, value });
  }

  /** Every worker's series, added up by prom-client's cluster aggregation; null unless every
   *  serving worker answered (a scrape with a worker missing would read as a counter reset). */
  private async metrics(): Promise<string | null> {
    const want = [...this.workers.values()].filter((w) => w.attached).length;
    const series = (await this.gather('series')) as MetricObjectWithValues<MetricValue<string>>[][];
    if (series.length < want) return null;
    return AggregatorRegistry.aggregate(series).metrics();
  }

  private acquire(w: Joined, n: number, id: string, model: string): void {
    const reply = (value: unknown) => send(w.channel, { gw: 'answer', n, value });
    const queue = this.backends.endpoints.get(id)?.queue;
    // No limit here (a reload removed it): nothing to hold.
    if (!queue) return reply({ turn: 'admitted' });
    // Admitted: whether the engine may be loading the model (a switch), for the worker's deadlines.
    const admitted = () => {
      hold(w, id, queue, model);
      reply({ turn: 'admitted', cold: queue.coldFor(model) });
    };
    if (queue.tryEnter(model)) return admitted();
    if (queue.full) {
      queue.reject();
      return reply({ turn: 'full' });
    }
    const waiter = queue.wait((turn) => {
      w.waiting.delete(n);
      if (turn === 'admitted') admitted();
      else reply({ turn });
    }, model);
    w.waiting.set(n, { queue, waiter });
  }

  private release(w: Joined, id: string, heldMs: number, model: string): void {
    const slots = w.held.get(id);
    if (!slots) return;
    const at = Math.max(
      0,
      slots.findIndex((s) => s.model === model),
    );
    const [slot] = slots.splice(at, 1);
    if (slots.length === 0) w.held.delete(id);
    slot.queue.release(performance.now() - heldMs, slot.model);
  }

  /** What every serving worker says (those that answer within GATHER_MS): its counters or its series. */
  private gather(what: 'snapshot' | 'series'): Promise<unknown[]> {
    const n = ++this.gathers;
    const got: unknown[] = [];
    const serving = [...this.workers.values()].filter((w) => w.attached);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.gathering.delete(n);
        resolve(got.filter((v) => v !== null));
      };
      const timer = setTimeout(done, GATHER_MS);
      this.gathering.set(n, { got, pending: new Set(serving.map((w) => w.channel.id)), done });
      if (serving.length === 0) return done();
      for (const w of serving) send(w.channel, { gw: 'gather', n, what });
    });
  }

  /** One worker's answer to a gathering, or null for one that left before it answered. */
  private gathered(g: Gathering, from: number, value: unknown): void {
    if (!g.pending.delete(from)) return;
    g.got.push(value);
    if (g.pending.size === 0) g.done();
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

function hold(w: Joined, id: string, queue: EndpointQueue, model: string): void {
  const slots = w.held.get(id);
  if (slots) slots.push({ queue, model });
  else w.held.set(id, [{ queue, model }]);
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
    id: ep.id,
    state: ep.state,
    reason: ep.lastError,
    lastCheck: ep.lastCheck?.getTime() ?? null,
    lastLatencyMs: ep.lastLatencyMs,
    consecutiveFailures: ep.consecutiveFailures,
    checksTotal: ep.checksTotal,
    checksPassed: ep.checksPassed,
    nextCheckAt: ep.nextCheckAt?.getTime() ?? null,
    ...(check ? { check } : {}),
  };
}

function loadOf(ep: Endpoint, workers: number): ToWorker {
  const r = ep.engineLoad;
  const now = performance.now();
  return {
    gw: 'load',
    id: ep.id,
    report: r && { running: r.running, waiting: r.waiting, workers, path: r.path, ageMs: now - r.at, ttlMs: r.until - r.at, readAt: r.readAt.getTime() },
  };
}
