// The API keys of a configuration (auth:), compiled once per loaded configuration and shared by
// every route: a presented key is found by its SHA-256, the digests compared in constant time,
// and remembered for its next requests by the header that presented it; each key knows its
// models (names, aliases and * patterns, compiled once) and whether it is an admin. Nothing here
// logs or returns a key or a hash.
import { hash } from 'node:crypto';
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
  /** Keys found lately, by the header value that presented them (Authorization, x-api-key). */
  private readonly byAuthorization = new Map<string, Key>();
  private readonly byApiKey = new Map<string, Key>();

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

  /** The key a request presents — Authorization: Bearer KEY (OpenAI SDKs, Codex, Ollama clients
   *  given a header), the password of HTTP Basic (a browser on the dashboard), else x-api-key
   *  (Anthropic SDK, Claude Code) — undefined when it presents none, null when the one it presents
   *  is not listed. A key found is remembered by the header value that presented it, for its next
   *  requests (a SHA-256 and the header's parsing per request are a third of what keys cost).
   *  Remembered in a Map: V8 hashes a string with a seed chosen at random per process and compares
   *  the text only when the whole hash matches, so how long a lookup takes says nothing of how
   *  much of a wrong key was right. A reload makes a new table: a revoked key is never found here. */
  keyOf(ctx: Context): Key | null | undefined {
    const authorization = ctx.header('authorization');
    if (authorization !== undefined) {
      const presented = this.byAuthorization.get(authorization) ?? fromAuthorization(authorization);
      if (presented !== undefined) return this.remembered(this.byAuthorization, authorization, presented);
    }
    const apiKey = ctx.header('x-api-key');
    if (apiKey === undefined) return undefined;
    const presented = this.byApiKey.get(apiKey) ?? (apiKey.trim() || undefined);
    return presented === undefined ? undefined : this.remembered(this.byApiKey, apiKey, presented);
  }

  /** The key presented (or already found) under a header's value, remembered under it. */
  private remembered(recent: Map<string, Key>, value: string, presented: string | Key): Key | null {
    if (presented instanceof Key) return presented;
    const key = this.find(presented);
    if (key === undefined) return null;
    if (recent.size >= RECENT_MAX) recent.clear();
    recent.set(value, key);
    return key;
  }

  /** The key whose hash is this key's, if any: the digests compared in constant time. */
  find(presented: string): Key | undefined {
    const digest = hash('sha256', presented, 'buffer');
    const list = this.byPrefix.get(digest.readUInt32BE(0));
    if (list) for (const key of list) if (sameDigest(digest, key.digest)) return key;
    return undefined;
  }
}

/** Keys remembered at most, per header (those of the clients of the last while). */
const RECENT_MAX = 1024;

/** Two SHA-256 digests compared in constant time: every byte, whatever differs first. */
function sameDigest(a: Buffer, b: Buffer): boolean {
  let diff = 0;
  for (let i = 0; i < 32; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}

const BEARER = /^Bearer\s+\S/i;
const BASIC = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i;

/** The key an Authorization header presents (Bearer, or the password of Basic), if it does. */
function fromAuthorization(authorization: string): string | undefined {
  if (BEARER.test(authorization)) return authorization.slice(7).trim();
  const basic = BASIC.exec(authorization);
  if (!basic) return undefined;
  const pair = Buffer.from(basic[1], 'base64').toString('utf8');
  const colon = pair.indexOf(':');
  return colon >= 0 && colon < pair.length - 1 ? pair.slice(colon + 1) : undefined;
}
