// The usage ledger shared by every replica through Redis (server.rate_limits.store: redis), like
// the rate limits: the same books as the in-memory ledger (usage-ledger.ts) — the minute bucket
// timed by the Redis server's clock, the day's and month's tokens, the reservations in flight —
// each admission one atomic script over every book it touches (all or none), each settlement
// another; the counters per key and model (a hash per key in total and per key per UTC day, the
// day's kept two days). A replica whose Redis cannot answer admits the request unreserved and
// keeps serving (fails open, warned at most every 30 s), as the rate limits do. Reservations are
// members of a sorted set per book, each with an expiry: those of a replica that died with
// requests under way stop counting after an hour.
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { UsageBooks } from '../usage-books.js';
import {
  DAY_MS,
  dayOf,
  holdOf,
  monthOf,
  secondsToNextDay,
  secondsToNextMonth,
  sum,
  zeroCounters,
  type Admission,
  type Budget,
  type Counters,
  type KeyReport,
  type LimitName,
  type Spent,
  type TokenLimits,
} from '../usage-ledger.js';
import { failFastClient } from './redis-client.js';
import type { RedisSettings } from './redis-buckets.js';

/** KEYS: each book's hash, then each book's reservations (a sorted set: member
 *  `replica:id:held`, score its expiry). ARGV: day, month, max concurrent (of the first book),
 *  the member's name without its held part, its expiry (ms from now), then per book: per minute,
 *  per day, per month, held. A reservation past its expiry (a replica that died with it) no
 *  longer counts. Returns {0} when admitted, else {book, limit (1 minute, 2 day, 3 month, 4
 *  concurrency), what is left}. */
const ADMIT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local day, month, maxc, member, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local books = #KEYS / 2
local s = {}
for i = 1, books do
  local pm, pd, pmo, held = tonumber(ARGV[4 * i + 2]), tonumber(ARGV[4 * i + 3]), tonumber(ARGV[4 * i + 4]), tonumber(ARGV[4 * i + 5])
  local res = KEYS[books + i]
  redis.call('ZREMRANGEBYSCORE', res, '-inf', now)
  local pending, inflight = 0, 0
  for _, m in ipairs(redis.call('ZRANGE', res, 0, -1)) do
    pending = pending + tonumber(string.match(m, ':(%d+)$'))
    inflight = inflight + 1
  end
  local b = redis.call('HMGET', KEYS[i], 'u', 'at', 'day', 'dt', 'month', 'mt')
  local u = tonumber(b[1])
  if pm > 0 then
    if u == nil then u = pm else u = math.min(pm, u + math.max(0, now - (tonumber(b[2]) or now)) * pm / 60000) end
  end
  local dt = (b[3] == day) and (tonumber(b[4]) or 0) or 0
  local mt = (b[5] == month) and (tonumber(b[6]) or 0) or 0
  if i == 1 and maxc > 0 and inflight >= maxc then return {i, 4, 0} end
  if pm > 0 and u < held then return {i, 1, tostring(u)} end
  if pd > 0 and dt + pending + held > pd then return {i, 2, pd - dt - pending} end
  if pmo > 0 and mt + pending + held > pmo then return {i, 3, pmo - mt - pending} end
  s[i] = {u or 0, dt, mt, pm, held}
end
for i = 1, books do
  local u, dt, mt, pm, held = unpack(s[i])
  local fields = {'at', now, 'day', day, 'dt', dt, 'month', month, 'mt', mt}
  if pm > 0 then table.insert(fields, 'u'); table.insert(fields, u - held) end
  redis.call('HSET', KEYS[i], unpack(fields))
  redis.call('PEXPIRE', KEYS[i], 3000000000)
  local res = KEYS[books + i]
  redis.call('ZADD', res, now + ttl, member .. ':' .. held)
  redis.call('PEXPIRE', res, ttl)
end
return {0}
`;

/** KEYS: each book's hash, then each book's reservations. ARGV: day, month, used, the member's
 *  name without its held part, then per book: per minute, held. */
const SETTLE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local day, month, used, member = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local books = #KEYS / 2
for i = 1, books do
  local pm, held = tonumber(ARGV[2 * i + 3]), tonumber(ARGV[2 * i + 4])
  redis.call('ZREM', KEYS[books + i], member .. ':' .. held)
  local b = redis.call('HMGET', KEYS[i], 'u', 'at', 'day', 'dt', 'month', 'mt')
  local dt = (b[3] == day) and (tonumber(b[4]) or 0) or 0
  local mt = (b[5] == month) and (tonumber(b[6]) or 0) or 0
  local fields = {'at', now, 'day', day, 'dt', dt + used, 'month', month, 'mt', mt + used}
  if pm > 0 then
    local u = tonumber(b[1]) or pm
    u = math.min(pm, u + math.max(0, now - (tonumber(b[2]) or now)) * pm / 60000)
    table.insert(fields, 'u'); table.insert(fields, math.min(pm, u + held - used))
  end
  redis.call('HSET', KEYS[i], unpack(fields))
end
return 0
`;

/** How long a reservation counts at most: a replica that dies with requests under way gives
 *  their reservations back after this (a request that lasts longer is settled all the same). */
const RESERVATION_TTL_MS = 3_600_000;

const LIMITS: Record<number, LimitName> = { 1: 'tokens_per_minute', 2: 'tokens_per_day', 3: 'tokens_per_month', 4: 'max_concurrent' };
const limitsOf = (l: TokenLimits) => [l.perMinute, l.perDay, l.perMonth];
const FIELDS: Record<keyof Omit<Spent, 'key' | 'model'>, keyof Counters> = {
  input: 'input_tokens',
  cachedInput: 'cached_input_tokens',
  output: 'output_tokens',
  reasoning: 'reasoning_tokens',
  estimated: 'estimated_tokens',
};

type Command = (...args: Array<string | number>) => Promise<unknown>;
interface Held {
  member: string;
  books: { key: string; res: string; perMinute: number; held: number }[];
}

export class RedisUsageBooks implements UsageBooks {
  readonly local = false;
  private readonly redis: Redis;
  private readonly held = new Map<number, Held>();
  private next = 1;
  /** This replica, in its reservations' names. */
  private readonly replica = randomUUID();
  private lastWarning = 0;

  constructor(
    readonly settings: RedisSettings,
    private readonly log: Logger,
  ) {
    this.redis = failFastClient(settings);
    this.redis.defineCommand('gwAdmit', { lua: ADMIT });
    this.redis.defineCommand('gwSettle', { lua: SETTLE });
    this.redis.on('error', () => undefined); // reported through the commands that fail
  }

  get connected(): boolean {
    return this.redis.status === 'ready';
  }

  private book(name: string): string {
    return `${this.settings.key_prefix}:usage:book:${name}`;
  }

  private reservations(name: string): string {
    return `${this.settings.key_prefix}:usage:held:${name}`;
  }

  async admit(budget: Budget, tokens: number): Promise<Admission> {
    const names = [budget.key];
    if (budget.model) names.push(`${budget.key}\u0000${budget.model.pattern}`);
    const books = names.map((name, i) => ({ key: this.book(name), res: this.reservations(name), limits: i === 0 ? budget.limits : budget.model!.limits }));
    const now = Date.now();
    const id = this.next++;
    const member = `${this.replica}:${id}`;
    const keys = [...books.map((b) => b.key), ...books.map((b) => b.res)];
    const args: Array<string | number> = [keys.length, ...keys, dayOf(now), monthOf(now), budget.maxConcurrent, member, RESERVATION_TTL_MS];
    const held = books.map((b) => ({ key: b.key, res: b.res, perMinute: b.limits.perMinute, held: holdOf(tokens, b.limits) }));
    books.forEach((b, i) => args.push(...limitsOf(b.limits), held[i].held));
    try {
      const [book, code, left] = (await (this.redis as unknown as { gwAdmit: Command }).gwAdmit(...args)) as [number, number, string | number];
      if (book === 0) {
        this.held.set(id, { member, books: held });
        return { ok: true, id };
      }
      const limits = books[book - 1].limits;
      const limit = LIMITS[code];
      const of = book === 1 ? budget.key : `${budget.key} (${budget.model!.pattern})`;
      const remaining = Math.max(0, Math.floor(Number(left)));
      if (limit === 'max_concurrent') return { ok: false, refusal: { limit, of, value: budget.maxConcurrent, remaining: 0, retryAfterS: 1, resetS: 1 } };
      if (limit === 'tokens_per_minute') {
        const perS = limits.perMinute / 60;
        const units = Number(left);
        return {
          ok: false,
          refusal: {
            limit,
            of,
            value: limits.perMinute,
            remaining,
            retryAfterS: Math.max(1, Math.ceil((held[book - 1].held - units) / perS)),
            resetS: Math.max(1, Math.ceil((limits.perMinute - units) / perS)),
          },
        };
      }
      const wait = limit === 'tokens_per_day' ? secondsToNextDay(now) : secondsToNextMonth(now);
      return {
        ok: false,
        refusal: { limit, of, value: limit === 'tokens_per_day' ? limits.perDay : limits.perMonth, remaining, retryAfterS: wait, resetS: wait },
      };
    } catch (err) {
      this.failed(err as Error);
      return { ok: true, id: 0 };
    }
  }

  settle(id: number, spent: Spent | null): void {
    const r = this.held.get(id);
    this.held.delete(id);
    void this.write(r, spent).catch((err) => this.failed(err as Error));
  }

  private async write(r: Held | undefined, spent: Spent | null): Promise<void> {
    const now = Date.now();
    const used = spent ? spent.input + spent.output : 0;
    if (r) {
      const keys = [...r.books.map((b) => b.key), ...r.books.map((b) => b.res)];
      const args: Array<string | number> = [keys.length, ...keys, dayOf(now), monthOf(now), used, r.member];
      for (const b of r.books) args.push(b.perMinute, b.held);
      await (this.redis as unknown as { gwSettle: Command }).gwSettle(...args);
    }
    if (!spent) return;
    const day = this.counters(spent.key, dayOf(now));
    const total = this.counters(spent.key, 'total');
    const m = this.redis.multi();
    for (const hash of [day, total]) {
      m.hincrby(hash, `${spent.model}\u0000requests`, 1);
      for (const [from, to] of Object.entries(FIELDS)) {
        const n = spent[from as keyof typeof FIELDS];
        if (n) m.hincrby(hash, `${spent.model}\u0000${to}`, n);
      }
    }
    m.pexpire(day, 2 * DAY_MS);
    await m.exec();
  }

  private counters(key: string, window: string): string {
    return `${this.settings.key_prefix}:usage:count:${window}:${key}`;
  }

  async report(budgets: readonly Budget[], only?: string): Promise<Record<string, KeyReport>> {
    const now = Date.now();
    const out: Record<string, KeyReport> = {};
    for (const b of budgets) {
      if (only !== undefined && b.key !== only) continue;
      const [today, total, book, held] = await Promise.all([
        this.redis.hgetall(this.counters(b.key, dayOf(now))),
        this.redis.hgetall(this.counters(b.key, 'total')),
        this.redis.hmget(this.book(b.key), 'u', 'at', 'day', 'dt', 'month', 'mt'),
        this.redis.zrangebyscore(this.reservations(b.key), now, '+inf'),
      ]);
      const pending = held.reduce((n, m) => n + Number(m.slice(m.lastIndexOf(':') + 1)), 0);
      const todayModels = models(today);
      const totalModels = models(total);
      out[b.key] = {
        today: { day: dayOf(now), models: todayModels, all: sum(Object.values(todayModels)) },
        total: { models: totalModels, all: sum(Object.values(totalModels)) },
        in_flight: held.length,
        budget: left(book, b.limits, now, pending),
      };
    }
    return out;
  }

  close(): void {
    this.redis.disconnect();
  }

  private failed(err: Error): void {
    const now = Date.now();
    if (now - this.lastWarning < 30_000) return;
    this.lastWarning = now;
    const { host, port } = this.redis.options;
    this.log.warn({ redis: `${host}:${port}`, error: err.message }, 'usage store unreachable: requests pass unreserved and uncounted until it answers');
  }
}

function models(hash: Record<string, string>): Record<string, Counters> {
  const out: Record<string, Counters> = {};
  for (const [field, value] of Object.entries(hash)) {
    const cut = field.lastIndexOf('\u0000');
    const model = field.slice(0, cut);
    (out[model] ??= zeroCounters())[field.slice(cut + 1) as keyof Counters] = Number(value);
  }
  return out;
}

function left(book: (string | null)[], l: TokenLimits, now: number, pending: number): KeyReport['budget'] {
  const out: KeyReport['budget'] = {};
  if (l.perMinute > 0) {
    const at = Number(book[1] ?? now);
    const units = book[0] === null ? l.perMinute : Math.min(l.perMinute, Number(book[0]) + (Math.max(0, now - at) * l.perMinute) / 60_000);
    const remaining = Math.max(0, Math.floor(units));
    out.tokens_per_minute = { limit: l.perMinute, used: l.perMinute - remaining, remaining, reset_s: Math.ceil(((l.perMinute - units) * 60) / l.perMinute) };
  }
  if (l.perDay > 0) {
    const used = (book[2] === dayOf(now) ? Number(book[3] ?? 0) : 0) + pending;
    out.tokens_per_day = { limit: l.perDay, used, remaining: Math.max(0, l.perDay - used), reset_s: secondsToNextDay(now) };
  }
  if (l.perMonth > 0) {
    const used = (book[4] === monthOf(now) ? Number(book[5] ?? 0) : 0) + pending;
    out.tokens_per_month = { limit: l.perMonth, used, remaining: Math.max(0, l.perMonth - used), reset_s: secondsToNextMonth(now) };
  }
  return out;
}
