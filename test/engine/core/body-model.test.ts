import { describe, expect, it } from 'vitest';
import { findModelField, modelKeys, replaceModel, topLevelValues, withModel } from '../../../engine/core/body-model.js';

const find = (text: string) => findModelField(Buffer.from(text))?.value ?? null;

describe('finding the top-level model', () => {
  it('finds it first, last, or after nested values that mention "model"', () => {
    expect(find('{"model":"a","messages":[]}')).toBe('a');
    expect(find('{"messages":[{"role":"user","content":"say \\"model\\": \\"x\\""}],"model":"b"}')).toBe('b');
    expect(find('{"meta":{"model":"nested"},"tools":[{"model":"x"}],"model" : "c"}')).toBe('c');
    expect(find(' \n{ "model"\t:\n"d" }')).toBe('d');
  });
  it('handles escapes and non-ASCII text', () => {
    expect(find('{"content":"ends with a backslash \\\\","model":"é/模型:7b"}')).toBe('é/模型:7b');
    expect(find('{"model":"a\\"b"}')).toBe('a"b');
  });
  it('gives nothing for bodies that name no model or are not JSON objects', () => {
    expect(find('{"messages":[]}')).toBeNull();
    expect(find('{"meta":{"model":"nested"}}')).toBeNull();
    expect(find('[{"model":"x"}]')).toBeNull();
    expect(find('model=x')).toBeNull();
    expect(find('{"model":42}')).toBeNull();
    expect(find('{"model":"unterminated')).toBeNull();
  });
});

describe('rewriting the model', () => {
  it('keeps every other byte and the key order', () => {
    const text = '{ "temperature": 0.5,\n  "model" : "alias",  "messages": [{"content": "héllo \\"model\\""}] }';
    const buf = Buffer.from(text);
    const out = replaceModel(buf, findModelField(buf)!, 'real/name:8b');
    expect(out.toString()).toBe(text.replace('"alias"', '"real/name:8b"'));
  });
});

describe('the fields a profile names (request.model_field_paths)', () => {
  const keys = modelKeys(['model', 'name']);
  const findIn = (text: string) => findModelField(Buffer.from(text), keys)?.value ?? null;
  it('takes the first listed field present, wherever it sits', () => {
    expect(findIn('{"name":"n","model":"m"}')).toBe('m');
    expect(findIn('{"name":"n","stream":false}')).toBe('n');
    expect(findIn('{"name":42,"x":{"model":"nested"}}')).toBeNull();
    expect(findIn('{"model":null,"name":"n"}')).toBe('n');
  });
  it('gives the span of the field it took, for a byte-preserving rewrite', () => {
    const buf = Buffer.from('{"name":"alias","messages":[]}');
    expect(replaceModel(buf, findModelField(buf, keys)!, 'real').toString()).toBe('{"name":"real","messages":[]}');
  });
});

describe('the body asking for the model routing chose (what a terminal step sends each attempt)', () => {
  const body = Buffer.from('{"model":"nick", "stream":true}');

  it('replaces only the model value; the same buffer when there is nothing to change', () => {
    expect(withModel(body, 'real-name')!.toString()).toBe('{"model":"real-name", "stream":true}');
    expect(withModel(body, undefined)).toBe(body);
    expect(withModel(body, 'nick')).toBe(body);
    expect(withModel(null, 'real-name')).toBeNull();
    expect(withModel(Buffer.from('not json'), 'real-name')!.toString()).toBe('not json');
  });

  it("reads the request's own body where its route found the model (the profile's model keys)", () => {
    const own = Buffer.from('{"model_name":"nick","model":"other"}');
    const request = { body: own, modelSpan: () => findModelField(own, modelKeys(['model_name'])) };
    expect(withModel(own, 'real', request)!.toString()).toBe('{"model_name":"real","model":"other"}');
    // A body a step built is searched by the default key.
    expect(withModel(Buffer.from('{"model":"nick"}'), 'real', request)!.toString()).toBe('{"model":"real"}');
  });
});

describe('top-level fields found without a parse', () => {
  const keys = modelKeys(['stream', 'stream_options']);
  const at = (body: string) => {
    const buf = Buffer.from(body);
    return topLevelValues(buf, keys).map((i) => (i === -1 ? null : buf.toString('utf8', i, i + 4)));
  };
  it('where each value starts, whatever is nested or quoted before it', () => {
    expect(at('{"stream": true, "stream_options": {"include_usage": false}}')).toEqual(['true', '{"in']);
    expect(at('{"metadata":{"stream":true},"tools":[{"properties":{"stream_options":{}}}],"text":"\\"stream\\": true","stream":false}')).toEqual([
      'fals',
      null,
    ]);
    expect(at('{"messages":[{"content":"Grüße 🌍"}] , "stream" :true}')).toEqual(['true', null]);
  });
  it('nothing for a body that is not a JSON object, or is cut off', () => {
    expect(at('[{"stream":true}]')).toEqual([null, null]);
    expect(at('{"text":"unterminated, "stream":true')).toEqual([null, null]);
  });
});
