// The README's configuration snippets are what a new user pastes first: each passes `gw validate`
// with no warning (a type the gateway does not know would be one), as written.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configFile, run } from '../helpers/cli.js';

const schema = JSON.parse(readFileSync('schemas/config.schema.json', 'utf8')) as { properties: Record<string, unknown> };
const snippets = [...readFileSync('README.md', 'utf8').matchAll(/```yaml\n([\s\S]*?)```/g)]
  .map((m) => m[1])
  .filter((text) => Object.hasOwn(schema.properties, text.split(':', 1)[0]));

describe("the README's configuration", () => {
  it('has a snippet to check', () => expect(snippets.length).toBeGreaterThan(0));

  it.each(snippets.map((text, i) => [i + 1, text]))('snippet %i passes gw validate as written', async (_n, text) => {
    const r = await run(['validate', '--config', configFile(String(text))]);
    expect(r.out).toMatch(/^summary: \d+ passed, 0 warnings, 0 failed$/m);
    expect(r.code).toBe(0);
  });
});
