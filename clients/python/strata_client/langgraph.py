"""LangGraph long-term memory on Strata: :class:`StrataStore`, a LangGraph
``BaseStore`` whose items are Strata typed memories (``pip install
strata-client[langgraph]``).

How namespaces and keys map (docs/langgraph.md):

- ``namespace[user_index]`` (default the first element) is the Strata user;
  the store's ``agent_id`` is the agent. Every item lives in that scope, so
  one user's items are out of every other user's reads, as everywhere in
  Strata. The rest of the namespace is the item's *path*.
- An item is a ``fact`` of category ``langgraph`` (``STRATA_CATEGORY``) whose
  ``metadata`` holds ``key`` (the path and the item key, JSON-encoded: a
  fact with the same key supersedes the old one, so ``put`` upserts) and
  ``value``: ``{"namespace": the path, "prefixes": every prefix of the path
  (JSON-encoded, for ``search`` by prefix), "item": the item's dict}``. Its ``content`` is
  the text Strata indexes for ``search(query=...)``: the ``index`` fields of
  the value (all of it by default), or none with ``index=False``.
- ``search(filter=...)`` compares ``value`` fields exactly
  (``metadata.value.item.<field>``; ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``,
  ``$lte`` as Strata's filters do); ``query`` ranks by Strata's hybrid
  search over the indexed text and sets ``score``.
- ``list_namespaces`` lists the namespaces of the user that its prefix
  condition names (a listing across users is not expressible in Strata).

TTLs are not supported (``supports_ttl = False``): Strata's typed memories
do not expire.
"""
from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Any, Iterable, List, Optional, Sequence, Tuple

try:
    from langgraph.store.base import (BaseStore, GetOp, Item, ListNamespacesOp, Op, PutOp, Result,
                                      SearchItem, SearchOp)
except ImportError as e:  # pragma: no cover - the extra is missing
    raise ImportError("strata_client.langgraph needs LangGraph: pip install 'strata-client[langgraph]'") from e

from .client import Strata
from .errors import NotFoundError

#: The fact category of LangGraph items.
STRATA_CATEGORY = "langgraph"
#: Items read per page when listing namespaces (Strata's top_k limit).
PAGE = 1000


def _ts(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


class StrataStore(BaseStore):
    """A LangGraph ``BaseStore`` on a Strata server.

    ``StrataStore(base_url, api_key, agent_id="my-agent")``; pass it as
    ``graph.compile(store=StrataStore(...))`` and nodes get it as ``store``.
    ``user_index`` says which namespace element is the Strata user id.
    """

    supports_ttl = False

    def __init__(self, base_url: str = "http://127.0.0.1:8750", api_key: Optional[str] = None, *,
                 agent_id: str, user_index: int = 0, timeout: float = 30.0):
        self.agent_id = agent_id
        self.user_index = user_index
        self._sync = Strata(base_url, api_key, timeout=timeout)
        self._base_url, self._api_key, self._timeout = base_url, api_key, timeout

    # ------------------------------------------------------------ mapping

    def _split(self, namespace: Sequence[str]) -> Tuple[str, Tuple[str, ...]]:
        """(user id, path) of a namespace."""
        ns = tuple(namespace)
        if not (-len(ns) <= self.user_index < len(ns)):
            raise ValueError(f"namespace {ns!r} has no element {self.user_index} to name the Strata user")
        i = self.user_index % len(ns)
        return ns[i], ns[:i] + ns[i + 1:]

    def _join(self, user: str, path: Tuple[str, ...]) -> Tuple[str, ...]:
        i = self.user_index if self.user_index >= 0 else len(path) + 1 + self.user_index
        return path[:i] + (user,) + path[i:]

    @staticmethod
    def _key(path: Tuple[str, ...], key: str) -> str:
        return json.dumps([*path, key], ensure_ascii=False, separators=(",", ":"))

    @staticmethod
    def _prefix(path: Tuple[str, ...]) -> str:
        return json.dumps(list(path), ensure_ascii=False, separators=(",", ":"))

    def _item(self, user: str, mem: dict, score: Optional[float] = None, search: bool = False):
        md = mem["metadata"]
        path = tuple(md["value"].get("namespace", []))
        key = json.loads(md["key"])[-1]
        args = dict(namespace=self._join(user, path), key=key, value=md["value"].get("item", {}),
                    created_at=_ts(mem["created_at"]), updated_at=_ts(mem["updated_at"]))
        return SearchItem(score=score, **args) if search else Item(**args)

    def _put_body(self, path: Tuple[str, ...], op: PutOp) -> Tuple[str, dict, bool]:
        value = op.value or {}
        prefixes = [self._prefix(path[:n]) for n in range(len(path) + 1)]
        metadata = {"category": STRATA_CATEGORY, "key": self._key(path, op.key),
                    "value": {"namespace": list(path), "prefixes": prefixes, "item": value}}
        if op.index is False:
            return op.key, metadata, False
        fields = op.index if isinstance(op.index, list) else None
        if fields:
            text = " ".join(str(value.get(f, "")) for f in fields if value.get(f) is not None)
        else:
            text = json.dumps(value, ensure_ascii=False)
        return text.strip() or op.key, metadata, True

    def _filter(self, path: Tuple[str, ...], flt: Optional[dict]) -> dict:
        f: dict = {"type": "fact", "metadata.category": STRATA_CATEGORY, "metadata.value.prefixes": self._prefix(path)}
        for field, cond in (flt or {}).items():
            f[f"metadata.value.item.{field}"] = cond
        return f

    # ------------------------------------------------------------ one op

    def _find(self, scope, path, key):
        r = scope.retrieve({"type": "fact", "metadata.category": STRATA_CATEGORY, "metadata.key": self._key(path, key)}, top_k=1)
        return r["memories"][0] if r["memories"] else None

    def _run(self, op: Op, client) -> Any:
        if isinstance(op, GetOp):
            user, path = self._split(op.namespace)
            mem = self._find(client.scope(user, self.agent_id), path, op.key)
            return self._item(user, mem) if mem else None
        if isinstance(op, PutOp):
            user, path = self._split(op.namespace)
            scope = client.scope(user, self.agent_id)
            if op.value is None:
                mem = self._find(scope, path, op.key)
                if mem:
                    try:
                        scope.forget_memory(mem["id"])
                    except NotFoundError:
                        pass
                return None
            content, metadata, indexed = self._put_body(path, op)
            scope.remember("fact", content, metadata, indexed=indexed)
            return None
        if isinstance(op, SearchOp):
            user, path = self._split(op.namespace_prefix)
            scope = client.scope(user, self.agent_id)
            want = op.offset + op.limit
            r = scope.retrieve(self._filter(path, op.filter), top_k=min(max(want, 1), PAGE), query=op.query or None)
            mems = r["memories"][op.offset:want]
            return [self._item(user, m, m.get("score") if op.query else None, search=True) for m in mems]
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op, client)
        raise ValueError(f"unknown LangGraph store operation {op!r}")

    def _namespaces(self, op: ListNamespacesOp, client) -> List[Tuple[str, ...]]:
        prefix = next((c.path for c in op.match_conditions or () if c.match_type == "prefix"), None)
        if not prefix or any(p == "*" for p in prefix[: self.user_index + 1]) or len(prefix) <= self.user_index:
            raise ValueError("list_namespaces needs a prefix that names the Strata user "
                             f"(namespace element {self.user_index}): a listing across users is not expressible")
        user, path = self._split(prefix)
        scope = client.scope(user, self.agent_id)
        seen = set()
        for page in scope.retrieve_pages({"type": "fact", "metadata.category": STRATA_CATEGORY}, top_k=PAGE):
            for m in page["memories"]:
                seen.add(self._join(user, tuple(m["metadata"]["value"].get("namespace", []))))
        out = []
        for ns in sorted(seen):
            if not all(_matches(ns, c) for c in op.match_conditions or ()):
                continue
            if op.max_depth is not None:
                ns = ns[: op.max_depth]
            if ns not in out:
                out.append(ns)
        return out[op.offset: op.offset + op.limit]

    # ------------------------------------------------------------ BaseStore

    def batch(self, ops: Iterable[Op]) -> List[Result]:
        """Runs the operations in order, each one HTTP call or two (a delete finds, then forgets)."""
        return [self._run(op, self._sync) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> List[Result]:
        """``batch`` off the event loop (the sync client in a worker thread)."""
        ops = list(ops)
        return await asyncio.to_thread(self.batch, ops)


def _matches(ns: Tuple[str, ...], cond) -> bool:
    path = tuple(cond.path)
    if len(path) > len(ns):
        return False
    part = ns[: len(path)] if cond.match_type == "prefix" else ns[len(ns) - len(path):]
    return all(p == "*" or p == n for p, n in zip(path, part))


__all__ = ["StrataStore", "STRATA_CATEGORY"]
