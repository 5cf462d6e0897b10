#!/usr/bin/env python3
"""The official `openai` Python package against Strata's memory proxy.

Run by tests/proxy.rs (`openai_python_sdk_through_the_proxy`), which starts
`strata serve` with `[proxy] tools = true` in front of an OpenAI-compatible
upstream it runs, and has already promoted a session about Miso the cat for
alice/bot. Usage: openai_sdk.py BASE_URL. Exits non-zero on the first
failed check; prints one line per check.

A backend changes two things to get memory: `base_url`, and one header
naming the session (the scope comes from the key, or from the user and
agent headers on an open loopback server).
"""
import sys

import openai

base = sys.argv[1]
QUESTION = "Does Miso the grey cat still sleep on the radiator every afternoon?"
scope = {"X-Strata-User-Id": "alice", "X-Strata-Agent-Id": "bot"}
client = openai.OpenAI(base_url=f"{base}/v1", api_key="upstream-key", default_headers=scope, max_retries=0)


def check(cond, what):
    if not cond:
        print(f"FAIL {what}", flush=True)
        sys.exit(1)
    print(f"ok   {what}", flush=True)


# non-streaming, with the raw response for the proxy's headers
raw = client.chat.completions.with_raw_response.create(
    model="m",
    messages=[{"role": "user", "content": QUESTION}],
    extra_headers={"X-Strata-Session-Id": "py-1"},
)
reply = raw.parse()
check(reply.choices[0].message.content == f"echo: {QUESTION} (with memory)", "non-streaming reply, with memory")
check(raw.headers.get("x-strata-injected", "").startswith("ep_"), "injected ids in x-strata-injected")

# streaming
stream = client.chat.completions.create(
    model="m",
    stream=True,
    messages=[{"role": "user", "content": QUESTION}],
    extra_headers={"X-Strata-Session-Id": "py-2"},
)
text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
check(text == f"echo: {QUESTION} (with memory)", "streamed reply assembled by the SDK")

# the memory tools run inside Strata: the client sees only the final answer
reply = client.chat.completions.create(
    model="m",
    messages=[{"role": "user", "content": "use memory: Miso radiator"}],
    extra_headers={"X-Strata-Session-Id": "py-3"},
)
check(reply.choices[0].message.tool_calls is None, "no memory tool call reaches the client")
check("ep_" in (reply.choices[0].message.content or ""), "the answer used memory_search's result")

# the client's own tools pass through
weather = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
reply = client.chat.completions.create(
    model="m",
    tools=[weather],
    messages=[{"role": "user", "content": "weather in Oslo?"}],
    extra_headers={"X-Strata-Session-Id": "py-4"},
)
calls = reply.choices[0].message.tool_calls or []
check(len(calls) == 1 and calls[0].function.name == "get_weather", "the client's tool call passes through")

# upstream failures are the SDK's own exceptions, with the upstream status
try:
    client.chat.completions.create(model="fail", messages=[{"role": "user", "content": "hello"}], extra_headers={"X-Strata-Session-Id": "py-5"})
    check(False, "upstream 500 raises")
except openai.InternalServerError as e:
    check(e.status_code == 500 and "boom" in str(e), "upstream 500 is openai.InternalServerError")
try:
    client.chat.completions.create(model="slow", messages=[{"role": "user", "content": "hello"}], extra_headers={"X-Strata-Session-Id": "py-6"})
    check(False, "upstream timeout raises")
except openai.APIStatusError as e:
    check(e.status_code == 504, "upstream timeout is a 504 APIStatusError")

# a key that is not Strata's, once keys exist, is refused: checked by the Rust test;
# here a malformed body gets OpenAI's error shape
try:
    client.chat.completions.create(model="m", messages=[])
    check(False, "empty messages raise")
except openai.BadRequestError as e:
    check(e.status_code == 400, "empty messages are openai.BadRequestError")
print("all checks passed")
