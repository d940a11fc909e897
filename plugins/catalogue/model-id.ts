// A model id taken from a request path (v1/models/{id}, /gw/models/{id}): percent-decoded, so
// `Qwen%2FQwen3-4B` (openai's models.retrieve) reads as `Qwen/Qwen3-4B`; 400 when it is not
// valid percent-encoding.
import { gwError } from '../../engine/api.js';

export function decodeModelId(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw gwError('BAD_REQUEST', { reason: 'the model id is not valid percent-encoding' });
  }
}
