// Read the request body into one buffer, within the size limit (413 past it, before any backend
// is contacted). One buffer keeps the body replayable for failover; it is parsed only if a
// later step asks (ctx.bodyJson()). A declared length over the limit is refused before a byte is
// read, so `Expect: 100-continue` gets its 413 without being invited to send the body; a body
// that stops arriving for server.body_idle_timeout ends with 408 and a closed connection.
import { configValue, definePlugin, gwError, parseDuration, type Context } from '../engine/api.js';

interface Options {
  max_bytes?: number;
  max_bytes_from?: string;
}

function read(ctx: Context, limit: number, idleMs: number, idleText: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = ctx.req;
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    let idle: NodeJS.Timeout | undefined;
    const settle = (err?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(idle);
      if (!err) {
        ctx.body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
        resolve();
        return;
      }
      req.removeAllListeners('data');
      reject(err);
    };
    // Most bodies come in the packet that brought the head: parsed whole before this microtask
    // runs, they need no timer. Only a body still arriving gets one.
    queueMicrotask(() => {
      if (settled || req.complete) return;
      idle = setTimeout(() => {
        // The client stalled mid-body: answer, then close (the rest of its body never comes).
        ctx.res.shouldKeepAlive = false;
        settle(gwError('BODY_TIMEOUT', { timeout: idleText }));
      }, idleMs).unref();
    });
    req.on('data', (chunk: Buffer) => {
      idle?.refresh();
      size += chunk.length;
      if (size > limit) {
        settle(gwError('BODY_TOO_LARGE', { limit }));
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.once('end', () => settle());
    req.once('error', () => settle(gwError('BAD_REQUEST', { reason: 'the client closed the connection before the body was complete' })));
  });
}

export default definePlugin<Options>({
  name: 'read-body',
  provides: ['body'],
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      max_bytes: { type: 'integer', minimum: 1, description: 'Default: server.request_limits.max_body_size' },
      max_bytes_from: {
        type: 'string',
        pattern: '^[a-z_]+(\\.[a-z_]+)*$',
        description: 'Take the limit from this config key instead (e.g. translators.msgapi.max_message_size)',
      },
    },
  },
  apply(hooks, o, env) {
    const fromConfig = o.max_bytes_from ? configValue(env.config, o.max_bytes_from) : undefined;
    if (o.max_bytes_from && typeof fromConfig !== 'number') throw new Error(`read-body: config key ${o.max_bytes_from} is not a number`);
    const limit = o.max_bytes ?? (fromConfig as number | undefined) ?? env.config.server.request_limits.max_body_size;
    const idleText = env.config.server.body_idle_timeout;
    const idleMs = parseDuration(idleText);
    hooks.request.tapPromise('read-body', async (ctx) => {
      const h = ctx.req.headers;
      if (h['content-length'] === undefined && h['transfer-encoding'] === undefined) return;
      if (Number(h['content-length']) > limit) throw gwError('BODY_TOO_LARGE', { limit });
      // The server leaves `Expect: 100-continue` to us: invite the body only now that it fits.
      if (h.expect?.toLowerCase().includes('100-continue')) ctx.res.writeContinue();
      await read(ctx, limit, idleMs, idleText);
    });
  },
});
