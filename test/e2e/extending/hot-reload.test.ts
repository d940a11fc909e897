// Hot reload under continuous load: profiles, pipelines, the endpoint list and a plugin file are
// edited while requests and SSE streams run; every change takes effect, no request fails, every
// stream completes, and a broken edit is reported while the graph before it keeps serving.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, request } from 'undici';
import { parse, stringify } from 'yaml';
import { FakeBackend } from '../../../engine/demo/index.js';
import { BUILTIN_PIPELINES_DIR, BUILTIN_PROFILES_DIR } from '../../../engine/core/paths.js';
import { closeAll, endpoint, startGateway, type Started, NO_RATE_LIMITS } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'gw-reload-'));
const profilesDir = join(dir, 'profiles');
const pipelinesDir = join(dir, 'pipelines');
const pluginFile = join(dir, 'tagger.mjs');
const tagger = (value: string) =>
  `export default { name: 'tagger', schema: { type: 'object' }, apply(hooks) { hooks.respond.tap('tagger', (ctx) => { ctx.replyHeaders.push('x-tagger', '${value}'); }); } };\n`;

let a: FakeBackend, b: FakeBackend, c: FakeBackend, gw: Started;
const dispatcher = new Agent({ connections: 16 });

/** The config file as the test edits it (written over the one startGateway wrote). */
function config(endpoints: FakeBackend[]) {
  return {
    server: { rate_limits: NO_RATE_LIMITS, host: '127.0.0.1', port: 0, shutdown_timeout: '5s' },
    logging: { level: 'info' },
    proxy: { profiles_dir: profilesDir },
    pipelines: { dir: pipelinesDir, after: ['tagger'] },
    plugins: [pluginFile, resolve('test/fixtures/plugins/tag-reply.mjs')],
    discovery: { static: { endpoints: endpoints.map((f) => endpoint(f.name, 'pagedengine', f.url, { check_interval: '1s' })) } },
  };
}

beforeAll(async () => {
  mkdirSync(profilesDir);
  mkdirSync(pipelinesDir);
  writeFileSync(pluginFile, tagger('v1'));
  [a, b, c] = await Promise.all(['a', 'b', 'c'].map((name) => new FakeBackend({ family: 'pagedengine', name, reply: 'one two three four five six' }).start()));
  for (const f of [a, b, c]) f.behaviour.chunkDelayMs = 15;
  gw = await startGateway(config([a, b]));
});
afterAll(async () => {
  await closeAll(gw, [a, b, c]);
  await dispatcher.close();
});

const chat = (stream: boolean) => JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'hi' }], stream });

interface Load {
  requests: number;
  failures: string[];
  streams: number;
  stop(): Promise<void>;
}

/** Requests and SSE streams in loops until stopped (each loop bounded). */
function load(): Load {
  let running = true;
  const l: Load = { requests: 0, failures: [], streams: 0, stop: async () => {} };
  const plain = async () => {
    for (let i = 0; running && i < 1_000_000; i++) {
      try {
        const res = await request(`${gw.url}/gw/pagedengine/v1/chat/completions`, { method: 'POST', body: chat(false), dispatcher });
        const text = await res.body.text();
        if (res.statusCode !== 200) l.failures.push(`${res.statusCode} ${text.slice(0, 200)}`);
        l.requests++;
      } catch (err) {
        l.failures.push(String(err));
      }
    }
  };
  const streams = async () => {
    for (let i = 0; running && i < 100_000; i++) {
      try {
        const res = await request(`${gw.url}/gw/pagedengine/v1/chat/completions`, { method: 'POST', body: chat(true), dispatcher });
        const text = await res.body.text();
        if (res.statusCode !== 200 || !text.trimEnd().endsWith('data: [DONE]')) l.failures.push(`stream ${res.statusCode}: ${text.slice(-200)}`);
        l.streams++;
      } catch (err) {
        l.failures.push(`stream ${err}`);
      }
    }
  };
  const workers = [...Array.from({ length: 8 }, plain), ...Array.from({ length: 4 }, streams)];
  l.stop = async () => {
    running = false;
    await Promise.all(workers);
  };
  return l;
}

async function status(path: string, headers: Record<string, string> = {}) {
  const res = await request(`${gw.url}${path}`, { headers, dispatcher });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text };
}

/** Edit, then wait for the effect (the signal); returns how long it took. */
async function change(what: string, edit: () => void, effect: () => Promise<boolean> | boolean): Promise<number> {
  const t0 = performance.now();
  edit();
  await waitFor(effect, what);
  return performance.now() - t0;
}

describe('hot reload under load', () => {
  it('applies profile, pipeline, endpoint and plugin edits without failing a request; a broken edit keeps the graph serving', async () => {
    const l = load();
    const took: Record<string, number> = {};
    const gen = () => gw.gw.runtime.reload.generation;
    try {
      await waitFor(() => l.requests > 50 && l.streams > 4, 'load to be running');

      // A profile: a new prefix for the family.
      const profile = parse(readFileSync(join(BUILTIN_PROFILES_DIR, 'pagedengine.yaml'), 'utf8'));
      profile.routing.prefixes.push('paged2');
      took.profile = await change(
        'the new prefix to answer',
        () => writeFileSync(join(profilesDir, 'pagedengine.yaml'), stringify(profile)),
        async () => (await status('/gw/paged2/v1/models')).status === 200,
      );

      // A pipeline: the proxy pipeline with a new plugin step.
      const proxy = readFileSync(join(BUILTIN_PIPELINES_DIR, 'proxy.yaml'), 'utf8').replace(
        '  - use: forward',
        '  - use: forward\n  - use: tag-reply\n    with: { value: reloaded }',
      );
      took.pipeline = await change(
        'the new step to run',
        () => writeFileSync(join(pipelinesDir, 'proxy.yaml'), proxy),
        async () => (await status('/gw/pagedengine/v1/models')).headers['x-tag'] === 'reloaded',
      );

      // The endpoint list: b removed, c added — while b carries a stream (b streams slowly).
      b.behaviour.chunkDelayMs = 100;
      const bEndpoint = gw.gw.runtime.endpoints.all.find((e) => e.name === 'b')!;
      await waitFor(() => bEndpoint.active > 0, 'a request in flight on b');
      const cBefore = c.traffic.length;
      took.endpoints = await change(
        'c to take traffic and b to leave',
        () => writeFileSync(gw.configFile, stringify(config([a, c]))),
        () => c.traffic.length > cBefore + 5 && gw.gw.runtime.endpoints.all.every((e) => e.name !== 'b'),
      );
      expect(bEndpoint.retired).toBe(true);
      const bAfter = b.traffic.length;

      // A plugin file, re-imported.
      took.plugin = await change(
        'the edited plugin to run',
        () => writeFileSync(pluginFile, tagger('v2')),
        async () => (await status('/gw/pagedengine/v1/models')).headers['x-tagger'] === 'v2',
      );

      // A broken file: reported, and the graph before it keeps serving.
      const before = gen();
      took.broken = await change(
        'the broken edit to be reported',
        () => writeFileSync(join(pipelinesDir, 'proxy.yaml'), 'name: proxy\nsteps: [ {use: forward\n'),
        async () => JSON.parse((await status('/internal/status')).text).reload.ok === false,
      );
      const report = JSON.parse((await status('/internal/status')).text).reload;
      expect(report.error).toContain(join(pipelinesDir, 'proxy.yaml'));
      expect(report.error).toContain('invalid YAML');
      expect(gen()).toBe(before);
      expect(gw.logs.some((x) => x.msg === 'reload failed; the configuration loaded before keeps serving' && String(x.file).endsWith('proxy.yaml'))).toBe(true);
      const still = await status('/gw/pagedengine/v1/models');
      expect(still.status).toBe(200);
      expect(still.headers['x-tag']).toBe('reloaded');

      // Fixed again: the next good edit takes effect.
      took.fixed = await change(
        'the fixed file to load',
        () => copyFileSync(join(BUILTIN_PIPELINES_DIR, 'proxy.yaml'), join(pipelinesDir, 'proxy.yaml')),
        async () =>
          JSON.parse((await status('/internal/status')).text).reload.ok === true && (await status('/gw/pagedengine/v1/models')).headers['x-tag'] === undefined,
      );

      await waitFor(() => l.streams > 20, 'more streams to complete');
      expect(b.traffic.length).toBeLessThanOrEqual(bAfter + 16); // at most what was in flight when it left
    } finally {
      await l.stop();
    }
    // The figures, for the record: how long each edit took to take effect, and the load carried.
    console.log(
      `hot reload: ${JSON.stringify(Object.fromEntries(Object.entries(took).map(([k, v]) => [k, Math.round(v)])))} ms; ${l.requests} requests and ${l.streams} streams, ${l.failures.length} failed`,
    );
    expect(l.failures).toEqual([]);
    expect(gen()).toBeGreaterThanOrEqual(6);
  });
});

describe('hot reload after a failed edit', () => {
  it('watches what the broken config names, so fixing it reloads', async () => {
    const own = mkdtempSync(join(tmpdir(), 'gw-reload-fix-'));
    const later = join(own, 'later.mjs');
    const fake = await new FakeBackend({ family: 'pagedengine', name: 'solo' }).start();
    const base = {
      server: { rate_limits: NO_RATE_LIMITS, host: '127.0.0.1', port: 0 },
      logging: { level: 'info' },
      discovery: { static: { endpoints: [endpoint('solo', 'pagedengine', fake.url)] } },
    };
    const g = await startGateway(base);
    try {
      // The config names a plugin file that is not there yet: the reload fails.
      writeFileSync(g.configFile, stringify({ ...base, plugins: [later], pipelines: { after: ['later'] } }));
      await waitFor(() => g.gw.runtime.reload.ok === false, 'the reload to fail on the missing plugin');
      expect(g.gw.runtime.reload.error).toContain(later);
      // Writing the plugin is the fix: it is watched, so it reloads by itself.
      writeFileSync(
        later,
        "export default { name: 'later', schema: { type: 'object' }, apply(h) { h.respond.tap('later', (ctx) => ctx.replyHeaders.push('x-later', 'yes')); } };\n",
      );
      await waitFor(async () => {
        const res = await request(`${g.url}/gw/pagedengine/v1/models`);
        await res.body.dump();
        return res.headers['x-later'] === 'yes';
      }, 'the fixed plugin to take effect');
      expect(g.gw.runtime.reload.ok).toBe(true);
    } finally {
      await closeAll(g, [fake]);
    }
  });
});

describe('settings a reload cannot change', () => {
  it('keeps the listen address, says a restart applies it, and applies the rest', async () => {
    const fake = await new FakeBackend({ family: 'pagedengine', name: 'solo' }).start();
    const base = {
      server: { rate_limits: NO_RATE_LIMITS, host: '127.0.0.1', port: 0 },
      logging: { level: 'info' },
      pipelines: { watch: false },
      discovery: { static: { endpoints: [endpoint('solo', 'pagedengine', fake.url)] } },
    };
    const g = await startGateway(base);
    try {
      const port = g.gw.port;
      writeFileSync(
        g.configFile,
        stringify({ ...base, server: { rate_limits: NO_RATE_LIMITS, host: '127.0.0.1', port: port + 1 }, model_aliases: { later: ['test-model'] } }),
      );
      expect(await g.gw.reload('test')).toBe(true);
      expect(g.gw.port).toBe(port);
      expect(g.logs.some((l) => l.level === 40 && String(l.msg).includes('take effect at the next restart'))).toBe(true);
      const alias = await request(`${g.url}/gw/models/later`);
      await alias.body.dump();
      expect(alias.statusCode).toBe(200);
    } finally {
      await closeAll(g, [fake]);
    }
  });
});
