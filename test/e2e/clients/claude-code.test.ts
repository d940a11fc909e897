// Claude Code's first request as recorded from the real CLI (test/fixtures/claude-code), replayed
// with its own headers: a `system` message at messages[1], a billing block at the top of `system`,
// and fields the translator does not know (thinking, context_management, output_config).
import { readFileSync } from 'node:fs';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

const recorded = JSON.parse(readFileSync(new URL('../../fixtures/claude-code/first-request.json', import.meta.url), 'utf8'));
const BILLING = /^x-anthropic-billing-header:/;

let cpp: FakeBackend, chat: FakeBackend, gw: Started;
beforeAll(async () => {
  cpp = await new FakeBackend({ family: 'cppengine', name: 'cpp', reply: 'Native hello', models: [{ name: 'cpp-chat' }] }).start();
  chat = await new FakeBackend({ family: 'mlxsingle', name: 'chat', reply: 'Translated hello', models: [{ name: 'qwen-chat' }] }).start();
  gw = await startGateway({ discovery: { static: { endpoints: [endpoint('cpp', 'cppengine', cpp.url), endpoint('chat', 'mlxsingle', chat.url)] } } });
});
afterAll(() => closeAll(gw, [cpp, chat]));
beforeEach(() => {
  cpp.reset();
  chat.reset();
});

/** The recorded request, for `model`, as Claude Code sends it (streamed unless told otherwise). */
async function replay(model: string, stream = true) {
  const res = await request(`${gw.url}/gw/msgapi/v1/messages?beta=true`, {
    method: 'POST',
    headers: recorded.headers,
    body: JSON.stringify({ ...recorded.body, model, stream }),
  });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

describe('Claude Code 2.1.330 first request, as recorded', () => {
  it('passthrough: forwarded as sent, less the billing block, and streamed back', async () => {
    const r = await replay('cpp-chat');
    expect(r.status).toBe(200);
    expect(r.headers['x-gw-mode']).toBe('passthrough');
    expect(r.text).toContain('event: message_stop');
    const sent = cpp.traffic[0].json;
    expect(sent.messages).toEqual(recorded.body.messages);
    expect(sent.thinking).toEqual(recorded.body.thinking);
    expect(sent.system).toEqual(recorded.body.system.filter((b: { text: string }) => !BILLING.test(b.text)));
  });

  it('translation: the mid-conversation system message stays in place as a <system-reminder> user turn', async () => {
    const r = await replay('qwen-chat', false);
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text)).toMatchObject({ type: 'message', role: 'assistant', content: [{ type: 'text', text: 'Translated hello' }] });
    const sent = chat.traffic[0];
    const roles = sent.json.messages.map((m: { role: string }) => m.role);
    expect(roles[0]).toBe('system');
    expect(roles.slice(1).every((role: string) => role === 'user' || role === 'assistant')).toBe(true);
    const system = sent.json.messages[0].content as string;
    expect(system).not.toMatch(/x-anthropic-billing-header/);
    const firstUser = JSON.stringify(sent.json.messages[1].content);
    expect(firstUser).toContain('<system-reminder>');
    expect(firstUser).toContain('# Environment');
    // The messages API's own headers stay behind on the way to a chat-completions backend.
    for (const name of Object.keys(sent.headers)) expect(name).not.toMatch(/^(x-api-key|anthropic-|x-stainless-)/);
  });
});
