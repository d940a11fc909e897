// Shared evidence (server.rate_limits.store: redis) for a replica started before Redis: its
// subscription is tried again once Redis answers, and a log line says so; until then it says it
// relies on its own evidence. A real redis-server, started late on the port the replica was given.
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { SharedEvidence, type Evidence } from '../../../engine/backends/sharing/shared-evidence.js';
import { freePort } from '../../helpers/llama-server.js';
import { haveRedis, RedisServer } from '../../helpers/redis.js';
import { waitFor } from '../../helpers/wait.js';

describe.skipIf(!haveRedis)('shared evidence, Redis started after the replica', () => {
  const redis = new RedisServer();
  const open: SharedEvidence[] = [];
  afterAll(async () => {
    for (const e of open) e.close();
    await redis.stop();
  });

  it('subscribes once Redis answers, says so, and receives what another replica publishes', async () => {
    redis.port = await freePort();
    const lines: { level: number; msg: string }[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const settings = { url: redis.url, key_prefix: 'gw-late', timeout: 300 };
    const got: Evidence[] = [];
    const late = new SharedEvidence(settings, log, (e) => got.push(e));
    open.push(late);
    await waitFor(() => lines.find((l) => l.msg.includes('could not subscribe')), 'the warning that it relies on its own evidence');
    expect(late.connected).toBe(false);

    await redis.start();
    await waitFor(() => lines.find((l) => l.msg.includes('subscribed now that Redis answers')), 'the line saying it subscribed');
    const other = new SharedEvidence(settings, pino({ level: 'silent' }), () => undefined);
    open.push(other);
    await waitFor(() => late.connected && other.connected, 'both replicas connected');
    const evidence: Evidence = { id: 'ep-1', kind: 'open', ms: 5000 };
    other.publish(evidence);
    await waitFor(() => got.length > 0, 'the evidence received');
    expect(got[0]).toMatchObject(evidence);
    expect(late.received).toBe(1);
  });
});
