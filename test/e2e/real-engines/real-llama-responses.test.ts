// Opt-in: the Responses API through /gw/openai/v1 in front of real llama.cpp llama-servers, with
// the official openai package. Runs only when GW_LLAMA_SERVER_DIR names the folder with
// start-llama-server.sh (../shared/real-backends/). Three servers on free ports: one served
// natively (the cppengine family has /v1/responses), and two under a custom family whose profile
// is cppengine's without its Responses routes, so they are translated to: one with a chat
// template that opens a <think> block (its reasoning_content becomes reasoning items), one with
// a strict-alternation template (Codex's request shape must pass it).
import OpenAI from 'openai';
import { readFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUILTIN_PROFILES_DIR } from '../../../engine/core/paths.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { LLAMA_SERVER_DIR, startLlamaServer, stopLlamaServers, type LlamaServer } from '../../helpers/llama-server.js';
import { waitFor } from '../../helpers/wait.js';

const fixture = (path: string) => fileURLToPath(new URL(`../../fixtures/${path}`, import.meta.url));

/** cppengine's profile as a family of its own without the Responses API. */
function chatOnlyLlama(): string {
  const dir = mkdtempSync(join(tmpdir(), 'gw-profiles-'));
  const p = parse(readFileSync(join(BUILTIN_PROFILES_DIR, 'cppengine.yaml'), 'utf8'));
  p.name = 'llamachat';
  p.display_name = 'llama.cpp without its Responses API';
  p.routing = { prefixes: ['llamachat'] };
  // A family of its own: the engine's names stay cppengine's types.
  p.type_aliases = [];
  const noResponses = (paths: string[]) => paths.filter((x) => !x.includes('responses'));
  p.api.paths = noResponses(p.api.paths);
  p.api.replay_safe_paths = noResponses(p.api.replay_safe_paths);
  p.request.generation_paths = noResponses(p.request.generation_paths);
  if (p.api.continuation?.routes) for (const r of Object.keys(p.api.continuation.routes)) if (r.includes('responses')) delete p.api.continuation.routes[r];
  writeFileSync(join(dir, 'llamachat.yaml'), stringify(p));
  return dir;
}

describe.skipIf(!LLAMA_SERVER_DIR)('the Responses API against real llama-servers', () => {
  let native: LlamaServer, thinker: LlamaServer, strict: LlamaServer, gw: Started;
  let client: OpenAI;

  beforeAll(async () => {
    [native, thinker, strict] = await Promise.all([
      startLlamaServer('tiny-native'),
      startLlamaServer('thinker', ['--jinja', '--chat-template-file', fixture('reasoning/think-open.jinja'), '--reasoning-format', 'deepseek']),
      startLlamaServer('strict-chat', ['--jinja', '--chat-template-file', fixture('msgapi/strict-alternation.jinja')]),
    ]);
    gw = await startGateway({
      proxy: { profiles_dir: chatOnlyLlama() },
      discovery: {
        static: {
          endpoints: [endpoint('native', 'cppengine', native.url), endpoint('thinker', 'llamachat', thinker.url), endpoint('strict', 'llamachat', strict.url)],
        },
      },
    });
    client = new OpenAI({ baseURL: `${gw.url}/gw/openai/v1`, apiKey: 'x', maxRetries: 0 });
    await waitFor(async () => ((await client.models.list()).data.length >= 3 ? true : undefined), 'the three models listed', 60_000);
  }, 120_000);
  afterAll(async () => {
    await closeAll(gw, []);
    stopLlamaServers([native, thinker, strict]);
  });

  it("natively: llama-server's own /v1/responses, plain and streamed", async () => {
    const { data, response } = await client.responses.create({ model: 'tiny-native', input: 'hello', max_output_tokens: 4 }).withResponse();
    expect(response.headers.get('x-gw-mode')).toBe('passthrough');
    expect(response.headers.get('x-gw-endpoint')).toBe('native');
    expect(data.output_text.length).toBeGreaterThan(0);
    let text = '';
    for await (const e of await client.responses.create({ model: 'tiny-native', input: 'hello', max_output_tokens: 4, stream: true }))
      if (e.type === 'response.output_text.delta') text += e.delta;
    expect(text.length).toBeGreaterThan(0);
  });

  it("translated: the engine's reasoning_content as a reasoning item, incomplete at max_output_tokens, the server's usage", async () => {
    const { data, response } = await client.responses
      .create({ model: 'thinker', input: 'What is 2+2?', instructions: 'Think first.', max_output_tokens: 8, temperature: 0 })
      .withResponse();
    expect(response.headers.get('x-gw-mode')).toBeNull();
    expect(response.headers.get('x-gw-endpoint')).toBe('thinker');
    expect(data.output[0]).toMatchObject({ type: 'reasoning', content: [{ type: 'reasoning_text', text: expect.any(String) }] });
    expect(data).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, usage: { output_tokens: 8 } });
    const stream = client.responses.stream({ model: 'thinker', input: 'What is 2+2?', max_output_tokens: 8, temperature: 0 });
    let thought = '';
    for await (const e of stream) if (e.type === 'response.reasoning_text.delta') thought += e.delta;
    const final = await stream.finalResponse();
    expect(thought.length).toBeGreaterThan(0);
    expect(final.status).toBe('incomplete');
    expect((final.output[0] as { content: Array<{ text: string }> }).content[0].text).toBe(thought);
  });

  it("translated: Codex's request shape (instructions, a developer message, two user messages, a tool round trip) passes a strict-alternation template", async () => {
    const input: OpenAI.Responses.ResponseInput = [
      { type: 'message', role: 'developer', content: [{ type: 'input_text', text: '<permissions>read-only</permissions>' }] },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: '<environment_context>/tmp</environment_context>' }] },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'List the files.' }] },
    ];
    const tools: OpenAI.Responses.Tool[] = [
      {
        type: 'function',
        name: 'shell',
        description: 'Run a command',
        parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
        strict: false,
      },
    ];
    const first = await client.responses.create({ model: 'strict-chat', instructions: 'You are Codex.', input, tools, max_output_tokens: 4 });
    expect(first.output.length).toBeGreaterThan(0);
    // The strict template refuses two user turns in a row: the check has teeth.
    const raw = await fetch(`${strict.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'strict-chat',
        max_tokens: 2,
        messages: [
          { role: 'user', content: 'a' },
          { role: 'user', content: 'b' },
        ],
      }),
    });
    expect(raw.status).toBe(400);
  });
});
