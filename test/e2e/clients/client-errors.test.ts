// The official clients pointed at a family's routes, as users do, show the text of a gateway-made
// error (unknown model, no endpoint up) in what they throw, with its status: each route answers
// in the shape its clients read (ollama: {"error": "<text>"}; openai: the envelope; the messages
// API: its own).
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

let local: FakeBackend, gw: Started;

beforeAll(async () => {
  local = await new FakeBackend({ family: 'localrunner', name: 'local', models: [{ name: 'llama3.1:8b', digest: 'sha256:aa' }] }).start();
  gw = await startGateway({ discovery: { static: { endpoints: [endpoint('local', 'localrunner', local.url)] } } });
  await waitFor(() => gw.gw.backends.endpoints.all.every((e) => e.state === 'healthy'), 'the endpoint to be healthy');
});
afterAll(() => closeAll(gw, [local]));

const messages = [{ role: 'user' as const, content: 'hello' }];

describe('ollama client', () => {
  const client = (url = gw.url) => new Ollama({ host: `${url}/gw/localrunner` });

  it("shows the gateway's text for an unknown model, with status 404", async () => {
    const err = await client()
      .chat({ model: 'no-such-model', messages, stream: false })
      .catch((e) => e);
    expect(err.name).toBe('ResponseError');
    expect(err.status_code).toBe(404);
    expect(err.message).toMatch(/^model no-such-model(:latest)? is not served by any localrunner endpoint/);
    expect(err.message).not.toContain('[object Object]');
  });

  it('shows it on a streamed call, and on the other native routes', async () => {
    const stream = await client()
      .generate({ model: 'no-such-model', prompt: 'hi', stream: true })
      .catch((e) => e);
    expect(stream.status_code).toBe(404);
    expect(stream.message).toContain('no-such-model');
    const embed = await client()
      .embed({ model: 'no-such-embedder', input: 'hi' })
      .catch((e) => e);
    expect(embed.status_code).toBe(404);
    expect(embed.message).toContain('no-such-embedder');
  });

  it("shows why when the family's endpoint is down, with status 503", async () => {
    const gone = await new FakeBackend({ family: 'localrunner', name: 'gone' }).start();
    await gone.stop(); // its port refuses connections from now on
    const down = await startGateway({ discovery: { static: { endpoints: [endpoint('gone', 'localrunner', gone.url)] } } });
    try {
      await waitFor(() => down.gw.backends.endpoints.all.every((e) => e.state === 'offline'), 'the endpoint to be offline');
      const err = await client(down.url)
        .chat({ model: 'llama3.1:8b', messages, stream: false })
        .catch((e) => e);
      expect(err.status_code).toBe(503);
      expect(err.message).toMatch(/^no healthy endpoint for provider localrunner/);
    } finally {
      await down.close();
    }
  });
});

describe('openai client on the same family', () => {
  it("shows the gateway's text for an unknown model, with status 404", async () => {
    const client = new OpenAI({ baseURL: `${gw.url}/gw/localrunner/v1`, apiKey: 'x', maxRetries: 0 });
    const err = await client.chat.completions.create({ model: 'no-such-model', messages }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.message).toContain('is not served by any localrunner endpoint');
    expect(err.code).toBe('MODEL_NOT_FOUND');
  });
});

describe("anthropic client on the family's messages route", () => {
  it("gets the messages API's error shape, with the gateway's text", async () => {
    const client = new Anthropic({ baseURL: `${gw.url}/gw/localrunner`, apiKey: 'x', maxRetries: 0 });
    const err = await client.messages.create({ model: 'no-such-model', max_tokens: 8, messages }).catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.NotFoundError);
    expect(err.error).toMatchObject({ type: 'error', error: { type: 'not_found_error', message: expect.stringContaining('no-such-model') } });
    expect(err.message).toContain('is not served by any localrunner endpoint');
  });
});
