// @strata/client against a real `strata serve` (test/server.js).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import {
  Strata, ConflictError, ForbiddenError, InvalidInputError, NotFoundError, RateLimitedError,
  StrataError, UnauthenticatedError,
} from "../src/index.js";
import { startServer } from "./server.js";

const MISO = ["I adopted a grey cat called Miso last spring.", "Miso sleeps on the radiator every afternoon."];
const QUESTION = "Does Miso the grey cat still sleep on the radiator every afternoon?";
const sid = (p) => `${p}-${Math.random().toString(16).slice(2, 10)}`;

let server;
before(async () => { server = await startServer(); });
after(async () => { await server.stop(); });

test("a chatbot loop records, promotes and injects", async () => {
  const s = new Strata({ baseUrl: server.url, apiKey: server.aliceKey }).scope("alice", "bot");
  const first = sid("miso");
  for (const text of MISO) assert.equal(typeof (await s.record(first, "user", text)).message_id, "number");
  await s.record(first, "assistant", "Miso sounds lovely.");
  assert.equal((await s.session(first)).status, "open");
  assert.equal((await s.end(first)).status, "completed");
  const state = await s.waitPromoted(first);
  assert.equal(state.status, "promoted");
  assert.match(state.episode_id, /^ep_/);
  assert.equal((await s.end(first)).status, "promoted", "ending it again says how far it got");
  const ctx = await s.inject(sid("next"), QUESTION);
  assert.ok(ctx.section.includes("Miso") && ctx.injected >= 1, ctx.section);
  const hits = (await s.search("Miso radiator")).results;
  assert.equal(hits[0].session_id, first);
  const full = await s.expand(hits[0].id, { raw: true });
  assert.equal(full.raw.length, 3);
  assert.ok("entities" in (await s.graph("Miso")));
});

test("endThread reads the proxy's session header", async () => {
  const s = new Strata({ baseUrl: server.url, apiKey: server.aliceKey }).scope("alice", "bot");
  const t = sid("thread");
  await s.record(t, "user", "We are painting the kitchen yellow this weekend.");
  // as the OpenAI SDK's .withResponse() returns it: { data, response } with fetch Headers
  const withResponse = { data: {}, response: new Response("{}", { headers: { "x-strata-session-id": t } }) };
  assert.equal((await s.endThread(withResponse)).status, "completed");
  assert.equal((await s.endThread({ "x-strata-session-id": t })).session_id, t);
  await assert.rejects(s.endThread({ "content-type": "application/json" }), TypeError);
});

test("records and batches are idempotent", async () => {
  const s = new Strata({ baseUrl: server.url, apiKey: server.aliceKey }).scope("alice", "bot");
  const t = sid("idem");
  const a = await s.record(t, "user", "I moved to Lisbon in May.", { idempotencyKey: "turn-1" });
  const b = await s.record(t, "user", "I moved to Lisbon in May.", { idempotencyKey: "turn-1" });
  assert.equal(a.message_id, b.message_id);
  const lines = [0, 1, 2].map((i) => ({ session_id: t, role: "user", content: `line ${i}`, timestamp: "2026-05-01T10:00:00Z" }));
  const r1 = await s.recordBatch(lines, { idempotencyKey: "batch-1" });
  const r2 = await s.recordBatch(lines, { idempotencyKey: "batch-1" });
  assert.deepEqual(r1.message_ids, r2.message_ids);
  assert.equal((await s.session(t)).message_count, 4);
});

test("typed memories, with cursor pages", async () => {
  const s = new Strata({ baseUrl: server.url, apiKey: server.aliceKey }).scope("alice", "bot");
  const fact = await s.remember("fact", "Prefers window seats.", { category: "travel", key: "seat" });
  for (const d of [1, 2, 3]) await s.remember("event", `Bought a grinder part ${d}`, { timestamp: `2026-05-0${d}T10:00:00Z`, action: "purchase" });
  const pages = [];
  for await (const p of s.retrievePages({ type: "event", "metadata.action": "purchase" }, { sortBy: "metadata.timestamp", topK: 2 })) pages.push(p);
  assert.equal(pages.length, 2);
  assert.equal(pages.flatMap((p) => p.memories).length, 3);
  assert.equal((await s.getMemory(fact.id)).content, "Prefers window seats.");
  assert.ok(await s.share(fact.id, "public"));
  assert.ok(await s.forgetMemory(fact.id));
  await assert.rejects(s.getMemory(fact.id), NotFoundError);
  assert.equal((await s.rememberBatch([{ type: "fact", content: "Allergic to peanuts.", metadata: { category: "health" } }])).length, 1);
});

test("each error code is its own class", async () => {
  const alice = new Strata({ baseUrl: server.url, apiKey: server.aliceKey });
  const s = alice.scope("alice", "bot");
  await assert.rejects(s.expand("ep_" + "0".repeat(32)), (e) => e instanceof NotFoundError && e.status === 404 && e.code === "not_found");
  await assert.rejects(s.record(sid("bad"), "user", "   "), InvalidInputError);
  await assert.rejects(alice.scope("bob", "bot").search("anything"), ForbiddenError);
  await assert.rejects(alice.jobs(), ForbiddenError);
  await assert.rejects(new Strata({ baseUrl: server.url, apiKey: "sk_strata_" + "0".repeat(64) }).scope("alice", "bot").search("x"), UnauthenticatedError);
  const ended = sid("ended");
  await s.record(ended, "user", "hello there");
  await s.end(ended);
  await assert.rejects(s.record(ended, "user", "too late"), (e) => e instanceof ConflictError && e instanceof StrataError);
  const bob = new Strata({ baseUrl: server.url, apiKey: server.bobKey }).scope("bob", "bot");
  assert.ok(!(await bob.inject(sid("b"), QUESTION)).section.includes("Miso"));
});

test("admin routes", async () => {
  const admin = new Strata({ baseUrl: server.url, apiKey: server.adminKey });
  assert.ok(Array.isArray(await admin.jobs()));
  assert.equal((await admin.usage()).calls, 0);
  assert.ok((await admin.config()).recall.min_score > 0);
  assert.ok("applied" in (await admin.reload()));
  assert.ok((await admin.metrics()).includes("strata_"));
  // plain-text answers, not JSON (both once failed to parse them)
  assert.equal(await admin.healthz(), "ok");
  assert.equal(await admin.readyz(), "ready");
  const carol = admin.scope("carol", "bot");
  await carol.record(sid("c"), "user", "Carol's secret plan.");
  await admin.forgetUser("carol");
  assert.deepEqual((await carol.search("secret plan")).results, []);
});

test("rate limits are retried after Retry-After", async () => {
  const limited = await startServer("server.rate_limit_per_sec=1", "server.rate_limit_burst=1");
  try {
    const seen = [];
    const counting = async (...a) => { const r = await fetch(...a); seen.push(r.status); return r; };
    const s = new Strata({ baseUrl: limited.url, apiKey: limited.aliceKey, fetch: counting, maxRetries: 5 }).scope("alice", "bot");
    for (let i = 0; i < 3; i++) await s.search("anything");
    assert.ok(seen.includes(429), String(seen));
    assert.equal(seen.filter((x) => x === 200).length, 3);
    const s0 = new Strata({ baseUrl: limited.url, apiKey: limited.aliceKey, maxRetries: 0 }).scope("alice", "bot");
    await assert.rejects(
      (async () => { for (let i = 0; i < 3; i++) await s0.search("anything"); })(),
      (e) => e instanceof RateLimitedError && e.retryAfter >= 1,
    );
  } finally {
    await limited.stop();
  }
});

test("the generated types match the server's /openapi.json", () => {
  const out = join(mkdtempSync(join(tmpdir(), "strata-ts-gen-")), "schema.d.ts");
  const root = resolve(import.meta.dirname, "..");
  execFileSync(join(root, "node_modules/.bin/openapi-typescript"), [`${server.url}/openapi.json`, "-o", out], { stdio: "ignore" });
  assert.equal(readFileSync(out, "utf8"), readFileSync(join(root, "src/schema.d.ts"), "utf8"),
    "src/schema.d.ts drifted from /openapi.json: run `npm run gen` against a fresh server (clients/typescript/README.md)");
});
