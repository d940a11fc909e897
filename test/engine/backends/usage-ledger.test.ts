// The usage ledger: reservations against every limit at once, settled on what was used; the
// minute bucket's refill, the day's and month's UTC windows; counters per key and model; the
// ledger kept on disk and read back.
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../engine/core/logger.js';
import { UsageFile, defaultUsageFile } from '../../../engine/backends/usage-file.js';
import { UsageLedger, type Budget, type Spent } from '../../../engine/backends/usage-ledger.js';

const NONE = { perMinute: 0, perDay: 0, perMonth: 0 };
const budget = (limits: Partial<typeof NONE>, more: Partial<Budget> = {}): Budget => ({
  key: 'k',
  limits: { ...NONE, ...limits },
  maxConcurrent: 0,
  model: null,
  ...more,
});
const spent = (input: number, output: number, model = 'm'): Spent => ({ key: 'k', model, input, output, cachedInput: 0, reasoning: 0, estimated: 0 });

/** A clock at a given UTC time, moved by hand. */
function clockAt(iso: string) {
  const c = { now: Date.parse(iso) };
  return { c, clock: () => c.now };
}

describe('the usage ledger', () => {
  it('admits while the reservations fit the minute bucket, all at once, and settles on what was used', () => {
    const { c, clock } = clockAt('2026-11-28T10:00:00Z');
    const ledger = new UsageLedger(clock);
    const b = budget({ perMinute: 1000 });
    const ids = [0, 1, 2, 3].map(() => ledger.admit(b, 300));
    expect(ids.map((a) => a.ok)).toEqual([true, true, true, false]);
    const refused = ids[3];
    if (refused.ok) throw new Error('admitted');
    expect(refused.refusal).toMatchObject({ limit: 'tokens_per_minute', of: 'k', value: 1000, remaining: 100 });
    // 200 more tokens arrive in 12 s (1000 a minute): the wait is for what is missing.
    expect(refused.refusal.retryAfterS).toBe(12);
    // Each used 50: 250 of each reservation come back.
    for (const a of ids.slice(0, 3)) if (a.ok) ledger.settle(a.id, spent(20, 30));
    expect(ledger.admit(b, 800).ok).toBe(true);
    c.now += 60_000;
    expect(ledger.report(new Map([['k', b]])).k.budget.tokens_per_minute).toMatchObject({ limit: 1000, remaining: 1000 });
  });

  it('a request that used more than it reserved leaves a debt the refill pays first', () => {
    const { c, clock } = clockAt('2026-11-28T10:00:00Z');
    const ledger = new UsageLedger(clock);
    const b = budget({ perMinute: 600 });
    const a = ledger.admit(b, 100);
    if (!a.ok) throw new Error('refused');
    ledger.settle(a.id, spent(100, 1100)); // 1200 used: 600 over the bucket
    expect(ledger.admit(b, 10).ok).toBe(false);
    c.now += 61_000; // 610 tokens refilled
    expect(ledger.admit(b, 10).ok).toBe(true);
  });

  it('a reservation larger than a limit holds the whole limit: admitted when the budget is whole', () => {
    const ledger = new UsageLedger(clockAt('2026-11-28T10:00:00Z').clock);
    const b = budget({ perDay: 500 });
    const a = ledger.admit(b, 5000);
    expect(a.ok).toBe(true);
    expect(ledger.admit(b, 1).ok).toBe(false);
    if (a.ok) ledger.settle(a.id, null);
    expect(ledger.admit(b, 500).ok).toBe(true);
  });

  it('a day budget counts the UTC day and begins again at midnight; a month budget the month', () => {
    const { c, clock } = clockAt('2026-11-30T23:59:00Z');
    const ledger = new UsageLedger(clock);
    const b = budget({ perDay: 100, perMonth: 250 });
    const a = ledger.admit(b, 100);
    if (!a.ok) throw new Error('refused');
    ledger.settle(a.id, spent(40, 60));
    const day = ledger.admit(b, 1);
    expect(day.ok || day.refusal).toMatchObject({ limit: 'tokens_per_day', retryAfterS: 60, remaining: 0 });
    c.now += 60_000; // 1 December: a new day and a new month
    const next = ledger.admit(b, 100);
    expect(next.ok).toBe(true);
    if (next.ok) ledger.settle(next.id, spent(50, 50));
    for (let day = 2; day <= 3; day++) {
      c.now += 86_400_000; // a new day, the same month
      const r = ledger.admit(b, 70);
      expect(r.ok).toBe(true);
      if (r.ok) ledger.settle(r.id, spent(35, 35));
    }
    const month = ledger.admit(b, 20);
    expect(month.ok || month.refusal).toMatchObject({ limit: 'tokens_per_month', value: 250, remaining: 10 });
  });

  it("a model pattern's limit and the key's own are reserved together, all or none", () => {
    const ledger = new UsageLedger(clockAt('2026-11-28T10:00:00Z').clock);
    const key = budget({ perDay: 1000 });
    const coder = { ...key, model: { pattern: 'coder-*', limits: { ...NONE, perDay: 100 } } };
    expect(ledger.admit(coder, 80).ok).toBe(true);
    const refused = ledger.admit(coder, 80);
    expect(refused.ok || refused.refusal).toMatchObject({ limit: 'tokens_per_day', of: 'k (coder-*)', remaining: 20 });
    // Refused by the model's limit: nothing was taken from the key's.
    expect(ledger.report(new Map([['k', key]])).k.budget.tokens_per_day).toMatchObject({ used: 80 });
    expect(ledger.admit(key, 900).ok).toBe(true);
  });

  it('max_concurrent: requests of the key at once; a settled or released one frees its place', () => {
    const ledger = new UsageLedger(clockAt('2026-11-28T10:00:00Z').clock);
    const b = budget({}, { maxConcurrent: 2 });
    const [a, b2] = [ledger.admit(b, 1), ledger.admit(b, 1)];
    const third = ledger.admit(b, 1);
    expect(third.ok || third.refusal).toMatchObject({ limit: 'max_concurrent', value: 2 });
    if (a.ok) ledger.settle(a.id, null);
    expect(ledger.admit(b, 1).ok).toBe(true);
    expect(b2.ok).toBe(true);
  });

  it('counts requests and tokens per key and model, today and in total; today begins again each UTC day', () => {
    const { c, clock } = clockAt('2026-11-28T10:00:00Z');
    const ledger = new UsageLedger(clock);
    ledger.settle(0, { ...spent(10, 20, 'a'), cachedInput: 4, reasoning: 5, estimated: 3 });
    ledger.settle(0, spent(1, 2, 'b'));
    c.now += 86_400_000;
    ledger.settle(0, spent(100, 200, 'a'));
    const k = ledger.report(new Map()).k;
    expect(k.today.day).toBe('2026-11-29');
    expect(Object.keys(k.today.models)).toEqual(['a']);
    expect(k.total.models.a).toEqual({
      requests: 2,
      input_tokens: 110,
      cached_input_tokens: 4,
      output_tokens: 220,
      reasoning_tokens: 5,
      estimated_tokens: 3,
    });
    expect(k.total.all.requests).toBe(3);
  });

  it('kept on disk: written while it changes, read back at start; an unreadable file set aside', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-ledger-'));
    const path = join(dir, 'state', 'usage.json');
    const { clock } = clockAt('2026-11-28T10:00:00Z');
    const first = new UsageLedger(clock);
    const file = new UsageFile(first, path, createLogger('silent'));
    const b = budget({ perDay: 1000 });
    const a = first.admit(b, 300);
    if (a.ok) first.settle(a.id, spent(100, 150));
    file.close();
    expect(JSON.parse(readFileSync(path, 'utf8')).version).toBe(1);
    const second = new UsageLedger(clock);
    new UsageFile(second, path, createLogger('silent')).close();
    const k = second.report(new Map([['k', b]])).k;
    expect(k.total.models.m).toMatchObject({ requests: 1, input_tokens: 100, output_tokens: 150 });
    expect(k.budget.tokens_per_day).toMatchObject({ used: 250, remaining: 750 });

    writeFileSync(path, '{"version": 1, "books": ');
    const third = new UsageLedger(clock);
    new UsageFile(third, path, createLogger('silent')).close();
    expect(third.report(new Map()).k).toBeUndefined();
    expect(readdirSync(join(dir, 'state')).some((f) => f.startsWith('usage.json.unreadable-'))).toBe(true);
    expect(existsSync(path)).toBe(false);
  });

  it('defaults to the user state directory, one file per port', () => {
    expect(defaultUsageFile(40114, { XDG_STATE_HOME: '/var/lib/me' })).toBe('/var/lib/me/inference-gateway/usage-40114.json');
  });
});
