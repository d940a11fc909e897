// node:http requests for tests that need headers undici refuses to send, or timestamps per chunk.
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { waitFor } from './wait.js';

export interface RawReply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** The URL's path goes out byte for byte: a URL string would have its dot segments resolved. */
function target(url: string) {
  const m = /^http:\/\/([^/:]+):(\d+)(.*)$/.exec(url);
  if (!m) throw new Error(`not a loopback URL with a port: ${url}`);
  return { hostname: m[1], port: Number(m[2]), path: m[3] || '/' };
}

export function rawRequest(url: string, opts: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ ...target(url), method: opts.method ?? 'GET', headers: opts.headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

export interface TimedChunk {
  at: number;
  text: string;
}

/** Every chunk as it arrives, with its arrival time; `error` is set when the stream was cut. */
export function timedChunks(
  url: string,
  opts: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; headers: IncomingHttpHeaders; chunks: TimedChunk[]; error?: Error; headersAt: number }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: opts.method ?? 'POST', headers: { 'content-type': 'application/json', ...opts.headers }, agent: false }, (res) => {
      const headersAt = performance.now();
      const chunks: TimedChunk[] = [];
      res.setEncoding('utf8');
      res.on('data', (c: string) => chunks.push({ at: performance.now(), text: c }));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, chunks, headersAt }));
      res.on('error', (error) => resolve({ status: res.statusCode ?? 0, headers: res.headers, chunks, error, headersAt }));
      res.on('aborted', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, chunks, error: new Error('aborted'), headersAt }));
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

/**
 * Stream a reply in lock-step: the fake writes piece i only once the client has received the
 * head and i pieces (each ending with `terminator`). A gateway that held the head back or
 * batched pieces would stall the stream, so the test fails on a budget, not on a timing margin.
 * The gateway holds a stream's head and its `leading` pieces without content (a role-only chunk)
 * until its first content arrives, so those go out without waiting for the client.
 */
export function lockstep(
  fake: { behaviour: { beforeChunk: ((i: number) => Promise<void>) | null } },
  url: string,
  body: string,
  terminator: string,
  leading = 0,
): Promise<{ status: number; headers: IncomingHttpHeaders; pieces: string[] }> {
  let text = '';
  let head = false;
  const seen = () => text.split(terminator).length - 1;
  fake.behaviour.beforeChunk = (i) =>
    i <= leading ? Promise.resolve() : waitFor(() => head && seen() >= i, `the client to receive the head and ${i} pieces`).then(() => undefined);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ ...target(url), method: 'POST', headers: { 'content-type': 'application/json' }, agent: false }, (res) => {
      head = true;
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          pieces: text
            .split(terminator)
            .filter(Boolean)
            .map((p) => p + terminator),
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
