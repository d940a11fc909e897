// logging.format: text — one readable line per entry (time, level name, message, key=value), the
// same redaction as JSON, and nothing a client sends can break a line or reach the terminal raw.
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../engine/core/logger.js';
import { textLine } from '../../../engine/core/log-text.js';

function capture(format: 'json' | 'text') {
  const lines: string[] = [];
  const log = createLogger('debug', { write: (line: string) => void lines.push(line) }, format);
  return { log, lines };
}

const TIME = '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z';

describe('text logs', () => {
  it('writes time, level name, message, then the fields as key=value', () => {
    const { log, lines } = capture('text');
    log.info({ req: 'req-1', method: 'GET', path: '/gw/models', status: 200, ms: 1.25, cached: true, none: null }, 'request');
    log.warn({ added: ['a', 'b'], endpoint: { name: 'local', id: 'x1' } }, 'configuration reloaded');
    log.debug('no fields');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(new RegExp(`^${TIME} INFO  request req=req-1 method=GET path=/gw/models status=200 ms=1.25 cached=true none=null\\n$`));
    expect(lines[1]).toMatch(new RegExp(`^${TIME} WARN  configuration reloaded added=\\["a","b"\\] endpoint.name=local endpoint.id=x1\\n$`));
    expect(lines[2]).toMatch(new RegExp(`^${TIME} DEBUG no fields\\n$`));
  });

  it('keeps an error on one line, its stack escaped', () => {
    const { log, lines } = capture('text');
    log.error({ err: new Error('boom\nsecond line') }, 'unexpected error');
    expect(lines).toHaveLength(1);
    expect(lines[0].split('\n')).toEqual([expect.any(String), '']);
    expect(lines[0]).toContain(' ERROR unexpected error err.type=Error err.message="boom\\nsecond line" err.stack="Error: boom\\nsecond line\\n    at ');
  });

  it('quotes what a client sends: spaces, quotes, "=", newlines and terminal escapes', () => {
    const { log, lines } = capture('text');
    log.info({ path: '/a b="c"\n\x1b[31mred\x9b' }, 'request refused: \x1b[2J');
    expect(lines[0]).toContain(' INFO  "request refused: \\u001b[2J" path="/a b=\\"c\\"\\n\\u001b[31mred\\u009b"');
    // biome-ignore lint/suspicious/noControlCharactersInRegex: no terminal escape may reach the log
    expect(lines[0]).not.toMatch(/[\x1b\x9b]/);
  });

  it('redacts as the JSON format does', () => {
    const entry = {
      headers: { authorization: 'Bearer sk-live-123' },
      auth: { password: 'hunter2' },
      endpoint: { password: 'pw-2', token: 'tok-3', authorization: 'Basic abc' },
    };
    const text = capture('text');
    const json = capture('json');
    text.log.info(entry, 'oops');
    json.log.info(entry, 'oops');
    for (const secret of ['sk-live-123', 'hunter2', 'pw-2', 'tok-3', 'Basic abc']) {
      expect(text.lines[0]).not.toContain(secret);
      expect(json.lines[0]).not.toContain(secret);
    }
    expect(text.lines[0]).toContain(
      'headers=[redacted] auth=[redacted] endpoint.password=[redacted] endpoint.token=[redacted] endpoint.authorization=[redacted]',
    );
  });

  it('redacts secrets at the top and one level down, never changing what was logged; an error stays an error', () => {
    const { log, lines } = capture('json');
    const endpoint = { name: 'local', token: 'tok-9' };
    const err = Object.assign(new Error('upstream refused'), { authorization: 'Bearer sk-err-1' });
    log.warn({ authorization: 'Bearer sk-top-1', password: 'pw-top', endpoint, err }, 'refused');
    const entry = JSON.parse(lines[0]);
    expect(entry).toMatchObject({ authorization: '[redacted]', password: '[redacted]', endpoint: { name: 'local', token: '[redacted]' } });
    expect(entry.err).toMatchObject({ type: 'Error', message: 'upstream refused', authorization: '[redacted]' });
    expect(entry.err.stack).toContain('Error: upstream refused');
    for (const secret of ['sk-top-1', 'pw-top', 'tok-9', 'sk-err-1']) expect(lines[0]).not.toContain(secret);
    // The caller's objects are its own: censored in a copy.
    expect(endpoint.token).toBe('tok-9');
    expect(err.authorization).toBe('Bearer sk-err-1');
  });

  it('leaves the JSON format as it was: numeric levels', () => {
    const { log, lines } = capture('json');
    log.info({ a: 1 }, 'hello');
    expect(JSON.parse(lines[0])).toMatchObject({ level: 30, service: 'gw', a: 1, msg: 'hello', time: expect.any(Number) });
  });

  it('passes a line that is not JSON through unchanged', () => {
    expect(textLine('not json\n')).toBe('not json\n');
  });
});
