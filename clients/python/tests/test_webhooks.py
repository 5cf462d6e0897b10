"""Webhook deliveries from a real `strata serve` to a receiver this test runs,
checked with strata_client.webhooks (the signature scheme of docs/webhooks.md)."""
import http.server
import json
import os
import queue
import threading
import uuid

import pytest

from strata_client import Strata
from strata_client.webhooks import WebhookSignatureError, parse_event, sign, verify_signature

from conftest import Server

SECRET = "whsec-python-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def receiver():
    got = queue.Queue()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            got.put(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/hook", got
    srv.shutdown()


@pytest.fixture(scope="module")
def hooked(receiver):
    url, _ = receiver
    os.environ["STRATA_PY_WEBHOOK_SECRET"] = SECRET
    s = Server(f'webhooks.endpoints=[{{ url = "{url}", secret_env = "STRATA_PY_WEBHOOK_SECRET", events = ["session.promoted", "memory.created"] }}]')
    yield s
    s.stop()


def next_event(got, event_type):
    while True:
        headers, body = got.get(timeout=60)
        if json.loads(body)["type"] == event_type:
            return headers, body


def test_a_promotion_and_a_memory_arrive_signed(hooked, receiver):
    _, got = receiver
    s = Strata(hooked.url, hooked.alice_key).scope("alice", "bot")
    session = "hook-" + uuid.uuid4().hex[:8]
    s.record(session, "user", "I adopted a grey cat called Miso last spring.")
    s.end(session)
    headers, body = next_event(got, "session.promoted")
    event = parse_event(SECRET, headers["x-strata-signature"], body)
    assert event["data"]["session_id"] == session
    assert event["data"]["episode_id"] == s.wait_promoted(session)["episode_id"]
    assert headers["x-strata-event"] == "session.promoted" and headers["x-strata-delivery"] == event["id"]
    with pytest.raises(WebhookSignatureError):
        parse_event("wrong secret", headers["x-strata-signature"], body)
    with pytest.raises(WebhookSignatureError):
        parse_event(SECRET, headers["x-strata-signature"], body.replace(b"alice", b"mallory"))
    made = s.remember("fact", "Alice's favourite tea is sencha.", {"category": "preference"})
    headers, body = next_event(got, "memory.created")
    assert parse_event(SECRET, headers["x-strata-signature"], body)["data"]["memory_id"] == made["id"]


def test_stale_or_malformed_signatures_fail():
    body = b'{"id":"evt_1"}'
    h = sign("k", 1_700_000_000, body)
    assert verify_signature("k", h, body, now=1_700_000_100)
    assert not verify_signature("k", h, body, now=1_700_000_000 + 301)
    assert not verify_signature("k", None, body)
    assert not verify_signature("k", "v1=00", body, now=1_700_000_000)
    # the same vector as the server's unit test (src/webhook.rs)
    assert sign("key", 1, "body") == "t=1,v1=91b5374b153842ad05b2c4eab9349b8321b14703165bd3fb8b034dfb8be98ae5"
