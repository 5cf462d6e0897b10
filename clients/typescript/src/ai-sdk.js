// @strata/client/ai-sdk: memory for the Vercel AI SDK as a language-model
// middleware (docs/ai-sdk.md). No import of `ai` itself: a middleware is a
// plain object, so `ai` stays a peer dependency of the application.
//
//   const model = wrapLanguageModel({ model: openai("gpt-4o-mini"),
//     middleware: strataMemory({ scope: strata.scope("alice", "bot"), sessionId: "thread-42" }) });
//
// Per call (generateText and streamText alike):
// 1. the last user message's text goes to `inject`; a non-empty Memory
//    Context is appended to the first system message (one is added first
//    when there is none);
// 2. that user turn is recorded, with an idempotency key from its ordinal and
//    text, so a retried call stores it once;
// 3. the model runs; its text reply (assembled from the deltas when
//    streaming, recorded once the stream ends) is recorded as the
//    assistant's turn. With `endSession: true` the session then ends.
// Memory is an addition: an inject that fails leaves the call without memory,
// and a record that fails is reported to `onError` (default console.warn),
// never thrown into the model call.

/** A 32-bit FNV-1a hash of `s` as 8 hex digits (idempotency keys; no crypto needed). */
function fnv(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, "0");
}

/** The text of a prompt message's content (a string, or its text parts). */
function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.filter((p) => p && p.type === "text").map((p) => p.text).join("\n");
}

/** `params.prompt` with `section` appended to its first system message (or a new one first). */
function withSection(prompt, section) {
  const out = prompt.map((m) => ({ ...m }));
  const sys = out.find((m) => m.role === "system");
  if (sys) sys.content = sys.content ? `${sys.content}\n\n${section}` : section;
  else out.unshift({ role: "system", content: section });
  return out;
}

/**
 * The middleware. Options:
 * - `scope`: a client scope (`new Strata({...}).scope(userId, agentId)`), required;
 * - `sessionId`: the session, a string or `(params) => string`, required;
 * - `inject` (default true), `record` (default true): turn either half off;
 * - `endSession` (default false): end the session after the reply is recorded;
 * - `onError(err, stage)`: told of a memory call that failed (stage `inject`,
 *   `record` or `end`); default `console.warn`.
 */
export function strataMemory({ scope, sessionId, inject = true, record = true, endSession = false, onError } = {}) {
  if (!scope || typeof scope.inject !== "function") throw new TypeError("strataMemory: `scope` must be a Strata client scope");
  if (!sessionId) throw new TypeError("strataMemory: `sessionId` is required");
  const report = onError || ((err, stage) => console.warn(`strataMemory: ${stage} failed: ${err.message}`));
  const sessionOf = (params) => (typeof sessionId === "function" ? sessionId(params) : sessionId);
  // per call: what transformParams learnt, for the wrap that follows (keyed by the params object it returned)
  const turns = new WeakMap();

  async function finish(params, text) {
    const t = turns.get(params);
    if (!t || !record) return;
    if (text.trim()) {
      try {
        await scope.record(t.session, "assistant", text, { idempotencyKey: `${t.key}:reply` });
      } catch (err) {
        report(err, "record");
      }
    }
    if (endSession) {
      try {
        await scope.end(t.session);
      } catch (err) {
        report(err, "end");
      }
    }
  }

  return {
    specificationVersion: "v3",
    async transformParams({ params }) {
      const session = sessionOf(params);
      const users = params.prompt.filter((m) => m.role === "user");
      const last = params.prompt[params.prompt.length - 1];
      const text = last && last.role === "user" ? textOf(last.content) : "";
      const key = `ai-sdk:${users.length}:${fnv(text)}`;
      let next = params;
      if (inject && text.trim()) {
        try {
          const ctx = await scope.inject(session, text);
          if (ctx.section) next = { ...params, prompt: withSection(params.prompt, ctx.section) };
        } catch (err) {
          report(err, "inject");
        }
      }
      if (record && text.trim()) {
        try {
          await scope.record(session, "user", text, { idempotencyKey: key });
        } catch (err) {
          report(err, "record");
        }
      }
      if (next === params) next = { ...params };
      turns.set(next, { session, key });
      return next;
    },
    async wrapGenerate({ doGenerate, params }) {
      const result = await doGenerate();
      await finish(params, (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join(""));
      return result;
    },
    async wrapStream({ doStream, params }) {
      const { stream, ...rest } = await doStream();
      let text = "";
      const tap = new TransformStream({
        transform(part, controller) {
          if (part.type === "text-delta") text += part.delta ?? part.textDelta ?? "";
          controller.enqueue(part);
        },
        async flush() {
          await finish(params, text);
        },
      });
      return { stream: stream.pipeThrough(tap), ...rest };
    },
  };
}
