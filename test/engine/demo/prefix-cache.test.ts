// The fakes' simulated prefix cache: a conversation's next turn finds its history cached (the
// prompt and the reply of the turn before), an unrelated one does not, the cache stays bounded,
// and each family reports it the way its engine does.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { PrefixCache, type Prefill } from '../../../engine/demo/prefix-cache.js';

const post = async (fake: FakeBackend, path: string, body: object) => {
  const res = await request(`${fake.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.statusCode, text: await res.body.text() };
};
/** Text of `chars` characters, distinct per seed from its first word. */
const prose = (seed: string, chars: number) => `${seed}: ${'the quick brown fox jumps over the lazy dog. '.repeat(Math.ceil(chars / 45))}`.slice(0, chars);
/** SSE data lines as objects (the [DONE] line left out). */
const events = (text: string) =>
  text
    .split('\n')
    .filter((l) => l.startsWith('data: {'))
    .map((l) => JSON.parse(l.slice(6)));

describe('PrefixCache', () => {
  it('finds the longest shared prefix in whole tokens and leaves at least one token to evaluate', () => {
    const cache = new PrefixCache(100);
    expect(cache.lookup('abcdefgh')).toEqual({ cached: 0, evaluated: 2 });
    cache.add('abcdefgh');
    expect(cache.lookup('abcdefXY')).toEqual({ cached: 1, evaluated: 1 });
    expect(cache.lookup('abcdefgh')).toEqual({ cached: 1, evaluated: 1 });
    expect(cache.lookup('abcdefghijkl')).toEqual({ cached: 2, evaluated: 1 });
  });

  it('keeps at most its capacity in tokens, the least recently used out first; an extended sequence replaces its prefix', () => {
    const cache = new PrefixCache(10);
    cache.add('a'.repeat(16)); // 4 tokens
    cache.add('b'.repeat(16));
    cache.lookup('a'.repeat(16)); // a is the most recent now
    cache.add('c'.repeat(16)); // 12 tokens: b goes
    expect(cache.tokens).toBe(8);
    expect(cache.lookup('b'.repeat(16)).cached).toBe(0);
    cache.add('a'.repeat(24)); // replaces the 16 a's
    expect(cache.tokens).toBe(10);
    expect(cache.lookup('a'.repeat(24)).cached).toBe(5);
  });
});

describe('a conversation on the cppengine fake', () => {
  let fake: FakeBackend;
  beforeAll(async () => {
    fake = await new FakeBackend({ family: 'cppengine', reply: 'Sure, here is a short answer for you.' }).start();
  });
  afterAll(() => fake.stop());

  const opening = [
    { role: 'system', content: prose('conversation one', 8000) },
    { role: 'user', content: 'First question?' },
  ];

  it('reports nothing cached on the first turn and all but the new message on the second', async () => {
    const first = JSON.parse((await post(fake, '/v1/chat/completions', { model: 'test-model', messages: opening })).text);
    expect(first.timings.cache_n).toBe(0);
    expect(first.timings.prompt_n).toBeGreaterThan(2000);
    expect(first.usage).toMatchObject({ prompt_tokens: first.timings.prompt_n, prompt_tokens_details: { cached_tokens: 0 } });
    expect(fake.lastPrefill).toEqual({ cached: 0, evaluated: first.timings.prompt_n });

    const next = [...opening, { role: 'assistant', content: first.choices[0].message.content }, { role: 'user', content: 'And a second one?' }];
    const stream = events((await post(fake, '/v1/chat/completions', { model: 'test-model', messages: next, stream: true })).text);
    const last = stream.at(-1);
    expect(last.choices[0].finish_reason).toBe('stop');
    expect(last.timings.cache_n).toBeGreaterThan(2000);
    expect(last.timings.prompt_n).toBeLessThan(12); // the new message and its role marker
    expect(fake.lastPrefill).toEqual({ cached: last.timings.cache_n, evaluated: last.timings.prompt_n });
    expect(stream.slice(0, -1).every((e) => e.timings === undefined)).toBe(true);
  });

  it("finds nothing of an unrelated conversation beyond the chat template's opening marker", async () => {
    const other = [
      { role: 'system', content: prose('a different one', 8000) },
      { role: 'user', content: 'First question?' },
    ];
    const reply = JSON.parse((await post(fake, '/v1/chat/completions', { model: 'test-model', messages: other })).text);
    expect(reply.timings.cache_n).toBeLessThanOrEqual(3);
  });

  it('puts timings on the usage chunk when the stream asks for usage', async () => {
    const stream = events(
      (await post(fake, '/v1/chat/completions', { model: 'test-model', messages: opening, stream: true, stream_options: { include_usage: true } })).text,
    );
    const [finish, usage] = stream.slice(-2);
    expect(finish.timings).toBeUndefined();
    expect(usage.usage.prompt_tokens_details.cached_tokens).toBe(usage.timings.cache_n);
    expect(usage.timings.cache_n).toBeGreaterThan(2000);
  });
});

/** Each family's route, and what its reply says of the prompt: the tokens found cached (Ollama:
 *  the tokens it evaluated, prompt_eval_count). */
const ROUTES: {
  family: string;
  path: string;
  body: (messages: object[]) => object;
  reported: (reply: any) => number;
  expected: (p: Prefill) => number;
  replyText: (reply: any) => string;
}[] = [
  {
    family: 'pagedengine',
    path: '/v1/chat/completions',
    body: (messages) => ({ model: 'test-model', messages }),
    reported: (r) => r.usage.prompt_tokens_details.cached_tokens,
    expected: (p) => p.cached,
    replyText: (r) => r.choices[0].message.content,
  },
  {
    family: 'radixengine',
    path: '/v1/chat/completions',
    body: (messages) => ({ model: 'test-model', messages }),
    reported: (r) => r.usage.prompt_tokens_details.cached_tokens,
    expected: (p) => p.cached,
    replyText: (r) => r.choices[0].message.content,
  },
  {
    family: 'cppengine',
    path: '/v1/messages',
    body: (messages) => ({ model: 'test-model', max_tokens: 64, system: 'Be brief.', messages }),
    reported: (r) => r.usage.cache_read_input_tokens,
    expected: (p) => p.cached,
    replyText: (r) => r.content[0].text,
  },
  {
    family: 'localrunner',
    path: '/api/chat',
    body: (messages) => ({ model: 'test-model', messages, stream: false }),
    reported: (r) => r.prompt_eval_count,
    expected: (p) => p.evaluated,
    replyText: (r) => r.message.content,
  },
];

describe.each(ROUTES)('$family $path', ({ family, path, body, reported, expected, replyText }) => {
  let fake: FakeBackend;
  beforeAll(async () => {
    fake = await new FakeBackend({ family }).start();
  });
  afterAll(() => fake.stop());

  it("finds the history of a conversation's second turn cached, and says so", async () => {
    const history: object[] = [{ role: 'user', content: prose(family, 4000) }];
    const first = JSON.parse((await post(fake, path, body(history))).text);
    expect(fake.lastPrefill!.cached).toBe(0);
    expect(reported(first)).toBe(expected(fake.lastPrefill!));
    history.push({ role: 'assistant', content: replyText(first) }, { role: 'user', content: 'more' });
    const second = JSON.parse((await post(fake, path, body(history))).text);
    const p = fake.lastPrefill!;
    expect(p.cached).toBeGreaterThan(0.95 * (p.cached + p.evaluated));
    expect(reported(second)).toBe(expected(p));
  });
});

describe('prompt routes', () => {
  let fake: FakeBackend;
  beforeAll(async () => {
    fake = await new FakeBackend({ family: 'cppengine', reply: 'and then the end.' }).start();
  });
  afterAll(() => fake.stop());

  it('/completion reports the prompt and reply of the last call as cached', async () => {
    const prompt = prose('once upon a time', 2000);
    const first = JSON.parse((await post(fake, '/completion', { prompt })).text);
    expect(first.timings).toMatchObject({ cache_n: 0, prompt_n: 500 });
    expect(first.tokens_evaluated).toBe(500);
    const second = events((await post(fake, '/completion', { prompt: `${prompt}${first.content} More`, stream: true })).text).at(-1);
    expect(second.stop).toBe(true);
    expect(second.timings.cache_n).toBe(Math.floor((prompt.length + first.content.length) / 4));
    expect(second.timings.prompt_n).toBeLessThanOrEqual(3);
  });
});

describe('the bound and the prefill delay', () => {
  let fake: FakeBackend;
  beforeAll(async () => {
    fake = await new FakeBackend({ family: 'cppengine', cacheTokens: 1000 }).start();
  });
  afterAll(() => fake.stop());
  const chat = (seed: string) => post(fake, '/v1/chat/completions', { model: 'test-model', messages: [{ role: 'system', content: prose(seed, 2400) }] });

  it('forgets the least recently used conversation past its capacity', async () => {
    await chat('A conversation'); // about 610 tokens with its reply
    await chat('A conversation');
    expect(fake.lastPrefill!.cached).toBeGreaterThan(590);
    await chat('B conversation'); // A and B do not fit together
    expect(fake.prefixCache.tokens).toBeLessThanOrEqual(1000);
    await chat('A conversation');
    expect(fake.lastPrefill!.cached).toBeLessThanOrEqual(3);
  });

  it('waits prefillMsPerToken for each token not cached before the head, and reports that time', async () => {
    fake.reset();
    fake.behaviour.prefillMsPerToken = 0.05;
    const started = performance.now();
    const first = JSON.parse((await chat('delayed')).text);
    const took = performance.now() - started;
    expect(first.timings.prompt_n).toBeGreaterThan(590);
    expect(first.timings.prompt_ms).toBeCloseTo(first.timings.prompt_n * 0.05, 6);
    // A lower bound only, which a slow machine cannot break (timers fire early by at most the
    // event loop clock's millisecond rounding).
    expect(took).toBeGreaterThanOrEqual(first.timings.prompt_ms - 2);
    const again = JSON.parse((await chat('delayed')).text);
    expect(again.timings.prompt_n).toBe(1);
    expect(again.timings.prompt_ms).toBeCloseTo(0.05, 6);
  });
});
