// What translating a request costs over proxying it, counted by callgrind (bench/instructions.js):
// the same chat request three ways through one gateway in front of the lean backend registered as
// `mlxsingle` (no messages API, no Responses API: both are translated) — proxied as is to its chat
// route, as a messages request (/gw/msgapi/v1/messages) and as a Responses request
// (/gw/openai/v1/responses) — plain and streamed (10 events). The messages translation is counted
// on the build before the Responses work too (BASELINE), so the Responses translation is held
// against what translating the messages API cost then, as issue 21 asks.
// Standalone: `npm run build && node bench/translation.js [--quick]` (starts its own backend).
import { hasCallgrind, instructionsPerRequest } from './instructions.js';
import { buildBaseline, removeBaseline } from './failover.js';
import { here, pct, quick, runAlone } from './lib.js';
import { join } from 'node:path';

const BASELINE = '12f7756';
const repo = join(here, '..');
const MLX = ', max_concurrent_requests: 0';
const SYSTEM = 'You are a helpful assistant.';
const ASK = 'Say hello to the benchmark in one short sentence, please.';

const bodies = (stream) => ({
  plain: JSON.stringify({
    model: 'bench-model',
    stream,
    max_tokens: 64,
    temperature: 0.7,
    messages: [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: ASK },
    ],
  }),
  messages: JSON.stringify({ model: 'bench-model', stream, max_tokens: 64, temperature: 0.7, system: SYSTEM, messages: [{ role: 'user', content: ASK }] }),
  responses: JSON.stringify({ model: 'bench-model', stream, max_output_tokens: 64, temperature: 0.7, instructions: SYSTEM, input: ASK }),
});
const PATHS = { plain: '/gw/mlxsingle/v1/chat/completions', messages: '/gw/msgapi/v1/messages', responses: '/gw/openai/v1/responses' };

export async function translationInstructions(backendPort) {
  if (!hasCallgrind()) return '(Translation instructions not counted: valgrind is not installed.)\n';
  const baseline = buildBaseline(BASELINE);
  const rows = [];
  const verdicts = [];
  try {
    for (const stream of [false, true]) {
      const n = stream ? { warm: quick ? 100 : 600, count: quick ? 100 : 300 } : { warm: quick ? 500 : 3000, count: quick ? 500 : 1500 };
      const b = bodies(stream);
      const count = (root, kind) =>
        instructionsPerRequest(root, backendPort, b[kind], n, 1, MLX, [], { type: 'mlxsingle', path: PATHS[kind] }).then((r) => r.withoutCompiler);
      const plain = await count(repo, 'plain');
      const messages = await count(repo, 'messages');
      const responses = await count(repo, 'responses');
      const before = baseline ? { plain: await count(baseline, 'plain'), messages: await count(baseline, 'messages') } : null;
      const kind = stream ? 'streaming (10 events)' : 'non-streaming';
      const added = (x, base) => `+${Math.round(x - base)} (${pct(x / base - 1)})`;
      rows.push(
        `| ${kind} | ${Math.round(plain)} | ${added(messages, plain)} | ${added(responses, plain)} | ${before ? added(before.messages, before.plain) : '—'} |`,
      );
      const today = before ? before.messages - before.plain : messages - plain;
      const cost = responses - plain;
      verdicts.push(
        `| a translated Responses request, ${kind}, adds at most what a translated messages request added before it (${before ? BASELINE : 'this build'}) | ${Math.round(cost)} vs ${Math.round(today)} instructions | ${cost <= today ? 'met' : 'NOT met'} |`,
      );
    }
  } finally {
    if (baseline) removeBaseline(baseline);
  }
  return `Instructions per request (callgrind, the JIT compiler's own work left out; ${quick ? 'quick run' : '1500 chat requests and 300 streams after warm-ups of 3000 and 600'}), one gateway per
count in front of the lean backend as \`mlxsingle\`: **plain** is the chat request proxied as is; the other columns
are what translating the same request adds to it, now and on ${BASELINE} (before the Responses translation and the
shared translator it brought).

| request | plain | messages translated, added | Responses translated, added | messages translated on ${BASELINE}, added |
|---|---|---|---|---|
${rows.join('\n')}

| target (issue 21) | measured | verdict |
|---|---|---|
${verdicts.join('\n')}
`;
}

await runAlone(import.meta.url, translationInstructions);
