// Conversation affinity: a conversation's requests go to the endpoint that holds its prompt in
// cache. Its key picks among the equally preferred candidates by weighted rendezvous hashing
// (highest random weight): each endpoint scores weight / -ln(u), u drawn from a hash of the key
// and the endpoint's id. No table and no shared state, so every worker and replica with the same
// endpoints gives the same answer; an endpoint that leaves moves only its own conversations; a
// weight-2 endpoint takes twice the conversations. Bounded load (consistent hashing with bounded
// loads, Mirrokni et al.): an endpoint already past max_load_factor × its weighted share of the
// candidates' load passes the key to the next in the key's order, so affinity never builds a
// hot spot. A new conversation has nothing cached anywhere: its opening turn goes to the least
// loaded candidate whenever its home is busier. A conversation placed away from its home (so, or
// by the load bound) keeps to where its cache now is: the placement is remembered host-wide
// (backends/placements.ts) and is its home from then on. The key comes from a session header or
// the conversation's opening (affinity-key.ts).
import type { AffinityNote, Endpoint } from '../../engine/api.js';

export interface AffinityKey {
  /** 64 bits of the key's hash, as two 32-bit halves. */
  readonly hi: number;
  readonly lo: number;
  /** 53 of those bits as one number: what a placement is remembered by. */
  readonly id: number;
  /** Where it came from: a header name, or "conversation" (a hash of its opening). */
  readonly source: string;
  /** The request's body: whether it opens its conversation is read from it when that decides. */
  readonly body: Buffer | null;
  /** Set by balancing: where the conversation's cache is (an earlier placement among the
   *  candidates, else the hash's choice), the hash's choice, the placement remembered (null:
   *  none), and whether the load bound passed the home on or an opening turn went elsewhere. */
  home: Endpoint | null;
  hashed: Endpoint | null;
  stored: Endpoint | null;
  overloaded: boolean;
  leastLoaded: boolean;
}

/** Does the request open its conversation? Read from its bytes, and only when that decides: an
 *  earlier answer is the JSON string "assistant" (its role) in every API, a Responses turn may
 *  name its predecessor or carry a tool's output instead; a bare prompt (no messages or input)
 *  grows with its conversation and cannot tell. */
export function openingTurn(body: Buffer | null): boolean {
  if (body === null || (body.indexOf('"messages"') < 0 && body.indexOf('"input"') < 0)) return false;
  return body.indexOf('"assistant"') < 0 && body.indexOf('"previous_response_id"') < 0 && body.indexOf('"function_call_output"') < 0;
}

/** murmur3's finaliser over two words: a well-mixed 32 bits. */
function mix(a: number, b: number): number {
  let h = Math.imul(a ^ Math.imul(b, 0x9e3779b1), 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The endpoint's rendezvous score for the key (higher wins): weight / -ln(u), u in (0, 1). */
export function score(key: AffinityKey, ep: Endpoint): number {
  const u = (mix(key.hi, ep.idHash) * 2 ** 21 + (mix(key.lo, ep.idHash ^ 0x5bd1e995) >>> 11) + 0.5) / 2 ** 53;
  return ep.weight / -Math.log(u);
}

/** `tier` in the key's order: its home first — where it was placed before (`placed`, when among
 *  the tier), else the hash's choice — unless an opening turn finds a less-loaded candidate (then
 *  the least loaded) or the load bound passes the home on (then the first within its bound); the
 *  rest by score, so a failover goes where the conversation would move anyway, and it moves
 *  once. The key's fields say how that went. */
export function rankKey(tier: readonly Endpoint[], key: AffinityKey, maxLoadFactor: number, now: number, placed?: Endpoint): Endpoint[] {
  const n = tier.length;
  const scores = new Array<number>(n);
  const ranked = new Array<Endpoint>(n);
  let total = 0;
  let weights = 0;
  // Insertion by score, best first: tiers are a handful of endpoints.
  for (let i = 0; i < n; i++) {
    const ep = tier[i];
    const s = score(key, ep);
    let j = i;
    for (; j > 0 && scores[j - 1] < s; j--) {
      scores[j] = scores[j - 1];
      ranked[j] = ranked[j - 1];
    }
    scores[j] = s;
    ranked[j] = ep;
    total += ep.load(now);
    weights += ep.weight;
  }
  key.hashed = ranked[0];
  if (placed !== undefined && placed !== ranked[0]) {
    const i = ranked.indexOf(placed);
    if (i > 0) ranked.unshift(...ranked.splice(i, 1));
  }
  key.home = ranked[0];
  if (n === 1) return ranked;
  if (key.home === key.hashed && total > 0) {
    // Busier than the least loaded, and nothing cached anywhere yet: the least loaded takes it.
    let least = ranked[0].load(now) / ranked[0].weight;
    let best = 0;
    for (let i = 1; i < n; i++) {
      const l = ranked[i].load(now) / ranked[i].weight;
      if (l < least) [least, best] = [l, i];
    }
    if (best > 0 && openingTurn(key.body)) {
      key.leastLoaded = true;
      ranked.unshift(...ranked.splice(best, 1));
      return ranked;
    }
  }
  // The request being placed counts: an idle fleet's bound is at least one request each.
  const within = (ep: Endpoint) => ep.load(now) < Math.ceil((maxLoadFactor * (total + 1) * ep.weight) / weights);
  if (within(ranked[0])) return ranked;
  key.overloaded = true;
  const i = ranked.findIndex(within);
  if (i > 0) ranked.unshift(...ranked.splice(i, 1));
  return ranked;
}

/** The X-Gw-Affinity value: hit, moved (<why>) — failover when another endpoint than the
 *  planned home answered — or none (no key). */
export function affinityOutcome(note: AffinityNote, answered: Endpoint | null): string {
  if (note.home === null) return 'none';
  if (note.moved !== null) return `moved (${note.moved})`;
  return answered !== null && answered !== note.home ? 'moved (failover)' : 'hit';
}
