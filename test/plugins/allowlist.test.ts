import { describe, expect, it } from 'vitest';
import allowlist from '../../plugins/allowlist.js';
import type { GatewayError } from '../../engine/core/errors.js';
import { applyPlugin, profiles, stubContext, testEnv } from '../helpers/plugin.js';
import type { Profile } from '../../engine/core/profiles.js';

const check = async (family: string | Profile, pathname: string, options: Record<string, unknown> = {}) => {
  const profile = typeof family === 'string' ? profiles.byName.get(family)! : family;
  const hooks = applyPlugin(allowlist, options, testEnv({ profile }));
  const { ctx } = stubContext(hooks);
  ctx.pathname = pathname;
  try {
    await hooks.request.promise(ctx);
    return 'allowed';
  } catch (err) {
    return `${(err as GatewayError).status} ${(err as GatewayError).code}`;
  }
};

describe('allowlist', () => {
  it('passes listed paths, exact match only', async () => {
    expect(await check('localrunner', '/api/chat')).toBe('allowed');
    expect(await check('localrunner', '/api/chat/')).toBe('404 PATH_NOT_ALLOWED');
    expect(await check('localrunner', '/api/cha')).toBe('404 PATH_NOT_ALLOWED');
    expect(await check('localrunner', '/API/CHAT')).toBe('404 PATH_NOT_ALLOWED');
  });
  it('passes the current Ollama API (version, embed, blobs by digest, OpenAI retrieve and responses)', async () => {
    for (const path of [
      '/api/version',
      '/api/embed',
      '/api/blobs/sha256:29fdb92e57cf',
      '/v1/models/llama3.1:8b',
      '/v1/models/hf.co/org/model',
      '/v1/responses',
      '/v1/messages',
    ]) {
      expect(await check('localrunner', path), path).toBe('allowed');
    }
    // A named segment is one segment; {model...} is never empty; nothing else is a wildcard.
    for (const path of ['/api/blobs/a/b', '/api/blobs/', '/v1/models/', '/api/versions'])
      expect(await check('localrunner', path), path).toBe('404 PATH_NOT_ALLOWED');
  });

  it('passes llama.cpp server routes, and named segments for slots', async () => {
    for (const path of [
      '/props',
      '/slots',
      '/slots/0',
      '/metrics',
      '/apply-template',
      '/v1/messages/count_tokens',
      '/tokenize',
      '/v1/rerank',
      '/v1/responses',
      '/v1/models/tiny-chat',
    ]) {
      expect(await check('cppengine', path), path).toBe('allowed');
    }
    expect(await check('cppengine', '/slots/0/save')).toBe('404 PATH_NOT_ALLOWED');
  });

  it('refuses with 501 when configured so', async () => {
    expect(await check('pagedengine', '/admin', { status: 501 })).toBe('501 PATH_NOT_SUPPORTED');
  });
  it('refuses a profile unsupported path with 501 even when forwarding everything', async () => {
    const profile = { ...profiles.byName.get('npuengine')!, api: { ...profiles.byName.get('npuengine')!.api, unsupported_paths: ['/api/v1/delete'] } };
    expect(await check(profile, '/api/v1/delete')).toBe('501 PATH_NOT_SUPPORTED');
    expect(await check(profile, '/api/v1/anything')).toBe('allowed');
  });
});
