import { keyHash } from '../dist/engine/core/keys.js';
import { instructionsPerRequest } from './instructions.js';
import { chatBody, forkReady, stopAll, streamBody } from './lib.js';
const KEY = 'gw-bench-key-0001';
const kind = process.argv[2] ?? 'chat';
const body = kind === 'chat' ? chatBody : streamBody;
const counts = kind === 'chat' ? { warm: 6000, count: 2000 } : { warm: 1500, count: 500 };
const { port } = await forkReady('backend.js', ['0']);
const root = new URL('..', import.meta.url).pathname;
try {
  for (const [name, lines, headers] of (process.env.ONLY_ON ? (a) => a.slice(1) : (a) => a)([
    ['off', [], {}],
    [
      'on',
      [`auth: { keys: [{ name: bench, hash: "${keyHash(KEY)}" }], admin: [bench], usage_file: /tmp/prof/u-${Date.now()}.json }`],
      { authorization: `Bearer ${KEY}` },
    ],
  ])) {
    const r = await instructionsPerRequest(root, port, body, counts, 1, '', lines, {
      type: 'pagedengine',
      path: '/gw/pagedengine/v1/chat/completions',
      headers,
    });
    console.log(name, Math.round(r.withoutCompiler), r.out);
  }
} finally {
  stopAll();
}
