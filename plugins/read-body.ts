// Read the request body into one buffer, within the size limit (413 past it, before any backend
// is contacted). One buffer keeps the body replayable for failover; it is parsed only if a
// later step asks (ctx.json()).
import { configValue } from '../engine/config.js';
import { gwError } from '../engine/errors.js';
import { definePlugin } from '../engine/plugin.js';
import type { Context } from '../engine/context.js';

interface Options { max_bytes?: number; max_bytes_from?: string }

function read(ctx: Context, limit: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = ctx.req;
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.removeAllListeners('data');
        req.resume();
        reject(gwError('BODY_TOO_LARGE', { limit }));
        return;
      }
      chunks.push(chunk);
    });
    req.once('end', () => {
      ctx.body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
      resolve();
    });
    req.once('error', reject);
  });
}

export default definePlugin<Options>({
  name: 'read-body',
  schema: {
    type: 'object', additionalProperties: false,
    properties: {
      max_bytes: { type: 'integer', minimum: 1, description: 'Default: server.request_limits.max_body_size' },
      max_bytes_from: { type: 'string', pattern: '^[a-z_]+(\\.[a-z_]+)*$', description: 'Take the limit from this config key instead (e.g. translators.msgapi.max_message_size)' },
    },
  },
  apply(hooks, o, env) {
    const fromConfig = o.max_bytes_from ? configValue(env.config, o.max_bytes_from) : undefined;
    if (o.max_bytes_from && typeof fromConfig !== 'number') throw new Error(`read-body: config key ${o.max_bytes_from} is not a number`);
    const limit = o.max_bytes ?? (fromConfig as number | undefined) ?? env.config.server.request_limits.max_body_size;
    hooks.request.tapPromise('read-body', async (ctx) => {
      const h = ctx.req.headers;
      if (h['content-length'] === undefined && h['transfer-encoding'] === undefined) return;
      if (Number(h['content-length']) > limit) throw gwError('BODY_TOO_LARGE', { limit });
      await read(ctx, limit);
    });
  },
});
