// The one rule by which a requested model name finds a listed one. Every lookup uses it: routing
// (Catalogue.servedBy, servedByAny), a family's v1/models/{id}, GET /gw/models/{id} and the
// messages API's v1/models/{id}, so a name found on one route is found on all. In order:
//  1. the name as listed;
//  2. a family whose engine reads a name without a tag as a default tag (profile
//     models.default_tag; Ollama: "llama3" is "llama3:latest"): a listed "name:<tag>" by "name";
//  3. a provider-prefixed family (models.provider_prefixed): "openai/gpt-4o" finds a listed
//     "gpt-4o" (the part after the first slash), then "gpt-4o" finds a listed "openai/gpt-4o".
// The first step that finds something ends the search, so a full name wins over a shortened
// one. The other names of a listed name are worked out when it is indexed: a lookup is map reads.
import type { Profile } from '../core/profiles.js';

/** What a family's engine makes of names (the profile's `models` block). */
export type NameRules = Pick<Profile['models'], 'default_tag' | 'provider_prefixed'>;

export interface Named<T> {
  /** The listed name that was found (the first one listed, when several share a key). */
  name: string;
  value: T;
}

/** "name" for a listed "name:<tag>" whose tag is `tag` (a colon before the last slash is a
 *  registry port, not a tag); undefined otherwise. */
function untagged(name: string, tag: string): string | undefined {
  const colon = name.lastIndexOf(':');
  return colon > 0 && colon > name.lastIndexOf('/') && name.slice(colon + 1) === tag ? name.slice(0, colon) : undefined;
}

/** The part after "provider/", or undefined when there is none. */
export function afterProvider(name: string): string | undefined {
  const slash = name.indexOf('/');
  return slash > 0 && slash < name.length - 1 ? name.slice(slash + 1) : undefined;
}

/**
 * Listed names → values (endpoints, a model), looked up by the rule above. Names may be added
 * from several families, each under its own rules (the messages API and /gw/models look across
 * families). A key met twice keeps its first entry, or `merge`s the values (endpoints lists).
 */
export class NameIndex<T> {
  private readonly exact = new Map<string, Named<T>>();
  private readonly byUntagged = new Map<string, Named<T>>();
  /** Names of provider-prefixed families: "provider/name" requests look here by "name". */
  private readonly prefixedExact = new Map<string, Named<T>>();
  private readonly byBare = new Map<string, Named<T>>();

  constructor(private readonly merge?: (a: T, b: T) => T) {}

  get size(): number {
    return this.exact.size;
  }

  add(name: string, value: T, rules: NameRules): void {
    this.put(this.exact, name, name, value);
    if (rules.default_tag) {
      const short = untagged(name, rules.default_tag);
      if (short !== undefined) this.put(this.byUntagged, short, name, value);
    }
    if (rules.provider_prefixed) {
      this.put(this.prefixedExact, name, name, value);
      const bare = afterProvider(name);
      if (bare !== undefined) this.put(this.byBare, bare, name, value);
    }
  }

  find(model: string): Named<T> | undefined {
    const hit = this.exact.get(model) ?? this.byUntagged.get(model);
    if (hit || this.prefixedExact.size === 0) return hit;
    const rest = afterProvider(model);
    return (rest !== undefined ? this.prefixedExact.get(rest) : undefined) ?? this.byBare.get(model);
  }

  /** Every listed name with its value (insertion order). */
  entries(): IterableIterator<Named<T>> {
    return this.exact.values();
  }

  private put(map: Map<string, Named<T>>, key: string, name: string, value: T): void {
    const had = map.get(key);
    if (!had) map.set(key, { name, value });
    else if (this.merge) had.value = this.merge(had.value, value);
  }
}
