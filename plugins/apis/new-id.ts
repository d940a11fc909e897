// Ids in the style of the APIs the gateway answers in (msg_01…, toolu_01…, resp_…, fc_…): the
// prefix, then 22 base62 characters from a pool of random bytes drawn 4 KiB at a time (one
// system call per ~180 ids, not one per id).
import { randomBytes } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

let pool = Buffer.alloc(0);
let offset = 0;

export function newId(prefix: string): string {
  if (offset + 22 > pool.length) {
    pool = randomBytes(4096);
    offset = 0;
  }
  let out = prefix;
  for (let i = 0; i < 22; i++) out += BASE62[pool[offset++] % 62];
  return out;
}
