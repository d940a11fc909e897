// The lookup rule of model names (engine/backends/model-names.ts), on its own.
import { describe, expect, it } from 'vitest';
import { NameIndex } from '../../../engine/backends/model-names.js';

const plain = { provider_prefixed: false };
const ollama = { provider_prefixed: false, default_tag: 'latest' };
const prefixed = { provider_prefixed: true };

describe('NameIndex', () => {
  it('finds a listed name as written, first listed wins', () => {
    const idx = new NameIndex<string>();
    idx.add('phi3', 'a', plain);
    idx.add('phi3', 'b', plain);
    expect(idx.find('phi3')).toEqual({ name: 'phi3', value: 'a' });
    expect(idx.find('phi')).toBeUndefined();
  });

  it('reads an untagged name as the default tag only where the family has one', () => {
    const idx = new NameIndex<string>();
    idx.add('llama3:latest', 'ollama', ollama);
    idx.add('tagged:latest', 'vllm', plain);
    idx.add('qwen:7b', 'ollama', ollama);
    // A colon before the last slash is a registry port, not a tag.
    idx.add('localhost:5000/mistral', 'ollama', ollama);
    expect(idx.find('llama3')).toEqual({ name: 'llama3:latest', value: 'ollama' });
    expect(idx.find('tagged')).toBeUndefined();
    expect(idx.find('qwen')).toBeUndefined();
    expect(idx.find('localhost')).toBeUndefined();
  });

  it('a full name wins over a shortened one', () => {
    const idx = new NameIndex<string>();
    idx.add('llama3:latest', 'tagged', ollama);
    idx.add('llama3', 'plain', plain);
    expect(idx.find('llama3')?.value).toBe('plain');
  });

  it('finds provider-prefixed names with and without the provider, merging endpoint lists', () => {
    const idx = new NameIndex<string[]>((a, b) => [...a, ...b]);
    idx.add('openai/gpt-4o', ['e1'], prefixed);
    idx.add('azure/gpt-4o', ['e2'], prefixed);
    idx.add('mistral-large', ['e3'], prefixed);
    expect(idx.find('gpt-4o')).toEqual({ name: 'openai/gpt-4o', value: ['e1', 'e2'] });
    expect(idx.find('openai/gpt-4o')?.value).toEqual(['e1']);
    expect(idx.find('mistral/mistral-large')?.value).toEqual(['e3']);
    // A name of a family that is not provider-prefixed is never found by a shortened name.
    const other = new NameIndex<string>();
    other.add('Qwen/Qwen2.5-7B', 'paged', plain);
    other.add('org/x', 'multi', prefixed);
    expect(other.find('Qwen2.5-7B')).toBeUndefined();
    expect(other.find('x')?.value).toBe('multi');
  });
});
