// The dashboard while API keys are on, in a real headless Chromium: the browser is asked for the
// key (HTTP Basic: any user, the admin key as the password) and sends it with every poll; the
// Usage tab shows each key's tokens today and in total and what is left of its limits.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyHash } from '../../../engine/core/keys.js';
import { FakeBackend } from '../../../engine/demo/index.js';
import { browserMissing, launchBrowser } from '../../helpers/browser.js';
import { closeAll, endpoint, NO_RATE_LIMITS, startGateway, type Started } from '../../helpers/gateway.js';

const WAIT = { timeout: 30_000 };
const OPS = 'gw-ops-secret-dashboard';
const ANA = 'gw-ana-secret-dashboard';

describe.skipIf(browserMissing)('the dashboard with API keys on, in Chromium', () => {
  let fake: FakeBackend, gw: Started, browser: Browser;

  beforeAll(async () => {
    fake = await new FakeBackend({ family: 'pagedengine', reply: 'one two three', models: [{ name: 'model-a' }] }).start();
    gw = await startGateway({
      auth: {
        keys: [
          { name: 'ops', hash: keyHash(OPS) },
          { name: 'ana', hash: keyHash(ANA), tokens_per_day: 50_000 },
        ],
        admin: ['ops'],
      },
      server: { rate_limits: NO_RATE_LIMITS },
      discovery: { static: { endpoints: [endpoint('gpu', 'pagedengine', fake.url)] } },
    });
    for (let i = 0; i < 2; i++) {
      await request(`${gw.url}/gw/pagedengine/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ANA}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'model-a', messages: [{ role: 'user', content: 'x' }] }),
      }).then((r) => r.body.dump());
    }
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await closeAll(gw, [fake]);
  });

  it('without the key the browser is challenged (and, headless, gives up: no one to ask)', async () => {
    const page = await browser.newPage();
    await expect(page.goto(`${gw.url}/internal/ui/`)).rejects.toThrow(/ERR_INVALID_AUTH_CREDENTIALS/);
    await page.close();
  });

  it('with the admin key as the password: every poll passes, and the Usage tab shows each key', async () => {
    const context = await browser.newContext({ httpCredentials: { username: 'me', password: OPS }, viewport: { width: 1360, height: 900 } });
    const page = await context.newPage();
    const failed: string[] = [];
    page.on('response', (r) => r.status() >= 400 && failed.push(`${r.status()} ${r.url()}`));
    page.on('pageerror', (e) => failed.push(String(e)));
    await page.goto(`${gw.url}/internal/ui/?interval=1#usage`);
    const row = page.locator('#usage-table tr[data-key="ana"]');
    await row.waitFor(WAIT);
    await expect.poll(() => page.locator('nav a[data-tab="usage"]').isVisible(), WAIT).toBe(true);
    const cells = await row.locator('td').allTextContents();
    const usage = ((await (await request(`${gw.url}/internal/usage?key=ana`, { headers: { authorization: `Bearer ${OPS}` } })).body.json()) as any).keys.ana;
    expect(cells[0]).toBe('ana');
    expect(cells[1]).toBe('2');
    expect(cells[2]).toBe(usage.today.all.input_tokens.toLocaleString('en'));
    expect(cells[3]).toBe(usage.today.all.output_tokens.toLocaleString('en'));
    expect(cells[7]).toBe(`day ${usage.budget.tokens_per_day.remaining.toLocaleString('en')} of 50,000`);
    expect(await page.locator('#usage-table tr[data-key="ops"]').count()).toBe(1);
    const artifacts = join(process.cwd(), 'test-artifacts');
    mkdirSync(artifacts, { recursive: true });
    await page.screenshot({ path: join(artifacts, 'dashboard-usage.png'), fullPage: true });
    expect(failed).toEqual([]);
    await context.close();
  });
});
