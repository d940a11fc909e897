// The nesting bound msgapi-parse applies: found without parsing, brackets inside strings (escaped
// quotes and backslashes included) not counted, agreeing with the depth of the parsed value.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nestsDeeperThan } from '../../../plugins/lib/json-depth.js';

/** Arrays and objects count one level each; scalars none. */
function depthOf(v: unknown): number {
  if (typeof v !== 'object' || v === null) return 0;
  const children = Array.isArray(v) ? v : Object.values(v);
  return 1 + children.reduce<number>((m, c) => Math.max(m, depthOf(c)), 0);
}

const deeper = (text: string, max: number) => nestsDeeperThan(Buffer.from(text), max);

describe('nestsDeeperThan', () => {
  it('counts arrays and objects, not brackets in strings', () => {
    expect(deeper('{"a":[[1]]}', 3)).toBe(false);
    expect(deeper('{"a":[[1]]}', 2)).toBe(true);
    expect(deeper('{"a":"[[[[{{{{"}', 1)).toBe(false);
    expect(deeper('{"a":"\\"[[[[\\""}', 1)).toBe(false);
    // An escaped backslash ends the string; the bracket after it counts.
    expect(deeper('{"a":"\\\\",  "b":[[1]]}', 2)).toBe(true);
    expect(deeper('[{"k\\\\\\"[": ["x"]}]', 3)).toBe(false);
    expect(deeper('[{"k\\\\\\"[": ["x"]}]', 2)).toBe(true);
  });

  it('answers for a text that is not JSON without looping (the parser judges it)', () => {
    expect(deeper('{"unterminated', 1)).toBe(false);
    expect(deeper(']]]]', 1)).toBe(false);
  });

  it('agrees with the depth of the parsed value', () => {
    const text = fc.string({ unit: fc.constantFrom('a', '"', '\\', '[', ']', '{', '}', 'é', '\n') });
    const value = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small' },
        text,
        fc.integer(),
        fc.constant(null),
        fc.array(tie('node'), { maxLength: 3 }),
        fc.dictionary(text, tie('node'), { maxKeys: 3 }),
      ),
    })).node;
    fc.assert(
      fc.property(value, fc.integer({ min: 0, max: 8 }), fc.boolean(), (v, max, pretty) => {
        const json = JSON.stringify(v, null, pretty ? 2 : undefined);
        expect(deeper(json, max)).toBe(depthOf(v) > max);
      }),
      { numRuns: 500 },
    );
  });
});
