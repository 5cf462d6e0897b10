"""Types of Strata's HTTP API, generated from /openapi.json by gen_models.py: do not edit."""
# ruff: noqa
from typing import Any, Dict, List, Literal, NotRequired, Optional, TypedDict, Union


class AcceptorFeatures(TypedDict):
    """The features of one inject candidate ([`crate::recall::evidence`]), each a"""
    coverage: float
    cross: float
    cross_lingual: float
    foreign: float
    foreign_coverage: float
    foreign_score: float
    gap: float
    keyword: float
    margin: float
    names_missing: float
    own: float
    rank: float
    score: float
    type_missing: float
    vector: float
    window_coverage: NotRequired[float]


class BatchReport(TypedDict):
    """Result of [`Episodic::record_batch`]."""
    message_ids: List["MessageId"]
    recorded: int
    sessions: List["SessionId"]


class Candidate(TypedDict):
    """One candidate of a recall, with every score that decided its fate (`explain: true`)."""
    acceptance: NotRequired[Optional[float]]
    bm25: NotRequired[Optional[float]]
    cosine: NotRequired[Optional[float]]
    cross_lingual_probability: NotRequired[Optional[float]]
    features: NotRequired[Optional["AcceptorFeatures"]]
    id: "EpisodeId"
    keyword_probability: NotRequired[Optional[float]]
    outcome: "CandidateOutcome"
    score: float
    session_id: NotRequired[Optional["SessionId"]]
    vector_probability: NotRequired[Optional[float]]


class CoOccurrence(TypedDict):
    """Two entities said together (edges `mentions` and `mentioned_with`): a"""
    episodes: List["EpisodeId"]
    last_seen: NotRequired[Optional[str]]
    source: "EntityId"
    target: "EntityId"
    weight: int


class DeleteCounts(TypedDict):
    """Counts of rows removed by an erasure or prune, per table."""
    rows: Dict[str, Any]


class Ended(TypedDict):
    """Answer of an end."""
    session_id: "SessionId"
    status: "PromotionStatus"


class Entity(TypedDict):
    """A node of the graph."""
    aliases: List[str]
    attributes: Any
    created_at: str
    episodes: List["EpisodeId"]
    id: "EntityId"
    identity_key: str
    name: str
    type: str
    updated_at: str


class Episode(TypedDict):
    """One finished session, summarised: the episodic tier."""
    abstract: str
    created_at: str
    ended_at: str
    expires_at: NotRequired[Optional[str]]
    id: "EpisodeId"
    session_id: "SessionId"
    started_at: str
    summary: str
    summary_kind: "SummaryKind"


class ErrorBody(TypedDict):
    """The error body."""
    error: "ErrorDetail"


class ErrorDetail(TypedDict):
    """Code and message of an error."""
    code: str
    message: str


class Expanded(TypedDict):
    """Result of [`Episodic::memory_expand`]."""
    episode: "Episode"
    raw: NotRequired[Optional[List["Message"]]]


class ForgetReport(TypedDict):
    """Result of [`forget_user`]: rows removed per store."""
    graph: "DeleteCounts"
    keyword_docs: int
    records: "DeleteCounts"
    scopes: int
    shared: "SharedErasure"
    vector_points: int


class ForgottenMemory(TypedDict):
    """Result of [`TypedMemories::forget_memory`]."""
    graph: "DeleteCounts"
    id: "MemoryId"
    keyword_docs: int
    source: str
    type: "MemoryType"
    vector_points: int


class GraphSearch(TypedDict):
    """A `knowledge_graph_search` request."""
    entity: NotRequired[Optional[str]]
    hops: NotRequired[int]
    include_invalid: NotRequired[bool]
    limit: NotRequired[Optional[int]]
    predicate: NotRequired[Optional[str]]
    query: NotRequired[Optional[str]]


class ImportTurn(TypedDict):
    """One turn of a bulk load: the `strata import` JSONL line as JSON, for"""
    agent_id: NotRequired[Optional[str]]
    content: str
    idempotency_key: NotRequired[Optional[str]]
    name: NotRequired[Optional[str]]
    role: "Role"
    session_id: "SessionId"
    timestamp: NotRequired[str]
    user_id: NotRequired[Optional[str]]


class InjectRequest(TypedDict):
    """Body of an inject."""
    explain: NotRequired[bool]
    message: str
    visibility: NotRequired["ReadVisibility"]


class InjectResult(TypedDict):
    """Result of [`Episodic::inject`]."""
    dependent: bool
    entries: List["SearchHit"]
    explain: NotRequired[Optional[List["Candidate"]]]
    injected: int
    knowledge: List["KnowledgeHit"]
    query: str
    section: str
    top_score: float
    trivial: bool


class KnowledgeHit(TypedDict):
    """A knowledge hit (a typed fact) of `memory_search` or `inject`."""
    abstract: str
    id: "MemoryId"
    score: float
    source: str
    type: "MemoryType"
    when: str


class MemoryInput(TypedDict):
    """The wire form of a memory to remember (REST body, MCP and CLI argument)."""
    content: str
    indexed: NotRequired[Optional[bool]]
    metadata: NotRequired[Dict[str, Any]]
    type: str


class NewMessage(TypedDict):
    """A message to record in the working tier."""
    content: str
    idempotency_key: NotRequired[Optional[str]]
    name: NotRequired[Optional[str]]
    role: "Role"
    timestamp: NotRequired[str]


class ParkedJob(TypedDict):
    """A job parked in the dead-letter table (`dead_letter` view over the outbox):"""
    attempts: int
    created_at: str
    event: "Event"
    id: "EventId"
    last_error: str
    parked_at: NotRequired[Optional[str]]


class Recorded(TypedDict):
    """Answer of a record."""
    message_id: "MessageId"


class Relation(TypedDict):
    """An edge of the graph."""
    attributes: Any
    episode_id: NotRequired[Optional["EpisodeId"]]
    id: "RelationId"
    invalid_at: NotRequired[Optional[str]]
    memory_id: NotRequired[Optional["MemoryId"]]
    predicate: str
    source: "EntityId"
    target: "EntityId"
    valid_from: NotRequired[Optional[str]]


class ReloadReport(TypedDict):
    """Result of [`reload`]: the dotted config keys whose value changed."""
    applied: List[str]
    needs_restart: List[str]


class Requeued(TypedDict):
    """Answer of a retry."""
    requeued: int


class RetrieveRequest(TypedDict):
    """A [`TypedMemories::retrieve`] request."""
    cursor: NotRequired[Optional[str]]
    direction: NotRequired["Direction"]
    filter: NotRequired[Dict[str, Any]]
    include_superseded: NotRequired[bool]
    query: NotRequired[Optional[str]]
    sort_by: NotRequired[Optional[str]]
    top_k: NotRequired[Optional[int]]
    visibility: NotRequired["ReadVisibility"]


class RetrieveResult(TypedDict):
    """Result of [`TypedMemories::retrieve`]."""
    memories: List["StoredMemory"]
    next_cursor: NotRequired[Optional[str]]
    used_embedder: bool


class Scope(TypedDict):
    """Who a piece of memory belongs to: one end user talking to one agent."""
    agent_id: str
    user_id: str


class SearchHit(TypedDict):
    """One L1 search result."""
    abstract: str
    id: "EpisodeId"
    score: float
    session_id: "SessionId"
    snippet: NotRequired[Optional[str]]
    when: str


class SearchRequest(TypedDict):
    """Body of a search."""
    explain: NotRequired[bool]
    query: str
    top_k: NotRequired[int]
    visibility: NotRequired["ReadVisibility"]


class SearchResult(TypedDict):
    """Result of [`Episodic::memory_search_explained`]."""
    explain: NotRequired[Optional[List["Candidate"]]]
    knowledge: List["KnowledgeHit"]
    results: List["SearchHit"]


class SessionJob(TypedDict):
    """One outbox job of a session not yet done."""
    attempts: int
    id: int
    kind: "SessionJobKind"
    last_error: NotRequired[Optional[str]]
    parked: bool


class SessionMessages(TypedDict):
    """A session's messages."""
    messages: List["Message"]
    session_id: "SessionId"


class SessionState(TypedDict):
    """A session's promotion status: [`Session`]'s metadata, its episode once"""
    episode_id: NotRequired[Optional["EpisodeId"]]
    first_message_at: str
    jobs: List["SessionJob"]
    last_message_at: str
    message_count: int
    session_id: "SessionId"
    status: "PromotionStatus"
    vectors_indexed: bool


class SharedErasure(TypedDict):
    """What [`TypedMemories::forget_user_shared`] removed from the shared tiers."""
    keyword_docs: int
    memories: int
    rewritten: int
    vector_points: int


class StoredMemory(TypedDict):
    """A stored typed memory, as reads return it."""
    category: "Category"
    content: str
    created_at: str
    id: "MemoryId"
    indexed: bool
    metadata: Dict[str, Any]
    recall_count: int
    score: NotRequired[Optional[float]]
    shared_by: NotRequired[Optional[str]]
    source: str
    superseded_at: NotRequired[Optional[str]]
    type: "MemoryType"
    updated_at: str


class Subgraph(TypedDict):
    """A part of the graph: entities with the relations among them."""
    entities: List["Entity"]
    relations: List["Relation"]


class UsageTotals(TypedDict):
    """LLM cost totals (from the `llm_calls` table)."""
    calls: int
    failed_calls: int
    input_tokens: int
    output_tokens: int
    sessions: int


class WebhookEvent(TypedDict):
    """The JSON body of a webhook delivery."""
    agent_id: NotRequired[Optional[str]]
    created_at: str
    data: Dict[str, Any]
    id: str
    type: "WebhookEventType"
    user_id: str


# Why a recall candidate was kept or cut (`explain: true`).
CandidateOutcome = Literal["kept", "below_min_score", "over_limit", "expired", "no_message_evidence", "below_relative_cut", "not_accepted"]
# How a memory is stored, decided on write from its type.
Category = Literal["knowledge", "entity", "event"]
# A sort order.
Direction = Literal["asc", "desc"]
# Id of an entity: `ent_` + 32 hex digits of BLAKE3(scope key, identity key).
EntityId = str
# Id of an episode: `ep_` followed by 32 hex digits (128 bits) of the BLAKE3
EpisodeId = str
# Events on the durable outbox (the bus payloads).
Event = Dict[str, Any]
# Id of an outbox event (SQLite rowid).
EventId = int
# Result of `knowledge_graph_search`.
GraphSearchResult = Dict[str, Any]
# A typed memory's id: `mem_` + 32 hex digits (a UUID v7, so ids sort by
MemoryId = str
# The four memory types.
MemoryType = Literal["fact", "event", "entity", "relation"]
# A stored message.
Message = Dict[str, Any]
# Id of a recorded message (SQLite rowid; unique across scopes).
MessageId = int
# Where a session is on its way to an episode (`GET …/sessions/{session_id}`).
PromotionStatus = Literal["open", "completed", "promoted", "failed", "expired"]
# What [`TypedStore::put_memory`] did.
PutOutcome = Dict[str, Any]
# Which stores a read covers.
ReadVisibility = Literal["private", "all"]
# Id of a relation: `rel_` + 32 hex digits of BLAKE3(scope key, source key,
RelationId = str
# Result of [`TypedMemories::remember`].
Remembered = Dict[str, Any]
# Who spoke a message.
Role = Literal["user", "assistant", "system"]
# Session id chosen by the caller (e.g. a chat thread id). Validated like
SessionId = str
# What the outbox still has to do for a session.
SessionJobKind = Literal["promotion", "vectors", "graph"]
# Result of [`TypedMemories::share`].
Shared = Dict[str, Any]
# How an episode's summary was produced.
SummaryKind = Literal["extractive", "llm"]
# Where a memory lives (and, in results, where it came from).
Visibility = Dict[str, Any]
# What a notification reports. Wire names are dotted (`session.promoted`).
WebhookEventType = Literal["session.promoted", "memory.created", "entity.merged", "job.parked", "user.erased"]
