"""strata_client against a real `strata serve` (tests/conftest.py)."""
import asyncio
import pathlib
import sys
import uuid

import httpx
import pytest

from strata_client import (AsyncStrata, ConflictError, ForbiddenError, InvalidInputError, NotFoundError,
                           RateLimitedError, Strata, UnauthenticatedError)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import gen_models  # noqa: E402

from conftest import Server  # noqa: E402

MISO = ["I adopted a grey cat called Miso last spring.", "Miso sleeps on the radiator every afternoon."]
QUESTION = "Does Miso the grey cat still sleep on the radiator every afternoon?"


def sid(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_a_chatbot_loop_records_promotes_and_injects(server):
    s = Strata(server.url, server.alice_key).scope("alice", "bot")
    first = sid("miso")
    for text in MISO:
        assert isinstance(s.record(first, "user", text)["message_id"], int)
    s.record(first, "assistant", "Miso sounds lovely.")
    assert s.session(first)["status"] == "open"
    assert s.end(first)["status"] == "completed"
    state = s.wait_promoted(first, timeout=60)
    assert state["status"] == "promoted" and state["episode_id"].startswith("ep_")
    assert state["message_count"] == 3
    assert s.end(first)["status"] == "promoted", "ending it again says how far it got"
    # the next conversation gets the memory
    ctx = s.inject(sid("next"), QUESTION)
    assert "Miso" in ctx["section"] and ctx["injected"] >= 1
    hits = s.search("Miso radiator")["results"]
    assert hits and hits[0]["session_id"] == first
    full = s.expand(hits[0]["id"], raw=True)
    assert "radiator" in full["episode"]["summary"]
    assert len(full["raw"]) == 3
    graph = s.graph("Miso")
    assert "entities" in graph


def test_end_thread_reads_the_proxy_session_header(server):
    s = Strata(server.url, server.alice_key).scope("alice", "bot")
    t = sid("thread")
    s.record(t, "user", "We are painting the kitchen yellow this weekend.")
    # the headers of a proxy reply, as the OpenAI SDK's raw response or httpx carries them
    class Raw:
        headers = {"x-strata-session-id": t, "x-strata-injected": ""}
    assert s.end_thread(Raw())["status"] == "completed"
    assert s.session(t)["status"] in ("completed", "promoted")
    assert s.end_thread({"x-strata-session-id": t})["session_id"] == t
    with pytest.raises(ValueError):
        s.end_thread({"content-type": "application/json"})


def test_records_are_idempotent_and_batches_too(server):
    s = Strata(server.url, server.alice_key).scope("alice", "bot")
    t = sid("idem")
    a = s.record(t, "user", "I moved to Lisbon in May.", idempotency_key="turn-1")
    b = s.record(t, "user", "I moved to Lisbon in May.", idempotency_key="turn-1")
    assert a["message_id"] == b["message_id"]
    assert s.session(t)["message_count"] == 1
    lines = [{"session_id": t, "role": "user", "content": f"line {i}", "timestamp": "2026-05-01T10:00:00Z"} for i in range(3)]
    r1 = s.record_batch(lines, idempotency_key="batch-1")
    r2 = s.record_batch(lines, idempotency_key="batch-1")
    assert r1["message_ids"] == r2["message_ids"] and len(r1["message_ids"]) == 3
    assert s.session(t)["message_count"] == 4


def test_typed_memories_with_cursor_pages(server):
    s = Strata(server.url, server.alice_key).scope("alice", "bot")
    fact = s.remember("fact", "Prefers window seats.", {"category": "travel", "key": "seat"})
    for day in (1, 2, 3):
        s.remember("event", f"Bought a coffee grinder part {day}", {"timestamp": f"2026-05-0{day}T10:00:00Z", "action": "purchase"})
    pages = list(s.retrieve_pages({"type": "event", "metadata.action": "purchase"}, sort_by="metadata.timestamp", top_k=2))
    got = [mem for p in pages for mem in p["memories"]]
    assert len(pages) == 2 and len(got) == 3
    mid = fact["id"]
    assert s.get_memory(mid)["content"] == "Prefers window seats."
    assert s.share(mid, "public")
    assert s.forget_memory(mid)
    with pytest.raises(NotFoundError):
        s.get_memory(mid)
    assert len(s.remember_batch([{"type": "fact", "content": "Allergic to peanuts.", "metadata": {"category": "health"}}])) == 1


def test_each_error_code_is_its_own_exception(server):
    alice = Strata(server.url, server.alice_key)
    s = alice.scope("alice", "bot")
    with pytest.raises(NotFoundError) as e:
        s.expand("ep_" + "0" * 32)
    assert e.value.status == 404 and e.value.code == "not_found"
    with pytest.raises(InvalidInputError):
        s.record(sid("bad"), "user", "   ")
    with pytest.raises(ForbiddenError):
        alice.scope("bob", "bot").search("anything")
    with pytest.raises(ForbiddenError):
        alice.jobs()
    with pytest.raises(UnauthenticatedError):
        Strata(server.url, "sk_strata_" + "0" * 64).scope("alice", "bot").search("x")
    ended = sid("ended")
    s.record(ended, "user", "hello there")
    s.end(ended)
    with pytest.raises(ConflictError):
        s.record(ended, "user", "too late")
    # bob's key reads bob's memory only
    bob = Strata(server.url, server.bob_key).scope("bob", "bot")
    assert "Miso" not in bob.inject(sid("b"), QUESTION)["section"]
    with pytest.raises(TimeoutError):
        s.wait_promoted(_open_session(s), timeout=0.3)


def _open_session(s):
    t = sid("open")
    s.record(t, "user", "still talking")
    return t


def test_admin_routes(server):
    admin = Strata(server.url, server.admin_key)
    assert isinstance(admin.jobs(), list)
    assert admin.usage()["calls"] == 0, "the offline summariser calls no LLM"
    assert admin.config()["recall"]["min_score"] > 0
    assert "applied" in admin.reload()
    assert "strata_" in admin.metrics()
    # plain-text answers, not JSON (both once failed to parse them)
    assert admin.healthz() == "ok"
    assert admin.readyz() == "ready"
    assert "/v1/users/{user_id}/agents/{agent_id}/search" in admin.openapi()["paths"]
    # an admin key acts on any scope; erasing a user removes it
    carol = admin.scope("carol", "bot")
    carol.record(sid("c"), "user", "Carol's secret plan.")
    admin.forget_user("carol")
    assert carol.search("secret plan")["results"] == []


def test_rate_limits_are_retried_after_retry_after():
    srv = Server("server.rate_limit_per_sec=1", "server.rate_limit_burst=1")
    try:
        seen = []
        http = httpx.Client(base_url=srv.url, headers={"authorization": f"Bearer {srv.alice_key}"},
                            event_hooks={"response": [lambda r: seen.append(r.status_code)]})
        s = Strata(http=http, max_retries=5).scope("alice", "bot")
        for _ in range(3):
            s.search("anything")
        assert 429 in seen, seen
        assert seen.count(200) == 3
        # without retries the 429 is the caller's
        s0 = Strata(http=http, max_retries=0).scope("alice", "bot")
        with pytest.raises(RateLimitedError) as e:
            for _ in range(3):
                s0.search("anything")
        assert e.value.retry_after and e.value.retry_after >= 1
    finally:
        srv.stop()


def test_writes_carry_an_idempotency_key():
    seen = []
    http = httpx.Client(transport=httpx.MockTransport(lambda r: (seen.append(r), httpx.Response(201, json={"message_id": 1}))[1]),
                        base_url="http://strata")
    Strata(http=http).scope("a", "b").record("s", "user", "hi")
    key = seen[0].headers["idempotency-key"]
    assert key and key == __import__("json").loads(seen[0].content)["idempotency_key"]


async def test_the_async_client(server):
    async with AsyncStrata(server.url, server.alice_key) as client:
        s = client.scope("alice", "bot")
        t = sid("async")
        await asyncio.gather(*(s.record(t, "user", text) for text in MISO))
        await s.end(t)
        state = await s.wait_promoted(t, timeout=60)
        assert state["status"] == "promoted"
        ctx = await s.inject(sid("async-next"), QUESTION)
        assert "Miso" in ctx["section"]
        pages = [p async for p in s.retrieve_pages({"type": "event"}, top_k=2)]
        assert pages
        with pytest.raises(NotFoundError):
            await s.expand("ep_" + "0" * 32)


def test_the_models_match_the_servers_openapi(server):
    live = gen_models.generate(httpx.get(f"{server.url}/openapi.json").json())
    committed = (pathlib.Path(gen_models.__file__).parent / "strata_client" / "models.py").read_text()
    assert live == committed, "strata_client/models.py drifted from /openapi.json: run gen_models.py (clients/python/README.md)"
