"""LangChain on Strata (``pip install strata-client[langchain]``; docs/langchain.md):

- :class:`StrataChatMessageHistory`, a ``BaseChatMessageHistory``: a chat's
  turns recorded into a Strata session (the working tier), read back in
  order; with ``RunnableWithMessageHistory`` a chain gets its history from
  Strata and every turn lands where promotion turns it into long-term memory.
- :class:`StrataRetriever`, a ``BaseRetriever`` over ``memory_search`` (L1):
  one ``Document`` per episode, its abstract as the text; ``expand=True``
  (or :meth:`StrataRetriever.expand_document` on one document) gives the full
  summary (``memory_expand``).
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.documents import Document
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
    from langchain_core.retrievers import BaseRetriever
except ImportError as e:  # pragma: no cover - the extra is missing
    raise ImportError("strata_client.langchain needs langchain-core: pip install 'strata-client[langchain]'") from e

from .errors import NotFoundError

_ROLE_OF = {"human": "user", "ai": "assistant", "system": "system"}
_MESSAGE_OF = {"user": HumanMessage, "assistant": AIMessage, "system": SystemMessage}


class StrataChatMessageHistory(BaseChatMessageHistory):
    """The messages of one Strata session as a LangChain chat history.

    ``scope`` is a client scope (``Strata(...).scope(user_id, agent_id)``);
    ``session_id`` the session. Human, AI and system messages are recorded
    as ``user``, ``assistant`` and ``system`` turns (``name`` kept); other
    kinds (tool calls and results) carry no conversation text of their own
    and are not recorded. Each record carries an idempotency key, so a
    retried call stores a turn once.

    ``clear()`` does not delete anything: Strata keeps conversations until
    the user is erased. It ends the session (its promotion into long-term
    memory starts) and continues in a new one, ``<session_id>.2``, ``.3``, …,
    so the history reads empty afterwards.
    """

    def __init__(self, scope: Any, session_id: str):
        self.scope = scope
        self.base_session_id = session_id
        self.session_id = session_id
        self._generation = 1

    @property
    def messages(self) -> List[BaseMessage]:  # type: ignore[override]
        try:
            rows = self.scope.messages(self.session_id)["messages"]
        except NotFoundError:
            return []
        out: List[BaseMessage] = []
        for r in rows:
            kind = _MESSAGE_OF.get(r["role"], HumanMessage)
            kw = {"name": r["name"]} if r.get("name") else {}
            out.append(kind(content=r["content"], **kw))
        return out

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        for msg in messages:
            role = _ROLE_OF.get(msg.type)
            text = msg.content if isinstance(msg.content, str) else " ".join(
                p.get("text", "") for p in msg.content if isinstance(p, dict))
            if role is None or not text.strip():
                continue
            self.scope.record(self.session_id, role, text, name=getattr(msg, "name", None) or None)

    def clear(self) -> None:
        try:
            self.scope.end(self.session_id)
        except NotFoundError:
            return  # nothing recorded yet: nothing to end
        self._generation += 1
        self.session_id = f"{self.base_session_id}.{self._generation}"


class StrataRetriever(BaseRetriever):
    """``memory_search`` as a LangChain retriever.

    ``StrataRetriever(scope=Strata(...).scope(user, agent), top_k=5)``. Each
    ``Document`` has the episode's abstract as ``page_content`` and
    ``metadata`` ``{id, session_id, score, when, snippet}``; with
    ``expand=True`` the text is the episode's full summary instead (one
    ``memory_expand`` call per hit). ``min_score`` drops hits below it.
    """

    scope: Any
    top_k: int = 5
    expand: bool = False
    min_score: Optional[float] = None

    model_config = {"arbitrary_types_allowed": True}

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> List[Document]:
        hits = self.scope.search(query, top_k=self.top_k)["results"]
        docs = []
        for h in hits:
            if self.min_score is not None and h.get("score", 0.0) < self.min_score:
                continue
            meta = {k: h.get(k) for k in ("id", "session_id", "score", "when", "snippet") if k in h}
            doc = Document(page_content=h["abstract"], metadata=meta)
            docs.append(self.expand_document(doc) if self.expand else doc)
        return docs

    def expand_document(self, doc: Document, *, raw: bool = False) -> Document:
        """The full summary of a retrieved episode (``memory_expand``); with
        ``raw`` the session's messages go into ``metadata["raw"]``."""
        full = self.scope.expand(doc.metadata["id"], raw=raw)
        meta = dict(doc.metadata, abstract=doc.page_content)
        if raw:
            meta["raw"] = full.get("raw")
        return Document(page_content=full["episode"]["summary"], metadata=meta)


__all__ = ["StrataChatMessageHistory", "StrataRetriever"]
