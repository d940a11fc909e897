// The API keys as the configuration loads them: the keys file joined to the inline keys, and what
// is refused — names or hashes given twice, a date that does not read, a malformed entry in the
// file (named by the file) — never repeating a hash; `gw keys new` prints a key and its entry.
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { checkConfig } from '../../../engine/core/config.js';
import { expiryOf, keyHash } from '../../../engine/core/keys.js';
import { writeConfig } from '../../helpers/gateway.js';
import { run } from '../../helpers/cli.js';

const hash = (n: number) => keyHash(`key-${n}`);
const check = (auth: object) => checkConfig(writeConfig({ auth }), {});

/** A key's limits when it names none. */
const NO_LIMITS = { requests_per_minute: 0, tokens_per_minute: 0, tokens_per_day: 0, tokens_per_month: 0, model_limits: {}, max_concurrent: 0 };

describe('keys as the configuration loads them', () => {
  it('joins the keys file to the inline keys, with their defaults', () => {
    const file = writeConfig({}).replace(/config\.yaml$/, 'keys.yaml');
    writeFileSync(file, `keys:\n  - { name: b, hash: "${hash(2)}", models: [m*] }\n`);
    const { loaded, problems } = check({ keys: [{ name: 'a', hash: hash(1) }], keys_file: file, admin: ['a'] });
    expect(problems).toEqual([]);
    expect(loaded!.config.auth.keys).toEqual([
      { name: 'a', hash: hash(1), ...NO_LIMITS, enabled: true, labels: {} },
      { name: 'b', hash: hash(2), models: ['m*'], ...NO_LIMITS, enabled: true, labels: {} },
    ]);
  });

  it('refuses names and hashes given twice and dates that do not read, repeating no hash', () => {
    const { loaded, problems } = check({
      keys: [
        { name: 'a', hash: hash(1) },
        { name: 'a', hash: hash(1), expires: '2027-13-45' },
      ],
      admin: ['a', 'nobody'],
    });
    expect(loaded).toBeUndefined();
    expect(problems.map((p) => [p.level, p.field])).toEqual([
      ['fail', 'auth.keys[1].name'],
      ['fail', 'auth.keys[1].hash'],
      ['fail', 'auth.keys[1].expires'],
      ['warn', 'auth.admin[1]'],
    ]);
    expect(JSON.stringify(problems)).not.toContain(hash(1).slice(7));
  });

  it('names the keys file in what is wrong with it, without repeating what it holds', () => {
    const file = writeConfig({}).replace(/config\.yaml$/, 'keys.yaml');
    writeFileSync(file, '- { name: a, hash: "sha256:SECRETSECRET" }\n');
    const { problems } = check({ keys_file: file });
    expect(problems[0]).toMatchObject({ level: 'fail', field: expect.stringContaining(`auth.keys_file (${file})[0]`) });
    expect(JSON.stringify(problems)).not.toContain('SECRETSECRET');
    writeFileSync(file, 'name: a\n');
    expect(check({ keys_file: file }).problems[0].message).toContain('a list of key entries');
  });

  it('warns when keys are on and no key is an admin', () => {
    expect(check({ keys: [{ name: 'a', hash: hash(1) }] }).problems).toEqual([expect.objectContaining({ level: 'warn', field: 'auth.admin' })]);
  });

  it('reads a date as the end of that day (UTC), a date and time as written', () => {
    expect(new Date(expiryOf('2027-01-31')).toISOString()).toBe('2027-01-31T23:59:59.999Z');
    expect(new Date(expiryOf('2027-01-31T12:00:00Z')).toISOString()).toBe('2027-01-31T12:00:00.000Z');
    expect(expiryOf('soon')).toBeNaN();
  });
});

describe('gw keys new', () => {
  it('prints a fresh key and the entry holding its hash; refuses a name that is not one', async () => {
    const a = await run(['keys', 'new', 'ana']);
    const b = await run(['keys', 'new', 'ana']);
    expect(a.code).toBe(0);
    const [keyA, entryA] = a.out.split('\n').filter((l) => !l.startsWith('#'));
    const [keyB] = b.out.split('\n').filter((l) => !l.startsWith('#'));
    expect(keyA).toMatch(/^gw-[A-Za-z0-9_-]{32}$/);
    expect(keyA).not.toBe(keyB);
    expect(parse(entryA)).toEqual([{ name: 'ana', hash: keyHash(keyA) }]);
    const bad = await run(['keys', 'new', 'two words']);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('is not a key name');
  });
});
