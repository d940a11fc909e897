// logging.format: text on a running gateway: every entry one readable line, requests included;
// a format that does not exist fails loading, naming the key and the values it takes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { request } from 'undici';
import { stringify } from 'yaml';
import { checkConfig } from '../../../engine/core/config.js';
import { Gateway } from '../../../engine/kernel/gateway.js';
import { FakeBackend } from '../../../engine/demo/index.js';
import { BUILTIN_PLUGINS } from '../../../plugins/index.js';
import { endpoint, NO_RATE_LIMITS, writeConfig } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

let local: FakeBackend, gw: Gateway, url: string, configFile: string, config: Record<string, any>;
const lines: string[] = [];

beforeAll(async () => {
  local = await new FakeBackend({ family: 'localrunner', name: 'local', models: [{ name: 'llama3.1:8b' }] }).start();
  config = {
    server: { host: '127.0.0.1', port: 0, rate_limits: NO_RATE_LIMITS },
    logging: { level: 'debug', format: 'text' },
    pipelines: { watch: false },
    discovery: {
      static: { endpoints: [endpoint('local', 'localrunner', local.url, { auth: { type: 'basic', username: 'u', password: 'pw-never-logged' } })] },
    },
  };
  configFile = writeConfig(config);
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
    expect(line).toMatch(
      /^\d{4}-\d\d-\d\dT[\d:.]+Z INFO {2}request req=req-\S+ method=POST path=\/gw\/localrunner\/api\/chat status=200 endpoint=local model=llama3\.1:8b ms=[\d.]+ /,
    );
    expect(lines.find((l) => l.includes('gateway listening'))).toMatch(/ INFO {2}gateway listening host=127\.0\.0\.1 port=\d+ /);
    for (const l of lines) {
      expect(l.endsWith('\n') && l.indexOf('\n') === l.length - 1).toBe(true);
      expect(l.startsWith('{')).toBe(false);
      expect(l).not.toContain('pw-never-logged');
    }
  });

  it('keeps the format through a reload that changes it, and says so', async () => {
    writeFileSync(configFile, stringify({ ...config, logging: { level: 'debug', format: 'json' } }));
    expect(await gw.reload('test')).toBe(true);
    expect(lines.find((l) => l.includes('logging.format takes effect at the next restart'))).toMatch(
      / WARN {2}logging\.format takes effect at the next restart; still logging as before format=text\n$/,
    );
    expect(lines.some((l) => / INFO {2}configuration reloaded reason=test generation=2 /.test(l))).toBe(true);
  });
});

describe('a logging.format that does not exist', () => {
  it('fails loading, naming the key and the formats there are', () => {
    const { problems } = checkConfig(writeConfig({ logging: { format: 'pretty' } }), {});
    expect(problems).toContainEqual(expect.objectContaining({ level: 'fail', field: 'logging.format', fix: 'use one of: json, text' }));
  });
});
