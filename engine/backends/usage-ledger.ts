// Who used how many tokens, and the keys' token limits (auth.keys[]: tokens_per_minute, _day,
// _month, overall and per model, and max_concurrent). A request is admitted by reserving its
// estimate (prompt and output cap) against every limit that applies, all or none; when it is
// over, the reservation is settled on what it really used (or released, when it used nothing).
// So the admitted total never passes a limit by more than the reservations in flight, whatever
// the concurrency: the check and the charge are one step. Tokens per minute is a token bucket
// (capacity: the limit, refilling it each minute); tokens per day and per month are counted in
// UTC calendar windows. Times are epoch milliseconds, so that a saved ledger (usage-file.ts)
// means the same after a restart. Kept once per host (a worker asks its host: sharing/).

export interface TokenLimits {
  /** 0: no such limit. */
  perMinute: number;
  perDay: number;
  perMonth: number;
}

/** The limits one request of a key meets: the key's, and those of the model pattern it matched. */
export interface Budget {
  key: string;
  limits: TokenLimits;
  /** Requests of the key at once; 0: any number. */
  maxConcurrent: number;
  model: { pattern: string; limits: TokenLimits } | null;
}

export type LimitName = 'tokens_per_minute' | 'tokens_per_day' | 'tokens_per_month' | 'max_concurrent';

/** Why a request was not admitted: the limit, whose (the key, or the key's model pattern), what
 *  is left of it, and when to come back. */
export interface Refusal {
  limit: LimitName;
  /** The key's name, or `name (model pattern)`. */
  of: string;
  value: number;
  remaining: number;
  retryAfterS: number;
  resetS: number;
}

export type Admission = { ok: true; id: number } | { ok: false; refusal: Refusal };

/** What one request used, for the counters. */
export interface Spent {
  key: string;
  model: string;
  input: number;
  cachedInput: number;
  output: number;
  reasoning: number;
  estimated: number;
}

export interface Counters {
  requests: number;
  input_tokens: number;
  cached_input_tokens: number;
  output_tokens: number;
  reasoning_tokens: number;
  estimated_tokens: number;
}

/** One budget's windows: the minute bucket, the day's and the month's tokens, the reserved. */
interface Book {
  /** Tokens in the minute bucket (may go below 0 when a request used more than it reserved). */
  units: number;
  at: number;
  day: string;
  dayTokens: number;
  month: string;
  monthTokens: number;
  /** Reserved by requests in flight (not saved: a restart ends them). */
  pending: number;
  inFlight: number;
}

interface KeyUsage {
  day: string;
  today: Map<string, Counters>;
  total: Map<string, Counters>;
}

interface Reservation {
  books: { book: Book; limits: TokenLimits; held: number }[];
  key: Book;
}

/** A saved ledger (usage-file.ts): the books and the counters. */
export interface LedgerSnapshot {
  version: 1;
  books: Record<string, Omit<Book, 'pending' | 'inFlight'>>;
  usage: Record<string, { day: string; today: Record<string, Counters>; total: Record<string, Counters> }>;
}

export interface KeyReport {
  today: { day: string; models: Record<string, Counters>; all: Counters };
  total: { models: Record<string, Counters>; all: Counters };
  in_flight: number;
  /** Per limit the key has: the limit, what is used of it (reservations included), what is left. */
  budget: Partial<Record<LimitName, { limit: number; used: number; remaining: number; reset_s: number }>>;
}

export const DAY_MS = 86_400_000;
/** The UTC day and month of a time, made once a day (every request asks). */
let calendar = { index: Number.NaN, day: '', month: '' };
function dateOf(t: number): typeof calendar {
  const index = Math.floor(t / DAY_MS);
  if (index !== calendar.index) {
    const iso = new Date(t).toISOString();
    calendar = { index, day: iso.slice(0, 10), month: iso.slice(0, 7) };
  }
  return calendar;
}
export const dayOf = (t: number) => dateOf(t).day;
export const monthOf = (t: number) => dateOf(t).month;
export const secondsToNextDay = (t: number) => Math.max(1, Math.ceil((DAY_MS - (t % DAY_MS)) / 1000));
export function secondsToNextMonth(t: number): number {
  const d = new Date(t);
  return Math.max(1, Math.ceil((Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) - t) / 1000));
}

export const zeroCounters = (): Counters => ({
  requests: 0,
  input_tokens: 0,
  cached_input_tokens: 0,
  output_tokens: 0,
  reasoning_tokens: 0,
  estimated_tokens: 0,
});

function addTo(c: Counters, s: Spent): void {
  c.requests++;
  c.input_tokens += s.input;
  c.cached_input_tokens += s.cachedInput;
  c.output_tokens += s.output;
  c.reasoning_tokens += s.reasoning;
  c.estimated_tokens += s.estimated;
}

export function sum(models: Iterable<Counters>): Counters {
  const all = zeroCounters();
  for (const c of models) for (const k of Object.keys(all) as (keyof Counters)[]) all[k] += c[k];
  return all;
}

/** The most one request holds of a budget: a request larger than a limit is admitted when the
 *  budget is whole (else it never could be), and charged what it really uses. */
export function holdOf(tokens: number, l: TokenLimits): number {
  let held = tokens;
  for (const v of [l.perMinute, l.perDay, l.perMonth]) if (v > 0 && v < held) held = v;
  return held;
}

export class UsageLedger {
  private readonly books = new Map<string, Book>();
  private readonly usage = new Map<string, KeyUsage>();
  private readonly reservations = new Map<number, Reservation>();
  private next = 1;
  /** Changed since the last snapshot. */
  dirty = false;

  constructor(private readonly clock: () => number = Date.now) {}

  /** Reserve `tokens` against every limit of the budget, all or none. */
  admit(budget: Budget, tokens: number): Admission {
    const now = this.clock();
    const keyBook = this.book(budget.key, now);
    if (budget.maxConcurrent > 0 && keyBook.inFlight >= budget.maxConcurrent) {
      return { ok: false, refusal: { limit: 'max_concurrent', of: budget.key, value: budget.maxConcurrent, remaining: 0, retryAfterS: 1, resetS: 1 } };
    }
    const books: Reservation['books'] = [{ book: keyBook, limits: budget.limits, held: holdOf(tokens, budget.limits) }];
    if (budget.model) {
      const { pattern, limits } = budget.model;
      books.push({ book: this.book(`${budget.key}\u0000${pattern}`, now), limits, held: holdOf(tokens, limits) });
    }
    for (let i = 0; i < books.length; i++) {
      const refusal = this.check(books[i].book, books[i].limits, books[i].held, now);
      if (refusal) return { ok: false, refusal: { ...refusal, of: i === 0 ? budget.key : `${budget.key} (${budget.model!.pattern})` } };
    }
    for (const { book, limits, held } of books) {
      if (limits.perMinute > 0) book.units -= held;
      book.pending += held;
    }
    keyBook.inFlight++;
    const id = this.next++;
    this.reservations.set(id, { books, key: keyBook });
    this.dirty = true;
    return { ok: true, id };
  }

  /** The request is over: its reservation (id; 0: none made) settles on what it used. */
  settle(id: number, spent: Spent | null): void {
    const now = this.clock();
    const r = id === 0 ? undefined : this.reservations.get(id);
    const used = spent ? spent.input + spent.output : 0;
    if (r) {
      this.reservations.delete(id);
      r.key.inFlight--;
      for (const { book, limits, held } of r.books) {
        this.roll(book, limits, now);
        book.pending -= held;
        // The bucket gets back what was held and gives what was used: below 0 is a debt the
        // refill pays before the next request is admitted.
        if (limits.perMinute > 0) book.units = Math.min(limits.perMinute, book.units + held - used);
        book.dayTokens += used;
        book.monthTokens += used;
      }
    }
    if (spent) this.count(spent, now);
    this.dirty = true;
  }

  /** Per key (`only`: that one), its counters today and in total, what is in flight, and what is
   *  left of each of its limits (`budgets`: the keys' limits, by name). */
  report(budgets: ReadonlyMap<string, Budget>, only?: string): Record<string, KeyReport> {
    const now = this.clock();
    const out: Record<string, KeyReport> = {};
    const names = new Set([...budgets.keys(), ...this.usage.keys()]);
    for (const name of names) {
      if (only !== undefined && name !== only) continue;
      const u = this.usage.get(name);
      const today = u && u.day === dayOf(now) ? Object.fromEntries(u.today) : {};
      const total = u ? Object.fromEntries(u.total) : {};
      const book = this.books.get(name);
      const budget = budgets.get(name);
      out[name] = {
        today: { day: dayOf(now), models: today, all: sum(Object.values(today)) },
        total: { models: total, all: sum(Object.values(total)) },
        in_flight: book?.inFlight ?? 0,
        budget: budget ? this.left(this.book(name, now), budget.limits, now) : {},
      };
    }
    return out;
  }

  snapshot(): LedgerSnapshot {
    this.dirty = false;
    const books: LedgerSnapshot['books'] = {};
    for (const [k, { pending: _p, inFlight: _f, ...saved }] of this.books) books[k] = saved;
    const usage: LedgerSnapshot['usage'] = {};
    for (const [k, u] of this.usage) usage[k] = { day: u.day, today: Object.fromEntries(u.today), total: Object.fromEntries(u.total) };
    return { version: 1, books, usage };
  }

  /** A saved ledger, read at start (before any request). */
  restore(s: LedgerSnapshot): void {
    // A bucket that was new (NaN) is saved as null.
    for (const [k, b] of Object.entries(s.books))
      this.books.set(k, { ...b, units: typeof b.units === 'number' ? b.units : Number.NaN, pending: 0, inFlight: 0 });
    for (const [k, u] of Object.entries(s.usage)) {
      this.usage.set(k, { day: u.day, today: new Map(Object.entries(u.today)), total: new Map(Object.entries(u.total)) });
    }
  }

  private book(name: string, now: number): Book {
    let b = this.books.get(name);
    if (!b)
      this.books.set(name, (b = { units: Number.NaN, at: now, day: dayOf(now), dayTokens: 0, month: monthOf(now), monthTokens: 0, pending: 0, inFlight: 0 }));
    return b;
  }

  /** The book brought up to now: the bucket refilled, a new day's or month's window begun. */
  private roll(b: Book, l: TokenLimits, now: number): void {
    if (l.perMinute > 0) {
      // A new bucket (or one saved while the key had no such limit) starts full.
      b.units = Number.isNaN(b.units) ? l.perMinute : Math.min(l.perMinute, b.units + (Math.max(0, now - b.at) * l.perMinute) / 60_000);
    }
    b.at = now;
    const day = dayOf(now);
    if (b.day !== day) {
      b.day = day;
      b.dayTokens = 0;
    }
    const month = monthOf(now);
    if (b.month !== month) {
      b.month = month;
      b.monthTokens = 0;
    }
  }

  private check(b: Book, l: TokenLimits, held: number, now: number): Omit<Refusal, 'of'> | null {
    this.roll(b, l, now);
    if (l.perMinute > 0 && b.units < held) {
      const perS = l.perMinute / 60;
      return {
        limit: 'tokens_per_minute',
        value: l.perMinute,
        remaining: Math.max(0, Math.floor(b.units)),
        retryAfterS: Math.max(1, Math.ceil((held - b.units) / perS)),
        resetS: Math.max(1, Math.ceil((l.perMinute - b.units) / perS)),
      };
    }
    if (l.perDay > 0 && b.dayTokens + b.pending + held > l.perDay) {
      const s = secondsToNextDay(now);
      return { limit: 'tokens_per_day', value: l.perDay, remaining: Math.max(0, l.perDay - b.dayTokens - b.pending), retryAfterS: s, resetS: s };
    }
    if (l.perMonth > 0 && b.monthTokens + b.pending + held > l.perMonth) {
      const s = secondsToNextMonth(now);
      return { limit: 'tokens_per_month', value: l.perMonth, remaining: Math.max(0, l.perMonth - b.monthTokens - b.pending), retryAfterS: s, resetS: s };
    }
    return null;
  }

  private left(b: Book, l: TokenLimits, now: number): KeyReport['budget'] {
    this.roll(b, l, now);
    const out: KeyReport['budget'] = {};
    if (l.perMinute > 0) {
      const remaining = Math.max(0, Math.floor(b.units));
      out.tokens_per_minute = {
        limit: l.perMinute,
        used: l.perMinute - remaining,
        remaining,
        reset_s: Math.ceil(((l.perMinute - b.units) * 60) / l.perMinute),
      };
    }
    if (l.perDay > 0) {
      const used = b.dayTokens + b.pending;
      out.tokens_per_day = { limit: l.perDay, used, remaining: Math.max(0, l.perDay - used), reset_s: secondsToNextDay(now) };
    }
    if (l.perMonth > 0) {
      const used = b.monthTokens + b.pending;
      out.tokens_per_month = { limit: l.perMonth, used, remaining: Math.max(0, l.perMonth - used), reset_s: secondsToNextMonth(now) };
    }
    return out;
  }

  private count(s: Spent, now: number): void {
    let u = this.usage.get(s.key);
    const day = dayOf(now);
    if (!u) this.usage.set(s.key, (u = { day, today: new Map(), total: new Map() }));
    if (u.day !== day) {
      u.day = day;
      u.today.clear();
    }
    let today = u.today.get(s.model);
    if (!today) u.today.set(s.model, (today = zeroCounters()));
    let total = u.total.get(s.model);
    if (!total) u.total.set(s.model, (total = zeroCounters()));
    addTo(today, s);
    addTo(total, s);
  }
}
