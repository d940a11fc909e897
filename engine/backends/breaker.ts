// One circuit breaker per endpoint. Closed → Open after 3 consecutive failed health checks or
// 5 consecutive proxy failures; Open for 30 s; then Half-Open admits exactly one test request:
// its success closes the breaker, its failure reopens it.
export type BreakerState = 'closed' | 'open' | 'half-open';

export interface BreakerSettings {
  healthFailures: number;
  proxyFailures: number;
  openMs: number;
}

/** What admit() hands out: whether this request is the half-open test request. */
export type Ticket = { probe: boolean };
const NORMAL: Ticket = { probe: false };

export class CircuitBreaker {
  private current: BreakerState = 'closed';
  proxyFailures = 0;
  healthFailures = 0;
  openedAt = 0;
  openedBy: 'health' | 'proxy' | null = null;
  private probing = false;

  constructor(private settings: BreakerSettings, private readonly now: () => number = Date.now) {}

  /** New thresholds from a reloaded configuration; the current state is kept. */
  configure(settings: BreakerSettings): void {
    this.settings = settings;
  }

  /** The state as a request would see it now (an Open breaker past its time reads Half-Open). */
  get state(): BreakerState {
    if (this.current === 'open' && this.now() - this.openedAt >= this.settings.openMs) return 'half-open';
    return this.current;
  }

  /** A ticket when the request may go to the endpoint now, null when it must skip it. */
  admit(): Ticket | null {
    const state = this.state;
    if (state === 'closed') return NORMAL;
    if (state === 'open' || this.probing) return null;
    this.current = 'half-open';
    this.probing = true;
    return { probe: true };
  }

  /** The endpoint answered (any status below 500). */
  success(ticket: Ticket): void {
    if (ticket.probe) this.close();
    else if (this.current === 'closed') this.proxyFailures = 0;
  }

  /** The endpoint failed the request (connection error, 5xx, timeout, broken stream). */
  failure(ticket: Ticket): void {
    if (ticket.probe) this.open('proxy');
    else if (this.current === 'closed' && ++this.proxyFailures >= this.settings.proxyFailures) this.open('proxy');
  }

  /** The request ended without telling anything about the endpoint (the client left). */
  release(ticket: Ticket): void {
    if (ticket.probe) this.probing = false;
  }

  healthFailure(): void {
    this.healthFailures++;
    if (this.current === 'closed' && this.healthFailures >= this.settings.healthFailures) this.open('health');
  }

  /** A passing health check closes a breaker that health checks opened; one opened by proxy
   *  failures waits for its test request (the backend may answer health and still fail work). */
  healthSuccess(): void {
    this.healthFailures = 0;
    if (this.current !== 'closed' && this.openedBy === 'health') this.close();
  }

  private open(by: 'health' | 'proxy'): void {
    this.current = 'open';
    this.openedAt = this.now();
    this.openedBy = by;
    this.probing = false;
  }

  private close(): void {
    this.current = 'closed';
    this.proxyFailures = 0;
    this.healthFailures = 0;
    this.openedBy = null;
    this.probing = false;
  }
}
