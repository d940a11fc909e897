// The one Prometheus registry of a gateway (prom-client), kept with the backends' state so a
// reload keeps every series. Two kinds of series live in it:
//   - read at scrape time (`collected`): a function reads the counters the status routes already
//     keep (Stats, endpoints, breakers, queues, the catalogue) — nothing is counted twice;
//   - observed per request (`histogram`, `counter`): timings and counts nobody else keeps. A
//     series is picked once by its label values (the caller caches it) and observed by a bucket
//     search and two additions: prom-client's own Histogram hashes its labels on every observe,
//     which a per-request path should not pay.
// Node's process metrics (prom-client's collectDefaultMetrics) join the registry on the first
// scrape, so gateways that are never scraped (tests, embedded use) start no observers for them.
import { collectDefaultMetrics, Registry } from 'prom-client';

/** Gauges prom-client names `…_total`, which Prometheus keeps for counters (promtool refuses
 *  them); the same counts by type stay (nodejs_active_handles, …_requests, …_resources). */
const GAUGES_NAMED_TOTAL = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

export type Labels = Record<string, string>;
export interface Sample {
  labels: Labels;
  value: number;
}

type MetricType = 'counter' | 'gauge' | 'histogram';
interface Exported {
  labels: Labels;
  value: number;
  metricName?: string;
}

/** What prom-client's registry reads from a metric: its name, help, type and samples. */
/** How a host adds up its workers' series (prom-client's cluster aggregation): counts and gauges
 *  of what each worker does are summed; what every worker reads from the host's state (health,
 *  the catalogue) is the same in each, so one worker's value is the host's. */
export type Aggregator = 'sum' | 'max' | 'first';

abstract class Metric {
  aggregator: Aggregator = 'sum';
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: MetricType,
  ) {}
  protected abstract values(): Exported[];
  get(): { name: string; help: string; type: MetricType; values: Exported[]; aggregator: string } {
    return { name: this.name, help: this.help, type: this.type, values: this.values(), aggregator: this.aggregator };
  }
}

function labelsOf(names: readonly string[], values: readonly string[]): Labels {
  const labels: Labels = {};
  names.forEach((n, i) => (labels[n] = values[i]));
  return labels;
}

/** One histogram series: counts per bucket (not cumulative; summed at export). */
export class HistogramSeries {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(
    private readonly bounds: readonly number[],
    readonly labels: Labels,
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }
  observe(value: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && value > b[i]) i++;
    this.counts[i]++;
    this.sum += value;
    this.count++;
  }
}

export class Histogram extends Metric {
  private readonly series = new Map<string, HistogramSeries>();
  constructor(
    name: string,
    help: string,
    readonly labelNames: readonly string[],
    readonly bounds: readonly number[],
  ) {
    super(name, help, 'histogram');
  }
  /** The series for these label values (labelNames order); cache it, it never changes. */
  with(...values: string[]): HistogramSeries {
    const key = values.join('\u0000');
    let s = this.series.get(key);
    if (!s) this.series.set(key, (s = new HistogramSeries(this.bounds, labelsOf(this.labelNames, values))));
    return s;
  }
  protected values(): Exported[] {
    const out: Exported[] = [];
    for (const s of this.series.values()) {
      let cumulative = 0;
      for (let i = 0; i <= this.bounds.length; i++) {
        cumulative += s.counts[i];
        const le = i < this.bounds.length ? String(this.bounds[i]) : '+Inf';
        out.push({ metricName: `${this.name}_bucket`, labels: { ...s.labels, le }, value: cumulative });
      }
      out.push({ metricName: `${this.name}_sum`, labels: s.labels, value: s.sum });
      out.push({ metricName: `${this.name}_count`, labels: s.labels, value: s.count });
    }
    return out;
  }
}

/** One counter series: add to `value`. */
export interface CounterCell {
  value: number;
  readonly labels: Labels;
}

export class Counter extends Metric {
  private readonly cells = new Map<string, CounterCell>();
  constructor(
    name: string,
    help: string,
    readonly labelNames: readonly string[],
  ) {
    super(name, help, 'counter');
  }
  with(...values: string[]): CounterCell {
    const key = values.join('\u0000');
    let c = this.cells.get(key);
    if (!c) this.cells.set(key, (c = { value: 0, labels: labelsOf(this.labelNames, values) }));
    return c;
  }
  protected values(): Exported[] {
    return [...this.cells.values()];
  }
}

/** A series read at scrape time from state kept elsewhere. */
class Collected extends Metric {
  constructor(
    name: string,
    help: string,
    type: 'counter' | 'gauge',
    public read: () => Sample[],
  ) {
    super(name, help, type);
  }
  protected values(): Exported[] {
    return this.read();
  }
}

export class Metrics {
  readonly registry = new Registry();
  private readonly byName = new Map<string, Metric>();
  private processMetrics = false;

  /** The histogram of this name (created once; a reload gets the same one with its data). */
  histogram(name: string, help: string, labelNames: readonly string[], bounds: readonly number[]): Histogram {
    return this.once(name, () => new Histogram(name, help, labelNames, bounds)) as Histogram;
  }

  counter(name: string, help: string, labelNames: readonly string[]): Counter {
    return this.once(name, () => new Counter(name, help, labelNames)) as Counter;
  }

  /** A series read at scrape time; registering the name again replaces the reader (a reload).
   *  `aggregator`: 'max' for what every worker reads from the host's state. */
  collected(name: string, help: string, type: 'counter' | 'gauge', read: () => Sample[], aggregator: Aggregator = 'sum'): void {
    const existing = this.byName.get(name);
    if (existing instanceof Collected) existing.read = read;
    else this.once(name, () => new Collected(name, help, type, read)).aggregator = aggregator;
  }

  /** A worker's series are scraped through its host, which adds up every worker's (prom-client's
   *  cluster aggregation): Node's process metrics are among them from now. */
  offerToHost(scrape: () => Promise<string | null>): void {
    this.addProcessMetrics();
    this.scrape = scrape;
  }

  private scrape: (() => Promise<string | null>) | null = null;

  private addProcessMetrics(): void {
    if (this.processMetrics) return;
    this.processMetrics = true;
    collectDefaultMetrics({ register: this.registry });
    for (const name of GAUGES_NAMED_TOTAL) this.registry.removeSingleMetric(name);
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The exposition text; Node's process metrics are added on the first call. */
  /** The exposition; null when a worker's host could not gather every worker's series. */
  async text(): Promise<string | null> {
    if (this.scrape) return this.scrape();
    this.addProcessMetrics();
    return this.registry.metrics();
  }

  private once(name: string, make: () => Metric): Metric {
    let m = this.byName.get(name);
    if (!m) {
      m = make();
      this.byName.set(name, m);
      this.registry.registerMetric(m as never);
    }
    return m;
  }
}
