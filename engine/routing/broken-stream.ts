// A reply that breaks after its head went out cannot become an error status any more. A stream
// then ends with an error in its own format, so the client's SDK raises it instead of waiting
// on a bare reset: SSE gets an error chunk in the route's shape (the messages API: `event: error`),
// NDJSON an {"error": …} line; then the connection closes. Any other reply is aborted.
import type { ServerResponse } from 'node:http';
import type { Endpoint } from '../backends/endpoints.js';
import { errorBody, gwError } from '../core/errors.js';
import type { ReplyHeaders } from '../core/json.js';
import type { Exchange } from './exchange.js';
import type { ReplyPlan } from './reply.js';
import { NDJSON_CONTENT_TYPE as NDJSON, SSE_CONTENT_TYPE as SSE } from './stream-watch.js';

/** What happened, in words, for the error the client receives and the log. */
export function brokenReason(error: Error, ep: Endpoint): string {
  const code = (error as { code?: string }).code;
  if (code === 'UND_ERR_BODY_TIMEOUT') return `sent nothing for ${ep.setting('stream_idle_timeout')}`;
  return `broke off the reply (${code ?? error.message})`;
}

/** Bytes that end the stream with an error, or null when its format has no way to say it. */
function errorFrame(format: Exchange['errorFormat'], endpoint: string, contentType: string, lastChunk: Buffer | null, reason: string): string | null {
  const err = gwError('UPSTREAM_STREAM_BROKEN', { endpoint, reason });
  const endsWith = (s: string) => lastChunk === null || lastChunk.toString('latin1', Math.max(0, lastChunk.length - s.length)) === s;
  if (SSE.test(contentType)) {
    // A partly written event is closed first, so ours is read as an event of its own.
    const sep = endsWith('\n\n') ? '' : endsWith('\n') ? '\n' : '\n\n';
    if (format === 'msgapi') return `${sep}event: error\ndata: ${errorBody(err, 'msgapi')}\n\n`;
    return `${sep}data: ${errorBody(err, format)}\n\n`;
  }
  // The native runner's stream: its clients read a line {"error": "…"}, whatever the route's format.
  if (NDJSON.test(contentType)) return `${endsWith('\n') ? '' : '\n'}${errorBody(err, 'localrunner')}\n`;
  return null;
}

/** End the client's reply with these last bytes, then close its connection. */
function endAndClose(res: ServerResponse, last: string): void {
  const socket = res.socket;
  res.end(last, () => socket?.end());
}

/** The upstream reply broke after the head reached the client: say so in the stream — a
 *  translated one with its plan's error event, a piped one with a frame in its format — or abort. */
export function endBroken(ex: Exchange, plan: ReplyPlan, endpoint: string, headers: ReplyHeaders, lastChunk: Buffer | null, reason: string): void {
  if (plan.kind === 'stream') return endAndClose(ex.res, plan.fail(`endpoint ${endpoint} ${reason}; the reply is incomplete`));
  // Bytes of ours fit only a plain stream: not past a declared length, not into compressed data.
  const plain = headers['content-length'] === undefined && String(headers['content-encoding'] ?? 'identity').toLowerCase() === 'identity';
  const frame = plain ? errorFrame(ex.errorFormat, endpoint, String(headers['content-type'] ?? ''), lastChunk, reason) : null;
  if (frame === null) ex.res.destroy();
  else endAndClose(ex.res, frame);
}
