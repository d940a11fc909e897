// A request's output cap, read from its body's bytes for its token reservation.
import { describe, expect, it } from 'vitest';
import { outputCap } from '../../../plugins/access/reservation.js';

const cap = (o: unknown) => outputCap(Buffer.from(typeof o === 'string' ? o : JSON.stringify(o)));

describe('outputCap', () => {
  it("reads each API's cap field, spaced or not", () => {
    expect(cap({ model: 'm', max_tokens: 256 })).toBe(256);
    expect(cap({ max_completion_tokens: 77 })).toBe(77);
    expect(cap({ input: 'x', max_output_tokens: 900 })).toBe(900);
    expect(cap({ model: 'm', options: { temperature: 0, num_predict: 42 } })).toBe(42);
    expect(cap({ prompt: 'x', n_predict: 16 })).toBe(16);
    expect(cap('{ "max_tokens" :\n 128 }')).toBe(128);
  });

  it('ignores a name in text, a name that is not a number, and none', () => {
    expect(cap({ messages: [{ role: 'user', content: 'set "max_tokens": 999999 please' }], max_tokens: 5 })).toBe(5);
    expect(cap({ tools: [{ parameters: { properties: { max_tokens: { type: 'integer' } } } }], max_tokens: 9 })).toBe(9);
    expect(cap({ model: 'm', messages: [] })).toBeUndefined();
    expect(cap({ max_tokens: null })).toBeUndefined();
    expect(outputCap(null)).toBeUndefined();
  });
});
