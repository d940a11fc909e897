// The official clients in a real headless Chromium, on a page of another origin: the browser's
// preflight must let them through (their own x-stainless-*, anthropic-*, x-api-key headers).
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeBackend } from '../../../engine/demo/index.js';
import { browserMissing, bundle, launchBrowser, servePage } from '../../helpers/browser.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

describe.skipIf(browserMissing)('browser clients on another origin', () => {
  let paged: FakeBackend, chat: FakeBackend, local: FakeBackend, gw: Started;
  let browser: Browser, page: Page, origin: { url: string; close(): Promise<void> };
  const consoleErrors: string[] = [];

  beforeAll(async () => {
    paged = await new FakeBackend({ family: 'pagedengine', reply: 'Paged says hi', models: [{ name: 'Qwen2.5-7B' }] }).start();
    chat = await new FakeBackend({ family: 'mlxsingle', reply: 'Translated hi', models: [{ name: 'qwen-chat' }] }).start();
    local = await new FakeBackend({ family: 'localrunner', reply: 'Local hi', models: [{ name: 'llama3.1:8b' }] }).start();
    gw = await startGateway({
      discovery: {
        static: {
          endpoints: [endpoint('paged', 'pagedengine', paged.url), endpoint('chat', 'mlxsingle', chat.url), endpoint('local', 'localrunner', local.url)],
        },
      },
    });
    origin = await servePage(await bundle('clients.ts'));
    browser = await launchBrowser();
    page = await browser.newPage();
    page.on('console', (m) => m.type() === 'error' && consoleErrors.push(m.text()));
    await page.goto(origin.url);
    await page.waitForFunction(() => 'openaiChat' in globalThis);
  });
  afterAll(async () => {
    await browser?.close();
    await origin?.close();
    await closeAll(gw, [paged, chat, local]);
  });

  it('the openai package: a chat completion and a stream', async () => {
    const result = await page.evaluate(([g]) => (globalThis as any).openaiChat(g, 'Qwen2.5-7B'), [gw.url]);
    expect(result).toEqual({ ok: true, value: { text: 'Paged says hi', streamed: 'Paged says hi', endpoint: 'paged' } });
    expect(paged.traffic.at(-1)!.headers['x-stainless-lang']).toBe('js');
  });

  it('the anthropic package: a message and a stream through the translator', async () => {
    const result = await page.evaluate(([g]) => (globalThis as any).anthropicMessage(g, 'qwen-chat'), [gw.url]);
    expect(result).toEqual({ ok: true, value: { text: 'Translated hi', streamed: 'Translated hi' } });
  });

  it('the ollama package: list', async () => {
    const result = await page.evaluate(([g]) => (globalThis as any).ollamaList(g), [gw.url]);
    expect(result).toEqual({ ok: true, value: ['llama3.1:8b'] });
  });

  it('logged no CORS error in the page', () => {
    expect(consoleErrors).toEqual([]);
  });
});
