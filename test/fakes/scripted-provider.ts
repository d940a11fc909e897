// A fake provider whose every generation request can be scripted: the resilience suite's
// failure injector. It speaks the hosted-compatible family (OpenAI chat completions: SSE or JSON;
// its model list, with context_window, doubles as the health route) or, in `ndjson` mode, the
// localrunner family (Ollama api/chat: NDJSON or JSON; health `/`, list `/api/tags`, api/show
// for the context window, api/ps for what is loaded). Unlike FakeBackend (engine/demo), which
// has one behaviour at a time, each request takes the next step of a FIFO script, then the
// default step (`always`). Health and list routes always answer normally; `setDown(true)` closes
// the listener (connection refused, as a dead process) and `setDown(false)` listens again on
// the same port.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface OkStep {
  ok: {
    /** The answer's text (split into content chunks on spaces); default the provider's `text`. */
    text?: string;
    finish?: 'stop' | 'length' | 'content_filter';
    /** Wait before the reply head (a slow head). */
    firstTokenDelayMs?: number;
    /** Wait between stream chunks. */
    chunkDelayMs?: number;
  };
}
export interface StatusStep {
  status: number;
  headers?: Record<string, string>;
  /** A string goes as is; anything else as JSON. Default: an OpenAI-style error object. */
  body?: unknown;
}
export interface StreamFault {
  /** n content chunks, then the socket dies. */
  cutAfter?: number;
  /** n content chunks, then silence with the socket open (until released or stopped). */
  stallAfter?: number;
  /** After n content chunks a chunk that is not JSON, then the rest of the stream as normal. */
  malformedAt?: number;
  /** Every content chunk, then a clean end: no finish_reason, no [DONE] (no done:true). */
  noTerminator?: true;
  /** After n content chunks an in-stream error event, then a clean end. */
  errorAt?: number;
  /** A role-only chunk at once, then the content only after this many ms. */
  roleOnlyThenStallMs?: number;
}
export interface StreamStep {
  stream: StreamFault;
  text?: string;
}
/** 'reset': the connection reset after the request was read (a crashed worker); 'close': closed
 *  cleanly instead, without a reply; 'hang': no reply at all until released. */
export type Step = OkStep | StatusStep | StreamStep | 'reset' | 'close' | 'hang';

export interface ScriptedModel {
  name: string;
  /** The context window the model list (hosted: context_window) or api/show reports. */
  context?: number;
  /** ndjson mode: listed by api/ps as loaded (default true). */
  loaded?: boolean;
}

export interface ScriptedRequest {
  method: string;
  path: string;
  /** The body's model, if any. */
  model?: string;
  stream: boolean;
  /** Date.now() on arrival. */
  at: number;
  headers: Record<string, string | string[] | undefined>;
  json: any;
  /** The step this request got (generation routes only). */
  step?: Step;
}

export interface ScriptedOptions {
  name?: string;
  mode?: 'openai' | 'ndjson';
  models?: ScriptedModel[];
  text?: string;
}

const CREATED = 1_732_000_000;
const SELF_KILLED = Symbol('the fake ended this reply itself');

/** The OpenAI wording of a context overflow (llama.cpp's server says the same in its own words:
 *  see CONTEXT_ERROR_LLAMACPP). */
export const CONTEXT_ERROR_OPENAI = {
  error: {
    message: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.",
    type: 'invalid_request_error',
    param: 'messages',
    code: 'context_length_exceeded',
  },
};
export const CONTEXT_ERROR_LLAMACPP = {
  error: {
    code: 400,
    message: 'the request exceeds the available context size, try increasing it',
    type: 'exceed_context_size_error',
    n_prompt_tokens: 9000,
    n_ctx: 8192,
  },
};

export class ScriptedProvider {
  readonly name: string;
  readonly mode: 'openai' | 'ndjson';
  models: ScriptedModel[];
  text: string;
  /** Every request, health and lists included. */
  readonly requests: ScriptedRequest[] = [];
  /** Generation replies the other side abandoned before they finished (the gateway cancelled). */
  aborted = 0;
  private queue: Step[] = [];
  private fallback: Step = { ok: {} };
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  private port = 0;
  private isDown = false;
  /** Releases every hung or stalled reply (each ends its socket). */
  private readonly held = new Set<() => void>();

  constructor(opts: ScriptedOptions = {}) {
    this.name = opts.name ?? 'scripted';
    this.mode = opts.mode ?? 'openai';
    this.models = opts.models ?? [{ name: 'primary-model', context: 8192 }];
    this.text = opts.text ?? `Hello from ${this.name}`;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get down(): boolean {
    return this.isDown;
  }

  /** The generation requests (chat), in arrival order. */
  get generations(): ScriptedRequest[] {
    return this.requests.filter((r) => r.step !== undefined);
  }

  /** Queue what the next generation requests get, in order. */
  script(...steps: Step[]): this {
    this.queue.push(...steps);
    return this;
  }

  /** What generation requests get once the queue is empty (default: a normal answer). */
  always(step: Step): this {
    this.fallback = step;
    return this;
  }

  /** Steps still queued. */
  get pending(): number {
    return this.queue.length;
  }

  /** End every hung or stalled reply now (the socket is closed). */
  release(): void {
    for (const r of [...this.held]) r();
  }

  reset(): void {
    this.requests.length = 0;
    this.aborted = 0;
    this.queue = [];
    this.fallback = { ok: {} };
    this.release();
  }

  async start(): Promise<this> {
    const server = createServer((req, res) => void this.handle(req, res).catch(() => res.destroy()));
    server.on('connection', (s) => {
      this.sockets.add(s);
      s.once('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
    return this;
  }

  async stop(): Promise<void> {
    this.release();
    const server = this.server;
    if (!server) return;
    this.server = null;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Down: the port refuses connections (a dead process); up: listening again on the same port. */
  async setDown(down: boolean): Promise<void> {
    if (down === this.isDown) return;
    this.isDown = down;
    if (down) await this.stop();
    else await this.start();
  }

  private isGeneration(method: string, path: string): boolean {
    if (method !== 'POST') return false;
    return this.mode === 'openai' ? path === '/v1/chat/completions' : path === '/api/chat' || path === '/v1/chat/completions';
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let json: any;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    const method = req.method ?? 'GET';
    const path = (req.url ?? '/').split('?')[0];
    // Ollama streams unless told not to; chat completions only when asked.
    const ndjsonRoute = this.mode === 'ndjson' && path === '/api/chat';
    const stream = ndjsonRoute ? json?.stream !== false : json?.stream === true;
    const rec: ScriptedRequest = {
      method,
      path,
      model: typeof json?.model === 'string' ? json.model : undefined,
      stream,
      at: Date.now(),
      headers: { ...req.headers },
      json,
    };
    this.requests.push(rec);
    if (!this.isGeneration(method, path)) {
      this.serveOther(rec, res);
      return;
    }
    const step = this.queue.shift() ?? this.fallback;
    rec.step = step;
    res.once('close', () => {
      if (!res.writableFinished && !(res as any)[SELF_KILLED]) this.aborted++;
    });
    await this.play(step, rec, res, ndjsonRoute);
  }

  private serveOther(rec: ScriptedRequest, res: ServerResponse): void {
    const send = (status: number, value: unknown) => {
      const body = typeof value === 'string' ? value : JSON.stringify(value);
      res.writeHead(status, { 'content-type': typeof value === 'string' ? 'text/plain' : 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    };
    const { method, path } = rec;
    if (method === 'GET' && path === '/v1/models') {
      send(200, {
        object: 'list',
        data: this.models.map((m) => ({
          id: m.name,
          object: 'model',
          created: CREATED,
          owned_by: this.name,
          ...(m.context ? { context_window: m.context } : {}),
        })),
      });
    } else if (this.mode === 'ndjson' && method === 'GET' && path === '/') {
      send(200, 'Ollama is running');
    } else if (this.mode === 'ndjson' && method === 'GET' && path === '/api/tags') {
      send(200, {
        models: this.models.map((m) => ({
          name: m.name,
          model: m.name,
          modified_at: '2026-11-01T10:00:00Z',
          size: 4_000_000_000,
          digest: `d-${m.name}`,
          details: { format: 'gguf', family: 'llama', parameter_size: '8B', quantization_level: 'Q4_K_M' },
        })),
      });
    } else if (this.mode === 'ndjson' && method === 'POST' && path === '/api/show') {
      const m = this.models.find((x) => x.name === (rec.json?.model ?? rec.json?.name));
      if (!m) send(404, { error: `model '${rec.json?.model}' not found` });
      else
        send(200, {
          modelfile: `FROM ${m.name}`,
          details: { family: 'llama' },
          model_info: { 'general.architecture': 'llama', ...(m.context ? { 'llama.context_length': m.context } : {}) },
          capabilities: ['completion'],
        });
    } else if (this.mode === 'ndjson' && method === 'GET' && path === '/api/ps') {
      send(200, {
        models: this.models
          .filter((m) => m.loaded !== false)
          .map((m) => ({ name: m.name, model: m.name, size: 4_000_000_000, digest: `d-${m.name}`, expires_at: '2026-11-01T11:00:00Z' })),
      });
    } else if (this.mode === 'ndjson' && method === 'GET' && path === '/api/version') {
      send(200, { version: '0.14.0' });
    } else {
      send(404, { error: { message: `scripted ${this.name}: no route ${method} ${path}`, type: 'not_found' } });
    }
  }

  /** Wait, or until released (then false). */
  private wait(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const done = (v: boolean) => {
        clearTimeout(t);
        this.held.delete(release);
        resolve(v);
      };
      const release = () => done(false);
      const t = setTimeout(() => done(true), ms);
      this.held.add(release);
    });
  }

  /** Hold the reply open until released or stopped, then close the socket. */
  private hold(res: ServerResponse): Promise<void> {
    return new Promise((resolve) => {
      const release = () => {
        this.held.delete(release);
        this.kill(res, false);
        resolve();
      };
      this.held.add(release);
      res.once('close', release);
    });
  }

  /** End the connection ourselves: `rst` as a crashed process (reset), else a plain close. */
  private kill(res: ServerResponse, rst: boolean): void {
    (res as any)[SELF_KILLED] = true;
    const socket = res.socket as Socket | null;
    if (!socket) return;
    if (rst) socket.resetAndDestroy();
    else socket.destroy();
  }

  private async play(step: Step, rec: ScriptedRequest, res: ServerResponse, ndjson: boolean): Promise<void> {
    if (step === 'reset' || step === 'close') {
      this.kill(res, step === 'reset');
      return;
    }
    if (step === 'hang') {
      await this.hold(res);
      return;
    }
    if ('status' in step) {
      const body =
        step.body === undefined
          ? JSON.stringify({ error: { message: `scripted ${this.name} failing with ${step.status}`, type: 'server_error', code: step.status } })
          : typeof step.body === 'string'
            ? step.body
            : JSON.stringify(step.body);
      res.writeHead(step.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-scripted': this.name, ...step.headers });
      res.end(body);
      return;
    }
    const model = rec.model ?? this.models[0]?.name ?? 'scripted';
    const ok = 'ok' in step ? step.ok : {};
    const fault: StreamFault = 'stream' in step ? step.stream : {};
    const text = ('ok' in step ? step.ok.text : step.text) ?? this.text;
    const finish = ok.finish ?? 'stop';
    if (ok.firstTokenDelayMs && !(await this.wait(ok.firstTokenDelayMs))) return this.kill(res, false);
    const words = text.split(/(?= )/);
    if (!rec.stream) {
      const body = ndjson
        ? {
            model,
            created_at: '2026-11-01T10:00:00Z',
            message: { role: 'assistant', content: text },
            done: true,
            done_reason: finish,
            eval_count: words.length,
            prompt_eval_count: 3,
          }
        : {
            id: `chatcmpl-${this.name}`,
            object: 'chat.completion',
            created: CREATED,
            model,
            choices: [{ index: 0, message: { role: 'assistant', content: text }, logprobs: null, finish_reason: finish }],
            usage: { prompt_tokens: 3, completion_tokens: words.length, total_tokens: 3 + words.length },
          };
      const s = JSON.stringify(body);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(s), 'x-scripted': this.name });
      res.end(s);
      return;
    }
    const f = this.format(model, ndjson);
    res.writeHead(200, { 'content-type': ndjson ? 'application/x-ndjson' : 'text/event-stream', 'cache-control': 'no-cache', 'x-scripted': this.name });
    res.flushHeaders();
    const write = (s: string) => new Promise<void>((resolve) => (res.destroyed ? resolve() : res.write(s, () => resolve())));
    await write(f.role());
    if (fault.roleOnlyThenStallMs && !(await this.wait(fault.roleOnlyThenStallMs))) return this.kill(res, false);
    for (let i = 0; i <= words.length; i++) {
      if (res.destroyed) return;
      if (fault.cutAfter === i) {
        // What was written reached the wire (write callbacks): now the connection closes with
        // the chunked body unfinished, as when the process died (a FIN: an RST could make the
        // other side drop what it had not read yet).
        this.kill(res, false);
        return;
      }
      if (fault.stallAfter === i) {
        await this.hold(res);
        return;
      }
      if (fault.malformedAt === i) await write(f.malformed());
      if (fault.errorAt === i) {
        await write(f.error(`scripted ${this.name}: the model failed mid-stream`));
        (res as any)[SELF_KILLED] = true;
        res.end();
        return;
      }
      if (i === words.length) break;
      if (ok.chunkDelayMs && i > 0 && !(await this.wait(ok.chunkDelayMs))) return this.kill(res, false);
      await write(f.content(words[i]));
    }
    if (!fault.noTerminator) await write(f.finish(finish));
    else (res as any)[SELF_KILLED] = true;
    res.end();
  }

  /** One stream's pieces, in the route's own format. */
  private format(model: string, ndjson: boolean) {
    if (ndjson) {
      const line = (content: string, extra: object = { done: false }) =>
        `${JSON.stringify({ model, created_at: '2026-11-01T10:00:00Z', message: { role: 'assistant', content }, ...extra })}\n`;
      return {
        role: () => line(''),
        content: (w: string) => line(w),
        malformed: () => '{"model": "this is not json\n',
        error: (message: string) => `${JSON.stringify({ error: message })}\n`,
        finish: (reason: string) => line('', { done: true, done_reason: reason, total_duration: 1000, eval_count: 3, prompt_eval_count: 3 }),
      };
    }
    const id = `chatcmpl-${this.name}`;
    const chunk = (delta: object, finish: string | null) =>
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: CREATED, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
    return {
      role: () => chunk({ role: 'assistant', content: '' }, null),
      content: (w: string) => chunk({ content: w }, null),
      malformed: () => 'data: {"this is not": json\n\n',
      error: (message: string) => `data: ${JSON.stringify({ error: { message, type: 'server_error', code: 'internal_error' } })}\n\n`,
      finish: (reason: string) => `${chunk({}, reason)}data: [DONE]\n\n`,
    };
  }
}
