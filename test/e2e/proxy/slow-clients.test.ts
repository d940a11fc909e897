// Slow and idle clients are timed out (server.read_header_timeout, body_idle_timeout,
// read_timeout, idle_timeout) while everyone else keeps being served.
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

let fake: FakeBackend, gw: Started;
beforeAll(async () => {
  fake = await new FakeBackend({ family: 'pagedengine' }).start();
  gw = await startGateway({
    server: { read_header_timeout: '1s', body_idle_timeout: '500ms', read_timeout: '2s', idle_timeout: '3s' },
    discovery: { static: { endpoints: [endpoint('paged', 'pagedengine', fake.url)] } },
  });
});
afterAll(() => closeAll(gw, [fake]));

interface Watched {
  socket: Socket;
  text: string;
  closed: boolean;
}

function open(): Watched {
  const w: Watched = { socket: connect(gw.gw.port, '127.0.0.1'), text: '', closed: false };
  w.socket.on('data', (d) => (w.text += d.toString('latin1')));
  w.socket.on('close', () => (w.closed = true));
  w.socket.on('error', () => undefined);
  return w;
}

describe('slow clients', () => {
  it('closes 20 connections trickling a request head, one byte at a time, while normal traffic succeeds', async () => {
    // 400 bytes at one every 200 ms would take 80 s: only the header timeout can end them sooner.
    const head = `GET /internal/health HTTP/1.1\r\nHost: gw\r\nX-Slow: ${'s'.repeat(350)}\r\n\r\n`;
    const slow = Array.from({ length: 20 }, open);
    const timers = slow.map((w) => {
      let i = 0;
      const t = setInterval(() => {
        if (w.closed || i >= head.length) return clearInterval(t);
        w.socket.write(head[i++]);
      }, 200);
      return t;
    });
    const statuses: number[] = [];
    try {
      await waitFor(async () => {
        const res = await request(`${gw.url}/gw/pagedengine/v1/chat/completions`, { method: 'POST', body: '{"model":"test-model","messages":[]}' });
        await res.body.dump();
        statuses.push(res.statusCode);
        return slow.every((w) => w.closed);
      }, 'every trickling connection to be closed');
    } finally {
      timers.forEach(clearInterval);
      slow.forEach((w) => w.socket.destroy());
    }
    expect(slow.every((w) => w.text === '' || w.text.startsWith('HTTP/1.1 408'))).toBe(true);
    expect(statuses.length).toBeGreaterThan(0);
    expect(statuses.every((s) => s === 200)).toBe(true);
  });

  it('closes a connection that never sends a request', async () => {
    const w = open();
    await waitFor(() => w.closed, 'the silent connection to be closed');
  });

  it('answers 408 to a body that stops arriving, and closes the connection', async () => {
    const before = fake.traffic.length;
    const w = open();
    w.socket.write('POST /gw/pagedengine/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model":');
    await waitFor(() => w.closed, 'the stalled upload to be closed');
    expect(w.text).toMatch(/^HTTP\/1\.1 408 /);
    expect(w.text).toMatch(/^connection: close\r$/im);
    expect(w.text).toContain('"code":"BODY_TIMEOUT"');
    expect(fake.traffic).toHaveLength(before);
  });

  it('cuts a body trickled too slowly to ever pause for body_idle_timeout, at read_timeout', async () => {
    // One byte every 200 ms of a 1000-byte body: 200 s to send; read_timeout (2 s) ends it.
    const trickle = (w: Watched) => {
      const t = setInterval(() => (w.closed ? clearInterval(t) : w.socket.write('x')), 200);
      return t;
    };
    const read = open();
    read.socket.write('POST /gw/pagedengine/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n');
    // A route that answered at once (404) leaves the body to be drained: that is timed too.
    const drained = open();
    drained.socket.write('POST /gw/nowhere HTTP/1.1\r\nHost: gw\r\nContent-Length: 1000\r\n\r\n');
    const timers = [trickle(read), trickle(drained)];
    try {
      await waitFor(() => read.closed && drained.closed, 'both trickled bodies to be cut');
    } finally {
      timers.forEach(clearInterval);
    }
    expect(read.text).toMatch(/^HTTP\/1\.1 408 /);
    expect(drained.text).toMatch(/^HTTP\/1\.1 404 /);
  });

  it('closes a kept-alive connection that stays idle after its reply, after idle_timeout', async () => {
    const w = open();
    w.socket.write('GET /internal/health HTTP/1.1\r\nHost: gw\r\n\r\n');
    await waitFor(() => w.text.includes('"status"'), 'the reply');
    expect(w.text).toMatch(/^keep-alive: timeout=3\r$/im);
    await waitFor(() => w.closed, 'the idle connection to be closed');
  });
});
