// The official @anthropic-ai/sdk sending what Claude Code sends: the beta messages API
// (`/v1/messages?beta=true`, anthropic-beta: mid-conversation-system-2026-04-07), a `system`
// message in the middle of `messages`, and a per-request billing block at the top of `system`.
// In passthrough (cppengine) and translation (mlxsingle), stream and not; count_tokens with the
// X-Gw-Token-Count header. Each test checks what the backend received.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

const BETA = 'mid-conversation-system-2026-04-07';
const BILLING = 'x-anthropic-billing-header: cc_version=2.1.154.e3f; cc_entrypoint=cli; cch=7c1e2;';
const SYSTEM = [
  { type: 'text', text: BILLING },
  { type: 'text', text: 'You are Claude Code.', cache_control: { type: 'ephemeral' } },
];
const REMINDER = 'The user changed the working directory to /tmp.';

/** A Claude Code turn: the first user message, then a system message mid-conversation. */
const conversation = (model: string) =>
  ({
    model,
    max_tokens: 64,
    betas: [BETA],
    system: SYSTEM,
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'List the files.' }] },
      { role: 'system', content: REMINDER },
      { role: 'assistant', content: 'Which directory?' },
      { role: 'user', content: 'This one.' },
    ],
  }) as unknown as Anthropic.Beta.MessageCreateParamsNonStreaming;

let cpp: FakeBackend, chat: FakeBackend, gw: Started;
beforeAll(async () => {
  cpp = await new FakeBackend({ family: 'cppengine', name: 'cpp', reply: 'Native hello', models: [{ name: 'cpp-chat' }] }).start();
  chat = await new FakeBackend({ family: 'mlxsingle', name: 'chat', reply: 'Translated hello', models: [{ name: 'qwen-chat' }] }).start();
  gw = await startGateway({
    discovery: { static: { endpoints: [endpoint('cpp', 'cppengine', cpp.url), endpoint('chat', 'mlxsingle', chat.url)] } },
    model_aliases: { coder: ['cpp-chat'] },
  });
});
afterAll(() => closeAll(gw, [cpp, chat]));
beforeEach(() => {
  cpp.reset();
  chat.reset();
});

// This SDK sends its key as `Authorization: Bearer`; Claude Code sends `x-api-key` (added here).
const client = () =>
  new Anthropic({ baseURL: `${gw.url}/gw/msgapi`, apiKey: 'sk-ant-client-key', maxRetries: 0, defaultHeaders: { 'x-api-key': 'sk-ant-client-key' } });

/** What the SDK puts in the body: the params less `betas` (they travel as a header). */
function bodyOf(params: object): Record<string, unknown> {
  const { betas: _betas, ...body } = params as Record<string, unknown>;
  return body;
}

describe('passthrough (cppengine speaks the messages API)', () => {
  it('forwards a mid-conversation system message as sent, less the billing block', async () => {
    const params = conversation('cpp-chat');
    const { data, response } = await client().beta.messages.create(params).withResponse();
    expect(data.content).toEqual([{ type: 'text', text: 'Native hello' }]);
    expect(response.headers.get('x-gw-mode')).toBe('passthrough');
    const sent = cpp.traffic[0];
    expect(sent.url).toBe('/v1/messages');
    expect(sent.json).toEqual({ ...bodyOf(params), system: [SYSTEM[1]] });
    // The messages API's own headers reach a backend that speaks it.
    expect(sent.headers).toMatchObject({
      'anthropic-beta': BETA,
      'anthropic-version': expect.any(String),
      'x-api-key': 'sk-ant-client-key',
      'x-stainless-lang': 'js',
    });
  });

  it('streams the same conversation through', async () => {
    const params = { ...conversation('cpp-chat'), stream: true } as const;
    const final = await client().beta.messages.stream(params).finalMessage();
    expect(final.content).toEqual([{ type: 'text', text: 'Native hello' }]);
    expect(cpp.traffic[0].json).toEqual({ ...bodyOf(params), system: [SYSTEM[1]] });
  });
});

describe('translation (mlxsingle speaks chat-completions)', () => {
  const expected = [
    { role: 'system', content: 'You are Claude Code.' },
    { role: 'user', content: `List the files.\n<system-reminder>\n${REMINDER}\n</system-reminder>` },
    { role: 'assistant', content: 'Which directory?' },
    { role: 'user', content: 'This one.' },
  ];

  it('carries the system message in place as a reminder in the user turn, without the billing block', async () => {
    const { data, response } = await client().beta.messages.create(conversation('qwen-chat')).withResponse();
    expect(data.content).toEqual([{ type: 'text', text: 'Translated hello' }]);
    expect(response.headers.get('x-gw-mode')).toBeNull();
    const sent = chat.traffic[0];
    expect(sent.url).toBe('/v1/chat/completions');
    expect(sent.json.messages).toEqual(expected);
    // Headers of the messages API stay behind: its key, version, betas and the SDK's telemetry.
    const names = Object.keys(sent.headers);
    expect(names.filter((n) => n === 'x-api-key' || n.startsWith('anthropic-') || n.startsWith('x-stainless-'))).toEqual([]);
  });

  it('streams the same conversation', async () => {
    const final = await client()
      .beta.messages.stream({ ...conversation('qwen-chat'), stream: true })
      .finalMessage();
    expect(final.content).toEqual([{ type: 'text', text: 'Translated hello' }]);
    expect(chat.traffic[0].json).toMatchObject({ stream: true, messages: expected });
  });
});

describe('count_tokens', () => {
  const params = {
    model: 'cpp-chat',
    betas: [BETA],
    system: SYSTEM,
    messages: conversation('cpp-chat').messages,
  } as unknown as Anthropic.Beta.MessageCountTokensParams;

  it('is answered by a backend that counts (cppengine), the billing block left out', async () => {
    const { data, response } = await client().beta.messages.countTokens(params).withResponse();
    expect(response.headers.get('x-gw-token-count')).toBe('backend');
    const sent = cpp.traffic[0];
    expect(sent.url).toBe('/v1/messages/count_tokens');
    expect(sent.json.system).toEqual([SYSTEM[1]]);
    // The fake's count: one token per word (4 in the system text, 3 + 8 + 2 + 2 in the
    // messages) and 4 per message; the reply is the backend's count in the spec's shape.
    expect(data).toEqual({ input_tokens: 4 + 15 + 4 * 4, output_tokens: 0, total_tokens: 4 + 15 + 4 * 4 });
  });

  it('sends an alias as the real name', async () => {
    await client().beta.messages.countTokens({ ...params, model: 'coder' });
    expect(cpp.traffic[0].json.model).toBe('cpp-chat');
  });

  it('falls back to the estimate when the backend has no such path (404, 501)', async () => {
    for (const status of [404, 501]) {
      cpp.behaviour.status = status;
      const { data, response } = await client()
        .messages.countTokens({ model: 'cpp-chat', messages: [{ role: 'user', content: 'x'.repeat(40) }] })
        .withResponse();
      expect(response.headers.get('x-gw-token-count')).toBe('estimate');
      expect(data).toEqual({ input_tokens: 10, output_tokens: 0, total_tokens: 10 });
    }
  });

  it('brings another backend error back in the messages error shape', async () => {
    cpp.behaviour.status = 500;
    const err = await client()
      .beta.messages.countTokens(params)
      .catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.InternalServerError);
    expect(err.error).toEqual({ type: 'error', error: { type: 'api_error', message: 'fake cpp failing with 500' } });
    expect(err.headers.get('x-gw-token-count')).toBeNull();
  });

  it('fails over to the next endpoint that counts', async () => {
    const dead = await new FakeBackend({ family: 'cppengine', name: 'dead', models: [{ name: 'cpp-chat' }] }).start();
    const two = await startGateway({
      discovery: { static: { endpoints: [endpoint('dead', 'cppengine', dead.url, { priority: 200 }), endpoint('cpp', 'cppengine', cpp.url)] } },
    });
    try {
      dead.behaviour.resetOnRequest = true;
      const c = new Anthropic({ baseURL: `${two.url}/gw/msgapi`, apiKey: 'x', maxRetries: 0 });
      const { response } = await c.beta.messages.countTokens(params).withResponse();
      expect(response.headers.get('x-gw-token-count')).toBe('backend');
      expect(response.headers.get('x-gw-endpoint')).toBe('cpp');
      expect(dead.traffic.length).toBeGreaterThan(0); // tried first (once more on a fresh socket when a pooled one was reset)
    } finally {
      await closeAll(two, [dead]);
    }
  });

  it('answers 404 for a model no endpoint serves, as messages does', async () => {
    const err = await client()
      .messages.countTokens({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] })
      .catch((e) => e);
    expect(err.status).toBe(404);
    expect(err.error).toMatchObject({ type: 'error', error: { code: 'MODEL_NOT_FOUND' } });
  });

  it('is estimated where no backend counts', async () => {
    const { data, response } = await client()
      .messages.countTokens({ model: 'qwen-chat', system: 'abcd', messages: [{ role: 'user', content: 'hello world!' }] })
      .withResponse();
    expect(response.headers.get('x-gw-token-count')).toBe('estimate');
    expect(data).toEqual({ input_tokens: 4, output_tokens: 0, total_tokens: 4 });
    expect(chat.traffic).toHaveLength(0);
  });
});
