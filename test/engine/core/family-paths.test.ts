// Where each built-in family's engine serves an OpenAI route, for /gw/openai/v1.
import { describe, expect, it } from 'vitest';
import { familyPath } from '../../../engine/core/family-paths.js';
import { profiles } from '../../helpers/plugin.js';

const of = (family: string, route: string) => familyPath(profiles.byName.get(family)!, route);

describe('familyPath', () => {
  it('the route itself where the profile lists it', () => {
    expect(of('cppengine', '/v1/responses')).toBe('/v1/responses');
    expect(of('localrunner', '/v1/chat/completions')).toBe('/v1/chat/completions');
  });
  it("a listed path ending with it (Docker Model Runner), or the parsing rules' (the NPU server)", () => {
    expect(of('containerrunner', '/v1/chat/completions')).toBe('/engines/v1/chat/completions');
    expect(of('npuengine', '/v1/chat/completions')).toBe('/api/v1/chat/completions');
    expect(of('npuengine', '/v1/completions')).toBe('/api/v1/completions');
  });
  it('none where the engine lacks the route', () => {
    expect(of('mlxsingle', '/v1/responses')).toBeUndefined();
    expect(of('turboengine', '/v1/responses')).toBeUndefined();
  });
});
