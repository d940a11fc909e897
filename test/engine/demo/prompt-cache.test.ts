// The radixengine fake's simulated prefix cache stays bounded in a long `gw demo` run: the
// least recently used prompt goes first; a hit makes a prompt recent again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { PromptCache } from '../../../engine/demo/prompt-cache.js';

describe('PromptCache', () => {
  it('forgets the least recently used prompt past its limit', () => {
    const cache = new PromptCache(2);
    expect([cache.seen('a'), cache.seen('b'), cache.seen('a')]).toEqual([false, false, true]);
    cache.seen('c'); // b is the least recent now
    expect(cache.size).toBe(2);
    expect([cache.seen('a'), cache.seen('b')]).toEqual([true, false]);
  });
});

describe('the radixengine fake', () => {
  let fake: FakeBackend;
  beforeAll(async () => {
    fake = await new FakeBackend({ family: 'radixengine' }).start();
  });
  afterAll(() => fake.stop());

  const generate = async (text: string) => {
    const res = await request(`${fake.url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text }) });
    return ((await res.body.json()) as { meta: { radix_cache_hit: boolean } }).meta.radix_cache_hit;
  };

  it(`remembers at most ${new PromptCache().limit} prompts however many it serves`, async () => {
    const limit = fake.promptCache.limit;
    expect(limit).toBe(1000);
    for (let i = 0; i <= limit; i++) expect(await generate(`prompt ${i}`)).toBe(false);
    expect(fake.promptCache.size).toBe(limit);
    expect(await generate(`prompt ${limit}`)).toBe(true);
    expect(await generate('prompt 0')).toBe(false); // the oldest was forgotten
  });
});
