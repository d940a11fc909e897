// Third-party plugins import the running gateway by its package name, `inference-gateway` (and its
// subpath exports, such as `inference-gateway/inference-api`), from any folder, with nothing
// installed: a module resolve hook resolves that name, and only that name, as if the importing
// file lived inside this gateway's package. So every plugin shares the one copy of the API the
// gateway runs (its version, its module state), even a plugin with a copy of its own in its
// node_modules; any other package resolves from the plugin's folder as usual. (The name resolves
// through package.json "exports" to dist/: a gateway run from its TypeScript sources, as in the
// tests, hands plugins the built copy, a module instance of its own.)
import { register } from 'node:module';

// Runs on Node's loader thread. `module.register` (Node 20.6+; `registerHooks` is not in Node 20)
// takes a module URL: a data: URL, so the built package and the TypeScript sources the tests run
// register the same text. `self` is a file inside this package: resolving from there is Node's
// own self-reference through package.json "exports".
const HOOKS = `
let self;
export function initialize(data) { self = data.self; }
export function resolve(specifier, context, next) {
  if (specifier === 'inference-gateway' || specifier.startsWith('inference-gateway/')) return next(specifier, { ...context, parentURL: self });
  return next(specifier, context);
}
`;

let registered = false;

/** Route `inference-gateway` imports to this gateway, once per process, before a plugin is imported. */
export function routePluginImports(): void {
  if (registered) return;
  registered = true;
  register(`data:text/javascript,${encodeURIComponent(HOOKS)}`, { data: { self: import.meta.url } });
}
