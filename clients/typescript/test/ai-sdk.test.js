// @strata/client/ai-sdk with the real `ai` package (its mock model) against a real `strata serve`.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { generateText, streamText, wrapLanguageModel } from "ai";
import { MockLanguageModelV3, simulateReadableStream } from "ai/test";
import { Strata } from "../src/index.js";
import { strataMemory } from "../src/ai-sdk.js";
import { startServer } from "./server.js";

let server;
before(async () => { server = await startServer(); });
after(async () => { await server.stop(); });

const usage = { inputTokens: { total: 1, noCache: 1 }, outputTokens: { total: 1, text: 1 } };
const uid = () => `u-${Math.random().toString(16).slice(2, 10)}`;
const systemOf = (call) => call.prompt.filter((m) => m.role === "system").map((m) => m.content).join("\n");

function generating(reply) {
  return new MockLanguageModelV3({
    doGenerate: async () => ({ content: [{ type: "text", text: reply }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] }),
  });
}

function streaming(chunks) {
  return new MockLanguageModelV3({
    doStream: async () => ({
      stream: simulateReadableStream({
        chunks: [
          { type: "text-start", id: "t" },
          ...chunks.map((delta) => ({ type: "text-delta", id: "t", delta })),
          { type: "text-end", id: "t" },
          { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage },
        ],
      }),
    }),
  });
}

test("generateText: the turn and the reply are recorded, and the next session gets the memory", async () => {
  const scope = new Strata({ baseUrl: server.url, apiKey: server.adminKey }).scope(uid(), "ai");
  const first = generating("Miso sounds lovely.");
  const model = wrapLanguageModel({ model: first, middleware: strataMemory({ scope, sessionId: "s1", endSession: true }) });
  const r = await generateText({ model, system: "You are helpful.", prompt: "I adopted a grey cat called Miso; she sleeps on the radiator." });
  assert.equal(r.text, "Miso sounds lovely.");
  const msgs = (await scope.messages("s1")).messages.map((m) => [m.role, m.content]);
  assert.deepEqual(msgs, [["user", "I adopted a grey cat called Miso; she sleeps on the radiator."], ["assistant", "Miso sounds lovely."]]);
  await scope.waitPromoted("s1");
  // a new session: the Memory Context goes into the system message the model receives
  const second = generating("She sleeps on the radiator.");
  const m2 = wrapLanguageModel({ model: second, middleware: strataMemory({ scope, sessionId: "s2" }) });
  await generateText({ model: m2, system: "You are helpful.", prompt: "Where does my grey cat Miso sleep in the afternoon?" });
  const sys = systemOf(second.doGenerateCalls[0]);
  assert.ok(sys.startsWith("You are helpful.") && sys.includes("Memory Context") && sys.includes("Miso"), sys);
  assert.equal((await scope.session("s2")).status, "open", "endSession is off by default");
});

test("streamText: the stream passes unchanged and the reply is recorded whole once it ends", async () => {
  const scope = new Strata({ baseUrl: server.url, apiKey: server.adminKey }).scope(uid(), "ai");
  const model = wrapLanguageModel({ model: streaming(["Kyoto ", "in ", "April."]), middleware: strataMemory({ scope, sessionId: (p) => "trip" }) });
  const r = streamText({ model, prompt: "I am planning a trip. Where and when?" });
  let text = "";
  for await (const d of r.textStream) text += d;
  assert.equal(text, "Kyoto in April.");
  let msgs = [];
  for (let i = 0; i < 50 && msgs.length < 2; i++) {
    msgs = (await scope.messages("trip")).messages;
    if (msgs.length < 2) await new Promise((ok) => setTimeout(ok, 20));
  }
  assert.deepEqual(msgs.map((m) => [m.role, m.content]), [["user", "I am planning a trip. Where and when?"], ["assistant", "Kyoto in April."]]);
});

test("a retried call stores the turn once, and memory failures never fail the call", async () => {
  const scope = new Strata({ baseUrl: server.url, apiKey: server.adminKey }).scope(uid(), "ai");
  const mw = strataMemory({ scope, sessionId: "retry" });
  const model = wrapLanguageModel({ model: generating("Noted."), middleware: mw });
  await generateText({ model, prompt: "Remember: my locker code is 4711." });
  await generateText({ model, prompt: "Remember: my locker code is 4711." });
  assert.equal((await scope.messages("retry")).messages.length, 2, "one user turn and one reply");
  const errors = [];
  const down = new Strata({ baseUrl: "http://127.0.0.1:9", apiKey: "x", maxRetries: 0 }).scope("a", "b");
  const m2 = wrapLanguageModel({ model: generating("Still here."), middleware: strataMemory({ scope: down, sessionId: "x", onError: (e, stage) => errors.push(stage) }) });
  assert.equal((await generateText({ model: m2, prompt: "hello there" })).text, "Still here.");
  assert.deepEqual(errors, ["inject", "record", "record"]);
  assert.throws(() => strataMemory({ sessionId: "x" }), TypeError);
});
