// The usage event the gateway asked for on a client's behalf is taken out of the client's stream
// again: only that event (empty choices and a usage object), wherever it sits in a chunk, with
// either line ending; everything else passes byte for byte.
import { describe, expect, it } from 'vitest';
import type { PipePlan } from '../../../engine/api.js';
import { dropUsageEvent } from '../../../plugins/apis/stream-usage.js';

const filter = dropUsageEvent({ kind: 'pipe' } as PipePlan).filter!;
const out = (text: string) => filter(Buffer.from(text)).toString();

const chunk = (content: string) => `data: {"choices":[{"index":0,"delta":{"content":"${content}"}}],"usage":null}\n\n`;
const USAGE = 'data: {"id":"c","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3}}\n\n';
const DONE = 'data: [DONE]\n\n';

describe('the usage event asked for is left out of the client stream', () => {
  it('alone, before [DONE], between events, last in a chunk', () => {
    expect(out(USAGE)).toBe('');
    expect(out(USAGE + DONE)).toBe(DONE);
    expect(out(chunk('a') + USAGE + DONE)).toBe(chunk('a') + DONE);
    expect(out(chunk('a') + chunk('b') + USAGE)).toBe(chunk('a') + chunk('b'));
  });

  it('with CRLF line endings', () => {
    const crlf = (s: string) => s.replaceAll('\n', '\r\n');
    expect(out(crlf(chunk('a') + USAGE + DONE))).toBe(crlf(chunk('a') + DONE));
  });

  it('keeps everything else: content with "usage": null, an empty-choices event without usage, a usage word in text', () => {
    const filterResults = 'data: {"choices":[],"prompt_filter_results":[],"usage":null}\n\n';
    const words = 'data: {"choices":[{"delta":{"content":"\\"usage\\": {} and \\"choices\\": []"}}]}\n\n';
    for (const text of [chunk('a') + chunk('b'), filterResults + chunk('a'), words + DONE]) {
      const bytes = Buffer.from(text);
      expect(filter(bytes)).toBe(bytes);
    }
  });
});
