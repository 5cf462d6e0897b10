// The official `openai` npm package against Strata's memory proxy: the same
// checks as openai_sdk.py, run by tests/proxy.rs (`openai_node_sdk_through_the_proxy`).
// Usage: node openai_sdk.mjs BASE_URL. Exits non-zero on the first failed check.
import OpenAI from "openai";

const base = process.argv[2];
const QUESTION = "Does Miso the grey cat still sleep on the radiator every afternoon?";
const client = new OpenAI({
  baseURL: `${base}/v1`,
  apiKey: "upstream-key",
  defaultHeaders: { "X-Strata-User-Id": "alice", "X-Strata-Agent-Id": "bot" },
  maxRetries: 0,
});

function check(cond, what) {
  if (!cond) {
    console.log(`FAIL ${what}`);
    process.exit(1);
  }
  console.log(`ok   ${what}`);
}

const session = (id) => ({ headers: { "X-Strata-Session-Id": id } });

{
  const { data, response } = await client.chat.completions
    .create({ model: "m", messages: [{ role: "user", content: QUESTION }] }, session("js-1"))
    .withResponse();
  check(data.choices[0].message.content === `echo: ${QUESTION} (with memory)`, "non-streaming reply, with memory");
  check((response.headers.get("x-strata-injected") ?? "").startsWith("ep_"), "injected ids in x-strata-injected");
}
{
  const stream = await client.chat.completions.create(
    { model: "m", stream: true, messages: [{ role: "user", content: QUESTION }] },
    session("js-2"),
  );
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
  check(text === `echo: ${QUESTION} (with memory)`, "streamed reply assembled by the SDK");
}
{
  const r = await client.chat.completions.create(
    { model: "m", messages: [{ role: "user", content: "use memory: Miso radiator" }] },
    session("js-3"),
  );
  check(!r.choices[0].message.tool_calls, "no memory tool call reaches the client");
  check((r.choices[0].message.content ?? "").includes("ep_"), "the answer used memory_search's result");
}
{
  const weather = { type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } };
  const r = await client.chat.completions.create(
    { model: "m", tools: [weather], messages: [{ role: "user", content: "weather in Oslo?" }] },
    session("js-4"),
  );
  const calls = r.choices[0].message.tool_calls ?? [];
  check(calls.length === 1 && calls[0].function.name === "get_weather", "the client's tool call passes through");
}
try {
  await client.chat.completions.create({ model: "fail", messages: [{ role: "user", content: "hello" }] }, session("js-5"));
  check(false, "upstream 500 raises");
} catch (e) {
  check(e instanceof OpenAI.InternalServerError && e.status === 500, "upstream 500 is OpenAI.InternalServerError");
}
try {
  await client.chat.completions.create({ model: "slow", messages: [{ role: "user", content: "hello" }] }, session("js-6"));
  check(false, "upstream timeout raises");
} catch (e) {
  check(e instanceof OpenAI.APIError && e.status === 504, "upstream timeout is a 504 APIError");
}
console.log("all checks passed");
