// FNV-1a (32-bit): endpoint ids and status ETags (base36), rendezvous hashing's endpoint side.
export function fnv1a32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

export const fnv1a36 = (text: string): string => fnv1a32(text).toString(36);
