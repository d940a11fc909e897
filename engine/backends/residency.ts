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
  /** The reports as read (name, loaded), for the host's workers. */
  private readonly entries = new Map<Endpoint, [string, boolean][]>();
  /** Told when an endpoint's report was set or dropped (the host passes it on to its workers). */
  onReport: ((ep: Endpoint) => void) | null = null;
  /** The catalogue's lists indexed by the lookup rule, made once per list (a list is replaced,
   *  never changed, when rediscovered). */
  private readonly listed = new WeakMap<readonly DiscoveredModel[], NameIndex<DiscoveredModel>>();
  private readonly inFlight;

  constructor(
    registry: EndpointRegistry,
    private readonly catalogue: Catalogue,
    private readonly reader: EngineReports,
    private readonly log: Logger,
  ) {
    this.inFlight = reader.singleFlight();
    registry.on('state', (ep: Endpoint) => {
      if (!ep.routable) this.forget(ep);
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
      this.forget(ep); // a reloaded profile may have dropped it
      return Promise.resolve();
    }
    return this.inFlight.run(ep, () => this.fetch(ep, path));
  }

  forget(ep: Endpoint): void {
    this.accept(ep, null);
  }

  /** An endpoint's report (name, loaded) or null for none: read here, or by the host. */
  accept(ep: Endpoint, entries: [string, boolean][] | null): void {
    if (entries === null) {
      if (!this.reports.delete(ep)) return;
      this.entries.delete(ep);
    } else {
      const index = new NameIndex<boolean>();
      for (const [name, loaded] of entries) index.add(name, loaded, ep.profile.models);
      this.reports.set(ep, index);
      this.entries.set(ep, entries);
      // A queue served by model takes what the engine holds from the engine itself.
      ep.queue?.turns?.observe(
        (model) => index.find(model)?.value,
        entries.filter(([, loaded]) => loaded).map(([name]) => name),
      );
    }
    this.onReport?.(ep);
  }

  entriesOf(ep: Endpoint): [string, boolean][] | null {
    return this.entries.get(ep) ?? null;
  }

  private async fetch(ep: Endpoint, path: string): Promise<void> {
    try {
      const body = (await this.reader.read(ep, path, `the ${path} reply`)).json();
      // An entry without `loaded` is listed because it is loaded (api/ps).
      const entries = parseModelList(body, ep.profile.request.response_format).map((m): [string, boolean] => [m.name, m.loaded ?? true]);
      // It may have gone down while this was under way: a report of an unroutable endpoint is not kept.
      if (ep.routable && !ep.retired) this.accept(ep, entries);
    } catch (err) {
      this.forget(ep);
      if (!this.reader.stopped)
        this.log.debug(
          { endpoint: ep.name, path, err: err instanceof SyntaxError ? 'not JSON' : (err as Error).message },
          'residency report failed; loaded models unknown',
        );
    }
  }
}
