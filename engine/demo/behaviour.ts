// What a fake backend serves and how it misbehaves on request (backend.ts runs it): its models,
// what it records of each request, and the faults a test can switch on.
import type { Prefill } from './prefix-cache.js';

export interface FakeModel {
  name: string;
  digest?: string;
  size?: number;
  /** The context window, reported the way the family reports it (see modelList). */
  context?: number;
  /** llama.cpp only: the per-slot serving context (meta.n_ctx, the window a request can use);
   *  default `context` (one slot serving the whole trained context). */
  servingContext?: number;
  /** Loaded now (localrunner's api/ps, mlxmulti's v1/models/status); when no model says so, the first one is. */
  loaded?: boolean;
}

export interface Recorded {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  text: string;
  json: any;
  /** Generation requests with a prompt: its tokens found in the prefix cache and those evaluated. */
  prefill?: Prefill;
}

export interface Behaviour {
  /** Wait this long before answering generation and listing routes. */
  delayMs: number;
  /** Never answer (the socket stays open until the fake stops). */
  hang: boolean;
  /** Answer generation routes with this status and an error body. */
  status: number;
  /** Only the requests whose text holds this get `status` (an engine failing on what a request
   *  asks, such as a tool call it cannot parse); null: every request. */
  statusFor: string | null;
  /** The error body sent with `status` (default: a JSON error object naming the fake). */
  errorBody: { contentType: string; body: string } | null;
  /** Read the whole request, count it as executed, then close the connection without a reply:
   *  a backend that took the request and died. */
  resetBeforeResponse: boolean;
  /** Reset the connection (RST) as soon as a request arrives, without reading its body. */
  resetOnRequest: boolean;
  /** Close a kept-alive connection when a second request arrives on it, without reading it:
   *  the server-side idle close that races a client reusing the socket. */
  closeReusedSockets: boolean;
  /** The same, with a reset (RST) instead of a clean close. */
  resetReusedSockets: boolean;
  /** Delay of the health route. */
  healthDelayMs: number;
  /** Extra headers on a failing health answer (Retry-After, say). */
  healthHeaders: Record<string, string>;
  /** Destroy the socket after this many stream chunks (streamed replies only). */
  resetAfterChunks: number;
  /** Send this many stream chunks, then nothing more, keeping the connection open. */
  stallAfterChunks: number;
  /** Generation replies (and the error body of `status`): send the head and this many bytes of
   *  the body, then die. */
  cutBodyAt: number;
  /** Generation and listing routes wait for this before answering (a test releases it). */
  holdUntil: Promise<void> | null;
  /** Streams wait for this before writing piece i (the head goes out first): lets a test move
   *  a stream in lock-step with what its client has received. */
  beforeChunk: ((i: number) => Promise<void>) | null;
  /** Status of the health route (200 = healthy). */
  healthStatus: number;
  /** Milliseconds between stream chunks. */
  chunkDelayMs: number;
  /** The next this-many model-list requests answer 500. */
  listFailures: number;
  /** Chat streams send nothing but [DONE]. */
  emptyStream: boolean;
  /** Chat streams carry a line that is not JSON. */
  malformedChunk: boolean;
  /** Override the chat finish_reason (and, for "stop", the matched stop sequence vLLM-style). */
  finishReason: string | null;
  stopMatched: string | null;
  /** Extra headers on every reply but the health route's (an engine that reports in headers). */
  replyHeaders: Record<string, string>;
  /** Refuse a request that ends with part of an answer (a trailing assistant message, a prompt
   *  ending in the reply's first words) with a 400, as an engine without prefill does. */
  refusePrefill: boolean;
  /** Streams: before piece `at`, write `text` (a malformed event, an error event) and end —
   *  cleanly, or with a reset (`reset`). */
  breakWith: { at: number; text: string; reset?: boolean } | null;
  /** Before the reply's head, wait this long per prompt token not found in the prefix cache; one
   *  prompt at a time, as an engine's compute is shared (0: no wait). */
  prefillMsPerToken: number;
  /** Requests other clients run and queue on this engine, added to its own in its load reports.
   *  Replace it, do not change it in place (the default is shared). */
  otherLoad: Readonly<{ running: number; waiting: number }>;
}

/** A tool call the fake makes when the request offers tools. */
export interface FakeToolCall {
  name: string;
  arguments: string;
}

export interface FakeOptions {
  family: string;
  name?: string;
  models?: FakeModel[];
  /** The text generation routes reply with (split into stream chunks on spaces). */
  reply?: string;
  /** Tool calls made (after the reply text) when the request offers tools. */
  toolCalls?: FakeToolCall[];
  port?: number;
  /** llama.cpp: requests served at once (its slots; the rest wait). Default 2. */
  slots?: number;
  /** The prefix cache's capacity in tokens. Default 256k. */
  cacheTokens?: number;
  /** One GPU holding this few models at once (gpu.ts): a request for another model waits for a
   *  switch of `switchMs`. Default: every model held. */
  modelsAtOnce?: number;
  switchMs?: number;
}

export const DEFAULT_BEHAVIOUR: Behaviour = {
  delayMs: 0,
  hang: false,
  status: 0,
  statusFor: null,
  errorBody: null,
  resetBeforeResponse: false,
  resetOnRequest: false,
  closeReusedSockets: false,
  resetReusedSockets: false,
  resetAfterChunks: -1,
  stallAfterChunks: -1,
  cutBodyAt: -1,
  holdUntil: null,
  beforeChunk: null,
  healthStatus: 200,
  healthDelayMs: 0,
  healthHeaders: {},
  chunkDelayMs: 0,
  listFailures: 0,
  emptyStream: false,
  malformedChunk: false,
  finishReason: null,
  stopMatched: null,
  replyHeaders: {},
  refusePrefill: false,
  breakWith: null,
  prefillMsPerToken: 0,
  otherLoad: Object.freeze({ running: 0, waiting: 0 }),
};
