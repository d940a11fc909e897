// Which models each endpoint has loaded now: a first token from a model that must be loaded
// first is slow for a reason (a cold load, not a stall), and the attempt loop gives it the longer
// cold_first_token_timeout. Two sources, the fresher first:
//  - the family's own report (profile api.residency_path: localrunner's api/ps lists what is
//    loaded; mlxmulti's v1/models/status lists every model with `loaded`), read after each
//    passing health check (engine-reports.ts) — a failure makes the answer unknown;
//  - the catalogue, where discovery's list says `loaded` (LM Studio `state`, mlxmulti).
// A report is forgotten when the endpoint stops being routable. Names follow the lookup rule
// (model-names.ts): "llama3" finds a loaded "llama3:latest".
import type { Logger } from 'pino';
import type { Catalogue } from './catalogue.js';
import type { Endpoint } from './endpoints.js';
import type { EngineReports } from './engine-reports.js';
import { parseModelList, type DiscoveredModel } from './model-lists.js';
import { NameIndex } from './model-names.js';
import type { EndpointRegistry } from './registry.js';

export class Residency {
  /** Listed name → loaded, per endpoint that reported; a name not listed is not loaded. */
  private readonly reports = new Map<Endpoint, NameIndex<boolean>>();
  /** The catalogue's lists indexed by the lookup rule, made once per list (a list is replaced,
   *  never changed, when rediscovered). */
  private readonly listed = new WeakMap<readonly DiscoveredModel[], NameIndex<DiscoveredModel>>();
  private readonly inFlight;

  constructor(registry: EndpointRegistry, private readonly catalogue: Catalogue, private readonly reader: EngineReports, private readonly log: Logger) {
    this.inFlight = reader.singleFlight();
    registry.on('state', (ep: Endpoint) => {
      if (!ep.routable) this.reports.delete(ep);
    });
  }

  /** Whether the endpoint has the model loaded now; undefined when that is not known. */
  isLoaded(ep: Endpoint, model: string): boolean | undefined {
    const report = this.reports.get(ep);
    if (report) return report.find(model)?.value ?? false;
    const list = this.catalogue.listOf(ep);
    if (!list) return undefined;
    let index = this.listed.get(list);
    if (!index) {
      index = new NameIndex<DiscoveredModel>();
      for (const m of list) index.add(m.name, m, ep.profile.models);
      this.listed.set(list, index);
    }
    return index.find(model)?.value.loaded;
  }

  /** Ask the endpoint what is loaded (after a passing health check); one request at a time. */
  refresh(ep: Endpoint): Promise<void> {
    const path = ep.profile.api.residency_path;
    if (!path) {
      this.reports.delete(ep); // a reloaded profile may have dropped it
      return Promise.resolve();
    }
    return this.inFlight.run(ep, () => this.fetch(ep, path));
  }

  forget(ep: Endpoint): void {
    this.reports.delete(ep);
  }

  private async fetch(ep: Endpoint, path: string): Promise<void> {
    try {
      const body = (await this.reader.read(ep, path, `the ${path} reply`)).json();
      const index = new NameIndex<boolean>();
      // An entry without `loaded` is listed because it is loaded (api/ps).
      for (const m of parseModelList(body, ep.profile.request.response_format)) index.add(m.name, m.loaded ?? true, ep.profile.models);
      // It may have gone down while this was under way: a report of an unroutable endpoint is not kept.
      if (ep.routable && !ep.retired) this.reports.set(ep, index);
    } catch (err) {
      this.reports.delete(ep);
      if (!this.reader.stopped) this.log.debug({ endpoint: ep.name, path, err: err instanceof SyntaxError ? 'not JSON' : (err as Error).message }, 'residency report failed; loaded models unknown');
    }
  }
}
