// The scenarios run back to back against ONE gateway, as the failure-injection benchmark runs
// them: what one scenario leaves behind (an open breaker, a Retry-After pause, an endpoint marked
// Unhealthy) must not turn the next rescuable request into a failure.
import { afterEach, describe, expect, it } from 'vitest';
import { openaiStream, rig, send, servedAfterOpenBreaker, type Rig, type Topology } from '../../helpers/resilience.js';

let r: Rig | null = null;
afterEach(async () => {
  await r?.close();
  r = null;
});

const TEXT = 'Hello from primary';

/** Every scenario a backend can be rescued from, each preceded by one it cannot. */
async function backToBack(topology: Topology): Promise<void> {
  // A small backoff keeps the run short; the breaker's own settings are the defaults.
  r = await rig(topology, { proxy: { retry: { backoff: '20ms' }, first_token_timeout: '1s' } });
  const p = r.primary;
  const served = async (what: string) => {
    const reply = await send(r!);
    expect(reply.status, what).toBe(200);
    return reply;
  };

  // Persistent 503: honest (one endpoint) or rescued (chain); either way the breaker has seen
  // several failures in a row.
  p.always({ status: 503 });
  const persistent = await send(r);
  expect(persistent.status).toBe(topology === 'one endpoint' ? 503 : 200);
  p.always({ ok: {} });
  // One 500, right after: rescued, although the breaker may have opened.
  p.script({ status: 500 });
  await served('one 500 after a persistent 503');
  // A 429 with a short Retry-After: rescued.
  p.script({ status: 429, headers: { 'retry-after': '1' } });
  await served('429 with Retry-After after a 500');
  // A reset before the headers, twice in a row: rescued.
  p.script('reset', 'reset');
  await served('resets');
  // A stream cut before its first content, then a malformed first chunk: rescued, whole.
  p.script({ stream: { cutAfter: 0 } }, { stream: { malformedAt: 0 } });
  const s = await openaiStream(r);
  expect(s.error).toBeUndefined();
  expect(s.text).toMatch(/^Hello from (primary|fallback)/);
  // A slow first token: rescued.
  p.script({ stream: { roleOnlyThenStallMs: 5000 } });
  const slow = await openaiStream(r);
  expect(slow.error).toBeUndefined();
  // Down and back: served again by the breaker's test request (the refusals before it say when).
  await p.setDown(true);
  await send(r);
  await p.setDown(false);
  const back = await servedAfterOpenBreaker(r);
  if (topology === 'one endpoint') expect(back.json.choices[0].message.content).toBe(TEXT);
}

describe('scenarios back to back on one gateway', () => {
  it('one endpoint: every rescuable request is rescued whatever came before it', () => backToBack('one endpoint'));
  it('fallback chain: the same', () => backToBack('fallback chain'));
});
