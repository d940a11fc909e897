// One circuit breaker per endpoint. Closed → Open after 3 consecutive failed health checks or
// 5 consecutive proxy failures; then Half-Open admits exactly one test request: its success
// closes the breaker, its failure reopens it. The open period grows with each opening that no
// close came between (initial × 2^(n-1), jittered, never above the longest), so a backend that is
// down for long is not probed every second while one that blinked is back within about a second.
// Passive and active evidence stay apart (Envoy's outlier detection beside its health checks):
// a breaker opened by failing health checks closes at a passing one; a breaker opened by what
// requests saw closes only when a request succeeds through it (its test request). A passing
// health check — another path, which a backend can pass while its inference route fails — only
// brings that test forward, to the initial period after the opening: a backend that is back is
// tested within about a second, one that flaps at most once a second.
// One client must not close a healthy endpoint to everyone (Envoy tells gateway failures — 502,
// 503, 504, connection errors — apart from every 5xx, and routes to its last hosts anyway): when
// every failure of the run that opened the breaker was an answer about its request (a 500: an
// engine that cannot parse a model's tool call) and at most SCOPE_MAX different requests, while
// the health checks pass, the opening refuses those requests only (their repeats: a client's SDK
// retrying). Any other request goes through; its success closes the breaker, and one more failure
// that is not such an answer, or about yet another request, makes the opening everyone's.
export type BreakerState = 'closed' | 'open' | 'half-open';

export interface BreakerSettings {
  healthFailures: number;
  proxyFailures: number;
  /** The first open period after a close. */
  initialOpenMs: number;
  /** The longest open period (the growth stops there; jitter never goes above it). */
  maxOpenMs: number;
  /** Each period is scaled by a random factor in [1 - jitter, 1 + jitter], so breakers that opened
   *  together (one outage) do not all probe at the same instant. */
  jitter: number;
}

/** What admit() hands out: whether this request is the test request (and a last resort's). */
export type Ticket = { probe: boolean; lastResort?: boolean };
const NORMAL: Ticket = { probe: false };
const PROBE: Ticket = { probe: true };
const LAST_RESORT: Ticket = { probe: true, lastResort: true };
/** The most different requests whose failures may open a breaker for themselves alone. */
const SCOPE_MAX = 2;

export class CircuitBreaker {
  private current: BreakerState = 'closed';
  proxyFailures = 0;
  healthFailures = 0;
  openedAt = 0;
  openedBy: 'health' | 'proxy' | null = null;
  /** Openings since the last close: the n of the open period's growth. */
  openings = 0;
  /** How long this opening lasts (chosen when it opened). */
  openMs = 0;
  private probing = false;
  /** When the last last-resort request failed: the next waits an initial period from then. */
  private lastResortFailedAt = -Infinity;
  /** The digests of the requests whose failed answers this run of failures counted; null: none. */
  private answers: Set<string> | null = null;
  /** Failures in this run that were not answers about their request (502–504, connection errors). */
  private otherFailures = 0;
  /** An opening that refuses these requests only (their digests); null: everyone's, or closed. */
  private scope: Set<string> | null = null;
  /** Told when requests open it (its open period in ms): the host's other workers and the fleet's replicas may be spared (state.ts, share). */
  onProxyOpen: ((openMs: number) => void) | null = null;
  /** Told of every opening, whoever's evidence (attempts under way on the endpoint move on). */
  onOpened: (() => void) | null = null;
  /** Told of each request that moved the consecutive-failure count while closed (true: a failure,
   *  with its digest when it was an answer about its request; false: a success that reset it):
   *  the other workers of the host count it too (countElsewhere). */
  onCount: ((failed: boolean, answer?: string) => void) | null = null;

  /** `now`: milliseconds; `random`: [0, 1) — both injected so tests are deterministic. */
  constructor(
    private settings: BreakerSettings,
    private readonly now: () => number = Date.now,
    private readonly random: () => number = Math.random,
  ) {}

  /** New thresholds from a reloaded configuration; the current state (and period) is kept. */
  configure(settings: BreakerSettings): void {
    this.settings = settings;
  }

  /** The state as a request would see it now (an Open breaker past its time reads Half-Open). */
  get state(): BreakerState {
    if (this.current === 'open' && this.now() >= this.openUntil) return 'half-open';
    return this.current;
  }

  /** When an Open breaker lets its test request through (epoch milliseconds). */
  get openUntil(): number {
    return this.openedAt + this.openMs;
  }

  /** A ticket when the request may go to the endpoint now, null when it must skip it: an Open
   *  breaker admits nobody until its time is up, then one test request at a time. */
  admit(): Ticket | null {
    const state = this.state;
    if (state === 'closed') return NORMAL;
    if (this.probing || state === 'open') return null;
    this.current = 'half-open';
    this.probing = true;
    return PROBE;
  }

  /** Open for some requests only (the failures that opened it were answers about them)? Then
   *  admitFor decides by the request's digest, for as long as it lasts (its period ended, one of
   *  them is the test request). */
  get scoped(): boolean {
    return this.scope !== null;
  }

  /** A scoped opening: any other request goes through; one that failed is refused while the
   *  period lasts, then one at a time is its test request. */
  admitFor(digest: string): Ticket | null {
    return this.scope?.has(digest) === true ? this.admit() : NORMAL;
  }

  /** A last-resort request (its endpoint is out of rotation by its health checks, and nothing
   *  routable serves the request): the test request, whatever is left of the open period — the
   *  health state, not the period, keeps traffic off a down backend, and a long outage's period
   *  must not hold back a backend that is back — one at a time, and an initial period after the
   *  last one failed (a backend that fails fast is not tried at the clients' rate). Its success
   *  closes the breaker; its failure (re)opens it, as any test request's. */
  admitLastResort(): Ticket | null {
    if (!this.lastResortReady) return null;
    if (this.current === 'open') this.current = 'half-open';
    this.probing = true;
    return LAST_RESORT;
  }

  /** Is a test request out now (one at a time, a last-resort request included)? */
  get testing(): boolean {
    return this.probing;
  }

  get lastResortReady(): boolean {
    return this.lastResortAt <= this.now();
  }

  /** Milliseconds until a last-resort request may next go (0: at once), by the breaker's one
   *  clock reading: a test request out now means a whole initial period. */
  get lastResortInMs(): number {
    if (this.probing) return this.settings.initialOpenMs;
    return Math.max(0, this.lastResortFailedAt + this.settings.initialOpenMs - this.now());
  }

  /** When a last-resort request may next go (epoch milliseconds; now or earlier: at once). */
  get lastResortAt(): number {
    if (this.probing) return this.now() + this.settings.initialOpenMs;
    return this.lastResortFailedAt + this.settings.initialOpenMs;
  }

  /** Would admit() let a request through now? (Nothing taken: the attempt loop skips an endpoint
   *  it would refuse before building the request for it.) */
  get admits(): boolean {
    const state = this.state;
    return state === 'closed' || (state === 'half-open' && !this.probing) || this.scope !== null;
  }

  /** When a request may next go through (epoch milliseconds): now when closed; when its open
   *  period ends; about an initial period from now while a test request is out. */
  get nextTestAt(): number {
    const now = this.now();
    if (this.current === 'closed') return now;
    if (this.probing) return now + this.settings.initialOpenMs;
    return Math.max(now, this.openUntil);
  }

  /** The endpoint answered (any status below 500). */
  success(ticket: Ticket): void {
    if (ticket.probe || this.scope !== null) this.close();
    else if (this.current === 'closed' && this.proxyFailures > 0) {
      this.restartRun();
      this.onCount?.(false);
    }
  }

  /** The endpoint failed the request (connection error, 5xx, timeout, broken stream). `answer`:
   *  the request's digest when the failure is an answer about it (a 5xx other than 502–504). */
  failure(ticket: Ticket, answer?: string): void {
    if (ticket.lastResort) this.lastResortFailedAt = this.now();
    if (ticket.probe) {
      // A test request that one of the refused requests was: open for them again.
      if (answer !== undefined && this.scope?.has(answer)) this.answers = this.scope;
      this.open('proxy');
    } else if (this.scope !== null) {
      // Open for some requests: another failed too.
      if (answer === undefined || (!this.scope.has(answer) && this.scope.size >= SCOPE_MAX)) this.widen();
      else this.scope.add(answer);
    } else if (this.current === 'closed') {
      if (answer === undefined) this.otherFailures++;
      else (this.answers ??= new Set()).add(answer);
      this.onCount?.(true, answer);
      if (++this.proxyFailures >= this.settings.proxyFailures) this.open('proxy');
    }
  }

  /** Another worker of this host counted a request (see onCount): the consecutive failures are
   *  the host's, so the breaker opens after proxy_failures of them wherever they were seen. */
  countElsewhere(failed: boolean, answer?: string): void {
    if (this.current !== 'closed') return;
    if (!failed) return this.restartRun();
    if (answer === undefined) this.otherFailures++;
    else (this.answers ??= new Set()).add(answer);
    if (++this.proxyFailures >= this.settings.proxyFailures) this.open('proxy');
  }

  /** A success: the run of failures starts again. */
  private restartRun(): void {
    this.proxyFailures = 0;
    this.answers = null;
    this.otherFailures = 0;
  }

  /** The opening refuses only this many requests (their repeats); 0: everyone, or not open. */
  get scopeSize(): number {
    return this.scoped ? this.scope!.size : 0;
  }

  /** The request ended without telling anything about the endpoint (the client left). */
  release(ticket: Ticket): void {
    if (ticket.probe) this.probing = false;
  }

  healthFailure(): void {
    this.healthFailures++;
    // Not the requests' fault after all: the opening is everyone's.
    if (this.scope !== null) this.widen();
    if (this.current === 'closed' && this.healthFailures >= this.settings.healthFailures) this.open('health');
  }

  /** A passing health check closes a breaker that health checks opened; one that requests opened
   *  gets its test request within the initial period of its opening, no later. */
  healthSuccess(): void {
    this.healthFailures = 0;
    if (this.current === 'closed') return;
    if (this.openedBy === 'health') this.close();
    else this.openMs = Math.min(this.openMs, this.settings.initialOpenMs);
  }

  /** Another replica's requests opened its breaker for this endpoint: closed here, it opens for
   *  that long (then tests like one requests opened; nothing is passed on again). */
  openElsewhere(openMs: number): void {
    if (this.current !== 'closed') return;
    this.current = 'open';
    this.openedAt = this.now();
    this.openedBy = 'proxy';
    this.probing = false;
    this.openings++;
    this.openMs = Math.min(openMs, this.settings.maxOpenMs);
    this.onOpened?.();
  }

  private open(by: 'health' | 'proxy'): void {
    this.current = 'open';
    this.openedAt = this.now();
    this.openedBy = by;
    this.probing = false;
    this.openings++;
    this.openMs = this.period(this.openings);
    const answers = this.answers;
    this.scope = by === 'proxy' && this.otherFailures === 0 && this.healthFailures === 0 && answers !== null && answers.size <= SCOPE_MAX ? answers : null;
    this.answers = null;
    this.otherFailures = 0;
    if (this.scope === null) this.opened();
  }

  /** An opening for some requests becomes everyone's. */
  private widen(): void {
    this.scope = null;
    this.openedAt = this.now();
    this.openMs = this.period(this.openings);
    this.opened();
  }

  /** Open for everyone: whoever shares the endpoint is told, and the attempts under way on it. */
  private opened(): void {
    if (this.openedBy === 'proxy') this.onProxyOpen?.(this.openMs);
    this.onOpened?.();
  }

  /** initial × 2^(n-1), capped, jittered, capped again (the longest period is a promise). */
  private period(n: number): number {
    const { initialOpenMs, maxOpenMs, jitter } = this.settings;
    const base = Math.min(maxOpenMs, initialOpenMs * 2 ** Math.min(n - 1, 52));
    const factor = 1 - jitter + 2 * jitter * this.random();
    return Math.min(maxOpenMs, base * factor);
  }

  private close(): void {
    this.current = 'closed';
    this.restartRun();
    this.scope = null;
    this.healthFailures = 0;
    this.openedBy = null;
    this.probing = false;
    this.openings = 0;
  }
}
