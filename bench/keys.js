// What API keys and token accounting cost per request, counted by callgrind in one run of the
// working tree: keys off; keys on (one key: authentication, the relay counting the tokens the
// engine reports — a stream asked for its usage and that event kept from the client — and the
// usage filed per key, model and endpoint); and keys on with a token limit (a reservation before
// each request, settled after). A chat request and a 10-event stream, PAIRS times each (default
// 3): `node bench/keys.js [PAIRS] [chat|stream]`. Prints each round and the medians against keys off.
// Every setup is sent the same request, an API key in Authorization included: clients send one
// whether or not the gateway checks it (the OpenAI SDKs require one), so what is compared is the
// gateway's work, not the client's header.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { keyHash } from '../dist/engine/core/keys.js';
import { hasCallgrind, instructionsPerRequest } from './instructions.js';
import { chatBody, forkReady, stopAll, streamBody } from './lib.js';

if (!hasCallgrind()) {
  console.log('valgrind (callgrind) is not installed: nothing counted');
  process.exit(0);
}
const pairs = Number(process.argv[2] ?? 3);
const KEY = 'gw-bench-key-0001';
const state = mkdtempSync(join(tmpdir(), 'gw-bench-keys-'));
const auth = (more) => [
  `auth: { keys: [{ name: bench, hash: "${keyHash(KEY)}"${more} }], admin: [bench], usage_file: ${join(state, `usage-${Math.random()}.json`)} }`,
];
const SETUPS = {
  'keys off': { lines: () => [], headers: { authorization: `Bearer ${KEY}` } },
  'keys on': { lines: () => auth(''), headers: { authorization: `Bearer ${KEY}` } },
  'keys on, token limit': { lines: () => auth(', tokens_per_minute: 1000000000'), headers: { authorization: `Bearer ${KEY}` } },
};
const KINDS = { chat: [chatBody, { warm: 10000, count: 4000 }], stream: [streamBody, { warm: 2000, count: 800 }] };
const root = new URL('..', import.meta.url).pathname;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const { port } = await forkReady('backend.js', ['0']);
try {
  for (const [kind, [body, counts]] of Object.entries(KINDS).filter(([k]) => !process.argv[3] || k === process.argv[3])) {
    const got = Object.fromEntries(Object.keys(SETUPS).map((k) => [k, []]));
    for (let i = 0; i < pairs; i++) {
      for (const [name, s] of Object.entries(SETUPS)) {
        const route = { type: 'pagedengine', path: '/gw/pagedengine/v1/chat/completions', headers: s.headers };
        const r = await instructionsPerRequest(root, port, body, counts, 1, '', s.lines(), route);
        got[name].push(r.withoutCompiler);
      }
      console.log(
        `${kind} round ${i + 1}: ${Object.entries(got)
          .map(([n, xs]) => `${n} ${Math.round(xs.at(-1))}`)
          .join(', ')}`,
      );
    }
    const off = median(got['keys off']);
    for (const [name, xs] of Object.entries(got)) {
      const m = median(xs);
      console.log(`| ${kind} | ${name} | ${Math.round(m)} | ${name === 'keys off' ? '—' : `${((m / off - 1) * 100).toFixed(1)}%`} |`);
    }
  }
} finally {
  stopAll();
}
