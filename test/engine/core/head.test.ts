// Header values from requests and backends: encoded, never thrown on, and short.
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { clip, echo, ECHO_MAX } from '../../../engine/core/head.js';
import { GatewayResponse } from '../../../engine/kernel/response.js';

describe('echo', () => {
  it('keeps plain values as they are', () => {
    expect(echo('llama3.1:8b')).toBe('llama3.1:8b');
    expect(echo('a b\tc')).toBe('a b\tc');
  });

  it('percent-encodes CR, LF, NUL and anything past visible ASCII, reversibly', () => {
    expect(echo('m\r\nX-Injected: yes')).toBe('m%0D%0AX-Injected: yes');
    expect(echo('a\0b')).toBe('a%00b');
    const unicode = 'модель-😀';
    expect(echo(unicode)).toMatch(/^[\x20-\x7e]+$/);
    expect(decodeURIComponent(echo(unicode))).toBe(unicode);
    expect(echo('\ud800')).toBe('%EF%BF%BD'); // a lone surrogate cannot be UTF-8
  });

  it('cuts to 256 characters without splitting an escape', () => {
    expect(echo('x'.repeat(100_000))).toHaveLength(ECHO_MAX);
    const cut = echo('é'.repeat(200));
    expect(cut.length).toBeLessThanOrEqual(ECHO_MAX);
    expect(cut).toMatch(/^(%C3%A9)+$/);
  });
});

describe('clip', () => {
  it('cuts a long value for a message and says how long it was', () => {
    expect(clip('short')).toBe('short');
    expect(clip('y'.repeat(1000))).toBe(`${'y'.repeat(ECHO_MAX)}… (1000 characters)`);
  });
});

describe('the head writer', () => {
  it('writes a head whose values Node would refuse, encoded, instead of throwing', async () => {
    const server = createServer({ ServerResponse: GatewayResponse }, (_req, res) => {
      res.writeHead(200, ['x-model', 'модель\r\nX-Injected: yes', 'bad name', 'dropped', 'content-length', '2']);
      res.end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as AddressInfo).port;
    try {
      const headers = await new Promise<Record<string, unknown>>((resolve, reject) => {
        httpRequest(`http://127.0.0.1:${port}/`, (res) => {
          res.resume();
          res.on('end', () => resolve(res.headers));
        })
          .on('error', reject)
          .end();
      });
      expect(headers['x-model']).toBe('%D0%BC%D0%BE%D0%B4%D0%B5%D0%BB%D1%8C%0D%0AX-Injected: yes');
      expect(headers['x-injected']).toBeUndefined();
      expect(headers['bad name']).toBeUndefined();
    } finally {
      server.close();
    }
  });
});
