// The gateway's API keys (the config's auth:): the entries of auth.keys_file joined to the inline
// ones, and every entry checked when the configuration loads — names unique, hashes unique,
// expiry dates readable, auth.admin naming keys that exist. A key itself is never stored, only
// its SHA-256: `gw keys new NAME` prints a fresh key once, with the entry that holds its hash.
// Nothing here ever puts a key or a hash in a message.
import { createHash, randomBytes } from 'node:crypto';
import type { Problem } from './schema.js';
import { readYaml } from './yaml-file.js';
import type { ConfigError } from './errors.js';

export interface ApiKeyConfig {
  name: string;
  hash: string;
  models?: string[];
  requests_per_minute: number;
  tokens_per_minute: number;
  tokens_per_day: number;
  tokens_per_month: number;
  /** Per model name or pattern: limits besides the key's own. */
  model_limits: Record<string, TokenLimitsConfig>;
  max_concurrent: number;
  expires?: string;
  enabled: boolean;
  labels: Record<string, string>;
}

export interface TokenLimitsConfig {
  tokens_per_minute: number;
  tokens_per_day: number;
  tokens_per_month: number;
}

export interface KeysConfig {
  keys: ApiKeyConfig[];
  keys_file?: string;
  admin: string[];
  usage_file?: string;
  reserve_output_tokens: number;
}

export const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** The entry's form of a key: its SHA-256 as sha256:<hex>. */
export const keyHash = (key: string): string => `sha256:${createHash('sha256').update(key).digest('hex')}`;

/** A fresh key: 192 random bits, url-safe, with a prefix that says what it is. */
export const newKey = (): string => `gw-${randomBytes(24).toString('base64url')}`;

/** When a key stops working (epoch ms): a date alone is the end of that day (UTC); NaN: unreadable. */
export function expiryOf(expires: string): number {
  if (/^\d{4}-\d{2}-\d{2}$/.test(expires)) return Date.parse(`${expires}T23:59:59.999Z`);
  return Date.parse(expires.replace(' ', 'T'));
}

/** What checking and filling {auth: {keys}} against the config's schema gave: its problems, and
 *  the keys with their defaults when none failed. */
export type KeysCheck = (wrapped: { auth: { keys: unknown } }) => { problems: Problem[]; keys?: ApiKeyConfig[] };

/** The keys of auth.keys_file (a YAML list of entries, or keys: [...]), checked as auth.keys is;
 *  its problems name the file. */
export function keysFromFile(file: string, check: KeysCheck): { keys: ApiKeyConfig[]; problems: Problem[] } {
  const field = `auth.keys_file (${file})`;
  let raw: unknown;
  try {
    raw = readYaml(file);
  } catch (err) {
    const e = err as ConfigError;
    return { keys: [], problems: [{ level: 'fail', field, message: e.problem ?? String(err), fix: e.fix || 'fix the keys file, or correct auth.keys_file' }] };
  }
  const list = Array.isArray(raw) ? raw : raw && typeof raw === 'object' && 'keys' in raw ? (raw as { keys: unknown }).keys : undefined;
  if (!Array.isArray(list)) {
    return {
      keys: [],
      problems: [
        {
          level: 'fail',
          field,
          message: 'the file must hold a list of key entries, or keys: followed by one',
          fix: 'write - { name: NAME, hash: "sha256:…" } entries (gw keys new NAME prints one)',
        },
      ],
    };
  }
  const { problems, keys } = check({ auth: { keys: list } });
  const renamed = problems.map((p) => ({ ...p, field: p.field.replace(/^auth\.keys/, field) }));
  return { keys: keys ?? [], problems: renamed };
}

/** What is wrong across the keys: names and hashes given twice, expiry dates that do not read,
 *  admin names that name no key. */
export function keysProblems(auth: KeysConfig): Problem[] {
  const problems: Problem[] = [];
  const names = new Map<string, number>();
  const hashes = new Map<string, string>();
  auth.keys.forEach((k, i) => {
    const field = `auth.keys[${i}]`;
    if (names.has(k.name))
      problems.push({ level: 'fail', field: `${field}.name`, message: `the name ${k.name} is given to two keys`, fix: 'give each key a name of its own' });
    names.set(k.name, i);
    const other = hashes.get(k.hash);
    if (other !== undefined)
      problems.push({
        level: 'fail',
        field: `${field}.hash`,
        message: `keys ${other} and ${k.name} have the same hash: they are one key`,
        fix: 'give each its own key (gw keys new NAME)',
      });
    hashes.set(k.hash, k.name);
    if (k.expires !== undefined && Number.isNaN(expiryOf(k.expires))) {
      problems.push({
        level: 'fail',
        field: `${field}.expires`,
        message: `${JSON.stringify(k.expires)} is not a date`,
        fix: 'write a date such as 2027-01-31, or a date and time such as 2027-01-31T12:00:00Z',
      });
    }
  });
  auth.admin.forEach((name, i) => {
    if (!names.has(name))
      problems.push({ level: 'warn', field: `auth.admin[${i}]`, message: `no key is named ${name}`, fix: 'name a key of auth.keys or auth.keys_file' });
  });
  if (auth.keys.length > 0 && auth.admin.length === 0) {
    problems.push({
      level: 'warn',
      field: 'auth.admin',
      message: 'keys are on and no key is an admin: the status routes, metrics and dashboard refuse every key',
      fix: 'list the names of the keys that may read them under auth.admin',
    });
  }
  return problems;
}
