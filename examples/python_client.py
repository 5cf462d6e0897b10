#!/usr/bin/env python3
"""A chatbot loop over Strata's HTTP API, standard library only.

Every user turn: POST .../inject (the Memory Context for the system prompt),
then POST .../messages (record the turn); the reply is recorded too. At the
end, --end ends the session so it is promoted into a searchable episode.

The reply comes from any OpenAI-compatible chat endpoint when
OPENAI_BASE_URL (e.g. http://127.0.0.1:8080/v1) or OPENAI_API_KEY is set;
otherwise the bot echoes, so the loop runs with no model at all.

    strata serve &
    python3 examples/python_client.py --user alice --agent bot --session demo-1 --end
    (type messages; Ctrl-D ends)

Options: --url (default http://127.0.0.1:8750), --key or STRATA_API_KEY
(needed once an API key exists), --model (default gpt-4o-mini).
"""
import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone


class Strata:
    def __init__(self, url, user, agent, key=None):
        q = urllib.parse.quote
        self.scope = f"{url.rstrip('/')}/v1/users/{q(user, safe='')}/agents/{q(agent, safe='')}"
        self.key = key

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.scope + path, data=data, method=method)
        if data is not None:
            req.add_header("content-type", "application/json")
        if self.key:
            req.add_header("authorization", f"Bearer {self.key}")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            err = json.loads(e.read() or b"{}").get("error", {})
            raise RuntimeError(f"{e.code} {err.get('code')}: {err.get('message')}") from None

    def inject(self, session, message):
        return self._call("POST", f"/sessions/{urllib.parse.quote(session, safe='')}/inject", {"message": message})

    def record(self, session, role, content):
        now = datetime.now(timezone.utc).isoformat()
        return self._call("POST", f"/sessions/{urllib.parse.quote(session, safe='')}/messages",
                          {"role": role, "content": content, "timestamp": now})

    def end(self, session):
        return self._call("POST", f"/sessions/{urllib.parse.quote(session, safe='')}/end")


def reply(system, history, model):
    base = os.environ.get("OPENAI_BASE_URL")
    key = os.environ.get("OPENAI_API_KEY")
    if not base and not key:
        return "(echo) " + history[-1]["content"]
    base = (base or "https://api.openai.com/v1").rstrip("/")
    body = {"model": model, "messages": [{"role": "system", "content": system}] + history}
    req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(), method="POST")
    req.add_header("content-type", "application/json")
    if key:
        req.add_header("authorization", f"Bearer {key}")
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())["choices"][0]["message"]["content"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8750")
    p.add_argument("--user", required=True)
    p.add_argument("--agent", required=True)
    p.add_argument("--session", required=True)
    p.add_argument("--key", default=os.environ.get("STRATA_API_KEY"))
    p.add_argument("--model", default="gpt-4o-mini")
    p.add_argument("--end", action="store_true", help="end the session at EOF (queues promotion)")
    a = p.parse_args()
    strata = Strata(a.url, a.user, a.agent, a.key)
    history = []
    for line in sys.stdin:
        text = line.strip()
        if not text:
            continue
        ctx = strata.inject(a.session, text)  # before recording the turn
        if ctx["section"]:
            print(ctx["section"], end="")
        strata.record(a.session, "user", text)
        history.append({"role": "user", "content": text})
        system = "You are a helpful assistant.\n\n" + ctx["section"]
        answer = reply(system, history, a.model)
        strata.record(a.session, "assistant", answer)
        history.append({"role": "assistant", "content": answer})
        print(f"bot> {answer}", flush=True)
    if a.end and history:
        strata.end(a.session)
        print(f"session {a.session} ended; it will be promoted in the background")


if __name__ == "__main__":
    main()
