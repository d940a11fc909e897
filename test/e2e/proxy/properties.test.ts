// Property: whatever a client sends — generated model names, paths, header values, JSON shapes,
// raw bytes — the gateway lives, and every answer is a well-formed HTTP response: a backend's
// reply, or the gateway's own (its errors in the envelope, never a 500). fast-check prints the
// seed and the shrunk counterexample on failure; FC_SEED and FC_RUNS replay or widen a run.
import fc from 'fast-check';
import { Agent, request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unsafePath } from '../../../engine/core/request-path.js';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

const RUNS = Number(process.env.FC_RUNS ?? 250);
const SEED = process.env.FC_SEED === undefined ? undefined : Number(process.env.FC_SEED);
const FAMILIES = ['pagedengine', 'localrunner', 'cppengine', 'npuengine'];

let fakes: FakeBackend[], gw: Started, agent: Agent;
beforeAll(async () => {
  fakes = await Promise.all(FAMILIES.map((family) => new FakeBackend({ family, name: family }).start()));
  gw = await startGateway({
    server: { read_header_timeout: '2s', request_limits: { max_body_size: 300_000 } },
    model_aliases: { 'my-alias': ['test-model'], constructor: ['test-model'] },
    discovery: { static: { endpoints: fakes.map((f) => endpoint(f.name, f.family, f.url, { check_interval: '60s' })) } },
  });
  agent = new Agent({ keepAlive: true, maxSockets: 4 });
});
afterAll(async () => {
  agent.destroy();
  await closeAll(gw, fakes);
});

// ---- what a client may send ----------------------------------------------------------------

const printable = fc
  .integer({ min: 0x21, max: 0x7e })
  .map((c) => String.fromCharCode(c))
  .filter((c) => !'/?#%'.includes(c));
const segment = fc.oneof(
  fc.constantFrom('v1', 'chat', 'completions', 'models', 'api', 'generate', 'messages', 'count_tokens', 'status', 'health', 'tags'),
  fc.constantFrom('.', '..', '%2e%2e', '.%2E', '%2F', '%5c', '..;x', '__proto__', 'constructor', 'toString', '%00', '%ZZ', '%', '%E0%A4%A', ''),
  fc.string({ unit: printable, maxLength: 12 }),
  fc.string({ unit: 'grapheme', maxLength: 6 }).map(encodeURIComponent),
);
const mount = fc.constantFrom(
  '/gw/pagedengine',
  '/gw/localrunner',
  '/gw/cppengine',
  '/gw/npuengine',
  '/gw/proxy',
  '/gw/msgapi/v1',
  '/gw/models',
  '/internal',
  '/gw/nope',
  '',
);
const query = fc
  .array(fc.tuple(fc.constantFrom('format', 'provider', 'capability', 'detailed', '__proto__', 'x'), segment), { maxLength: 3 })
  .map((pairs) => (pairs.length ? `?${pairs.map(([k, v]) => `${k}=${v}`).join('&')}` : ''));
const knownRoute = fc.constantFrom(
  '/gw/pagedengine/v1/chat/completions',
  '/gw/localrunner/api/chat',
  '/gw/localrunner/api/generate',
  '/gw/cppengine/completion',
  '/gw/npuengine/api/v1/chat/completions',
  '/gw/proxy/v1/chat/completions',
  '/gw/msgapi/v1/messages',
  '/gw/msgapi/v1/messages/count_tokens',
  '/gw/models',
  '/gw/models/test-model',
  '/internal/status',
  '/internal/status/models',
  '/gw/localrunner/api/pull',
);
const path = fc.oneof(
  { weight: 3, arbitrary: knownRoute },
  { weight: 2, arbitrary: fc.tuple(mount, fc.array(segment, { maxLength: 5 }), query).map(([m, segs, q]) => `${m}/${segs.join('/')}${q}`) },
);

const model = fc.oneof(
  fc.constantFrom('test-model', 'my-alias', 'constructor', '__proto__', 'toString', '', 'm\r\nX-Injected: yes', 'модель-😀', 'a\u0000b', '\ud800'),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.nat({ max: 120_000 }).map((n) => 'x'.repeat(n)),
  fc.jsonValue({ maxDepth: 2 }),
);
const content = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.jsonValue({ maxDepth: 3 }),
  fc.array(
    fc.record(
      {
        type: fc.constantFrom('text', 'image', 'tool_use', 'tool_result', 'thinking', 'x'),
        text: fc.jsonValue({ maxDepth: 1 }),
        name: fc.jsonValue({ maxDepth: 1 }),
        content: fc.jsonValue({ maxDepth: 2 }),
        source: fc.jsonValue({ maxDepth: 2 }),
      },
      { requiredKeys: ['type'] },
    ),
    { maxLength: 3 },
  ),
);
const chatBody = fc
  .record(
    {
      model,
      stream: fc.oneof(fc.boolean(), fc.jsonValue({ maxDepth: 0 })),
      max_tokens: fc.oneof(fc.integer(), fc.jsonValue({ maxDepth: 0 })),
      messages: fc.oneof(
        fc.array(fc.record({ role: fc.constantFrom('user', 'assistant', 'system', 'x'), content }), { maxLength: 3 }),
        fc.jsonValue({ maxDepth: 2 }),
      ),
      system: fc.jsonValue({ maxDepth: 2 }),
      tools: fc.jsonValue({ maxDepth: 3 }),
      tool_choice: fc.jsonValue({ maxDepth: 2 }),
      prompt: fc.string({ maxLength: 10 }),
    },
    { requiredKeys: ['model'] },
  )
  .map((b) => JSON.stringify(b));
const body = fc.oneof(
  { weight: 4, arbitrary: chatBody },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b).toString('latin1')) },
  { weight: 1, arbitrary: fc.constant(undefined) },
);
// What Node's client lets through in a header value: visible Latin-1 and space.
const headerValue = fc.string({
  unit: fc
    .integer({ min: 0x20, max: 0xff })
    .filter((c) => c !== 0x7f)
    .map((c) => String.fromCharCode(c)),
  maxLength: 300,
});
const headers = fc.record(
  {
    'x-request-id': headerValue,
    'content-type': fc.constantFrom('application/json', 'text/plain', 'application/json; charset=utf-8', 'multipart/form-data; boundary=x'),
    'if-none-match': headerValue,
    'x-custom': headerValue,
    authorization: headerValue,
    origin: headerValue,
  },
  { requiredKeys: [] },
);
const method = fc.constantFrom('GET', 'POST', 'POST', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS');

// ---- what counts as a well-formed answer -----------------------------------------------------

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function send(req: { method: string; path: string; headers: Record<string, string>; body?: string }): Promise<Answer> {
  // Node's client frames an OPTIONS or DELETE body only when told its length.
  const headers = req.body === undefined ? req.headers : { ...req.headers, 'content-length': String(Buffer.byteLength(req.body)) };
  return new Promise((resolve, reject) => {
    const r = httpRequest({ hostname: '127.0.0.1', port: gw.gw.port, path: req.path, method: req.method, headers, agent }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      res.on('error', reject);
    });
    r.on('error', reject);
    r.end(req.body);
  });
}

function checkAnswer(a: Answer, method: string): void {
  expect(a.status).toBeGreaterThanOrEqual(100);
  expect(a.status).toBeLessThan(600);
  // A backend's own reply, passed through (a reply made by the backend's HTTP parser, a 400 say,
  // has no header of the fake's, but the gateway names the endpoint it came from).
  const type = String(a.headers['content-type'] ?? '');
  if (a.headers['x-fake-backend'] || (a.headers['x-gw-endpoint'] && !type.startsWith('application/json'))) return;
  expect(a.status, `a gateway 500: ${a.body}`).not.toBe(500);
  if (a.status >= 400) {
    expect(type).toMatch(/^application\/json/);
    if (method === 'HEAD') return;
    const error = JSON.parse(a.body).error;
    // localrunner's native routes answer in their own shape: the text alone.
    if (typeof error === 'string') return void expect(error).not.toBe('');
    expect(typeof error.message).toBe('string');
    expect(typeof error.type).toBe('string');
    expect(['string', 'number']).toContain(typeof error.code);
  } else if (type.startsWith('application/json') && method !== 'HEAD') {
    expect(() => JSON.parse(a.body)).not.toThrow();
  }
  for (const name of ['x-gw-model', 'x-gw-request-id', 'x-gw-routing-reason']) expect(String(a.headers[name] ?? '').length).toBeLessThanOrEqual(256);
}

/** fast-check's report, with long generated runs of one character cut short (a 100 KB model
 *  name would otherwise fill the terminal). */
const options = (numRuns: number) => ({
  numRuns,
  seed: SEED,
  reporter(details: fc.RunDetails<any>) {
    if (!details.failed) return;
    const text = fc.defaultReportMessage(details) ?? 'property failed';
    throw new Error(
      text.replace(/(.)\1{99,}/g, (run, ch) => `${ch.repeat(20)}…(${run.length} of ${JSON.stringify(ch)})`),
      { cause: details.errorInstance },
    );
  },
});

async function alive(): Promise<void> {
  const a = await send({ method: 'GET', path: '/internal/health', headers: {} });
  expect(a.status).toBe(200);
}

describe('property: any request gets a well-formed answer and the gateway lives', () => {
  it('over generated methods, paths, headers and bodies', async () => {
    await fc.assert(
      fc.asyncProperty(method, path, headers, body, async (m, p, h, b) => {
        const a = await send({ method: m, path: p, headers: h, body: m === 'GET' || m === 'HEAD' ? undefined : b });
        checkAnswer(a, m);
      }),
      options(RUNS),
    );
    await alive();
    // Nothing that climbs out of its mount ever reached a backend.
    for (const f of fakes) for (const r of f.received) expect(unsafePath(r.url.split('?')[0]), r.url).toBeUndefined();
  });

  it('over raw bytes in the request head', async () => {
    const line = fc.tuple(
      fc.constantFrom('GET', 'POST', 'BREW', 'G\u0000T', ''),
      fc.oneof(path, fc.string({ unit: 'binary-ascii', maxLength: 30 })),
      fc.constantFrom('HTTP/1.1', 'HTTP/1.0', 'HTTP/9.9', ''),
    );
    const headerLines = fc.array(fc.string({ unit: 'binary-ascii', maxLength: 60 }), { maxLength: 4 });
    await fc.assert(
      fc.asyncProperty(line, headerLines, fc.boolean(), async ([m, p, v], extra, close) => {
        const head = `${m} ${p} ${v}\r\nHost: gw\r\n${extra.map((x) => `${x}\r\n`).join('')}${close ? 'Connection: close\r\n' : ''}\r\n`;
        const reply = await new Promise<string>((resolve) => {
          const socket = connect(gw.gw.port, '127.0.0.1');
          let text = '';
          socket.on('data', (d) => (text += d.toString('latin1')));
          socket.on('close', () => resolve(text));
          socket.on('error', () => undefined);
          // Half-close after the head: the gateway answers what it got, then the connection ends
          // (read_header_timeout bounds the wait for a head that never completes).
          socket.end(Buffer.from(head, 'latin1'));
        });
        if (reply !== '') expect(reply).toMatch(/^HTTP\/1\.1 \d{3} /);
      }),
      options(Math.ceil(RUNS / 3)),
    );
    await alive();
  });
});
