// TypeScript (ESM) client of Strata's HTTP API: zero runtime dependencies,
// the platform's fetch. Types: index.d.ts, over schema.d.ts (generated from
// /openapi.json by openapi-typescript; test/drift.test.js checks it).
//
// Retries: a 429 or a 503 (overloaded, shutting_down, unavailable) is retried
// up to maxRetries times after its Retry-After seconds (else 250 ms doubling,
// at most 4 s). A connection failure or a 503 `timeout` is retried only where
// a repeat cannot write twice: reads, and the two record routes, whose
// Idempotency-Key (generated per call unless given) is the same on every attempt.

const SAFE_503 = new Set(["overloaded", "shutting_down", "unavailable"]);

/** An error answer of Strata: `status`, `code`, `message`, `retryAfter` (s). */
export class StrataError extends Error {
  constructor(status, code, message, retryAfter) {
    super(`${status} ${code}: ${message}`);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
    this.detail = message;
  }
}

const CODES = {
  invalid_input: "InvalidInputError",
  malformed_json: "MalformedJsonError",
  invalid_body: "InvalidBodyError",
  unsupported_media_type: "UnsupportedMediaTypeError",
  payload_too_large: "PayloadTooLargeError",
  not_acceptable: "NotAcceptableError",
  unauthenticated: "UnauthenticatedError",
  forbidden: "ForbiddenError",
  not_found: "NotFoundError",
  no_route: "NoRouteError",
  method_not_allowed: "MethodNotAllowedError",
  conflict: "ConflictError",
  rate_limited: "RateLimitedError",
  overloaded: "OverloadedError",
  timeout: "RequestTimeoutError",
  shutting_down: "ShuttingDownError",
  unavailable: "UnavailableError",
  internal: "InternalError",
  transport: "TransportError",
  promotion_failed: "PromotionFailed",
};

/** Error code → class (each a subclass of StrataError named as in CODES). */
export const errors = Object.fromEntries(
  Object.entries(CODES).map(([code, name]) => [code, { [name]: class extends StrataError {} }[name]]),
);
export const {
  InvalidInputError, MalformedJsonError, InvalidBodyError, UnsupportedMediaTypeError, PayloadTooLargeError,
  NotAcceptableError, UnauthenticatedError, ForbiddenError, NotFoundError, NoRouteError, MethodNotAllowedError,
  ConflictError, RateLimitedError, OverloadedError, RequestTimeoutError, ShuttingDownError, UnavailableError,
  InternalError, TransportError, PromotionFailed,
} = Object.fromEntries(Object.entries(CODES).map(([code, name]) => [name, errors[code]]));

function errorFor(status, body, retryAfter) {
  const e = (body && body.error) || {};
  const code = e.code || `http_${status}`;
  const Cls = errors[code] || StrataError;
  return new Cls(status, code, e.message || JSON.stringify(body).slice(0, 300), retryAfter);
}

const q = encodeURIComponent;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const dropUndefined = (o) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined && v !== null));
const newKey = () => globalThis.crypto.randomUUID().replaceAll("-", "");

export class Strata {
  /**
   * @param {object} [opts] baseUrl (default http://127.0.0.1:8750), apiKey, timeoutMs per attempt
   *   (30000), maxRetries (3), fetch (the platform's by default).
   */
  constructor(opts = {}) {
    this.baseUrl = (opts.baseUrl || "http://127.0.0.1:8750").replace(/\/+$/, "");
    this.apiKey = opts.apiKey;
    this.timeoutMs = opts.timeoutMs ?? 30000;
    this.maxRetries = opts.maxRetries ?? 3;
    this.fetch = opts.fetch || globalThis.fetch.bind(globalThis);
  }

  /** The routes of one scope. */
  scope(userId, agentId) {
    return new Scope(this, userId, agentId);
  }

  /** One call, with the retries of the module comment. */
  async request(method, path, { body, query, key, idempotent = false, text = false } = {}) {
    const headers = { "user-agent": "strata-client-typescript" };
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    if (method === "POST") headers["idempotency-key"] = key || newKey();
    const safe = idempotent || method === "GET" || key !== undefined;
    const url = this.baseUrl + path + (query ? `?${new URLSearchParams(query)}` : "");
    for (let attempt = 0; ; attempt++) {
      const backoff = Math.min(250 * 2 ** attempt, 4000);
      let r;
      try {
        r = await this.fetch(url, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(this.timeoutMs),
        });
      } catch (e) {
        if (safe && attempt < this.maxRetries) {
          await sleep(backoff);
          continue;
        }
        throw new TransportError(0, "transport", String(e && e.cause ? e.cause : e));
      }
      if (r.ok) {
        if (text) return r.text();
        const t = await r.text();
        return t ? JSON.parse(t) : null;
      }
      const raw = await r.text();
      let parsed;
      try {
        parsed = JSON.parse(raw);
      } catch {
        parsed = { error: { code: `http_${r.status}`, message: raw.slice(0, 300) } };
      }
      const ra = r.headers.get("retry-after");
      const err = errorFor(r.status, parsed, ra === null ? undefined : Number(ra));
      const retryable = r.status === 429 || (r.status === 503 && (SAFE_503.has(err.code) || safe));
      if (retryable && attempt < this.maxRetries) {
        await sleep(err.retryAfter !== undefined && !Number.isNaN(err.retryAfter) ? err.retryAfter * 1000 : backoff);
        continue;
      }
      throw err;
    }
  }

  // operator routes (an admin key, or an open loopback server)
  forgetUser(userId) { return this.request("DELETE", `/v1/users/${q(userId)}`, { idempotent: true }); }
  jobs() { return this.request("GET", "/v1/jobs"); }
  retryJob(id) { return this.request("POST", `/v1/jobs/${Number(id)}/retry`, { idempotent: true }); }
  usage() { return this.request("GET", "/v1/usage"); }
  reload() { return this.request("POST", "/v1/admin/reload", { idempotent: true }); }
  config() { return this.request("GET", "/v1/admin/config"); }
  /** The process is up: "ok" (plain text). */
  healthz() { return this.request("GET", "/healthz", { text: true }); }
  /** Stores open and workers running: "ready"; a 503 while shutting down rejects with the client's error. */
  readyz() { return this.request("GET", "/readyz", { text: true }); }
  metrics() { return this.request("GET", "/metrics", { text: true }); }
  openapi() { return this.request("GET", "/openapi.json"); }
}

export class Scope {
  constructor(client, userId, agentId) {
    this.client = client;
    this.userId = userId;
    this.agentId = agentId;
    this.base = `/v1/users/${q(userId)}/agents/${q(agentId)}`;
  }

  #call(method, path, opts) {
    return this.client.request(method, this.base + path, opts);
  }

  // working tier
  record(sessionId, role, content, { name, timestamp, idempotencyKey } = {}) {
    const key = idempotencyKey || newKey();
    const body = dropUndefined({ role, content, name, timestamp: timestamp instanceof Date ? timestamp.toISOString() : timestamp, idempotency_key: key });
    return this.#call("POST", `/sessions/${q(sessionId)}/messages`, { body, key });
  }
  recordBatch(turns, { idempotencyKey } = {}) {
    return this.#call("POST", "/messages:batch", { body: turns, key: idempotencyKey || newKey() });
  }
  inject(sessionId, message, { explain, visibility } = {}) {
    return this.#call("POST", `/sessions/${q(sessionId)}/inject`, { body: dropUndefined({ message, explain, visibility }), idempotent: true });
  }
  end(sessionId) {
    return this.#call("POST", `/sessions/${q(sessionId)}/end`, { idempotent: true });
  }
  /**
   * Ends the session of a reply that came through the memory proxy: reads its
   * `X-Strata-Session-Id` response header from `response` (the OpenAI SDK's
   * `.withResponse()` result `{ response }`, a fetch `Response`, anything with
   * `headers`, or a plain object of headers). The same as sending
   * `X-Strata-End-Session: true` with the last request.
   */
  endThread(response) {
    const src = response && response.response && response.response.headers ? response.response : response;
    const h = src && src.headers !== undefined ? src.headers : src;
    let id = null;
    if (h && typeof h.get === "function") id = h.get("x-strata-session-id");
    else if (h) id = h["x-strata-session-id"] ?? h["X-Strata-Session-Id"] ?? null;
    if (!id) return Promise.reject(new TypeError("no X-Strata-Session-Id header: endThread takes a response of Strata's memory proxy"));
    return this.end(id);
  }
  messages(sessionId) {
    return this.#call("GET", `/sessions/${q(sessionId)}/messages`);
  }
  session(sessionId) {
    return this.#call("GET", `/sessions/${q(sessionId)}`);
  }
  /** Polls `session` until promoted (and, with `vectors`, embedded); PromotionFailed when parked. */
  async waitPromoted(sessionId, { timeoutMs = 60000, vectors = false, intervalMs = 100 } = {}) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const s = await this.session(sessionId);
      if (s.status === "failed") {
        const job = (s.jobs || []).find((j) => j.parked) || {};
        throw new PromotionFailed(200, "promotion_failed", `promotion parked (job ${job.id}): ${job.last_error}`);
      }
      if (s.status === "promoted" && (s.vectors_indexed || !vectors)) return s;
      if (Date.now() > deadline) throw new Error(`session ${sessionId} not promoted after ${timeoutMs} ms: ${s.status}`);
      await sleep(intervalMs);
    }
  }

  // episodic and semantic tiers
  search(query, { topK = 5, explain, visibility } = {}) {
    return this.#call("POST", "/search", { body: dropUndefined({ query, top_k: topK, explain, visibility }), idempotent: true });
  }
  expand(episodeId, { raw = false } = {}) {
    return this.#call("GET", `/episodes/${q(episodeId)}`, { query: raw ? { raw: "true" } : undefined });
  }
  graph(query, { entity, hops = 1, predicate, includeInvalid } = {}) {
    const body = dropUndefined({ query, entity, hops, predicate, include_invalid: includeInvalid });
    return this.#call("POST", "/graph/search", { body, idempotent: true });
  }

  // typed memories
  remember(type, content, metadata, { indexed } = {}) {
    return this.#call("POST", "/memories", { body: dropUndefined({ type, content, metadata, indexed }) });
  }
  rememberBatch(memories) {
    return this.#call("POST", "/memories:batch", { body: memories });
  }
  retrieve(filter, { sortBy, direction, topK, cursor, query, includeSuperseded, visibility } = {}) {
    const body = dropUndefined({ filter, sort_by: sortBy, direction, top_k: topK, cursor, query, include_superseded: includeSuperseded, visibility });
    return this.#call("POST", "/memories/query", { body, idempotent: true });
  }
  /** Every page of a retrieve, following next_cursor. */
  async *retrievePages(filter, opts = {}) {
    let cursor;
    for (;;) {
      const page = await this.retrieve(filter, { ...opts, cursor });
      yield page;
      cursor = page.next_cursor;
      if (!cursor) return;
    }
  }
  getMemory(memoryId) { return this.#call("GET", `/memories/${q(memoryId)}`); }
  forgetMemory(memoryId) { return this.#call("DELETE", `/memories/${q(memoryId)}`, { idempotent: true }); }
  share(memoryId, visibility, { teamId } = {}) {
    return this.#call("POST", `/memories/${q(memoryId)}/share`, { body: dropUndefined({ visibility, team_id: teamId }) });
  }
}
