// The resilience suite's rigs: a gateway in front of scripted providers (test/fakes), in the
// topologies the issue names — one endpoint; a fallback chain (primary-model → fallback-model on
// a second provider); two endpoints serving the same model — and the reading helpers the
// scenarios share (replies, streams, the access log, statistics, metrics).
import OpenAI from 'openai';
import { request } from 'undici';
import { ScriptedProvider, type ScriptedModel } from '../fakes/scripted-provider.js';
import { endpoint, startGateway, type Started } from './gateway.js';
import { waitFor } from './wait.js';

export type Topology = 'one endpoint' | 'fallback chain' | 'two endpoints';

export interface RigOptions {
  /** proxy.* settings (retry, timeouts). */
  proxy?: Record<string, unknown>;
  /** Other top-level config (merged last). */
  config?: Record<string, unknown>;
  /** ndjson: localrunner (Ollama api/chat); default: hosted-compatible chat completions. */
  mode?: 'openai' | 'ndjson';
  /** The primary provider's models (default primary-model with an 8192-token context). */
  primaryModels?: ScriptedModel[];
  /** The fallback provider's models (default fallback-model with a 128000-token context). */
  fallbackModels?: ScriptedModel[];
  /** Extra settings on every endpoint (check_interval, first_token_timeout…). */
  endpointExtra?: Record<string, unknown>;
}

export interface Rig {
  gw: Started;
  topology: Topology;
  primary: ScriptedProvider;
  /** The fallback model's provider (fallback chain) or the second endpoint (two endpoints). */
  other: ScriptedProvider | null;
  /** The chat route of the family. */
  path: string;
  close(): Promise<void>;
}

export const PRIMARY_MODELS: ScriptedModel[] = [{ name: 'primary-model', context: 8192 }];
export const FALLBACK_MODELS: ScriptedModel[] = [{ name: 'fallback-model', context: 128000 }];

export async function rig(topology: Topology, opts: RigOptions = {}): Promise<Rig> {
  const mode = opts.mode ?? 'openai';
  const type = mode === 'openai' ? 'hosted-compatible' : 'localrunner';
  const path = mode === 'openai' ? '/gw/hosted/v1/chat/completions' : '/gw/localrunner/api/chat';
  const primary = await new ScriptedProvider({ name: 'primary', mode, models: opts.primaryModels ?? PRIMARY_MODELS }).start();
  let other: ScriptedProvider | null = null;
  // Health checks far apart unless a test says otherwise: only the proxy path notices failures.
  const extra = { check_interval: '60s', ...opts.endpointExtra };
  const endpoints = [endpoint('primary', type, primary.url, { priority: 100, ...extra })];
  let config: Record<string, unknown> = {};
  if (topology === 'fallback chain') {
    other = await new ScriptedProvider({ name: 'fallback', mode, models: opts.fallbackModels ?? FALLBACK_MODELS }).start();
    endpoints.push(endpoint('fallback', type, other.url, { priority: 50, ...extra }));
    config = { model_fallbacks: { 'primary-model': ['fallback-model'] } };
  } else if (topology === 'two endpoints') {
    other = await new ScriptedProvider({ name: 'secondary', mode, models: PRIMARY_MODELS }).start();
    endpoints.push(endpoint('secondary', type, other.url, { priority: 50, ...extra }));
  }
  const gw = await startGateway({
    ...config,
    ...(opts.proxy ? { proxy: opts.proxy } : {}),
    ...opts.config,
    discovery: { static: { endpoints } },
  });
  return {
    gw,
    topology,
    primary,
    other,
    path,
    close: async () => {
      await gw.close();
      await primary.stop();
      await other?.stop();
    },
  };
}

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: any;
}

export const chatBody = (stream: boolean, model = 'primary-model') => ({ model, messages: [{ role: 'user', content: 'hello' }], stream });

/** One request through the gateway, read whole. */
export async function send(r: Rig, body: object = chatBody(false), headers: Record<string, string> = {}): Promise<Reply> {
  const res = await request(`${r.gw.url}${r.path}`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test', ...headers },
  });
  const text = await res.body.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.statusCode, headers: res.headers, text, json };
}

/** A backend that was down is back, but its breaker may still be open: the requests before its
 *  test request (or its next last resort) get a 503 whose Retry-After says when to come back (the gateway's
 *  own signal, followed as a client would); the one after is answered. */
export async function servedAfterOpenBreaker(r: Rig, body: object = chatBody(false)): Promise<Reply> {
  for (let i = 0; i < 10; i++) {
    const reply = await send(r, body);
    // A 503 with Retry-After: the breaker's open period, or the wait for the next last resort.
    if (!(reply.status === 503 && reply.headers['retry-after'] !== undefined)) {
      if (reply.status !== 200) throw new Error(`expected the request to be served, got ${reply.status} ${reply.text}`);
      return reply;
    }
    const wait = Number(reply.headers['retry-after']);
    if (!(wait >= 1 && wait <= 60)) throw new Error(`a 503 with Retry-After ${reply.headers['retry-after']}`);
    await new Promise((done) => setTimeout(done, wait * 1000));
  }
  throw new Error('still refused for an open breaker after 10 tries');
}

/** SSE events' data (the `data: ` stripped). */
export function sseData(text: string): string[] {
  return text
    .split('\n\n')
    .filter((e) => e.trim())
    .map((e) =>
      e
        .split('\n')
        .filter((l) => l.startsWith('data: '))
        .map((l) => l.slice(6))
        .join('\n'),
    );
}

/** NDJSON lines, parsed. */
export function ndjsonLines(text: string): any[] {
  return text
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

/** The content of a chat-completions SSE stream (chunks that parse), and its last event. */
export function sseContent(text: string): { content: string; last: string | undefined; done: boolean } {
  const data = sseData(text);
  let content = '';
  for (const d of data) {
    try {
      content += JSON.parse(d).choices?.[0]?.delta?.content ?? '';
    } catch {
      // a malformed chunk or [DONE]
    }
  }
  return { content, last: data.at(-1), done: data.includes('[DONE]') };
}

/** A stream read with the official openai client, as users run it: the text it assembled and
 *  the error it raised (undefined when it ended normally), with the last finish_reason. */
export async function openaiStream(
  r: Rig,
  headers: Record<string, string> = {},
  model = 'primary-model',
): Promise<{ text: string; error: any; finish: string | null; model: string | undefined }> {
  const client = new OpenAI({ baseURL: `${r.gw.url}/gw/hosted/v1`, apiKey: 'sk-test', maxRetries: 0, defaultHeaders: headers });
  let text = '';
  let finish: string | null = null;
  let seenModel: string | undefined;
  const error = await (async () => {
    const stream = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hello' }], stream: true });
    for await (const chunk of stream) {
      seenModel ??= chunk.model;
      text += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
  })().then(
    () => undefined,
    (e) => e,
  );
  return { text, error, finish, model: seenModel };
}

/** The access-log lines of the chat route, oldest first. */
export function accessLines(r: Rig): Record<string, any>[] {
  const tail = r.path.endsWith('/api/chat') ? '/api/chat' : '/chat/completions';
  return r.gw.logs.filter((l) => l.msg === 'request' && typeof l.path === 'string' && l.path.endsWith(tail));
}

/** Outcomes the access log's `tried` list may give a failed attempt are free-form ("503",
 *  "reset", "first_token_timeout"…); a success is never one of them. */
export const SUCCESS_OUTCOME = /^(ok|success|2\d\d)$/;

export async function statistics(r: Rig): Promise<{ requests_total: number; requests_failed: number }> {
  const res = await request(`${r.gw.url}/internal/status`);
  return ((await res.body.json()) as any).statistics;
}

export async function metricsText(r: Rig): Promise<string> {
  const res = await request(`${r.gw.url}/internal/metrics`);
  return res.body.text();
}

/** A request counted and logged as failed, never as a success: the failed-requests statistic
 *  grew by one, and the request's id has a warning (or worse) in the log besides its access line. */
export async function expectCountedFailed(r: Rig, failedBefore: number): Promise<void> {
  await waitFor(async () => (await statistics(r)).requests_failed === failedBefore + 1, 'the request to be counted as failed');
  const line = await waitFor(() => accessLines(r).at(-1), 'the access log line');
  const warned = r.gw.logs.some((l) => l.req === line.req && l !== line && typeof l.level === 'number' && l.level >= 40);
  if (!warned) throw new Error(`request ${line.req} was not logged as failed: ${JSON.stringify(r.gw.logs.filter((l) => l.req === line.req))}`);
}

/** A request counted as a success: the failed-requests statistic did not move. */
export async function expectCountedSuccess(r: Rig, failedBefore: number, totalBefore: number): Promise<void> {
  await waitFor(async () => (await statistics(r)).requests_total === totalBefore + 1, 'the request to be counted');
  if ((await statistics(r)).requests_failed !== failedBefore) throw new Error('a finished answer was counted as failed');
}
