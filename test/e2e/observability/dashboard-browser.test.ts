// The dashboard in a real headless Chromium (Debian's chromium through playwright-core): it loads
// with no console error under its CSP, asks nothing of another origin, shows every configured
// endpoint and the models per family, polls with If-None-Match, and shows an endpoint going down.
// Screenshots of the three tabs are kept in test-artifacts/ (the paths are printed).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeBackend } from '../../../engine/demo/index.js';
import { browserMissing, launchBrowser } from '../../helpers/browser.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

const ARTIFACTS = join(process.cwd(), 'test-artifacts');
const WAIT = { timeout: 30_000 };

describe.skipIf(browserMissing)('the dashboard in Chromium', () => {
  let paged: FakeBackend, local: FakeBackend, chat: FakeBackend, gw: Started;
  let browser: Browser, page: Page;
  const consoleErrors: string[] = [];
  const foreign: string[] = [];
  const conditional: string[] = [];

  const chatCompletion = () =>
    request(`${gw.url}/gw/pagedengine/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'Qwen2.5-7B', messages: [{ role: 'user', content: 'x' }] }),
    }).then((r) => r.body.dump());

  async function screenshot(name: string) {
    mkdirSync(ARTIFACTS, { recursive: true });
    const path = join(ARTIFACTS, `dashboard-${name}.png`);
    await page.screenshot({ path, fullPage: true });
    console.log(`dashboard screenshot: ${path}`);
  }

  beforeAll(async () => {
    paged = await new FakeBackend({
      family: 'pagedengine',
      reply: 'hi',
      models: [{ name: 'Qwen2.5-7B' }, { name: 'Mistral-7B' }, { name: 'bge-m3-embed' }],
    }).start();
    local = await new FakeBackend({ family: 'localrunner', reply: 'hi', models: [{ name: 'llama3.1:8b' }] }).start();
    chat = await new FakeBackend({ family: 'mlxsingle', reply: 'hi', models: [{ name: 'qwen-chat' }] }).start();
    gw = await startGateway({
      discovery: {
        static: {
          endpoints: [
            endpoint('gpu-paged', 'pagedengine', paged.url),
            // One model at a time on its GPU: its queue serves by model (the row says what it holds).
            endpoint('workstation', 'localrunner', local.url, { model_switching: { models_at_once: 1 } }),
            endpoint('mac-mlx', 'mlxsingle', chat.url),
          ],
        },
      },
    });
    // Some traffic for the counters: chat completions and one translated messages request.
    for (let i = 0; i < 3; i++) await chatCompletion();
    await request(`${gw.url}/gw/msgapi/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'qwen-chat', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }),
    }).then((r) => r.body.dump());
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
    page.on('console', (m) => m.type() === 'error' && consoleErrors.push(m.text()));
    page.on('pageerror', (e) => consoleErrors.push(String(e)));
    page.on('response', (r) => r.status() >= 400 && consoleErrors.push(`${r.status()} ${r.url()}`));
    page.on('request', (r) => {
      if (!r.url().startsWith(`${gw.url}/`)) foreign.push(r.url());
      if (r.headers()['if-none-match']) conditional.push(new URL(r.url()).pathname);
    });
    // interval=1: a poll every second, so the test waits on page content, not on a timer.
    await page.goto(`${gw.url}/internal/ui/?interval=1`);
  });
  afterAll(async () => {
    await browser?.close();
    await closeAll(gw, [paged, local, chat]);
  });

  it('shows every configured endpoint as healthy, and the counters', async () => {
    for (const name of ['gpu-paged', 'workstation', 'mac-mlx']) await page.locator(`#health-strip .pill.healthy[data-endpoint="${name}"]`).waitFor(WAIT);
    await page.locator('#cards .card', { hasText: 'Routable endpoints' }).filter({ hasText: '3 / 3' }).waitFor(WAIT);
    await page.locator('#translators tbody td', { hasText: 'msgapi' }).first().waitFor(WAIT);
  });

  it('polls with If-None-Match and takes a 304', async () => {
    await page.waitForResponse((r) => r.url().endsWith('/internal/status/endpoints') && r.status() === 304, WAIT);
    expect(conditional).toContain('/internal/status');
  });

  it('charts the request rate and latency from successive polls of the counters', async () => {
    // Traffic until the page shows a rate above zero (bounded: the wait's own 30 s ends it).
    let seen = false;
    const traffic = (async () => {
      for (let i = 0; i < 3000 && !seen; i++) await chatCompletion();
    })();
    try {
      await page.locator('#chart-rate-now', { hasText: /^(?!0\.00)[\d.]+ now$/ }).waitFor(WAIT);
      await page.locator('#chart-latency-now', { hasText: / (ms|s) now$/ }).waitFor(WAIT);
    } finally {
      seen = true;
      await traffic;
    }
    await screenshot('overview');
  });

  it('shows an endpoint going down, on the overview and the endpoints tab', async () => {
    local.behaviour.healthStatus = 500;
    await page.locator('#health-strip .pill.unhealthy[data-endpoint="workstation"]').waitFor(WAIT);
    await page.click('nav a[data-tab="endpoints"]');
    const row = page.locator('#endpoint-table tr[data-endpoint="workstation"]');
    await row.locator('td.health', { hasText: 'unhealthy' }).waitFor(WAIT);
    // What its engine holds (its api/ps), who waits for which model, the switches and the longest wait.
    await row.locator('.turns', { hasText: /^holds llama3\.1:8b · nobody waiting · \d+ switches · longest wait / }).waitFor(WAIT);
    await page.locator('#endpoint-table tr[data-endpoint="gpu-paged"] td.health', { hasText: /^\s*healthy$/ }).waitFor(WAIT);
    expect(await page.locator('#endpoint-table tbody tr').count()).toBe(3);
    // Load as the engine reports it (vLLM's /metrics: requests it serves for other clients), the
    // weight, and the time to first byte of the chat replies it served.
    paged.behaviour.otherLoad = { running: 2, waiting: 1 };
    const paged_ = page.locator('#endpoint-table tr[data-endpoint="gpu-paged"]');
    await paged_.locator('td.load', { hasText: /^3$/ }).waitFor(WAIT);
    expect(await paged_.locator('td.load').getAttribute('title')).toMatch(
      /^0 in flight from this gateway; the engine reports 2 running, 1 waiting \(3 for others\)/,
    );
    const cells = await paged_.locator('td').allTextContents();
    expect(cells[9]).toBe('1');
    expect(cells[10]).toMatch(/\d( ms|s|µs)$/);
    await screenshot('endpoints');
  });

  it('shows the models per family', async () => {
    await page.click('nav a[data-tab="models"]');
    await page.locator('.family[data-family="pagedengine"] li', { hasText: 'Mistral-7B' }).waitFor(WAIT);
    await page.locator('.family[data-family="pagedengine"] li', { hasText: 'bge-m3-embed' }).waitFor(WAIT);
    await page.locator('.family[data-family="localrunner"] li', { hasText: 'llama3.1:8b' }).waitFor(WAIT);
    await page.locator('.family[data-family="mlxsingle"] li', { hasText: 'qwen-chat' }).waitFor(WAIT);
    await screenshot('models');
  });

  it('logged no console error and asked nothing of another origin', () => {
    expect(consoleErrors).toEqual([]);
    expect(foreign).toEqual([]);
  });
});
