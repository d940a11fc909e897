// The API keys of a configuration (auth:), compiled once per loaded configuration and shared by
// every route: a presented key is found by its SHA-256 (never kept itself), the digests compared
// in constant time; each key knows its models (names, aliases and * patterns, compiled once) and
// whether it is an admin. Nothing here logs or returns a key or a hash.
import { hash, randomBytes } from 'node:crypto';
import {
  expiryOf,
  globRegExp,
  type ApiKeyConfig,
  type Budget,
  type Caller,
  type Context,
  type KeysConfig,
  type TokenLimits,
  type TokenLimitsConfig,
} from '../../engine/api.js';

export class Key implements Caller {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly admin: boolean;
  readonly everyModel: boolean;
  readonly enabled: boolean;
  /** Epoch ms after which it is refused; Infinity: never. */
  readonly expiresAt: number;
  readonly requestsPerMinute: number;
  /** The key's token limits and the models' (first matching pattern), or null: it has none. */
  private readonly budget: Budget | null;
  private readonly modelLimits: readonly { pattern: string; re: RegExp; limits: TokenLimits }[];
  readonly digest: Buffer;
  private readonly names: ReadonlySet<string>;
  private readonly patterns: readonly RegExp[];

  constructor(entry: ApiKeyConfig, admin: boolean) {
    this.name = entry.name;
    this.labels = entry.labels;
    this.admin = admin;
    this.enabled = entry.enabled;
    this.expiresAt = entry.expires === undefined ? Infinity : expiryOf(entry.expires);
    this.requestsPerMinute = entry.requests_per_minute;
    this.modelLimits = Object.entries(entry.model_limits).map(([pattern, l]) => ({ pattern, re: globRegExp(pattern), limits: limitsOf(l) }));
    const limits = limitsOf(entry);
    const any = entry.max_concurrent > 0 || limited(limits) || this.modelLimits.some((m) => limited(m.limits));
    this.budget = any ? { key: entry.name, limits, maxConcurrent: entry.max_concurrent, model: null } : null;
    this.digest = Buffer.from(entry.hash.slice('sha256:'.length), 'hex');
    const models = entry.models;
    this.everyModel = models === undefined;
    this.names = new Set((models ?? []).filter((m) => !m.includes('*')));
    this.patterns = (models ?? []).filter((m) => m.includes('*')).map(globRegExp);
  }

  /** The limits a request for `model` meets (undefined: no model named); null: none. */
  budgetFor(model: string | undefined): Budget | null {
    const b = this.budget;
    if (b === null || this.modelLimits.length === 0 || model === undefined) return b;
    for (const m of this.modelLimits) if (m.re.test(model)) return { ...b, model: { pattern: m.pattern, limits: m.limits } };
    return b;
  }

  /** The key's own limits (for the usage report). */
  get limits(): Budget | null {
    return this.budget;
  }

  allows(model: string): boolean {
    if (this.everyModel || this.names.has(model)) return true;
    for (const p of this.patterns) if (p.test(model)) return true;
    return false;
  }
}

const limitsOf = (l: TokenLimitsConfig): TokenLimits => ({ perMinute: l.tokens_per_minute, perDay: l.tokens_per_day, perMonth: l.tokens_per_month });
const limited = (l: TokenLimits) => l.perMinute > 0 || l.perDay > 0 || l.perMonth > 0;

const tables = new WeakMap<KeysConfig, KeyTable | null>();

export class KeyTable {
  /** By the first 4 bytes of the digest, as a number: the table is looked up without comparing
   *  secrets byte by byte, then the whole digest is compared in constant time. */
  private readonly byPrefix = new Map<number, Key[]>();
  /** Whether any key has a request limit of its own. */
  readonly anyRate: boolean;
  /** Whether any key has token limits or a concurrency limit. */
  readonly anyBudget: boolean;
  /** Every key, in the order of the configuration. */
  readonly keys: readonly Key[];
  /** Keys found lately, by seededHash: the presented text and its key. */
  private readonly recent = new Map<number, { presented: string; key: Key }>();
  private readonly seed = randomBytes(4).readUInt32BE(0);

  private constructor(auth: KeysConfig) {
    const admins = new Set(auth.admin);
    this.keys = auth.keys.map((entry) => new Key(entry, admins.has(entry.name)));
    for (const key of this.keys) {
      const prefix = key.digest.readUInt32BE(0);
      const list = this.byPrefix.get(prefix);
      if (list) list.push(key);
      else this.byPrefix.set(prefix, [key]);
    }
    this.anyRate = auth.keys.some((k) => k.requests_per_minute > 0);
    this.anyBudget = this.keys.some((k) => k.limits !== null);
  }

  /** The configuration's keys (one table for every route of a loaded configuration); null while
   *  none is listed: keys are off. */
  static of(auth: KeysConfig): KeyTable | null {
    let table = tables.get(auth);
    if (table === undefined) tables.set(auth, (table = auth.keys.length > 0 ? new KeyTable(auth) : null));
    return table;
  }

  /** The key whose hash is this key's, if any. A key found is remembered for its next requests
   *  (a SHA-256 per request is a fifth of what keys cost): by a hash of it seeded at random, so
   *  that its place tells nothing, and compared in full, in constant time. A reload makes a new
   *  table: a revoked key is never found here. */
  find(presented: string): Key | undefined {
    const seen = this.recent.get(seededHash(presented, this.seed));
    if (seen !== undefined && sameText(seen.presented, presented)) return seen.key;
    const digest = hash('sha256', presented, 'buffer');
    const list = this.byPrefix.get(digest.readUInt32BE(0));
    if (!list) return undefined;
    for (const key of list) {
      if (!sameDigest(digest, key.digest)) continue;
      if (this.recent.size >= RECENT_MAX) this.recent.clear();
      this.recent.set(seededHash(presented, this.seed), { presented, key });
      return key;
    }
    return undefined;
  }
}

/** Keys remembered at most (those of the clients of the last while). */
const RECENT_MAX = 1024;

/** FNV-1a from a random offset: where a key is remembered, never how it reads. */
function seededHash(text: string, seed: number): number {
  let h = seed;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** Two strings compared in constant time for their length: every character, whatever differs first. */
function sameText(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/** Two SHA-256 digests compared in constant time: every byte, whatever differs first. */
function sameDigest(a: Buffer, b: Buffer): boolean {
  let diff = 0;
  for (let i = 0; i < 32; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}

const BEARER = /^Bearer\s+\S/i;
const BASIC = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i;

/** The key a request presents: Authorization: Bearer KEY (OpenAI SDKs, Codex, Ollama clients given
 *  a header), x-api-key: KEY (Anthropic SDK, Claude Code), or the password of HTTP Basic (a
 *  browser on the dashboard); undefined when it presents none. */
export function presentedKey(ctx: Context): string | undefined {
  const authorization = ctx.header('authorization');
  if (authorization) {
    if (BEARER.test(authorization)) return authorization.slice(7).trim();
    const basic = BASIC.exec(authorization);
    if (basic) {
      const pair = Buffer.from(basic[1], 'base64').toString('utf8');
      const colon = pair.indexOf(':');
      if (colon >= 0 && colon < pair.length - 1) return pair.slice(colon + 1);
    }
  }
  const key = ctx.header('x-api-key')?.trim();
  return key || undefined;
}
