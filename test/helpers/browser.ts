// Headless Chromium for browser tests: Debian's chromium (installed by .ci/run), driven by
// playwright-core, with the page's code bundled by esbuild from test/fixtures/browser.
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { chromium, type Browser } from 'playwright-core';

const CANDIDATES = [process.env.GW_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

/** The browser's path; undefined when none is installed (the test then skips, unless CI requires it). */
export const chromiumPath = CANDIDATES.find((p): p is string => !!p && existsSync(p));

/** .ci/run sets GW_REQUIRE_BROWSER=1: there a missing browser fails the test instead of skipping it. */
export const browserMissing = !chromiumPath && process.env.GW_REQUIRE_BROWSER !== '1';

export function launchBrowser(): Promise<Browser> {
  if (!chromiumPath) throw new Error("no Chromium found: install Debian's chromium (apt-get install -y chromium) or set GW_CHROMIUM");
  return chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
}

/** One ES module for the browser from a fixture under test/fixtures/browser. */
export async function bundle(fixture: string): Promise<string> {
  const entry = fileURLToPath(new URL(`../fixtures/browser/${fixture}`, import.meta.url));
  const out = await build({ entryPoints: [entry], bundle: true, platform: 'browser', format: 'esm', target: 'es2022', write: false, logLevel: 'silent' });
  return out.outputFiles[0].text;
}

/** A page origin of its own (another port, so every call to the gateway is cross-origin). */
export async function servePage(script: string): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    if (req.url === '/app.js') return res.writeHead(200, { 'content-type': 'text/javascript' }).end(script);
    res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>app</title><script type="module" src="/app.js"></script>');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/`, close: () => new Promise((r) => server.close(() => r())) };
}
