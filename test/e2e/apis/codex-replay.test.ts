// OpenAI Codex CLI 0.169.0's first Responses request as recorded from the real CLI
// (test/fixtures/responses), replayed with Codex's headers to /gw/openai/v1/responses in front of
// a chat-only engine: the stream must be one Codex accepts (typed frames, sequence numbers from 0,
// created first, completed last) and the chat request one strict templates accept (one leading
// system message, no two user turns in a row, only the function tools).
import { readFileSync } from 'node:fs';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

const recorded = JSON.parse(readFileSync(new URL('../../fixtures/responses/codex-request.json', import.meta.url), 'utf8'));
const MODEL = 'codex-replay-model';
const REPLY = 'Hello from the gateway';
const SESSION = '00000000-0000-4000-8000-000000000005';

/** The headers Codex 0.169.0 sent with it (ids neutralised). */
const CODEX_HEADERS = {
  accept: 'text/event-stream',
  'content-type': 'application/json',
  authorization: 'Bearer sk-test',
  originator: 'codex_exec',
  'user-agent': 'codex_exec/0.169.0 (Linux; x86_64) xterm (codex_exec; 0.169.0)',
  'session-id': SESSION,
  'thread-id': SESSION,
  'x-client-request-id': SESSION,
  'x-codex-window-id': `${SESSION}:0`,
  'x-codex-beta-features': 'remote_compaction_v2',
  'x-codex-turn-metadata': recorded.client_metadata['x-codex-turn-metadata'],
};

interface Frame {
  event: string | undefined;
  data: any;
}

/** The SSE frames of a reply, each with its `event:` name and parsed `data:`. */
function frames(text: string): Frame[] {
  return text
    .split(/\r?\n\r?\n/)
    .filter((block) => block.trim() !== '')
    .map((block) => {
      let event: string | undefined;
      const data: string[] = [];
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      return { event, data: JSON.parse(data.join('\n')) };
    });
}

const textOf = (content: unknown): string => (typeof content === 'string' ? content : (content as { text?: string }[]).map((p) => p.text ?? '').join(''));

let fake: FakeBackend, gw: Started;
beforeAll(async () => {
  fake = await new FakeBackend({ family: 'mlxsingle', name: 'mlx', reply: REPLY, models: [{ name: MODEL }] }).start();
  gw = await startGateway({ discovery: { static: { endpoints: [endpoint('mlx', 'mlxsingle', fake.url)] } } });
  await waitFor(async () => {
    const res = await request(`${gw.url}/gw/openai/v1/models`);
    const body = (await res.body.json()) as { data?: { id: string }[] };
    return body.data?.some((m) => m.id === MODEL);
  }, `${MODEL} discovered`);
});
afterAll(() => closeAll(gw, [fake]));

describe('Codex CLI 0.169.0 first request, as recorded, on a chat-only engine', () => {
  it('streams a Responses event stream Codex accepts, and sends a chat request strict templates accept', async () => {
    const res = await request(`${gw.url}/gw/openai/v1/responses`, {
      method: 'POST',
      headers: CODEX_HEADERS,
      body: JSON.stringify({ ...recorded, model: MODEL }),
    });
    const text = await res.body.text();
    expect(res.statusCode, text).toBe(200);
    expect(String(res.headers['content-type'])).toMatch(/^text\/event-stream/);

    // The stream: every frame named for its type, numbered from 0, created first, completed last.
    const fs = frames(text);
    expect(fs.length).toBeGreaterThan(2);
    for (const [i, f] of fs.entries()) {
      expect(f.event).toBe(f.data.type);
      expect(f.data.sequence_number).toBe(i);
    }
    expect(fs[0].data.type).toBe('response.created');
    expect(fs.at(-1)!.data.type).toBe('response.completed');
    expect(fs.filter((f) => f.data.type === 'response.completed')).toHaveLength(1);
    const deltas = fs
      .filter((f) => f.data.type === 'response.output_text.delta')
      .map((f) => f.data.delta)
      .join('');
    expect(deltas).toBe(REPLY);
    const done = fs.at(-1)!.data.response;
    expect(done).toMatchObject({ object: 'response', status: 'completed', model: MODEL });
    const outputText = done.output
      .filter((o: { type: string }) => o.type === 'message')
      .flatMap((o: { content: { type: string; text: string }[] }) => o.content)
      .filter((p: { type: string }) => p.type === 'output_text')
      .map((p: { text: string }) => p.text)
      .join('');
    expect(outputText).toBe(REPLY);

    // The chat request the engine received.
    const sent = fake.traffic.at(-1)!;
    expect(sent.url).toBe('/v1/chat/completions');
    const chat = sent.json;
    expect(chat.model).toBe(MODEL);
    expect(chat.stream).toBe(true);

    const roles: string[] = chat.messages.map((m: { role: string }) => m.role);
    expect(roles[0]).toBe('system');
    expect(roles.filter((r) => r === 'system' || r === 'developer')).toHaveLength(1);
    for (let i = 1; i < roles.length; i++) expect(roles[i] === 'user' && roles[i - 1] === 'user', `user twice at ${i}`).toBe(false);
    // The system message: the instructions (Codex 0.169.0 sends none) then each leading developer message.
    const developer = recorded.input.filter((m: { role?: string }) => m.role === 'developer').map((m: { content: unknown }) => textOf(m.content));
    expect(developer.length).toBeGreaterThan(0);
    expect(chat.messages[0].content).toBe([recorded.instructions, ...developer].filter(Boolean).join('\n\n'));
    // Codex's two user messages in a row became one, in order.
    const users = recorded.input.filter((m: { role?: string }) => m.role === 'user').map((m: { content: unknown }) => textOf(m.content));
    expect(users.length).toBe(2);
    expect(chat.messages.slice(1)).toEqual([{ role: 'user', content: users.join('\n\n') }]);

    // Tools: the function tools Codex offered, in order; the namespace and web_search tools dropped.
    const offered = recorded.tools.filter((t: { type: string }) => t.type === 'function');
    expect(recorded.tools.some((t: { type: string }) => t.type !== 'function')).toBe(true);
    expect(chat.tools.map((t: { function: { name: string } }) => t.function.name)).toEqual(offered.map((t: { name: string }) => t.name));
    for (const [i, t] of offered.entries()) {
      expect(chat.tools[i]).toEqual({
        type: 'function',
        function: { name: t.name, description: t.description, parameters: t.parameters, strict: t.strict },
      });
    }
    expect(chat.tool_choice).toBe('auto');
    expect(chat.parallel_tool_calls).toBe(true);
  });
});
