// logging.format: text on a running gateway: every entry one readable line, requests included;
// a format that does not exist fails loading, naming the key and the values it takes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { checkConfig } from '../../engine/core/config.js';
import { Gateway } from '../../engine/kernel/gateway.js';
import { FakeBackend } from '../../engine/demo/index.js';
import { BUILTIN_PLUGINS } from '../../plugins/index.js';
import { endpoint, NO_RATE_LIMITS, writeConfig } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

let local: FakeBackend, gw: Gateway, url: string;
const lines: string[] = [];

beforeAll(async () => {
  local = await new FakeBackend({ family: 'localrunner', name: 'local', models: [{ name: 'llama3.1:8b' }] }).start();
  const configFile = writeConfig({
    server: { host: '127.0.0.1', port: 0, rate_limits: NO_RATE_LIMITS },
    logging: { level: 'debug', format: 'text' },
    discovery: { static: { endpoints: [endpoint('local', 'localrunner', local.url, { auth: { type: 'basic', username: 'u', password: 'pw-never-logged' } })] } },
  });
  gw = await Gateway.create({ configFile, env: {}, logDestination: { write: (line: string) => void lines.push(line) }, plugins: BUILTIN_PLUGINS });
  url = `http://127.0.0.1:${(await gw.listen()).port}`;
});
afterAll(async () => {
  await gw.close();
  await local.stop();
});

describe('logging.format: text', () => {
  it('writes every entry as one line with the time, the level name and the message', async () => {
    await (await request(`${url}/gw/localrunner/api/chat`, { method: 'POST', body: '{"model":"llama3.1:8b","messages":[],"stream":false}' })).body.dump();
    const line = await waitFor(() => lines.find((l) => l.includes(' request ') && l.includes('path=/gw/localrunner/api/chat')), 'the request to be logged');
    expect(line).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+Z INFO  request req=req-\S+ method=POST path=\/gw\/localrunner\/api\/chat status=200 endpoint=local model=llama3\.1:8b ms=[\d.]+ /);
    expect(lines.find((l) => l.includes('gateway listening'))).toMatch(/ INFO  gateway listening host=127\.0\.0\.1 port=\d+ /);
    for (const l of lines) {
      expect(l.endsWith('\n') && l.indexOf('\n') === l.length - 1).toBe(true);
      expect(l.startsWith('{')).toBe(false);
      expect(l).not.toContain('pw-never-logged');
    }
  });
});

describe('a logging.format that does not exist', () => {
  it('fails loading, naming the key and the formats there are', () => {
    const { problems } = checkConfig(writeConfig({ logging: { format: 'pretty' } }), {});
    expect(problems).toContainEqual(expect.objectContaining({ level: 'fail', field: 'logging.format', fix: 'use one of: json, text' }));
  });
});
