// The dashboard's static files (the package's dashboard/ folder, plus uPlot's dist files from
// node_modules): read once at load, each with a strong ETag, served under a strict CSP (scripts
// and styles from this origin only, no inline code, fetches only to this origin).
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { extname, join } from 'node:path';
import { definePlugin, fnv1a36, gwError, PACKAGE_ROOT } from '../engine/api.js';
import { etagMatches } from './reports/status-json.js';

const BASE = '/internal/ui/';
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');
const SECURITY_HEADERS = [
  'content-security-policy',
  CSP,
  'x-content-type-options',
  'nosniff',
  'referrer-policy',
  'no-referrer',
  'x-frame-options',
  'DENY',
  'cache-control',
  'no-cache',
];

interface StaticFile {
  body: Buffer;
  headers: string[];
  etag: string;
}

function staticFile(path: string): StaticFile {
  const body = readFileSync(path);
  const etag = `"${fnv1a36(body.toString('latin1'))}-${body.length.toString(36)}"`;
  return { body, etag, headers: ['content-type', TYPES[extname(path)] ?? 'application/octet-stream', 'etag', etag, ...SECURITY_HEADERS] };
}

/** URL path under /internal/ui/ → file, built once. */
function loadFiles(): Map<string, StaticFile> {
  const dir = join(PACKAGE_ROOT, 'dashboard');
  const files = new Map<string, StaticFile>();
  for (const name of readdirSync(dir)) if (TYPES[extname(name)]) files.set(BASE + name, staticFile(join(dir, name)));
  files.set(BASE, files.get(`${BASE}index.html`)!);
  const require = createRequire(import.meta.url);
  for (const name of ['uPlot.iife.min.js', 'uPlot.min.css']) files.set(`${BASE}vendor/${name}`, staticFile(require.resolve(`uplot/dist/${name}`)));
  return files;
}

export default definePlugin<Record<string, never>>({
  name: 'dashboard-files',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks) {
    const files = loadFiles();
    hooks.dispatch.tap('dashboard-files', (ctx) => {
      const path = ctx.pathname;
      // /internal/ui → /internal/ui/, so the page's relative URLs resolve under it.
      if (path === '/internal/ui') return ctx.reply(308, null, ['location', BASE + ctx.path.slice(path.length)]);
      const file = files.get(path);
      if (!file) throw gwError('ROUTE_NOT_FOUND', { method: ctx.method, path });
      if (etagMatches(ctx.header('if-none-match'), file.etag)) return ctx.reply(304, null, file.headers);
      return ctx.reply(200, file.body, file.headers);
    });
  },
});
