// The endpoints a routing step works on: its route's family (the proxy routes), or every family
// (the messages API, the generic proxy, /gw/openai/v1). One object answers for both, chosen once
// when the step is applied, so that nothing on the request's path asks which.
import type { Endpoint, PluginEnv, Profile } from '../../engine/api.js';
import { outOfRotation } from './unavailable-hint.js';

export interface Families {
  /** The family named in errors; undefined across every family. */
  readonly label: string | undefined;
  /** Routable endpoints, in configuration order (the registry's array: replaced, never mutated). */
  routable(): readonly Endpoint[];
  /** Every configured endpoint, family by family (a retired one is no longer listed). */
  configured(): readonly Endpoint[];
  /** How many are configured (compared with the routable count: is anything out of rotation?). */
  configuredCount(): number;
  /** The endpoints whose model list names `model`, routable or not. */
  servedBy(model: string): readonly Endpoint[];
  /** Whether any model list is known yet (an empty catalogue routes by family alone). */
  known(): boolean;
}

/** The families of a step: its route's, or every family when its route has none (one, where only
 *  one family is loaded). */
export function familiesOf(env: PluginEnv): Families {
  const list = env.profile ? [env.profile] : env.profiles.list;
  return list.length === 1 ? oneFamily(env, list[0]) : allFamilies(env);
}

function oneFamily(env: PluginEnv, profile: Profile): Families {
  const { endpoints, catalogue } = env;
  const name = profile.name;
  return {
    label: name,
    routable: () => endpoints.routable(name),
    configured: () => endpoints.endpoints(name),
    configuredCount: () => endpoints.endpoints(name).length,
    servedBy: (model) => catalogue.servedBy(name, model),
    known: () => catalogue.family(name).known,
  };
}

function allFamilies(env: PluginEnv): Families {
  const { endpoints, catalogue } = env;
  const profiles = env.profiles.list;
  return {
    label: undefined,
    routable: () => endpoints.routableAll,
    configured: () => profiles.flatMap((p) => endpoints.endpoints(p.name)),
    configuredCount: () => endpoints.all.length,
    servedBy: (model) => catalogue.servedByAny(model),
    known: () => catalogue.anyKnown(),
  };
}

/** Out of rotation by their health (Unhealthy, Offline), and still configured: what a last resort may try. */
export const downIn = (families: Families): Endpoint[] => families.configured().filter((e) => !e.retired && outOfRotation(e));
