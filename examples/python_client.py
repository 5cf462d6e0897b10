#!/usr/bin/env python3
"""A chatbot loop over Strata, on the Python client (clients/python).

Every user turn: inject (the Memory Context for the system prompt), then
record the turn; the reply is recorded too. At the end, --end ends the
session so it is promoted into a searchable episode, and --wait waits
until it is.

The reply comes from any OpenAI-compatible chat endpoint when
OPENAI_BASE_URL (e.g. http://127.0.0.1:8080/v1) or OPENAI_API_KEY is set;
otherwise the bot echoes, so the loop runs with no model at all.

    pip install ./clients/python
    strata serve &
    python3 examples/python_client.py --user alice --agent bot --session demo-1 --end
    (type messages; Ctrl-D ends)

Options: --url (default http://127.0.0.1:8750), --key or STRATA_API_KEY
(needed once an API key exists), --model (default gpt-4o-mini).
"""
import argparse
import os
import sys

import httpx
from strata_client import Strata


def reply(system, history, model):
    base = os.environ.get("OPENAI_BASE_URL")
    key = os.environ.get("OPENAI_API_KEY")
    if not base and not key:
        return "(echo) " + history[-1]["content"]
    base = (base or "https://api.openai.com/v1").rstrip("/")
    body = {"model": model, "messages": [{"role": "system", "content": system}] + history}
    headers = {"authorization": f"Bearer {key}"} if key else {}
    r = httpx.post(base + "/chat/completions", json=body, headers=headers, timeout=120)
    r.raise_for_status()
    return r.json()["choices"][0]["message"]["content"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8750")
    p.add_argument("--user", required=True)
    p.add_argument("--agent", required=True)
    p.add_argument("--session", required=True)
    p.add_argument("--key", default=os.environ.get("STRATA_API_KEY"))
    p.add_argument("--model", default="gpt-4o-mini")
    p.add_argument("--end", action="store_true", help="end the session at EOF (queues promotion)")
    p.add_argument("--wait", action="store_true", help="with --end, wait until the session is promoted")
    a = p.parse_args()
    memory = Strata(a.url, a.key).scope(a.user, a.agent)
    history = []
    for line in sys.stdin:
        text = line.strip()
        if not text:
            continue
        ctx = memory.inject(a.session, text)  # before recording the turn
        if ctx["section"]:
            print(ctx["section"], end="")
        memory.record(a.session, "user", text)
        history.append({"role": "user", "content": text})
        answer = reply("You are a helpful assistant.\n\n" + ctx["section"], history, a.model)
        memory.record(a.session, "assistant", answer)
        history.append({"role": "assistant", "content": answer})
        print(f"bot> {answer}", flush=True)
    if a.end and history:
        memory.end(a.session)
        print(f"session {a.session} ended; it will be promoted in the background")
        if a.wait:
            state = memory.wait_promoted(a.session)
            print(f"session {a.session} promoted: {state['episode_id']}")


if __name__ == "__main__":
    main()
