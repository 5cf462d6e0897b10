"""StrataStore with the real ``langgraph`` package against a real server."""
import os
import uuid

import pytest

# scripts/test.sh installs the pinned package (requirements.txt) and sets
# STRATA_REQUIRE_CLIENT_TESTS: there a missing package fails instead of skipping
if not os.environ.get("STRATA_REQUIRE_CLIENT_TESTS"):
    pytest.importorskip("langgraph", reason="pip install 'strata-client[langgraph]'")

from typing import TypedDict  # noqa: E402

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.store.base import BaseStore  # noqa: E402

from strata_client.langgraph import StrataStore  # noqa: E402


def store(server, key=None):
    return StrataStore(server.url, key or server.admin_key, agent_id="lg-agent")


def test_put_get_search_delete_and_namespaces(server):
    user = f"u-{uuid.uuid4().hex[:8]}"
    s = store(server)
    s.put((user, "memories"), "food", {"text": "Loves spicy ramen", "kind": "food"})
    s.put((user, "memories"), "home", {"text": "Lives in Lisbon near the river", "kind": "place"})
    s.put((user, "memories", "work"), "job", {"text": "Data engineer at Acme Robotics", "kind": "job"})
    s.put((user, "prefs"), "seat", {"text": "window seat"}, index=False)
    item = s.get((user, "memories"), "food")
    assert item.value == {"text": "Loves spicy ramen", "kind": "food"} and item.namespace == (user, "memories")
    # put upserts: one item per key
    s.put((user, "memories"), "food", {"text": "Loves spicy ramen and kimchi", "kind": "food"})
    assert s.get((user, "memories"), "food").value["text"].endswith("kimchi")
    # by prefix, with a filter on the value, and ranked by a query
    assert {i.key for i in s.search((user, "memories"))} == {"food", "home", "job"}
    assert {i.key for i in s.search((user, "memories"), filter={"kind": "place"})} == {"home"}
    hits = s.search((user,), query="where does the user live")
    assert hits and hits[0].key == "home" and hits[0].score is not None
    assert [i.key for i in s.search((user, "memories"), limit=1, offset=0)] and len(s.search((user, "memories"), limit=2)) == 2
    assert s.list_namespaces(prefix=(user,)) == [(user, "memories"), (user, "memories", "work"), (user, "prefs")]
    assert s.list_namespaces(prefix=(user,), max_depth=2) == [(user, "memories"), (user, "prefs")]
    s.delete((user, "memories"), "food")
    assert s.get((user, "memories"), "food") is None
    assert s.get((user, "nothing"), "food") is None
    with pytest.raises(ValueError):
        s.list_namespaces()


def test_one_users_items_are_out_of_another_users_reads(server):
    # alice's key is bound to alice/bot: the store's agent must be hers
    alice = StrataStore(server.url, server.alice_key, agent_id="bot")
    alice.put(("alice", "notes"), "k", {"text": "a secret about alice"})
    bob = StrataStore(server.url, server.bob_key, agent_id="bot")
    from strata_client.errors import ForbiddenError
    with pytest.raises(ForbiddenError):
        bob.get(("alice", "notes"), "k")
    assert bob.search(("bob",), query="secret") == []


class State(TypedDict):
    user: str
    said: str
    recalled: str


def remember(state: State, *, store: BaseStore):
    if state["said"]:
        store.put((state["user"], "memories"), str(uuid.uuid4()), {"text": state["said"]})
    return {}


def recall(state: State, *, store: BaseStore):
    items = store.search((state["user"], "memories"), query="pet cat")
    return {"recalled": " | ".join(i.value["text"] for i in items)}


async def arecall(state: State, *, store: BaseStore):
    items = await store.asearch((state["user"], "memories"), query="pet cat")
    return {"recalled": " | ".join(i.value["text"] for i in items)}


def build(s, node):
    g = StateGraph(State)
    g.add_node("remember", remember)
    g.add_node("recall", node)
    g.add_edge(START, "remember")
    g.add_edge("remember", "recall")
    g.add_edge("recall", END)
    return g.compile(checkpointer=InMemorySaver(), store=s)


def test_a_graph_remembers_in_one_thread_and_recalls_in_another(server):
    user = f"u-{uuid.uuid4().hex[:8]}"
    graph = build(store(server), recall)
    graph.invoke({"user": user, "said": "My cat Miso sleeps on the radiator.", "recalled": ""},
                 {"configurable": {"thread_id": "thread-1"}})
    out = graph.invoke({"user": user, "said": "", "recalled": ""}, {"configurable": {"thread_id": "thread-2"}})
    assert "Miso" in out["recalled"]


async def test_the_async_path(server):
    user = f"u-{uuid.uuid4().hex[:8]}"
    graph = build(store(server), arecall)
    await graph.ainvoke({"user": user, "said": "My cat Miso sleeps on the radiator.", "recalled": ""},
                        {"configurable": {"thread_id": "a-1"}})
    out = await graph.ainvoke({"user": user, "said": "", "recalled": ""}, {"configurable": {"thread_id": "a-2"}})
    assert "Miso" in out["recalled"]
