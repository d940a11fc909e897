// How a backend's reply reaches the client, and the one writer of such replies: the head of one
// relayed as it comes (the backend's own, or a translated stream's), and a whole reply (a buffer
// plan's, or an answer held back while another candidate was tried), shaped the same way either
// way. Heads go through the kernel's head writer (res.writeHead: the respond hook, X-Gw-*, CORS).
import type { ServerResponse } from 'node:http';
import type { ReplyHeaders } from '../core/json.js';

/** How a reply is shaped on its way to the client, decided when the backend's head arrives. */
export type ReplyPlan =
  /** As the backend sent it: status, headers (less hop-by-hop ones) and body, chunk by chunk;
   *  `headers` (flat) are added to the backend's. */
  | PipePlan
  /** A translated stream: a head of our own, each backend chunk turned into output as it comes. */
  | StreamPlan
  /** Read whole, then answered: `finish` builds the reply from the backend's status and body.
   *  Past `limit` the request fails, or, given an `overflow` pipe plan, the reply is relayed as
   *  that plan says after all (what was read first, then the rest as it comes). */
  | { kind: 'buffer'; limit: number; overflow?: PipePlan; discard?: false; finish: BufferFinish }
  /** The same, for a reply whose body is never used: read to its end and dropped as it comes
   *  (nothing kept, so no limit); `finish` gets an empty body. */
  | { kind: 'buffer'; discard: true; finish: BufferFinish };

export type PipePlan = {
  kind: 'pipe';
  headers?: string[];
  /** The bytes of each chunk as they go to the client; of a watched stream, only its whole
   *  events from its terminator on (what an engine adds after its answer: a usage event). */
  filter?: (chunk: Buffer) => Buffer;
};
export type StreamPlan = {
  kind: 'stream';
  status: number;
  headers: string[];
  first?: string;
  chunk(data: Buffer): string;
  end(): string;
  fail(reason: string): string;
};
type BufferFinish = (status: number, body: Buffer) => { status: number; headers: string[]; body: string | Buffer };

export const PIPE: PipePlan = { kind: 'pipe' };
const EMPTY = Buffer.alloc(0);

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);
const HOP_BY_HOP_AND_LENGTH = new Set([...HOP_BY_HOP, 'content-length']);

/** The backend's headers as a flat list, less hop-by-hop ones; `withLength: false` drops
 *  Content-Length too (a body measured again). */
export function backendHeaders(headers: ReplyHeaders, withLength = true): string[] {
  const skip = withLength ? HOP_BY_HOP : HOP_BY_HOP_AND_LENGTH;
  const out: string[] = [];
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || skip.has(name)) continue;
    if (typeof value === 'string') out.push(name, value);
    else for (const v of value) out.push(name, v);
  }
  return out;
}

/** The head of a reply relayed as it comes. Returns whether it is a stream (no length known):
 *  its head then goes out at once, before the first event. */
export function writeRelayHead(res: ServerResponse, plan: PipePlan | StreamPlan, status: number, headers: ReplyHeaders): boolean {
  if (plan.kind === 'stream') {
    res.writeHead(plan.status, [...plan.headers, 'cache-control', 'no-cache']);
    if (plan.first) res.write(plan.first);
    return true;
  }
  const out = backendHeaders(headers);
  if (plan.headers) for (const h of plan.headers) out.push(h);
  res.writeHead(status, out);
  if (headers['content-length'] !== undefined) return false;
  res.flushHeaders();
  return true;
}

/** A whole reply, shaped by the plan as it would have been had it been relayed as it came. A
 *  HEAD gets the head only (a piped one keeps the backend's Content-Length). */
export function writeWhole(res: ServerResponse, method: string, plan: ReplyPlan, status: number, headers: ReplyHeaders, body: Buffer): void {
  const head = method === 'HEAD';
  if (plan.kind === 'buffer') {
    const reply = plan.finish(status, plan.discard ? EMPTY : body);
    const out = typeof reply.body === 'string' ? Buffer.from(reply.body) : reply.body;
    res.writeHead(reply.status, [...reply.headers, 'content-length', String(out.length)]);
    res.end(head ? undefined : out);
  } else if (plan.kind === 'stream') {
    res.writeHead(plan.status, [...plan.headers, 'cache-control', 'no-cache']);
    res.end((plan.first ?? '') + plan.chunk(body) + plan.end());
  } else {
    const out = backendHeaders(headers, head);
    if (plan.headers) for (const h of plan.headers) out.push(h);
    if (!head) out.push('content-length', String(body.length));
    res.writeHead(status, out);
    res.end(head ? undefined : body);
  }
}
