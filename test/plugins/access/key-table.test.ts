// The key table: a key found by its hash alone, its models matched by name and * pattern, and the
// key a request presents read from each header clients use.
import { describe, expect, it } from 'vitest';
import { keyHash } from '../../../engine/core/keys.js';
import { createHooks } from '../../../engine/kernel/hooks.js';
import { KeyTable } from '../../../plugins/access/key-table.js';
import { stubContext } from '../../helpers/plugin.js';

const entry = (name: string, key: string, more: object = {}) => ({
  name,
  hash: keyHash(key),
  requests_per_minute: 0,
  tokens_per_minute: 0,
  tokens_per_day: 0,
  tokens_per_month: 0,
  model_limits: {},
  max_concurrent: 0,
  enabled: true,
  labels: {},
  ...more,
});

describe('the key table', () => {
  it('is null while no key is listed, and one table per loaded configuration', () => {
    expect(KeyTable.of({ keys: [], admin: [], reserve_output_tokens: 1024 })).toBeNull();
    const auth = { keys: [entry('a', 'k1')], admin: [], reserve_output_tokens: 1024 };
    expect(KeyTable.of(auth)).toBe(KeyTable.of(auth));
  });

  it('finds a key by what the client sent, and nothing else', () => {
    const table = KeyTable.of({ keys: [entry('a', 'k1'), entry('b', 'k2')], admin: ['b'], reserve_output_tokens: 1024 })!;
    expect(table.find('k1')).toMatchObject({ name: 'a', admin: false, everyModel: true });
    expect(table.find('k2')).toMatchObject({ name: 'b', admin: true });
    for (const wrong of ['k3', '', 'k1 ', keyHash('k1')]) expect(table.find(wrong)).toBeUndefined();
  });

  it('matches models by name and by * pattern, nothing else being special', () => {
    const key = KeyTable.of({ keys: [entry('a', 'k1', { models: ['exact', 'llama3*', '*/coder', 'a.b'] })], admin: [], reserve_output_tokens: 1024 })!.find(
      'k1',
    )!;
    expect(key.everyModel).toBe(false);
    for (const yes of ['exact', 'llama3', 'llama3.1:8b', 'org/coder', 'a.b']) expect(key.allows(yes), yes).toBe(true);
    for (const no of ['exactly', 'xllama3', 'org/coder-2', 'aXb', '']) expect(key.allows(no), no).toBe(false);
  });
});

describe('a key found again', () => {
  const ctx = (headers: Record<string, string>) => stubContext(createHooks(), { headers }).ctx;
  it('is the same key, by the full text of the header that presented it only; a new table (a reload) remembers nothing', () => {
    const auth = { keys: [entry('a', 'gw-key-0001'), entry('b', 'gw-key-0002')], admin: [], reserve_output_tokens: 1024 };
    const table = KeyTable.of(auth)!;
    const a = table.keyOf(ctx({ authorization: 'Bearer gw-key-0001' }));
    expect(a?.name).toBe('a');
    for (let i = 0; i < 3; i++) expect(table.keyOf(ctx({ authorization: 'Bearer gw-key-0001' }))).toBe(a);
    expect(table.keyOf(ctx({ 'x-api-key': 'gw-key-0001' }))).toBe(a);
    for (const near of ['gw-key-0003', 'gw-key-000', 'gw-key-00011', 'GW-KEY-0001']) {
      expect(table.keyOf(ctx({ authorization: `Bearer ${near}` })), near).toBeNull();
      expect(table.keyOf(ctx({ 'x-api-key': near })), near).toBeNull();
    }
    // A remembered x-api-key value is not an Authorization value, nor the other way round.
    expect(table.keyOf(ctx({ authorization: 'gw-key-0001' }))).toBeUndefined();
    expect(table.keyOf(ctx({ 'x-api-key': 'Bearer gw-key-0001' }))).toBeNull();
    // An Authorization header that presents nothing leaves the choice to x-api-key, every time.
    for (let i = 0; i < 2; i++) expect(table.keyOf(ctx({ authorization: 'Token x', 'x-api-key': 'gw-key-0002' }))?.name).toBe('b');
    expect(table.keyOf(ctx({ authorization: 'Token x', 'x-api-key': 'gw-key-0001' }))?.name).toBe('a');
    expect(table.keyOf(ctx({}))).toBeUndefined();
    const revoked = KeyTable.of({ ...auth, keys: [entry('b', 'gw-key-0002')] })!;
    expect(revoked.keyOf(ctx({ authorization: 'Bearer gw-key-0001' }))).toBeNull();
    expect(revoked.find('gw-key-0001')).toBeUndefined();
  });
});

describe('the key a request presents', () => {
  const ctx = (headers: Record<string, string>) => stubContext(createHooks(), { headers }).ctx;
  const table = KeyTable.of({ keys: [entry('bearer', 'k1'), entry('basic', 'k:1'), entry('api', 'k2')], admin: [], reserve_output_tokens: 1024 })!;
  const nameOf = (headers: Record<string, string>) => table.keyOf(ctx(headers))?.name;
  it("from Authorization: Bearer, HTTP Basic's password, or x-api-key", () => {
    expect(nameOf({ authorization: 'Bearer k1' })).toBe('bearer');
    expect(nameOf({ authorization: `Basic ${Buffer.from('user:k:1').toString('base64')}` })).toBe('basic');
    expect(nameOf({ 'x-api-key': ' k2 ' })).toBe('api');
    expect(nameOf({ authorization: 'Bearer k1', 'x-api-key': 'k2' })).toBe('bearer');
    const nones: Record<string, string>[] = [
      {},
      { authorization: 'Bearer ' },
      { authorization: `Basic ${Buffer.from('user:').toString('base64')}` },
      { 'x-api-key': ' ' },
    ];
    for (const none of nones) expect(table.keyOf(ctx(none))).toBeUndefined();
  });
});
