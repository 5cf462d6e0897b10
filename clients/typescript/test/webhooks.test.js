// Webhook deliveries from a real `strata serve` to a receiver this test runs,
// checked with src/webhooks.js (the signature scheme of docs/webhooks.md).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { Strata } from "../src/index.js";
import { parseEvent, sign, verifySignature, WebhookSignatureError } from "../src/webhooks.js";
import { startServer } from "./server.js";

const SECRET = `whsec-ts-${Math.random().toString(16).slice(2)}`;
const got = [];
let receiver, server, url;

before(async () => {
  receiver = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      got.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(204).end();
    });
  });
  await new Promise((ok) => receiver.listen(0, "127.0.0.1", ok));
  url = `http://127.0.0.1:${receiver.address().port}/hook`;
  process.env.STRATA_TS_WEBHOOK_SECRET = SECRET;
  server = await startServer(`webhooks.endpoints=[{ url = "${url}", secret_env = "STRATA_TS_WEBHOOK_SECRET", events = ["session.promoted"] }]`);
});
after(async () => {
  await server.stop();
  receiver.close();
});

test("a promotion arrives signed", async () => {
  const s = new Strata({ baseUrl: server.url, apiKey: server.aliceKey }).scope("alice", "bot");
  const session = `hook-${Math.random().toString(16).slice(2, 10)}`;
  await s.record(session, "user", "I adopted a grey cat called Miso last spring.");
  await s.end(session);
  const deadline = Date.now() + 60000;
  while (!got.length) {
    assert.ok(Date.now() < deadline, "no delivery within 60 s");
    await new Promise((r) => setTimeout(r, 100));
  }
  const { headers, body } = got[0];
  const event = await parseEvent(SECRET, headers["x-strata-signature"], body);
  assert.equal(event.type, "session.promoted");
  assert.equal(event.data.session_id, session);
  assert.equal(event.data.episode_id, (await s.waitPromoted(session)).episode_id);
  assert.equal(headers["x-strata-delivery"], event.id);
  await assert.rejects(parseEvent("wrong", headers["x-strata-signature"], body), WebhookSignatureError);
  const tampered = Buffer.from(body.toString().replace("alice", "mallory"));
  await assert.rejects(parseEvent(SECRET, headers["x-strata-signature"], tampered), WebhookSignatureError);
});

test("stale or malformed signatures fail; the server's test vector holds", async () => {
  const body = '{"id":"evt_1"}';
  const h = await sign("k", 1700000000, body);
  assert.ok(await verifySignature("k", h, body, { now: 1700000100 }));
  assert.ok(!(await verifySignature("k", h, body, { now: 1700000000 + 301 })));
  assert.ok(!(await verifySignature("k", undefined, body)));
  assert.ok(!(await verifySignature("k", "v1=00", body, { now: 1700000000 })));
  assert.equal(await sign("key", 1, "body"), "t=1,v1=91b5374b153842ad05b2c4eab9349b8321b14703165bd3fb8b034dfb8be98ae5");
});
