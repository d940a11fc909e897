// Opt-in, against real llama.cpp servers (GW_LLAMA_SERVER_DIR = the folder holding
// start-llama-server.sh): a chat server and an embeddings-only server in one cppengine family.
// Requests that name no model reach the server that can serve them; a concurrency limit of 1
// queues the second request at the chat server. Skipped when the variable is not set.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { LLAMA_SERVER_DIR, startLlamaServer, stopLlamaServers, type LlamaServer } from '../../helpers/llama-server.js';
import { waitFor } from '../../helpers/wait.js';

describe.skipIf(!LLAMA_SERVER_DIR)('real llama-server: capability routing and a queue', () => {
  let chat: LlamaServer, embed: LlamaServer;
  let gw: Started;

  beforeAll(async () => {
    chat = await startLlamaServer('tiny-chat');
    embed = await startLlamaServer('tiny-embed', ['--embeddings', '--pooling', 'mean']);
    gw = await startGateway({
      discovery: {
        static: {
          endpoints: [
            // The embeddings server first by priority: balancing alone would send it everything.
            endpoint('embed', 'cppengine', embed.url, { priority: 100 }),
            endpoint('chat', 'cppengine', chat.url, { priority: 50, max_concurrent_requests: 1 }),
          ],
        },
      },
    });
    await waitFor(async () => ((await (await request(`${gw.url}/internal/status/models`)).body.json()) as any).total === 2, 'both models discovered');
  }, 120_000);

  afterAll(async () => {
    await gw?.close();
    stopLlamaServers([chat, embed]);
  });

  const post = async (path: string, body: unknown) => {
    const res = await request(`${gw.url}/gw/cppengine${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
    const text = await res.body.text();
    return { status: res.statusCode, endpoint: res.headers['x-gw-endpoint'], reason: res.headers['x-gw-routing-reason'], text };
  };

  it('sends /completion to the chat server and /embedding to the embeddings server', async () => {
    const completion = await post('/completion', { prompt: 'hello', n_predict: 8, stream: true });
    expect(completion).toMatchObject({ status: 200, endpoint: 'chat', reason: 'capability_generation' });
    const embedding = await post('/embedding', { content: 'hello' });
    expect(embedding).toMatchObject({ status: 200, endpoint: 'embed', reason: 'capability_embedding' });
    expect(JSON.parse(embedding.text)[0].embedding[0].length).toBe(64);
  });

  it('runs requests to the chat server one at a time under max_concurrent_requests 1', async () => {
    // Streamed: the random-weight model's text can fail llama-server's non-streaming output check (a 500 of its own).
    const replies = await Promise.all([1, 2, 3].map(() => post('/completion', { prompt: 'hello', n_predict: 64, stream: true })));
    expect(replies.map((r) => [r.status, r.endpoint])).toEqual([
      [200, 'chat'],
      [200, 'chat'],
      [200, 'chat'],
    ]);
    const status = (await (await request(`${gw.url}/internal/status/endpoints`)).body.json()) as any;
    const queue = status.endpoints.find((e: any) => e.name === 'chat').queue;
    expect(queue).toMatchObject({ max_concurrent_requests: 1, in_flight: 0, queued: 0 });
    expect(queue.admitted).toBeGreaterThanOrEqual(4);
  });
});
