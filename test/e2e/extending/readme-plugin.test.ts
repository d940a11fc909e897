// The plugin recipe of docs/reference/pipelines-and-plugins.md, copied as a user copies it: its
// files (the blocks marked `<!-- readme-plugin: PATH -->`) into an empty folder outside the
// repository, with nothing installed there, served by `gw serve` started from that folder.
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { parse, stringify } from 'yaml';
import { cleanEnv, serve, stopServing } from '../../helpers/cli.js';
import { FakeBackend } from '../../../engine/demo/index.js';

/** The recipe's marked blocks: path → text. */
function recipe(): Map<string, string> {
  const readme = readFileSync('docs/reference/pipelines-and-plugins.md', 'utf8');
  const blocks = new Map<string, string>();
  for (const m of readme.matchAll(/^<!-- readme-plugin: (\S+) -->\n```\w*\n([\s\S]*?)^```$/gm)) blocks.set(m[1], m[2]);
  return blocks;
}

let fake: FakeBackend;
let child: ChildProcess | undefined;
let base: string;
beforeAll(async () => {
  const blocks = recipe();
  expect([...blocks.keys()].sort()).toEqual(['config.yaml', 'plugins/api-key.mjs']);
  const folder = mkdtempSync(join(tmpdir(), 'gw-readme-plugin-'));
  for (const [path, text] of blocks) {
    mkdirSync(dirname(join(folder, path)), { recursive: true });
    writeFileSync(join(folder, path), text);
  }
  // What a test adds to the recipe's config: a free port and a backend to reach.
  fake = await new FakeBackend({ family: 'pagedengine', name: 'paged' }).start();
  const config = {
    ...parse(blocks.get('config.yaml')!),
    server: { host: '127.0.0.1', port: 0 },
    discovery: { static: { endpoints: [{ name: 'paged', type: 'pagedengine', url: fake.url }] } },
  };
  writeFileSync(join(folder, 'config.yaml'), stringify(config));
  const started = await serve(['--config', 'config.yaml'], { ...cleanEnv(), GW_API_KEYS: 'k-alpha,k-beta' }, folder);
  child = started.child;
  base = `http://127.0.0.1:${started.port}`;
});
afterAll(async () => {
  await stopServing(child);
  await fake?.stop();
});

const chat = (headers: Record<string, string>) =>
  request(`${base}/gw/pagedengine/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: '{"model":"test-model","messages":[{"role":"user","content":"hi"}]}',
  });

describe("the docs' plugin recipe, from a folder of its own", () => {
  it('refuses a request without a key, in the envelope, before any backend is reached', async () => {
    const res = await chat({});
    expect(res.statusCode).toBe(401);
    expect(((await res.body.json()) as any).error).toEqual({
      message: 'send your API key in the x-api-key header',
      type: 'unauthorized',
      code: 'API_KEY_REQUIRED',
    });
    expect(res.headers['x-gw-request-id']).toBeDefined();
    expect(fake.traffic).toHaveLength(0);
  });

  it('refuses a wrong key and lets a right one through, in the header or as a bearer token', async () => {
    const wrong = await chat({ 'x-api-key': 'nope' });
    await wrong.body.dump();
    expect(wrong.statusCode).toBe(403);
    for (const headers of [{ 'x-api-key': 'k-alpha' }, { authorization: 'Bearer k-beta' }] as Record<string, string>[]) {
      const res = await chat(headers);
      expect(res.statusCode).toBe(200);
      expect(((await res.body.json()) as any).choices[0].message.content).toBeTypeOf('string');
    }
  });

  it('leaves the probes, the metrics and the dashboard (with the status routes it reads) open', async () => {
    for (const path of [
      '/internal/health',
      '/internal/ready',
      '/internal/metrics',
      '/internal/ui/',
      '/internal/status',
      '/internal/status/endpoints',
      '/version',
    ]) {
      const res = await request(`${base}${path}`);
      await res.body.dump();
      expect([path, res.statusCode]).toEqual([path, 200]);
    }
  });

  it("its 'try it' works with no engine: the index refused without a key, served with one", async () => {
    const without = await request(`${base}/`);
    await without.body.dump();
    const withKey = await request(`${base}/`, { headers: { 'x-api-key': 'k-alpha' } });
    await withKey.body.dump();
    expect([without.statusCode, withKey.statusCode]).toEqual([401, 200]);
  });
});
