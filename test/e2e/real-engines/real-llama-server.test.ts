// Opt-in: the messages API in front of a real llama.cpp llama-server (the cppengine family), the
// way Claude Code uses it. Runs only when GW_LLAMA_SERVER_DIR names the folder with
// start-llama-server.sh (../shared/real-backends/); it starts its own two servers on free ports —
// one with the model's own chat template (passthrough), one with a strict-alternation template
// (translation) — and stops them after. The model has random weights: replies are gibberish,
// but every status, count, error and template check is the real server's.
import Anthropic from '@anthropic-ai/sdk';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { LLAMA_SERVER_DIR, startLlamaServer, stopLlamaServers, type LlamaServer } from '../../helpers/llama-server.js';

const STRICT_TEMPLATE = fileURLToPath(new URL('../../fixtures/msgapi/strict-alternation.jinja', import.meta.url));
const BILLING = (cch: string) => ({ type: 'text', text: `x-anthropic-billing-header: cc_version=2.1.154.e3f; cc_entrypoint=cli; cch=${cch};` });

/** A Claude Code turn: the billing block, the system prompt, a system message mid-conversation. */
const conversation = (model: string, cch = '7c1e2', system = 'You are Claude Code.') =>
  ({
    model,
    max_tokens: 4,
    betas: ['mid-conversation-system-2026-04-07'],
    system: [BILLING(cch), { type: 'text', text: system }],
    messages: [
      { role: 'user', content: 'List the files.' },
      { role: 'system', content: 'The user changed the working directory to /tmp.' },
      { role: 'assistant', content: 'Which directory?' },
      { role: 'user', content: 'This one.' },
    ],
  }) as unknown as Anthropic.Beta.MessageCreateParamsNonStreaming;

describe.skipIf(!LLAMA_SERVER_DIR)('against a real llama-server', () => {
  let plain: LlamaServer, strict: LlamaServer, gw: Started;
  const client = () => new Anthropic({ baseURL: `${gw.url}/gw/msgapi`, apiKey: 'x', maxRetries: 0 });

  beforeAll(async () => {
    plain = await startLlamaServer('tiny-chat');
    strict = await startLlamaServer('strict-chat', ['--jinja', '--chat-template-file', STRICT_TEMPLATE]);
    gw = await startGateway({ discovery: { static: { endpoints: [endpoint('llama', 'cppengine', plain.url), endpoint('strict', 'mlxsingle', strict.url)] } } });
  }, 120_000);
  afterAll(async () => {
    await closeAll(gw, []);
    stopLlamaServers([plain, strict]);
  });

  it('the strict template refuses what the translator must avoid (the check has teeth)', async () => {
    for (const messages of [
      [
        { role: 'user', content: 'a' },
        { role: 'system', content: 'b' },
        { role: 'assistant', content: 'c' },
        { role: 'user', content: 'd' },
      ],
      [
        { role: 'user', content: 'a' },
        { role: 'user', content: 'b' },
      ],
    ]) {
      const res = await fetch(`${strict.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'strict-chat', max_tokens: 2, messages }),
      });
      expect(res.status).toBe(400);
    }
  });

  it('passthrough: llama.cpp takes the mid-conversation system message, stream and not', async () => {
    const { data, response } = await client().beta.messages.create(conversation('tiny-chat')).withResponse();
    expect(response.headers.get('x-gw-mode')).toBe('passthrough');
    expect(data.content[0].type).toBe('text');
    const final = await client()
      .beta.messages.stream({ ...conversation('tiny-chat'), stream: true })
      .finalMessage();
    expect(final.content[0].type).toBe('text');
  });

  it('translation: the <system-reminder> turn passes a strict-alternation template, stream and not', async () => {
    const { data, response } = await client().beta.messages.create(conversation('strict-chat')).withResponse();
    expect(response.headers.get('x-gw-mode')).toBeNull();
    expect(data.content[0].type).toBe('text');
    const final = await client()
      .beta.messages.stream({ ...conversation('strict-chat'), stream: true })
      .finalMessage();
    expect(final.stop_reason).toBe('max_tokens');
  });

  it('the billing block left out, a new one per request keeps the prompt cache', async () => {
    const system = `Cache check ${Date.now()}.`;
    const first = await client().beta.messages.create(conversation('tiny-chat', 'aaaaa', system));
    const second = await client().beta.messages.create(conversation('tiny-chat', 'bbbbb', system));
    expect(first.usage.input_tokens).toBeGreaterThan(20);
    expect(second.usage.input_tokens).toBeLessThan(5);
  });

  it("count_tokens is the server's count (without the billing block) in the spec's shape, with X-Gw-Token-Count: backend", async () => {
    const params = { ...conversation('tiny-chat'), max_tokens: undefined } as unknown as Anthropic.Beta.MessageCountTokensParams;
    const { data, response } = await client().beta.messages.countTokens(params).withResponse();
    expect(response.headers.get('x-gw-token-count')).toBe('backend');
    const { betas: _b, ...body } = params as unknown as Record<string, unknown>;
    const direct = await fetch(`${plain.url}/v1/messages/count_tokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...body, system: [(body.system as unknown[])[1]] }),
    });
    const counted = (await direct.json()) as { input_tokens: number };
    // The server's count in the spec's shape (it sends input_tokens only).
    expect(data).toEqual({ input_tokens: counted.input_tokens, output_tokens: 0, total_tokens: counted.input_tokens });
  });

  it('a llama.cpp error reaches the client in the messages API shape', async () => {
    const err = await client()
      .messages.create({ model: 'tiny-chat', max_tokens: 4, messages: [{ role: 'user', content: 'hello world '.repeat(1500) }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect(err.error).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: expect.stringContaining('exceeds the available context size') },
    });
  });
});
