// Property: whatever a client sends as a Responses request — any JSON, items of any shape — the
// translation either names what it cannot read (a 400) or builds a chat request, never throws;
// and whatever a chat-completions backend streams back, the translated stream keeps the API's
// order and numbering. fast-check prints the seed and the shrunk counterexample on failure;
// FC_SEED and FC_RUNS replay or widen a run.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { estimateInputTokens, inputItems, requestProblem, toChatRequest } from '../../../plugins/apis/responses/request.js';
import { shellOf } from '../../../plugins/apis/responses/response.js';
import { ResponsesStreamTranslator } from '../../../plugins/apis/responses/stream.js';
import type { ResponsesRequest } from '../../../plugins/apis/responses/types.js';

const RUNS = Number(process.env.FC_RUNS ?? 500);
const SEED = process.env.FC_SEED === undefined ? undefined : Number(process.env.FC_SEED);
const params = { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: SEED }) };

const scalar = fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.boolean(), fc.constant(null));
const part = fc.oneof(
  fc.record(
    {
      type: fc.constantFrom('input_text', 'output_text', 'input_image', 'input_file', 'refusal', 'x'),
      text: fc.option(scalar),
      image_url: fc.option(scalar),
      refusal: fc.option(scalar),
    },
    { requiredKeys: ['type'] },
  ),
  scalar,
);
const item = fc.oneof(
  fc.record(
    {
      type: fc.option(fc.constantFrom('message', 'x')),
      role: fc.constantFrom('user', 'assistant', 'system', 'developer', 'robot'),
      content: fc.oneof(fc.string(), fc.array(part, { maxLength: 3 }), scalar),
    },
    { requiredKeys: ['role'] },
  ),
  fc.record({ type: fc.constant('function_call'), call_id: scalar, name: scalar, arguments: scalar }),
  fc.record({ type: fc.constant('function_call_output'), call_id: scalar, output: fc.oneof(fc.string(), fc.array(part, { maxLength: 2 }), scalar) }),
  fc.record({
    type: fc.constant('reasoning'),
    content: fc.option(fc.oneof(fc.array(part, { maxLength: 2 }), scalar)),
    summary: fc.option(fc.oneof(fc.array(part, { maxLength: 2 }), scalar)),
    encrypted_content: fc.option(scalar),
  }),
  fc.record({ type: fc.constantFrom('item_reference', 'web_search_call') }),
  scalar,
);
const request = fc.record(
  {
    model: fc.constant('m'),
    input: fc.option(fc.oneof(fc.string(), fc.array(item, { maxLength: 6 }), scalar)),
    instructions: fc.option(scalar),
    tools: fc.option(
      fc.oneof(
        fc.array(
          fc.oneof(fc.record({ type: fc.constantFrom('function', 'web_search'), name: fc.option(scalar), parameters: fc.option(fc.object()) }), scalar),
          { maxLength: 3 },
        ),
        scalar,
      ),
    ),
    tool_choice: fc.option(fc.oneof(fc.constantFrom('auto', 'none', 'required'), fc.record({ type: fc.constant('function'), name: scalar }), scalar)),
    text: fc.option(
      fc.oneof(
        fc.record({
          format: fc.oneof(
            fc.record({ type: fc.constantFrom('json_schema', 'json_object', 'text'), schema: fc.option(fc.object()), name: fc.option(scalar) }),
            scalar,
          ),
        }),
        scalar,
      ),
    ),
    reasoning: fc.option(fc.oneof(fc.record({ effort: fc.option(scalar), summary: fc.option(scalar) }), scalar)),
    max_output_tokens: fc.option(scalar),
    previous_response_id: fc.option(scalar),
  },
  { requiredKeys: ['model'] },
);

describe('Responses translation, any request', () => {
  it('names what it cannot read, or builds a chat request; never throws', () => {
    fc.assert(
      fc.property(request, (raw) => {
        const req = raw as unknown as ResponsesRequest;
        const why = requestProblem(raw as Record<string, unknown>);
        if (why !== undefined) {
          expect(typeof why).toBe('string');
          return;
        }
        const items = inputItems(req);
        const chat = toChatRequest(req, items, { model: 'm', streamUsage: true, effortLevels: ['low', 'high'], reasoningHistory: true, dropped: [] });
        expect(Array.isArray(chat.messages)).toBe(true);
        expect(() => JSON.stringify(chat)).not.toThrow();
        expect(estimateInputTokens(req, items)).toBeGreaterThanOrEqual(0);
        // The shell echoes any request it accepted as valid JSON.
        expect(() => JSON.parse(`{${shellOf(req, () => 1, false).echoJson}}`)).not.toThrow();
      }),
      params,
    );
  });
});

const delta = fc.oneof(
  fc.record({ content: fc.option(fc.string({ maxLength: 5 })), reasoning_content: fc.option(fc.string({ maxLength: 5 })) }),
  fc.record({
    tool_calls: fc.array(
      fc.oneof(
        fc.record({
          index: fc.option(fc.integer({ min: 0, max: 2 })),
          id: fc.option(fc.constantFrom('a', 'b', 'c')),
          function: fc.option(fc.record({ name: fc.option(fc.constantFrom('f', 'g')), arguments: fc.option(fc.string({ maxLength: 4 })) })),
        }),
        fc.constant(null),
      ),
      { maxLength: 2 },
    ),
  }),
  fc.constant(null),
);
const chunk = fc.oneof(
  fc
    .record({
      choices: fc.array(fc.record({ delta, finish_reason: fc.option(fc.constantFrom('stop', 'length', 'tool_calls', 'content_filter')) }), { maxLength: 1 }),
    })
    .map((c) => `data: ${JSON.stringify(c)}\n\n`),
  fc.constant('data: {not json\n\n'),
  fc.constant(': keep-alive\n\n'),
  fc.constant('data: {"error":{"message":"boom"}}\n\n'),
  fc.constant('data: {"usage":{"prompt_tokens":3,"completion_tokens":"x"}}\n\n'),
);

describe('Responses stream translation, any backend stream', () => {
  it('keeps the order and numbering whatever the chunks, however they are cut', () => {
    fc.assert(
      fc.property(fc.array(chunk, { maxLength: 12 }), fc.boolean(), fc.integer({ min: 1, max: 40 }), (chunks, done, size) => {
        const body = Buffer.from(chunks.join('') + (done ? 'data: [DONE]\n\n' : ''));
        const t = new ResponsesStreamTranslator(shellOf({ model: 'm', reasoning: { summary: 'auto' } }, () => 1, false));
        let out = t.start();
        for (let i = 0; i < body.length; i += size) out += t.feed(body.subarray(i, i + size));
        out += t.end();
        const events = out
          .split('\n\n')
          .filter(Boolean)
          .map((f) => JSON.parse(/^data: (.*)$/m.exec(f)![1]));
        events.forEach((e, i) => expect(e.sequence_number).toBe(i));
        expect(events[0].type).toBe('response.created');
        expect(['response.completed', 'response.incomplete', 'response.failed']).toContain(events.at(-1).type);
        expect(events.filter((e) => /^response\.(completed|incomplete|failed)$/.test(e.type)).length).toBe(1);
        const added = events.filter((e) => e.type === 'response.output_item.added').length;
        expect(events.at(-1).response.output.length).toBe(added);
      }),
      params,
    );
  });
});
