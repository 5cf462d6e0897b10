"""strata_client.langchain with the real ``langchain-core`` (its fake chat
model) against a real server."""
import os
import uuid

import pytest

# scripts/test.sh installs the pinned package (requirements.txt) and sets
# STRATA_REQUIRE_CLIENT_TESTS: there a missing package fails instead of skipping
if not os.environ.get("STRATA_REQUIRE_CLIENT_TESTS"):
    pytest.importorskip("langchain_core", reason="pip install 'strata-client[langchain]'")

from langchain_core.language_models.fake_chat_models import FakeListChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder  # noqa: E402
from langchain_core.runnables.history import RunnableWithMessageHistory  # noqa: E402

from strata_client import Strata  # noqa: E402
from strata_client.langchain import StrataChatMessageHistory, StrataRetriever  # noqa: E402


def scope(server):
    return Strata(server.url, server.admin_key).scope(f"u-{uuid.uuid4().hex[:8]}", "lc")


def test_the_history_records_and_reads_a_session(server):
    s = scope(server)
    h = StrataChatMessageHistory(s, "chat-1")
    assert h.messages == []
    h.add_messages([HumanMessage("I adopted a grey cat called Miso."), AIMessage("Lovely!"),
                    ToolMessage("42", tool_call_id="t1")])
    got = h.messages
    assert [type(m).__name__ for m in got] == ["HumanMessage", "AIMessage"], "a tool result is not a turn"
    assert got[0].content == "I adopted a grey cat called Miso."
    # clear ends the session (promotion starts) and goes on in a new one
    h.clear()
    assert h.messages == [] and h.session_id == "chat-1.2"
    assert s.session("chat-1")["status"] in ("completed", "promoted")


def test_a_chain_with_memory_then_retrieval(server):
    s = scope(server)
    model = FakeListChatModel(responses=["Miso sounds lovely.", "You told me about Miso, your grey cat."])
    prompt = ChatPromptTemplate.from_messages([("system", "You are helpful."), MessagesPlaceholder("history"), ("human", "{input}")])
    seen = []
    chain = RunnableWithMessageHistory(
        prompt | (lambda p: seen.append(p.to_messages()) or p) | model,
        lambda session_id: StrataChatMessageHistory(s, session_id),
        input_messages_key="input", history_messages_key="history")
    cfg = {"configurable": {"session_id": "chat-7"}}
    assert chain.invoke({"input": "I adopted a grey cat called Miso; she sleeps on the radiator."}, cfg).content == "Miso sounds lovely."
    chain.invoke({"input": "What did I tell you?"}, cfg)
    # the second call's prompt held the first turn, read back from Strata
    assert any("Miso" in m.content for m in seen[1][1:-1]), seen[1]
    assert len(s.messages("chat-7")["messages"]) == 4
    # ended and promoted, the session is long-term memory for the retriever
    s.end("chat-7")
    s.wait_promoted("chat-7", timeout=60)
    docs = StrataRetriever(scope=s, top_k=3).invoke("Miso grey cat radiator")
    assert docs and docs[0].metadata["session_id"] == "chat-7" and docs[0].metadata["id"].startswith("ep_")
    full = StrataRetriever(scope=s, top_k=3).expand_document(docs[0], raw=True)
    assert "Miso" in full.page_content and len(full.metadata["raw"]) == 4
    assert StrataRetriever(scope=s, top_k=3, expand=True).invoke("Miso grey cat radiator")[0].page_content == full.page_content
