// The OpenTelemetry GenAI conventions' words for what the gateway knows: the operation a path
// runs, the provider a family is, and where an endpoint listens.
import type { Endpoint } from '../../engine/api.js';

/** gen_ai.provider.name per family: the engine's own name (the conventions' well-known values
 *  where one fits: openai), so a trace backend groups the spans by engine. */
const PROVIDERS: Record<string, string> = {
  localrunner: 'ollama',
  deskrunner: 'lm_studio',
  cppengine: 'llama.cpp',
  'hosted-compatible': 'openai',
  pagedengine: 'vllm',
  radixengine: 'sglang',
  npuengine: 'lemonade',
  mlxmulti: 'mlx',
  mlxsingle: 'mlx_lm',
  containerrunner: 'docker_model_runner',
  turboengine: 'lmdeploy',
  multigateway: 'litellm',
};

/** The provider name of a family; a custom family is its own name. */
export const providerOf = (family: string): string => PROVIDERS[family] ?? family;

/** The operation (gen_ai.operation.name) an upstream path runs, by how it ends; undefined: none
 *  of the conventions' (a model list, a management route). */
export function operationOf(path: string): string | undefined {
  const q = path.indexOf('?');
  const p = q < 0 ? path : path.slice(0, q);
  if (p.endsWith('/chat/completions') || p.endsWith('/api/chat') || p.endsWith('/messages') || p.endsWith('/responses')) return 'chat';
  if (p.endsWith('/embeddings') || p.endsWith('/embed') || p.endsWith('/embedding') || p.endsWith('/pooling')) return 'embeddings';
  if (p.endsWith('/completions') || p.endsWith('/api/generate') || p.endsWith('/completion') || p.endsWith('/generate') || p.endsWith('/infill'))
    return 'text_completion';
  return undefined;
}

const addresses = new WeakMap<Endpoint, { address: string; port: number }>();

/** server.address and server.port of an endpoint (its URL's host and port, the scheme's default
 *  when none is written): read once per endpoint. */
export function serverOf(ep: Endpoint): { address: string; port: number } {
  let a = addresses.get(ep);
  if (!a) {
    const url = new URL(ep.url);
    a = { address: url.hostname.replace(/^\[|\]$/g, ''), port: url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80 };
    addresses.set(ep, a);
  }
  return a;
}
