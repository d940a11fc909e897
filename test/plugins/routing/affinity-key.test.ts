// A request's conversation key: the session header first, else the conversation's opening in
// every API's shape; only text counts, so what moves between turns (cache_control, later turns,
// sampling fields) leaves the key as it was.
import { describe, expect, it } from 'vitest';
import { affinityKeys, openingOf } from '../../../plugins/routing/affinity-key.js';
import type { Context } from '../../../engine/kernel/context.js';

const ctxOf = (body: unknown, headers: Record<string, string> = {}) =>
  ({ req: { rawHeaders: Object.entries(headers).flat() }, bodyJson: () => body }) as unknown as Context;
const keyOf = affinityKeys(['x-gw-session-id', 'x-claude-code-session-id']);
const same = (a: unknown, b: unknown, model = 'm') => {
  const x = keyOf(ctxOf(a), model)!;
  const y = keyOf(ctxOf(b), model)!;
  return x.hi === y.hi && x.lo === y.lo;
};

describe('the conversation opening', () => {
  it('chat completions: leading system and developer messages, then the first user message', () => {
    expect(
      openingOf({
        messages: [
          { role: 'system', content: 'S' },
          { role: 'developer', content: 'D' },
          { role: 'user', content: 'U1' },
          { role: 'assistant', content: 'A' },
          { role: 'user', content: 'U2' },
        ],
      }),
    ).toEqual(['SD', 'U1']);
  });
  it("messages API: system (text or blocks) and the first user message's text blocks", () => {
    expect(
      openingOf({
        system: [{ type: 'text', text: 'S', cache_control: { type: 'ephemeral' } }],
        messages: [{ role: 'user', content: [{ type: 'text', text: 'U' }] }],
      }),
    ).toEqual(['S', 'U']);
  });
  it('Responses API: instructions and input, text or items', () => {
    expect(openingOf({ instructions: 'I', input: 'U' })).toEqual(['I', 'U']);
    expect(openingOf({ input: [{ role: 'user', content: [{ type: 'input_text', text: 'U' }] }] })).toEqual(['', 'U']);
  });
  it('prompts: the beginning only (a growing prompt keeps it)', () => {
    const turn1 = 'p'.repeat(600);
    expect(openingOf({ prompt: turn1 })).toEqual(openingOf({ prompt: `${turn1} and the next turn` }));
    expect(openingOf({ system: 'S', prompt: 'Why?' })).toEqual(['S', 'Why?']);
  });
  it('a hostile body nested without end is read one level down, never deeper', () => {
    let content: unknown = 'deep';
    for (let i = 0; i < 100_000; i++) content = [{ type: 'tool_result', content }];
    expect(openingOf({ messages: [{ role: 'user', content }] })).toBeUndefined();
    expect(openingOf({ messages: [{ role: 'user', content: [{ type: 'tool_result', content: [{ type: 'text', text: 'ok' }] }] }] })).toEqual(['', 'ok']);
  });
  it('nothing to key on: undefined', () => {
    expect(openingOf({ model: 'm' })).toBeUndefined();
    expect(openingOf('text')).toBeUndefined();
    expect(openingOf([1, 2])).toBeUndefined();
    expect(openingOf({ messages: 'no' })).toBeUndefined();
  });
});

describe('the key', () => {
  const turn1 = {
    system: [{ type: 'text', text: 'You are terse.' }],
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi', cache_control: { type: 'ephemeral' } }] }],
    max_tokens: 100,
  };
  const turn2 = {
    max_tokens: 200,
    temperature: 0.2,
    system: [{ type: 'text', text: 'You are terse.', cache_control: { type: 'ephemeral' } }],
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'Hi' }] },
      { role: 'assistant', content: 'Hello' },
      { role: 'user', content: [{ type: 'text', text: 'More', cache_control: { type: 'ephemeral' } }] },
    ],
  };
  it('is the same on every turn of a conversation', () => expect(same(turn1, turn2)).toBe(true));
  it('differs between conversations and between models', () => {
    expect(same(turn1, { ...turn1, messages: [{ role: 'user', content: 'Bye' }] })).toBe(false);
    const a = keyOf(ctxOf(turn1), 'one')!;
    const b = keyOf(ctxOf(turn1), 'two')!;
    expect([a.hi, a.lo]).not.toEqual([b.hi, b.lo]);
  });
  it('a session header wins, the first listed present, whatever the body', () => {
    const k = keyOf(ctxOf(turn1, { 'X-Claude-Code-Session-Id': 'abc', 'X-Gw-Session-ID': 's1' }), 'm')!;
    expect(k.source).toBe('x-gw-session-id');
    const j = keyOf(ctxOf({ messages: [{ role: 'user', content: 'other' }] }, { 'x-gw-session-id': 's1' }), 'm')!;
    expect([j.hi, j.lo]).toEqual([k.hi, k.lo]);
    expect(keyOf(ctxOf(turn1), 'm')!.source).toBe('conversation');
  });
  it('none for a body without an opening', () => expect(keyOf(ctxOf({ model: 'm' }), 'm')).toBeNull());
});
