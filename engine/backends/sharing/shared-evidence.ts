// What one replica learns about an endpoint that spares the others (server.rate_limits.store:
// redis): a circuit breaker that requests opened, and a Retry-After pause the backend asked for,
// published on one Redis channel and applied by every other replica to the same endpoint (by its
// id, the hash of its URL: the same in every replica with the same configuration). Durations, not
// instants, travel: the replicas' clocks may differ. Breakers that health checks open are not
// shared: each replica checks for itself, from where it stands. Best effort: a replica that
// misses a message (Redis away) relies on its own evidence, as without sharing.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { redisClient } from './redis-client.js';
import type { Logger } from 'pino';
import type { RedisSettings } from './redis-buckets.js';

export interface Evidence {
  /** The endpoint's id. */
  id: string;
  /** open: a breaker requests opened; pause: a Retry-After. */
  kind: 'open' | 'pause';
  /** For how long, from when it was seen. */
  ms: number;
}

const MAX_MS = 3_600_000;

export class SharedEvidence {
  /** Evidence this replica received from the others. */
  received = 0;
  private readonly sender = randomBytes(8).toString('hex');
  private readonly pub: Redis;
  private readonly sub: Redis;
  private readonly channel: string;
  private subscribed = false;

  constructor(
    readonly settings: RedisSettings,
    log: Logger,
    onEvidence: (e: Evidence) => void,
  ) {
    const options = {
      ...(settings.password === undefined ? {} : { password: settings.password }),
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: settings.timeout,
      connectTimeout: Math.max(1000, settings.timeout),
    };
    this.pub = redisClient(settings.url, options);
    this.sub = redisClient(settings.url, { ...options, enableOfflineQueue: true });
    this.channel = `${settings.key_prefix}:evidence`;
    for (const c of [this.pub, this.sub]) c.on('error', () => undefined);
    // Subscribed once Redis answers, however late: tried again each time the connection is ready
    // until it holds (a replica started before Redis); once it does, ioredis keeps it across
    // reconnections.
    let refused = false;
    const subscribe = (): void => {
      if (this.subscribed) return;
      this.sub.subscribe(this.channel).then(
        () => {
          if (this.subscribed) return;
          this.subscribed = true;
          if (refused)
            log.info({ channel: this.channel }, "shared evidence: subscribed now that Redis answers; this replica receives the others' evidence again");
        },
        (err: Error) => {
          if (refused) return;
          refused = true;
          log.warn({ error: err.message }, 'shared evidence: could not subscribe; this replica relies on its own until Redis answers');
        },
      );
    };
    subscribe();
    this.sub.on('ready', subscribe);
    this.sub.on('message', (_channel: string, text: string) => {
      const e = parse(text);
      if (!e || e.sender === this.sender) return;
      this.received++;
      onEvidence(e);
    });
  }

  /** Tell the other replicas (best effort: lost while Redis is away). */
  publish(e: Evidence): void {
    this.pub.publish(this.channel, JSON.stringify({ ...e, sender: this.sender })).catch(() => undefined);
  }

  /** Both connections up and the subscription held: what is published now reaches the others,
   *  and what they publish reaches this replica. */
  get connected(): boolean {
    return this.subscribed && this.pub.status === 'ready' && this.sub.status === 'ready';
  }

  close(): void {
    this.pub.disconnect();
    this.sub.disconnect();
  }
}

/** A message from another replica, checked: anything else on the channel is ignored. */
function parse(text: string): (Evidence & { sender: string }) | undefined {
  try {
    const e = JSON.parse(text);
    if (typeof e?.id !== 'string' || (e.kind !== 'open' && e.kind !== 'pause') || typeof e.sender !== 'string') return undefined;
    if (typeof e.ms !== 'number' || !Number.isFinite(e.ms) || e.ms <= 0) return undefined;
    return { id: e.id, kind: e.kind, ms: Math.min(e.ms, MAX_MS), sender: e.sender };
  } catch {
    return undefined;
  }
}
