// Types of the client (src/index.js). The wire types come from schema.d.ts,
// generated from Strata's /openapi.json by openapi-typescript (`npm run gen`).
import type { components } from "./schema.js";

export type Schemas = components["schemas"];
type S<K extends keyof Schemas> = Schemas[K];

export interface StrataOptions {
  /** Default http://127.0.0.1:8750. */
  baseUrl?: string;
  /** A Strata key (`sk_strata_…`); none on an open loopback server. */
  apiKey?: string;
  /** Per attempt, in ms (default 30000). */
  timeoutMs?: number;
  /** Retries of 429/503 and of safe calls after a connection failure (default 3). */
  maxRetries?: number;
  fetch?: typeof fetch;
}

export class StrataError extends Error {
  status: number;
  code: string;
  /** Seconds, from Retry-After (429, 503). */
  retryAfter?: number;
  detail: string;
}
export class InvalidInputError extends StrataError {}
export class MalformedJsonError extends StrataError {}
export class InvalidBodyError extends StrataError {}
export class UnsupportedMediaTypeError extends StrataError {}
export class PayloadTooLargeError extends StrataError {}
export class NotAcceptableError extends StrataError {}
export class UnauthenticatedError extends StrataError {}
export class ForbiddenError extends StrataError {}
export class NotFoundError extends StrataError {}
export class NoRouteError extends StrataError {}
export class MethodNotAllowedError extends StrataError {}
export class ConflictError extends StrataError {}
export class RateLimitedError extends StrataError {}
export class OverloadedError extends StrataError {}
export class RequestTimeoutError extends StrataError {}
export class ShuttingDownError extends StrataError {}
export class UnavailableError extends StrataError {}
export class InternalError extends StrataError {}
export class TransportError extends StrataError {}
export class PromotionFailed extends StrataError {}
export const errors: Record<string, typeof StrataError>;

export class Strata {
  constructor(opts?: StrataOptions);
  scope(userId: string, agentId: string): Scope;
  request(method: string, path: string, opts?: { body?: unknown; query?: Record<string, string>; key?: string; idempotent?: boolean; text?: boolean }): Promise<any>;
  forgetUser(userId: string): Promise<S<"ForgetReport">>;
  jobs(): Promise<S<"ParkedJob">[]>;
  retryJob(id: number): Promise<S<"Requeued">>;
  usage(): Promise<S<"UsageTotals">>;
  reload(): Promise<S<"ReloadReport">>;
  config(): Promise<Record<string, any>>;
  /** The process is up: "ok". */
  healthz(): Promise<string>;
  /** Stores open and workers running: "ready" (a 503 while shutting down rejects). */
  readyz(): Promise<string>;
  metrics(): Promise<string>;
  openapi(): Promise<Record<string, any>>;
}

export class Scope {
  readonly userId: string;
  readonly agentId: string;
  record(sessionId: string, role: S<"Role">, content: string, opts?: { name?: string; timestamp?: Date | string; idempotencyKey?: string }): Promise<S<"Recorded">>;
  recordBatch(turns: Record<string, unknown>[], opts?: { idempotencyKey?: string }): Promise<S<"BatchReport">>;
  inject(sessionId: string, message: string, opts?: { explain?: boolean; visibility?: S<"ReadVisibility"> }): Promise<S<"InjectResult">>;
  end(sessionId: string): Promise<S<"Ended">>;
  /** Ends the session of a memory-proxy reply, read from its `X-Strata-Session-Id` header (`{ response }` of `.withResponse()`, a `Response`, or headers). */
  endThread(response: unknown): Promise<S<"Ended">>;
  /** The session's messages in recorded order, open or ended. */
  messages(sessionId: string): Promise<S<"SessionMessages">>;
  session(sessionId: string): Promise<S<"SessionState">>;
  waitPromoted(sessionId: string, opts?: { timeoutMs?: number; vectors?: boolean; intervalMs?: number }): Promise<S<"SessionState">>;
  search(query: string, opts?: { topK?: number; explain?: boolean; visibility?: S<"ReadVisibility"> }): Promise<S<"SearchResult">>;
  expand(episodeId: string, opts?: { raw?: boolean }): Promise<S<"Expanded">>;
  graph(query?: string, opts?: { entity?: string; hops?: number; predicate?: string; includeInvalid?: boolean }): Promise<S<"GraphSearchResult">>;
  remember(type: S<"MemoryType">, content: string, metadata?: Record<string, unknown>, opts?: { indexed?: boolean }): Promise<S<"Remembered">>;
  rememberBatch(memories: S<"MemoryInput">[]): Promise<S<"Remembered">[]>;
  retrieve(filter?: Record<string, unknown>, opts?: RetrieveOptions): Promise<S<"RetrieveResult">>;
  retrievePages(filter?: Record<string, unknown>, opts?: RetrieveOptions): AsyncGenerator<S<"RetrieveResult">>;
  getMemory(memoryId: string): Promise<S<"StoredMemory">>;
  forgetMemory(memoryId: string): Promise<S<"ForgottenMemory">>;
  share(memoryId: string, visibility: "team" | "public" | "private", opts?: { teamId?: string }): Promise<S<"Shared">>;
}

export interface RetrieveOptions {
  sortBy?: string;
  direction?: S<"Direction">;
  topK?: number;
  cursor?: string;
  query?: string;
  includeSuperseded?: boolean;
  visibility?: S<"ReadVisibility">;
}
