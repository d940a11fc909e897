// What each engine reports about the models it holds, parsed from its replies (recorded from the
// real llama-server in router mode; the others as their sources and documentation write them:
// test/fixtures/residency/README.md): which models are loaded, which are loading, and that a
// queue served by model takes the engine's word for what it holds.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseModelList } from '../../../engine/backends/model-lists.js';
import { ModelTurns } from '../../../engine/backends/model-turns.js';

const fixture = (name: string) => JSON.parse(readFileSync(new URL(`../../fixtures/${name}`, import.meta.url), 'utf8'));
const loaded = (body: unknown, format?: string) => parseModelList(body, format).map((m) => [m.name, m.loaded ?? true, m.isLoading ?? false]);

describe('residency, from each engine', () => {
  it("llama-server's router: each model's status.value, loading counted as not loaded yet", () => {
    expect(loaded(fixture('residency/llama-server-router-models-loading.json'))).toEqual([
      ['alpha', false, false],
      ['beta', false, false],
      ['gamma', false, true],
    ]);
    expect(loaded(fixture('residency/llama-server-router-models-alpha-loaded.json')).filter(([, l]) => l)).toEqual([['alpha', true, false]]);
    // A model whose load failed is unloaded (status.failed, exit_code beside).
    const failed = fixture('residency/llama-server-router-models-failed-load.json');
    expect(failed.data.some((m: any) => m.status.failed === true)).toBe(true);
    expect(loaded(failed).filter(([, l]) => l)).toEqual([]);
  });

  it("llama-swap's running list: the models it runs now", () => {
    expect(loaded(fixture('residency/llama-swap-running.json'))).toEqual([['qwen-coder', true, false]]);
  });

  it("LM Studio's api/v0/models: state loaded or not-loaded", () => {
    expect(loaded(fixture('residency/lmstudio-api-v0-models.json'))).toEqual([
      ['qwen2.5-7b-instruct', true, false],
      ['llama-3.2-3b-instruct', false, false],
      ['text-embedding-nomic-embed-text-v1.5', false, false],
    ]);
  });

  it("Ollama's api/ps: every model listed is loaded", () => {
    expect(loaded(fixture('engine-load/ollama-ps.json'), 'localrunner').every(([, l]) => l)).toBe(true);
  });

  it('a queue served by model takes what the engine reports it holds', () => {
    const turns = new ModelTurns({ atOnce: 1, maxWaitMs: 30_000, minDwellMs: 0 });
    const report = parseModelList(fixture('residency/llama-server-router-models-alpha-loaded.json'));
    const held = report.filter((m) => m.loaded).map((m) => m.name);
    turns.observe((m) => held.includes(m), held);
    expect(turns.counts([]).held).toEqual(['alpha']);
    expect(turns.cold('alpha')).toBe(false);
    expect(turns.cold('beta')).toBe(true);
  });
});
