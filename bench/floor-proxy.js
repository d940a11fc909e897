// The floor for Node: the simplest undici pass-through proxy. It strips /gw/<prefix>, forwards
// method, path and body to one backend, and pipes the reply back. No checks, no headers, no failover.
import { createServer } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { Pool } from 'undici';

const [backend, port = '0'] = process.argv.slice(2);
const pool = new Pool(backend);
const server = createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  try {
    const up = await pool.request({
      path: req.url.replace(/^\/gw\/[^/]+/, ''),
      method: req.method,
      headers: { 'content-type': 'application/json' },
      body: chunks.length ? Buffer.concat(chunks) : null,
    });
    const { connection, 'keep-alive': _k, 'transfer-encoding': _t, ...headers } = up.headers;
    res.writeHead(up.statusCode, headers);
    if (!headers['content-length']) res.flushHeaders();
    await pipeline(up.body, res);
  } catch {
    res.destroy();
  }
});
server.listen(Number(port), '127.0.0.1', () => process.send?.({ port: server.address().port }));
