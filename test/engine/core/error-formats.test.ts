// Which paths of a family route answer errors in which shape: the profile's lists, matched on the
// path as it came (before or after the prefix is stripped; the request's query is not part of it).
import { describe, expect, it } from 'vitest';
import { ErrorFormatPaths } from '../../../engine/core/error-formats.js';

describe('ErrorFormatPaths', () => {
  const formats = new ErrorFormatPaths({ localrunner: ['/api/{path...}'], msgapi: ['/v1/messages'], cppengine: ['/slots/{id}', '/completion'] });
  const of = (url: string) => formats.formatOf(url, '/gw/fam');

  it("finds the shape of a listed path, exact or by pattern, under the route's prefix", () => {
    expect(of('/gw/fam/api/chat')).toBe('localrunner');
    expect(of('/gw/fam/api/blobs/sha256:aa')).toBe('localrunner');
    expect(of('/gw/fam/v1/messages')).toBe('msgapi');
    expect(of('/gw/fam/slots/0')).toBe('cppengine');
    expect(of('/gw/fam/completion')).toBe('cppengine');
  });

  it("leaves other paths to the route's default", () => {
    expect(of('/gw/fam/v1/chat/completions')).toBeUndefined();
    expect(of('/gw/fam/api')).toBeUndefined();
    expect(of('/gw/fam')).toBeUndefined();
    expect(of('/gw/fam/completions')).toBeUndefined();
    // A spelling of the prefix the router took but that is not the prefix: not matched, default.
    expect(of('/gw/f%61m/api/chat')).toBeUndefined();
  });

  it('is empty when the profile lists nothing', () => {
    expect(new ErrorFormatPaths({}).empty).toBe(true);
    expect(formats.empty).toBe(false);
  });
});
