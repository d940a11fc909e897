// A fake inference backend on loopback: speaks one family's routes (see families.ts), records
// what it receives, and can be told to delay, hang, refuse, reset, fail or go down and come back.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { routesFor, type Handler } from './families.js';
import { PromptCache } from './prompt-cache.js';
import { PrefixCache, tokensOf, type Prefill } from './prefix-cache.js';
import { DEFAULT_BEHAVIOUR, type Behaviour, type FakeModel, type FakeOptions, type FakeToolCall, type Recorded } from './behaviour.js';
import { promptText, servedText } from './prompt-text.js';
import { OneGpu } from './gpu.js';

export type { Behaviour, FakeModel, FakeOptions, FakeToolCall, Recorded } from './behaviour.js';

/** A prompt's end counts as the reply's beginning from this many characters (no accidental match). */
const MIN_PROMPT_PREFILL = 8;
const SERVED = Symbol('requests served on this socket');

export class FakeBackend {
  readonly family: string;
  readonly name: string;
  models: FakeModel[];
  reply: string;
  toolCalls: FakeToolCall[];
  /** Reasoning text sent before the reply (reasoning_content), when set. */
  reasoning = '';
  /** radixengine: speculative decoding on (health and model list report it). */
  speculativeDecoding = false;
  /** radixengine: the prompts seen lately, whose exact repeat its replies call a cache hit. */
  readonly promptCache = new PromptCache();
  /** The token sequences served lately: how much of a prompt is cached (prefix-cache.ts). */
  readonly prefixCache: PrefixCache;
  /** The last prompt's cached and evaluated tokens, and the totals since the start (or reset). */
  lastPrefill: Prefill | null = null;
  tokens = { cached: 0, evaluated: 0, generated: 0 };
  /** Generation requests being served now, from arrival until their reply ends or breaks. */
  inFlight = 0;
  readonly slots: number;
  /** Holding only a few models at once (FakeOptions.modelsAtOnce); null: every model is held. */
  readonly gpu: OneGpu | null;
  readonly received: Recorded[] = [];
  /** Generation requests that ran to the point of producing output (for double-execution checks). */
  executions = 0;
  /** Replies the other side abandoned before they finished (the gateway cancelled upstream). */
  aborts = 0;
  /** Reused sockets reset under a request (resetReusedSockets). */
  resetsOnReuse = 0;
  /** Health checks running now, and the most that ever ran at once. */
  healthInFlight = 0;
  healthMaxInFlight = 0;
  behaviour: Behaviour = { ...DEFAULT_BEHAVIOUR };
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  private readonly routes: Map<string, Handler>;
  private wantedPort: number;
  /** When the prompt being evaluated is done (prefills take turns). */
  private prefillFreeAt = 0;

  constructor(opts: FakeOptions) {
    this.family = opts.family;
    this.name = opts.name ?? `fake-${opts.family}`;
    // Every fake serves "test-model" too, for tests whose subject is not model routing.
    this.models = opts.models ?? [{ name: `${opts.family}-model-1`, digest: `sha256:${opts.family}1` }, { name: 'test-model' }];
    this.reply = opts.reply ?? `Hello from ${this.name}`;
    this.toolCalls = opts.toolCalls ?? [];
    this.wantedPort = opts.port ?? 0;
    this.routes = routesFor(opts.family);
    this.slots = opts.slots ?? 2;
    this.gpu = opts.modelsAtOnce ? new OneGpu(opts.modelsAtOnce, opts.switchMs ?? 0) : null;
    this.prefixCache = new PrefixCache(opts.cacheTokens);
  }

  get port(): number {
    return this.wantedPort;
  }

  get url(): string {
    return `http://127.0.0.1:${this.wantedPort}`;
  }

  /** Requests the gateway proxied (they carry its request id; health checks and discovery do not). */
  get traffic(): Recorded[] {
    return this.received.filter((r) => r.headers['x-gw-request-id'] !== undefined);
  }

  private handlerFor(rec: { method: string; url: string }): Handler | undefined {
    const path = rec.url.split('?')[0];
    const exact = this.routes.get(`${rec.method} ${path}`) ?? this.routes.get(`* ${path}`);
    if (exact) return exact;
    // "METHOD /prefix/*": a parameterised route such as GET /v1/models/{id} (ids may hold slashes).
    for (let slash = path.lastIndexOf('/'); slash > 0; slash = path.lastIndexOf('/', slash - 1)) {
      const h = this.routes.get(`${rec.method} ${path.slice(0, slash)}/*`);
      if (h) return h;
    }
    return undefined;
  }

  async start(): Promise<this> {
    const server = createServer((req, res) => void this.handle(req, res));
    server.on('connection', (s) => {
      this.sockets.add(s);
      s.once('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.wantedPort, '127.0.0.1', () => resolve());
    });
    this.wantedPort = (server.address() as AddressInfo).port;
    this.server = server;
    return this;
  }

  /** Close the listener and every socket: further connections are refused. */
  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = null;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Back up on the same port. */
  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  reset(): void {
    this.received.length = 0;
    this.executions = 0;
    this.aborts = 0;
    this.healthMaxInFlight = 0;
    this.promptCache.clear();
    this.prefixCache.clear();
    this.lastPrefill = null;
    this.tokens = { cached: 0, evaluated: 0, generated: 0 };
    this.prefillFreeAt = 0;
    this.behaviour = { ...DEFAULT_BEHAVIOUR };
  }

  requestsTo(path: string): Recorded[] {
    return this.received.filter((r) => r.url.split('?')[0] === path);
  }

  /** Those the gateway proxied (`traffic`) to `path`: not its own health, discovery or residency requests. */
  proxiedTo(path: string): Recorded[] {
    return this.traffic.filter((r) => r.url.split('?')[0] === path);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    res.once('close', () => {
      if (!res.writableFinished) this.aborts++;
    });
    const socket = req.socket as Socket & { [SERVED]?: number };
    const served = (socket[SERVED] = (socket[SERVED] ?? 0) + 1);
    const notHealth = !exempt(this.handlerFor({ method: req.method ?? 'GET', url: req.url ?? '/' }));
    if (notHealth && this.behaviour.resetOnRequest) {
      this.received.push({ method: req.method ?? 'GET', url: req.url ?? '/', headers: { ...req.headers }, body: Buffer.alloc(0), text: '', json: undefined });
      socket.resetAndDestroy();
      return;
    }
    if (notHealth && this.behaviour.closeReusedSockets && served > 1) {
      socket.destroy();
      return;
    }
    if (notHealth && this.behaviour.resetReusedSockets && served > 1) {
      this.resetsOnReuse++;
      socket.resetAndDestroy();
      return;
    }
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const text = body.toString('utf8');
    let json: any;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    const rec: Recorded = { method: req.method ?? 'GET', url: req.url ?? '/', headers: { ...req.headers }, body, text, json };
    this.received.push(rec);
    // Bounded, so a long `gw demo` run does not grow without end.
    if (this.received.length > 10_000) this.received.splice(0, 5_000);
    const handler = this.handlerFor(rec);
    if (handler?.kind === 'generate') {
      this.inFlight++;
      res.once('close', () => this.inFlight--);
    }
    const b = this.behaviour;
    if (!exempt(handler)) {
      if (b.resetBeforeResponse) {
        if (handler?.kind === 'generate') this.executions++;
        req.socket.destroy();
        return;
      }
      if (b.hang) return;
      if (b.holdUntil) await b.holdUntil;
      if (b.delayMs) await new Promise((r) => setTimeout(r, b.delayMs));
      if (b.refusePrefill && handler?.kind === 'generate' && this.prefillOf(rec) !== undefined) {
        sendJson400(res, this.name);
        return;
      }
      if (b.status && handler?.kind === 'generate' && (b.statusFor === null || rec.text.includes(b.statusFor))) {
        const err =
          b.errorBody?.body ?? JSON.stringify({ error: { message: `fake ${this.name} failing with ${b.status}`, type: 'server_error', code: b.status } });
        res.writeHead(b.status, {
          ...b.replyHeaders,
          'content-type': b.errorBody?.contentType ?? 'application/json',
          'content-length': Buffer.byteLength(err),
          'x-fake-backend': this.name,
        });
        if (b.cutBodyAt >= 0) this.cutAfter(res, err);
        else res.end(err);
        return;
      }
    } else if (handler!.kind === 'health' && (b.healthDelayMs || b.healthStatus !== 200)) {
      this.healthInFlight++;
      this.healthMaxInFlight = Math.max(this.healthMaxInFlight, this.healthInFlight);
      await new Promise((r) => setTimeout(r, b.healthDelayMs));
      this.healthInFlight--;
      if (b.healthStatus === 200) {
        await handler!.fn(this, rec, res);
        return;
      }
      res.writeHead(b.healthStatus, { 'content-type': 'application/json', ...b.healthHeaders });
      res.end(JSON.stringify({ status: 'unavailable' }));
      return;
    }
    res.setHeader('x-fake-backend', this.name);
    for (const [name, value] of Object.entries(b.replyHeaders)) res.setHeader(name, value);
    if (!handler) {
      // Anything else the family routes: echo what arrived, so tests can see the path reached us.
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ fake: this.name, method: rec.method, path: rec.url }));
      return;
    }
    if (
      handler.kind !== 'generate' &&
      handler.kind !== 'other' &&
      b.listFailures > 0 &&
      rec.headers['x-gw-request-id'] === undefined &&
      /models/.test(rec.url)
    ) {
      b.listFailures--;
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end('{"error":"list failed"}');
      return;
    }
    if (handler.kind === 'generate') this.executions++;
    if (handler.kind === 'generate' && b.cutBodyAt >= 0) {
      // The head and part of the body go out, then the backend dies.
      res.end = ((body?: string | Buffer) => {
        this.cutAfter(res, String(body ?? ''));
        return res;
      }) as typeof res.end;
    }
    const model = rec.json?.model;
    if (this.gpu && handler.kind === 'generate' && typeof model === 'string') {
      const gpu = this.gpu;
      await gpu.acquire(model);
      // Its client may have left while it waited (the close event is then behind it).
      if (res.destroyed) return gpu.release(model);
      res.once('close', () => gpu.release(model));
    }
    if (handler.prompt) {
      await this.prefill(rec);
      if (res.destroyed) return;
    }
    await handler.fn(this, rec, res);
  }

  /** Look the prompt up in the prefix cache, wait out the evaluation of the rest, then cache it
   *  with the reply it gets (known already: the fake's reply is fixed). */
  private async prefill(rec: Recorded): Promise<void> {
    const prompt = promptText(rec.json);
    if (prompt === undefined) return;
    const p = this.prefixCache.lookup(prompt);
    rec.prefill = this.lastPrefill = p;
    const reply = this.replyFor(rec);
    this.tokens.cached += p.cached;
    this.tokens.evaluated += p.evaluated;
    this.tokens.generated += tokensOf(reply);
    const ms = p.evaluated * this.behaviour.prefillMsPerToken;
    if (ms > 0) {
      this.prefillFreeAt = Math.max(performance.now(), this.prefillFreeAt) + ms;
      await new Promise((r) => setTimeout(r, this.prefillFreeAt - performance.now()));
    }
    this.prefixCache.add(servedText(rec.json, prompt, reply));
  }

  /** What the request gives of the answer already (a trailing assistant message; a prompt
   *  ending in the reply's first words), or undefined. */
  prefillOf(rec: Recorded): string | undefined {
    const j = rec.json;
    const last = Array.isArray(j?.messages) ? j.messages[j.messages.length - 1] : undefined;
    if (last?.role === 'assistant') {
      const c = last.content;
      return typeof c === 'string' ? c : Array.isArray(c) ? c.map((b: { text?: string }) => b?.text ?? '').join('') : undefined;
    }
    if (typeof j?.prompt !== 'string') return undefined;
    for (let n = Math.min(j.prompt.length, this.reply.length); n >= MIN_PROMPT_PREFILL; n--) {
      if (this.reply.startsWith(j.prompt.slice(-n))) return j.prompt.slice(-n);
    }
    return undefined;
  }

  /** The reply a request gets: the whole reply, or the rest of it after what the request gives
   *  of it already (an engine continuing a prefill). */
  replyFor(rec: Recorded): string {
    const prefill = this.prefillOf(rec);
    return prefill !== undefined && this.reply.startsWith(prefill) ? this.reply.slice(prefill.length) : this.reply;
  }

  /** Write the first cutBodyAt characters of `body`, then die as a crashed backend would. */
  private cutAfter(res: ServerResponse, body: string): void {
    res.write(body.slice(0, this.behaviour.cutBodyAt), () => setTimeout(() => res.socket?.destroy(), 30));
  }

  /** Write stream pieces with the configured gap; honours resetAfterChunks. */
  async writeStream(res: ServerResponse, pieces: string[], contentType: string): Promise<void> {
    res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-cache', 'x-fake-backend': this.name });
    res.flushHeaders();
    for (let i = 0; i < pieces.length; i++) {
      if (this.behaviour.resetAfterChunks >= 0 && i >= this.behaviour.resetAfterChunks) {
        // Let what was written reach the wire, then die as a crashed backend would.
        await new Promise((r) => setTimeout(r, 30));
        res.socket?.destroy();
        return;
      }
      if (this.behaviour.stallAfterChunks >= 0 && i >= this.behaviour.stallAfterChunks) return; // open, silent
      const breakWith = this.behaviour.breakWith;
      if (breakWith && i === breakWith.at) {
        if (!breakWith.reset) return void res.end(breakWith.text);
        res.write(breakWith.text);
        await new Promise((r) => setTimeout(r, 30));
        res.socket?.destroy();
        return;
      }
      if (this.behaviour.beforeChunk) await this.behaviour.beforeChunk(i);
      if (this.behaviour.chunkDelayMs && i > 0) await new Promise((r) => setTimeout(r, this.behaviour.chunkDelayMs));
      if (res.destroyed) return;
      res.write(pieces[i]);
    }
    res.end();
  }
}

/** Health checks and load reports answer whatever the failure behaviours: a test breaks or holds
 *  generation and still reads them. */
const exempt = (h: Handler | undefined) => h?.kind === 'health' || h?.kind === 'load';

function sendJson400(res: ServerResponse, name: string): void {
  const body = JSON.stringify({ error: { message: `fake ${name} does not continue an assistant message`, type: 'invalid_request_error', code: 400 } });
  res.writeHead(400, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-fake-backend': name });
  res.end(body);
}
