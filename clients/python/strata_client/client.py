"""Sync and async clients of Strata's HTTP API, on httpx.

``Strata`` / ``AsyncStrata`` hold the connection and the operator (admin)
routes; ``.scope(user_id, agent_id)`` gives the routes of one scope. Every
method is one HTTP call and returns the decoded JSON answer, typed by
:mod:`strata_client.models`; errors raise the class of their code
(:mod:`strata_client.errors`).

Retries: a 429 or a 503 (``overloaded``, ``shutting_down``, ``unavailable``)
is retried up to ``max_retries`` times, waiting the answer's
``Retry-After`` seconds (else 0.25 s doubling, at most 4 s). A connection
failure or a 503 ``timeout`` is retried only where a repeat cannot write
twice: reads, and the two record routes, which carry an ``Idempotency-Key``
(generated per call unless given, and the same on every attempt).
"""
import asyncio
import time
import urllib.parse
import uuid
from datetime import datetime
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional

import httpx

from . import models as m
from .errors import StrataError, TransportError, from_response

DEFAULT_URL = "http://127.0.0.1:8750"
#: 503 codes retried on every route (nothing ran); ``timeout`` may have run part of a write.
SAFE_503 = {"overloaded", "shutting_down", "unavailable"}


class PromotionFailed(StrataError):
    """``wait_promoted``: the session's promotion job is parked (``status: failed``)."""


def _q(s: str) -> str:
    return urllib.parse.quote(str(s), safe="")


def _drop_none(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _retry_after(r: httpx.Response) -> Optional[float]:
    v = r.headers.get("retry-after")
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


class _Call:
    """One request: what it is and whether repeating it is safe."""

    def __init__(self, method: str, path: str, body: Any = None, *, params=None, idempotent: bool = False,
                 key: Optional[str] = None, text: bool = False):
        self.method = method
        self.path = path
        self.body = body
        self.params = params
        # reads and keyed writes may be repeated after a lost answer
        self.idempotent = idempotent or method == "GET" or key is not None
        self.headers = {"idempotency-key": key} if key else {}
        if method == "POST" and not key:
            self.headers["idempotency-key"] = uuid.uuid4().hex
        self.text = text


def _decide(call: _Call, r: Optional[httpx.Response], err: Optional[Exception], attempt: int, max_retries: int):
    """(result, None) when done, (None, wait seconds) to retry; raises the error otherwise."""
    if r is None:
        if call.idempotent and attempt < max_retries:
            return None, min(0.25 * 2 ** attempt, 4.0)
        raise TransportError(0, "transport", str(err))
    if r.status_code < 400:
        if call.text:
            return r.text, None
        return (r.json() if r.content else None), None
    try:
        body = r.json()
    except ValueError:
        body = {"error": {"code": f"http_{r.status_code}", "message": r.text[:300]}}
    e = from_response(r.status_code, body, _retry_after(r))
    retryable = r.status_code == 429 or (r.status_code == 503 and (e.code in SAFE_503 or call.idempotent))
    if retryable and attempt < max_retries:
        wait = e.retry_after if e.retry_after is not None else min(0.25 * 2 ** attempt, 4.0)
        return None, wait
    raise e


class _ScopeRoutes:
    """The routes of one scope; ``_call`` runs them (sync) or returns a coroutine (async)."""

    def __init__(self, client, user_id: str, agent_id: str):
        self._client = client
        self.user_id = user_id
        self.agent_id = agent_id
        self._base = f"/v1/users/{_q(user_id)}/agents/{_q(agent_id)}"

    def _call(self, call: _Call):
        return self._client._run(call)

    # working tier
    def record(self, session_id: str, role: m.Role, content: str, *, name: Optional[str] = None,
               timestamp: Optional[datetime] = None, idempotency_key: Optional[str] = None) -> m.Recorded:
        """Records one message (``role``: user, assistant or system); a retry stores it once."""
        key = idempotency_key or uuid.uuid4().hex
        body = _drop_none({"role": role, "content": content, "name": name,
                           "timestamp": timestamp.isoformat() if timestamp else None, "idempotency_key": key})
        return self._call(_Call("POST", f"{self._base}/sessions/{_q(session_id)}/messages", body, key=key))

    def record_batch(self, turns: List[Dict[str, Any]], *, idempotency_key: Optional[str] = None) -> m.BatchReport:
        """Records `strata import` lines (``session_id``, ``role``, ``content``, ``timestamp``…) at once."""
        key = idempotency_key or uuid.uuid4().hex
        return self._call(_Call("POST", f"{self._base}/messages:batch", turns, key=key))

    def inject(self, session_id: str, message: str, *, explain: bool = False,
               visibility: Optional[m.ReadVisibility] = None) -> m.InjectResult:
        """L0: the Memory Context for ``message`` (call before recording it)."""
        body = _drop_none({"message": message, "explain": explain or None, "visibility": visibility})
        return self._call(_Call("POST", f"{self._base}/sessions/{_q(session_id)}/inject", body, idempotent=True))

    def end(self, session_id: str) -> m.Ended:
        """Ends a session: promotion runs in the background (see ``wait_promoted``)."""
        return self._call(_Call("POST", f"{self._base}/sessions/{_q(session_id)}/end", idempotent=True))

    def end_thread(self, response: Any) -> m.Ended:
        """Ends the session of a reply that came through the memory proxy
        (``POST /v1/chat/completions``): reads its ``X-Strata-Session-Id``
        response header from ``response``, which may be the OpenAI SDK's raw
        response (``client.chat.completions.with_raw_response.create(...)``),
        an ``httpx.Response``, anything with ``.headers``, or a mapping of
        headers. The same as sending ``X-Strata-End-Session: true`` with the
        last request. Raises ``ValueError`` when the header is missing."""
        headers = getattr(response, "headers", response)
        session_id = None
        if headers is not None:
            session_id = headers.get("x-strata-session-id") or headers.get("X-Strata-Session-Id")
        if not session_id:
            raise ValueError("no X-Strata-Session-Id header: end_thread takes a response of Strata's memory proxy")
        return self.end(session_id)

    def messages(self, session_id: str) -> m.SessionMessages:
        """The session's messages in recorded order, open or ended (``GET …/sessions/{id}/messages``)."""
        return self._call(_Call("GET", f"{self._base}/sessions/{_q(session_id)}/messages"))

    def session(self, session_id: str) -> m.SessionState:
        """The session's promotion status (open, completed, promoted, failed, expired)."""
        return self._call(_Call("GET", f"{self._base}/sessions/{_q(session_id)}"))

    # episodic and semantic tiers
    def search(self, query: str, *, top_k: int = 5, explain: bool = False,
               visibility: Optional[m.ReadVisibility] = None) -> m.SearchResult:
        """L1 ``memory_search``: episode ids with abstracts, and matching facts."""
        body = _drop_none({"query": query, "top_k": top_k, "explain": explain or None, "visibility": visibility})
        return self._call(_Call("POST", f"{self._base}/search", body, idempotent=True))

    def expand(self, episode_id: str, *, raw: bool = False) -> m.Expanded:
        """L1 ``memory_expand``: the full summary, and with ``raw`` every message."""
        params = {"raw": "true"} if raw else None
        return self._call(_Call("GET", f"{self._base}/episodes/{_q(episode_id)}", params=params))

    def graph(self, query: Optional[str] = None, *, entity: Optional[str] = None, hops: int = 1,
              predicate: Optional[str] = None, include_invalid: bool = False) -> m.GraphSearchResult:
        """L2 ``knowledge_graph_search`` by text or by entity id."""
        body = _drop_none({"query": query, "entity": entity, "hops": hops, "predicate": predicate,
                           "include_invalid": include_invalid or None})
        return self._call(_Call("POST", f"{self._base}/graph/search", body, idempotent=True))

    # typed memories
    def remember(self, type: m.MemoryType, content: str, metadata: Optional[Dict[str, Any]] = None, *,
                 indexed: Optional[bool] = None) -> m.Remembered:
        """Stores one typed memory (fact, event, entity, relation)."""
        body = _drop_none({"type": type, "content": content, "metadata": metadata, "indexed": indexed})
        return self._call(_Call("POST", f"{self._base}/memories", body))

    def remember_batch(self, memories: List[m.MemoryInput]) -> List[m.Remembered]:
        """Stores up to 1000 typed memories at once."""
        return self._call(_Call("POST", f"{self._base}/memories:batch", memories))

    def retrieve(self, filter: Optional[Dict[str, Any]] = None, *, sort_by: Optional[str] = None,
                 direction: Optional[m.Direction] = None, top_k: Optional[int] = None,
                 cursor: Optional[str] = None, query: Optional[str] = None,
                 include_superseded: Optional[bool] = None,
                 visibility: Optional[m.ReadVisibility] = None) -> m.RetrieveResult:
        """One page of typed memories by metadata filter (``next_cursor`` for the next)."""
        body = _drop_none({"filter": filter, "sort_by": sort_by, "direction": direction, "top_k": top_k,
                           "cursor": cursor, "query": query, "include_superseded": include_superseded,
                           "visibility": visibility})
        return self._call(_Call("POST", f"{self._base}/memories/query", body, idempotent=True))

    def get_memory(self, memory_id: str) -> m.StoredMemory:
        """One typed memory."""
        return self._call(_Call("GET", f"{self._base}/memories/{_q(memory_id)}"))

    def forget_memory(self, memory_id: str) -> m.ForgottenMemory:
        """Deletes one typed memory everywhere it is indexed."""
        return self._call(_Call("DELETE", f"{self._base}/memories/{_q(memory_id)}", idempotent=True))

    def share(self, memory_id: str, visibility: str, *, team_id: Optional[str] = None) -> m.Shared:
        """Shares a memory with a team (``visibility="team"``, ``team_id``) or the public store."""
        body = _drop_none({"visibility": visibility, "team_id": team_id})
        return self._call(_Call("POST", f"{self._base}/memories/{_q(memory_id)}/share", body))


class _ClientRoutes:
    """The operator routes (an admin key, or an open loopback server)."""

    def _call(self, call: _Call):
        return self._run(call)

    def forget_user(self, user_id: str) -> m.ForgetReport:
        """Erases a user from every store."""
        return self._call(_Call("DELETE", f"/v1/users/{_q(user_id)}", idempotent=True))

    def jobs(self) -> List[m.ParkedJob]:
        """Parked (dead-letter) jobs."""
        return self._call(_Call("GET", "/v1/jobs"))

    def retry_job(self, job_id: int) -> m.Requeued:
        """Puts a parked job back in the outbox."""
        return self._call(_Call("POST", f"/v1/jobs/{int(job_id)}/retry", idempotent=True))

    def usage(self) -> m.UsageTotals:
        """LLM calls and tokens."""
        return self._call(_Call("GET", "/v1/usage"))

    def reload(self) -> m.ReloadReport:
        """Re-reads the config and applies the recall tunables."""
        return self._call(_Call("POST", "/v1/admin/reload", idempotent=True))

    def config(self) -> Dict[str, Any]:
        """The configuration in force."""
        return self._call(_Call("GET", "/v1/admin/config"))

    def healthz(self) -> str:
        """The process is up: ``"ok"`` (the server answers plain text)."""
        return self._call(_Call("GET", "/healthz", text=True))

    def readyz(self) -> str:
        """Stores open and workers running: ``"ready"``; while the server shuts
        down it answers 503, raised as the client's error for that status."""
        return self._call(_Call("GET", "/readyz", text=True))

    def metrics(self) -> str:
        """Prometheus text."""
        return self._call(_Call("GET", "/metrics", text=True))

    def openapi(self) -> Dict[str, Any]:
        """The OpenAPI 3.1 document."""
        return self._call(_Call("GET", "/openapi.json"))


def _headers(api_key: Optional[str]) -> Dict[str, str]:
    h = {"user-agent": "strata-client-python"}
    if api_key:
        h["authorization"] = f"Bearer {api_key}"
    return h


class Scope(_ScopeRoutes):
    """The routes of one scope (sync)."""

    def wait_promoted(self, session_id: str, *, timeout: float = 60.0, vectors: bool = False,
                      interval: float = 0.1) -> m.SessionState:
        """Polls ``session`` until the session is promoted (and, with ``vectors``, its
        embedding indexed). Raises :class:`PromotionFailed` when its job is parked,
        ``TimeoutError`` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.session(session_id)
            if _promoted(s, vectors):
                return s
            if time.monotonic() > deadline:
                raise TimeoutError(f"session {session_id} not promoted after {timeout} s: {s['status']}")
            time.sleep(interval)

    def retrieve_pages(self, filter: Optional[Dict[str, Any]] = None, **kw) -> Iterator[m.RetrieveResult]:
        """Every page of a ``retrieve``, following ``next_cursor``."""
        cursor = None
        while True:
            page = self.retrieve(filter, cursor=cursor, **kw)
            yield page
            cursor = page.get("next_cursor")
            if not cursor:
                return


class AsyncScope(_ScopeRoutes):
    """The routes of one scope (async: every method is awaited)."""

    async def wait_promoted(self, session_id: str, *, timeout: float = 60.0, vectors: bool = False,
                            interval: float = 0.1) -> m.SessionState:
        """As :meth:`Scope.wait_promoted`."""
        deadline = time.monotonic() + timeout
        while True:
            s = await self.session(session_id)
            if _promoted(s, vectors):
                return s
            if time.monotonic() > deadline:
                raise TimeoutError(f"session {session_id} not promoted after {timeout} s: {s['status']}")
            await asyncio.sleep(interval)

    async def retrieve_pages(self, filter: Optional[Dict[str, Any]] = None, **kw) -> AsyncIterator[m.RetrieveResult]:
        """Every page of a ``retrieve``, following ``next_cursor``."""
        cursor = None
        while True:
            page = await self.retrieve(filter, cursor=cursor, **kw)
            yield page
            cursor = page.get("next_cursor")
            if not cursor:
                return


def _promoted(s: m.SessionState, vectors: bool) -> bool:
    if s["status"] == "failed":
        job = next((j for j in s.get("jobs", []) if j.get("parked")), {})
        raise PromotionFailed(200, "promotion_failed", f"promotion parked (job {job.get('id')}): {job.get('last_error')}")
    return s["status"] == "promoted" and (s["vectors_indexed"] or not vectors)


class Strata(_ClientRoutes):
    """A sync client: ``Strata(base_url, api_key)``, then ``.scope(user, agent)``.

    ``timeout`` is per HTTP attempt, in seconds; ``max_retries`` bounds the
    retries of one call (see the module docs). ``http`` replaces the httpx
    client (its base URL and headers are yours to set)."""

    def __init__(self, base_url: str = DEFAULT_URL, api_key: Optional[str] = None, *, timeout: float = 30.0,
                 max_retries: int = 3, http: Optional[httpx.Client] = None):
        self.max_retries = max_retries
        self.http = http or httpx.Client(base_url=base_url.rstrip("/"), headers=_headers(api_key), timeout=timeout)

    def scope(self, user_id: str, agent_id: str) -> Scope:
        return Scope(self, user_id, agent_id)

    def _run(self, call: _Call):
        attempt = 0
        while True:
            r, err = None, None
            try:
                r = self.http.request(call.method, call.path, json=call.body, params=call.params, headers=call.headers)
            except httpx.TransportError as e:
                err = e
            result, wait = _decide(call, r, err, attempt, self.max_retries)
            if wait is None:
                return result
            time.sleep(wait)
            attempt += 1

    def close(self) -> None:
        self.http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class AsyncStrata(_ClientRoutes):
    """The async client: the same surface as :class:`Strata`, every call awaited."""

    def __init__(self, base_url: str = DEFAULT_URL, api_key: Optional[str] = None, *, timeout: float = 30.0,
                 max_retries: int = 3, http: Optional[httpx.AsyncClient] = None):
        self.max_retries = max_retries
        self.http = http or httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=_headers(api_key), timeout=timeout)

    def scope(self, user_id: str, agent_id: str) -> AsyncScope:
        return AsyncScope(self, user_id, agent_id)

    async def _run(self, call: _Call):
        attempt = 0
        while True:
            r, err = None, None
            try:
                r = await self.http.request(call.method, call.path, json=call.body, params=call.params, headers=call.headers)
            except httpx.TransportError as e:
                err = e
            result, wait = _decide(call, r, err, attempt, self.max_retries)
            if wait is None:
                return result
            await asyncio.sleep(wait)
            attempt += 1

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.aclose()
