// A profile's model patterns, compiled once: capabilities (vision, embeddings, code) and context
// windows from case-sensitive globs, first match wins, else the platform default.
import type { Profile } from '../core/profiles.js';

export const DEFAULT_CONTEXT = 4096;

export function globToRegExp(glob: string): RegExp {
  const body = glob
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${body}$`);
}

export interface ModelTraits {
  vision: boolean;
  embedding: boolean;
  code: boolean;
  contextWindow: number;
}

export type TraitMatcher = (name: string) => ModelTraits;

export function compileTraits(profile: Profile): TraitMatcher {
  const compile = (globs: string[] | undefined) => (globs ?? []).map(globToRegExp);
  const vision = compile(profile.models.capability_patterns.vision);
  const embeddings = compile(profile.models.capability_patterns.embeddings);
  const code = compile(profile.models.capability_patterns.code);
  const contexts = profile.models.context_patterns.map((c) => ({ re: globToRegExp(c.pattern), context: c.context }));
  const any = (res: RegExp[], name: string) => res.some((re) => re.test(name));
  return (name) => ({
    vision: any(vision, name),
    embedding: any(embeddings, name),
    code: any(code, name),
    contextWindow: contexts.find((c) => c.re.test(name))?.context ?? DEFAULT_CONTEXT,
  });
}
