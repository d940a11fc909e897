// Timeouts and failover settings a user writes take effect, the most specific first: the
// endpoint's, a custom profile's, the config's proxy value, the built-in profile's, the built-in
// default. Shown per endpoint with where each came from, on /internal/status/endpoints and by
// `gw validate`; and felt: a backend that accepts and never answers is given up after the reply
// timeout that won, not the built-in profile's 2 minutes.
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { validate } from '../../../engine/kernel/validate.js';
import { BUILTIN_PLUGINS } from '../../../plugins/index.js';
import { endpoint, writeConfig } from '../../helpers/gateway.js';
import { customProfiles } from '../../helpers/profiles.js';
import { rig, send, type Rig } from '../../helpers/resilience.js';

let r: Rig | null = null;
afterEach(async () => {
  await r?.close();
  r = null;
});

async function settingsOf(r: Rig, name = 'primary'): Promise<Record<string, { value: unknown; from: string }>> {
  const res = await request(`${r.gw.url}/internal/status/endpoints`);
  return ((await res.body.json()) as any).endpoints.find((e: any) => e.name === name).settings;
}

/** A silent backend: the reply names the timeout that ended the wait, and where it came from. */
async function givenUpAfter(r: Rig, timeout: string, from: string): Promise<void> {
  r.primary.always('hang');
  const reply = await send(r);
  expect(reply.status).toBe(503);
  expect(reply.json.error.message).toContain(`no reply head within ${timeout}, response_timeout from ${from}`);
  expect(r.primary.generations).toHaveLength(1);
}

describe('the reply-head timeout in force', () => {
  it('with nothing set, the built-in profile’s (hosted-compatible: 2m); stream idle, first token and retry statuses by default', async () => {
    r = await rig('one endpoint');
    expect(await settingsOf(r)).toEqual({
      response_timeout: { value: '2m', from: 'built-in profile hosted-compatible' },
      stream_idle_timeout: { value: '300s', from: 'default' },
      first_token_timeout: { value: '0s', from: 'default' },
      cold_first_token_timeout: { value: '0s', from: 'default' },
      retry_on_statuses: { value: [429, 500, 502, 503, 504], from: 'default' },
      continuation: { value: true, from: 'default' },
      continuation_max: { value: 1, from: 'default' },
      continuation_same_model_only: { value: false, from: 'default' },
    });
  });

  it('proxy.response_timeout set in the config wins over the built-in profile’s, and takes effect', async () => {
    r = await rig('one endpoint', { proxy: { response_timeout: '1s' } });
    expect((await settingsOf(r)).response_timeout).toEqual({ value: '1s', from: 'proxy.response_timeout' });
    await givenUpAfter(r, '1s', 'proxy.response_timeout');
  });

  it('a custom profile’s characteristics.timeout wins over proxy.response_timeout', async () => {
    const profiles_dir = customProfiles({ 'hosted-compatible': (p) => (p.characteristics.timeout = '1s') });
    r = await rig('one endpoint', { proxy: { response_timeout: '30s', profiles_dir } });
    expect((await settingsOf(r)).response_timeout).toEqual({ value: '1s', from: 'custom profile hosted-compatible' });
    await givenUpAfter(r, '1s', 'custom profile hosted-compatible');
  });

  it('an endpoint’s response_timeout wins over everything', async () => {
    const profiles_dir = customProfiles({ 'hosted-compatible': (p) => (p.characteristics.timeout = '20s') });
    r = await rig('one endpoint', { proxy: { response_timeout: '30s', profiles_dir }, endpointExtra: { response_timeout: '1s' } });
    expect((await settingsOf(r)).response_timeout).toEqual({ value: '1s', from: 'endpoint' });
    await givenUpAfter(r, '1s', 'endpoint');
  });
});

describe('the other per-family defaults follow the same rule', () => {
  it('stream idle, first token, cold first token and retry statuses: endpoint, custom profile, proxy, in that order', async () => {
    const profiles_dir = customProfiles({
      'hosted-compatible': (p) => Object.assign(p.characteristics, { first_token_timeout: '7s', retry_on_statuses: [503] }),
    });
    r = await rig('one endpoint', {
      proxy: { profiles_dir, stream_idle_timeout: '45s', first_token_timeout: '9s', cold_first_token_timeout: '2m' },
      endpointExtra: { cold_first_token_timeout: '90s' },
    });
    expect(await settingsOf(r)).toMatchObject({
      stream_idle_timeout: { value: '45s', from: 'proxy.stream_idle_timeout' },
      first_token_timeout: { value: '7s', from: 'custom profile hosted-compatible' },
      cold_first_token_timeout: { value: '90s', from: 'endpoint' },
      retry_on_statuses: { value: [503], from: 'custom profile hosted-compatible' },
    });
  });

  it('an endpoint’s stream_idle_timeout ends a silent stream after its own time', async () => {
    r = await rig('one endpoint', { endpointExtra: { stream_idle_timeout: '1s' } });
    r.primary.script({ stream: { stallAfter: 2 } });
    const reply = await send(r, { model: 'primary-model', messages: [{ role: 'user', content: 'hi' }], stream: true });
    expect(reply.status).toBe(200);
    expect(reply.text).toContain('sent nothing for 1s, stream_idle_timeout from endpoint');
  });
});

describe('gw validate', () => {
  it('prints each endpoint’s settings and where each came from', async () => {
    const file = writeConfig({
      proxy: { response_timeout: '20s', profiles_dir: '/nonexistent/profiles' },
      pipelines: { dir: '/nonexistent/pipelines' },
      discovery: { static: { endpoints: [endpoint('gpu', 'pagedengine', 'http://127.0.0.1:9', { first_token_timeout: '15s' })] } },
    });
    const lines: string[] = [];
    await validate(file, {}, (l) => lines.push(l), BUILTIN_PLUGINS);
    const line = lines.find((l) => l.startsWith('PASS endpoint gpu:'));
    expect(line).toBeDefined();
    expect(line).toContain('response_timeout 20s (proxy.response_timeout)');
    expect(line).toContain('first_token_timeout 15s (endpoint)');
    expect(line).toContain('stream_idle_timeout 300s (default)');
  });
});
