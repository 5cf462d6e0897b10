//! Store traits, one per role; one folder or file per backend; one factory.
//!
//! | role | trait | embedded default | at scale |
//! |---|---|---|---|
//! | system of record | [`RecordStore`] | `sqlite::SqliteStore` | `postgres::PgStore` |
//! | typed memories | [`TypedStore`] | `sqlite::SqliteStore` | `postgres::PgStore` |
//! | team and public tiers | [`shared::SharedStores`] | `sqlite::shared::SqliteSharedStores` | `postgres::PgStore` |
//! | keyword (BM25) | [`KeywordIndex`] | `tantivy_index::TantivyIndex` | `qdrant::QdrantKeywordIndex` |
//! | vectors | [`VectorIndex`] | `qdrant_edge::EdgeVectorIndex` | `qdrant::QdrantVectorIndex` |
//! | graph | [`crate::graph::GraphStore`] | `sqlite::SqliteStore` | `cypher::CypherGraph` (Bolt) |
//! | migration target | [`copy::CopyTarget`] | — | `postgres::PgStore` |
//!
//! [`factory`] turns the `[stores]` config into these trait objects.
//!
//! Architecture Invariant: [`factory`] is the only module outside the
//! backends that names a backend type; everything else holds trait objects
//! (`tests/architecture.rs` checks it).
//!
//! Architecture Invariant: every method that reads or writes user data takes
//! a [`Scope`] (or items that carry one); a store never returns another
//! scope's rows. The few maintenance methods that enumerate across scopes
//! (`pending_events`, `idle_sessions`, `expired_episodes`) return only ids
//! paired with their scope, never content, and are called only by workers.
//! Stores never call the LLM. All write operations are idempotent.

// the traits beside this file's
#[doc(hidden)]
pub mod copy;
pub mod shared;
// the factory: the only place that names a backend
#[doc(hidden)]
pub mod factory;
// helpers shared by backends
#[doc(hidden)]
pub mod analyzer;
pub(crate) mod typed_sql;
// the backends
#[doc(hidden)]
pub mod cypher;
#[doc(hidden)]
pub mod postgres;
#[doc(hidden)]
pub mod qdrant;
#[doc(hidden)]
pub mod qdrant_edge;
#[doc(hidden)]
pub mod sqlite;
#[doc(hidden)]
pub mod tantivy_index;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::Result;
pub use crate::model::DeleteCounts;
use crate::model::filter::{Direction, Field, Filter};
use crate::model::typed::{MemoryId, MemoryType, NewMemory, StoredMemory};
use crate::model::{
    ApiKey, Episode, EpisodeId, EventId, Message, MessageId, NewMessage, Scope, Session, SessionId,
};

/// Events on the durable outbox (the bus payloads).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// A session was ended (by the caller or the idle timeout): summarise it.
    SessionCompleted {
        /// Owner.
        scope: Scope,
        /// The session.
        session_id: SessionId,
    },
    /// An episode was written (consumed by the semantic tier).
    EpisodeCreated {
        /// Owner.
        scope: Scope,
        /// The episode.
        episode_id: EpisodeId,
    },
    /// An episode's vector units are still to be embedded: promotion wrote the
    /// episode and its keyword document and left the embedding to this job
    /// (`episodes.defer_vectors`; consumed by the vector worker).
    EpisodeVectors {
        /// Owner.
        scope: Scope,
        /// The episode.
        episode_id: EpisodeId,
    },
    /// An entity was created or updated by extraction (consumed by the dedup worker).
    EntityUpserted {
        /// Owner.
        scope: Scope,
        /// The entity.
        entity_id: crate::model::graph::EntityId,
    },
    /// A webhook notification still to be posted to one endpoint (consumed by
    /// the webhook worker; `docs/webhooks.md`). The row carries the URL, not
    /// the secret: the worker signs with the secret the endpoint's config names.
    WebhookDelivery {
        /// The scope the notification concerns (a `user.erased` one: the user
        /// with agent `_`, so erasing the user again removes it too).
        scope: Scope,
        /// The endpoint's URL, as configured in `[[webhooks.endpoints]]`.
        url: String,
        /// The body to post.
        webhook: crate::model::webhook::WebhookEvent,
    },
}

impl Event {
    /// The kind's stored name.
    pub fn kind(&self) -> EventKind {
        match self {
            Event::SessionCompleted { .. } => EventKind::SessionCompleted,
            Event::EpisodeCreated { .. } => EventKind::EpisodeCreated,
            Event::EpisodeVectors { .. } => EventKind::EpisodeVectors,
            Event::EntityUpserted { .. } => EventKind::EntityUpserted,
            Event::WebhookDelivery { .. } => EventKind::WebhookDelivery,
        }
    }
    /// The event's scope.
    pub fn scope(&self) -> &Scope {
        match self {
            Event::SessionCompleted { scope, .. }
            | Event::EpisodeCreated { scope, .. }
            | Event::EpisodeVectors { scope, .. }
            | Event::EntityUpserted { scope, .. }
            | Event::WebhookDelivery { scope, .. } => scope,
        }
    }
}

/// Event kinds, for routing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// See [`Event::SessionCompleted`].
    SessionCompleted,
    /// See [`Event::EpisodeCreated`].
    EpisodeCreated,
    /// See [`Event::EpisodeVectors`].
    EpisodeVectors,
    /// See [`Event::EntityUpserted`].
    EntityUpserted,
    /// See [`Event::WebhookDelivery`].
    WebhookDelivery,
}

impl EventKind {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::SessionCompleted => "session_completed",
            EventKind::EpisodeCreated => "episode_created",
            EventKind::EpisodeVectors => "episode_vectors",
            EventKind::EntityUpserted => "entity_upserted",
            EventKind::WebhookDelivery => "webhook_delivery",
        }
    }
}

/// An outbox row.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxEvent {
    /// Row id.
    pub id: EventId,
    /// Payload.
    pub event: Event,
    /// Failed attempts so far.
    pub attempts: u32,
}

/// A job parked in the dead-letter table (`dead_letter` view over the outbox):
/// it failed `attempts` times and waits for `strata jobs retry`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ParkedJob {
    /// Outbox row id (what `strata jobs retry ID` takes).
    pub id: EventId,
    /// The event, with its scope and session or episode.
    pub event: Event,
    /// Attempts made (each with the LLM client's own retries).
    pub attempts: u32,
    /// The last error.
    pub last_error: String,
    /// When it was parked.
    pub parked_at: Option<DateTime<Utc>>,
    /// When the event was written.
    pub created_at: DateTime<Utc>,
}

/// The event of a listed outbox row (`parked_jobs`, `open_jobs`), or `None`,
/// logged with `what` (the kind of row), when its payload cannot be read:
/// a listing skips such a row; the claim path parks it.
pub(crate) fn listed_event(id: i64, payload: &str, what: &str) -> Option<Event> {
    match serde_json::from_str::<Event>(payload) {
        Ok(e) => Some(e),
        Err(_) => {
            tracing::warn!(event_id = id, "{what} with an unreadable payload");
            None
        }
    }
}

/// An outbox job not yet done ([`RecordStore::open_jobs`]).
#[derive(Debug, Clone, PartialEq)]
pub struct OpenJob {
    /// Outbox row id (what `strata jobs retry ID` takes once parked).
    pub id: EventId,
    /// The event, with its scope and session or episode.
    pub event: Event,
    /// Parked in the dead-letter table (else pending).
    pub parked: bool,
    /// Failed attempts so far.
    pub attempts: u32,
    /// The last error, when an attempt failed.
    pub last_error: Option<String>,
}

/// LLM cost totals (from the `llm_calls` table).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct UsageTotals {
    /// Requests sent, including failed attempts.
    pub calls: u64,
    /// Of which failed (retried or given up).
    pub failed_calls: u64,
    /// Prompt tokens, summed.
    pub input_tokens: u64,
    /// Completion tokens, summed.
    pub output_tokens: u64,
    /// Distinct sessions the calls were made for.
    pub sessions: u64,
}

/// Row counts of the system of record, over every scope (operators).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct StoreSizes {
    /// Sessions, open and completed.
    pub sessions: u64,
    /// Of which still open (working tier).
    pub open_sessions: u64,
    /// Recorded messages.
    pub messages: u64,
    /// Episodes (expired ones until the pruner removes them).
    pub episodes: u64,
    /// Jobs in the dead-letter table.
    pub parked_jobs: u64,
}

/// A held maintenance lock ([`RecordStore::maintenance_lock`]); released on drop.
pub struct MaintenanceLock {
    _held: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl MaintenanceLock {
    /// A lock that holds nothing: the store belongs to one process.
    pub fn local() -> Self {
        Self { _held: None }
    }
    /// A lock kept for as long as `held` lives (a server session, say).
    pub fn holding(held: Box<dyn std::any::Any + Send + Sync>) -> Self {
        Self { _held: Some(held) }
    }
}

impl std::fmt::Debug for MaintenanceLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaintenanceLock").field("held", &self._held.is_some()).finish()
    }
}

/// The system of record: sessions, messages, episodes and the durable outbox.
///
/// Contract: a write that returns `Ok` is durable. State changes that produce
/// events write the outbox row in the same transaction.
#[async_trait]
pub trait RecordStore: Send + Sync + 'static {
    /// Appends a message to the session (creating the session when new).
    /// `now` is the wall-clock time used for the idle timeout.
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] for an invalid message;
    /// [`crate::Error::Conflict`] when the session is already completed (use
    /// a new session id).
    ///
    /// Provided: a one-message [`RecordStore::append_messages`].
    async fn append_message(
        &self,
        scope: &Scope,
        session: &SessionId,
        msg: &NewMessage,
        now: DateTime<Utc>,
    ) -> Result<MessageId> {
        let mut ids = self
            .append_messages(scope, vec![(session.clone(), msg.clone())], now)
            .await?;
        ids.pop()
            .ok_or_else(|| crate::Error::Task("append_messages returned no id".into()))
    }
    /// Appends several messages (each to its session, created when new) in
    /// one transaction: all are stored or none. Returns their ids in order.
    ///
    /// # Errors
    /// As [`RecordStore::append_message`], for the first failing message.
    async fn append_messages(
        &self,
        scope: &Scope,
        turns: Vec<(SessionId, NewMessage)>,
        now: DateTime<Utc>,
    ) -> Result<Vec<MessageId>>;
    /// Session metadata. [`crate::Error::NotFound`] when it does not exist in `scope`.
    async fn session(&self, scope: &Scope, session: &SessionId) -> Result<Session>;
    /// All messages of a session in record order. NotFound as above.
    async fn messages(&self, scope: &Scope, session: &SessionId) -> Result<Vec<Message>>;
    /// The last `n` user messages of a session, oldest first (empty when the session is unknown).
    async fn recent_user_turns(
        &self,
        scope: &Scope,
        session: &SessionId,
        n: usize,
    ) -> Result<Vec<String>>;
    /// Marks the session completed and writes `SessionCompleted` to the
    /// outbox, in one transaction. Returns the event id, or `None` when it was
    /// already completed (idempotent). NotFound when the session does not exist.
    async fn complete_session(
        &self,
        scope: &Scope,
        session: &SessionId,
        now: DateTime<Utc>,
    ) -> Result<Option<EventId>>;
    /// Writes (or overwrites) an episode, marks `done` events done and writes
    /// `EpisodeCreated` and `on_new` (the `session.promoted` webhook
    /// deliveries) when the episode is new and, with `vectors_pending`, an
    /// [`Event::EpisodeVectors`] job, in one transaction.
    async fn put_episode(
        &self,
        scope: &Scope,
        episode: &Episode,
        done: EventId,
        vectors_pending: bool,
        on_new: Vec<Event>,
    ) -> Result<()>;
    /// The episode, if it exists in `scope` and has not expired at `now`.
    /// NotFound otherwise.
    async fn episode(&self, scope: &Scope, id: &EpisodeId, now: DateTime<Utc>) -> Result<Episode>;
    /// Ids of at most `limit` episodes of `scope` live at `now` whose id
    /// starts with `prefix` (`ep_` + hex digits, as [`crate::model::EpisodeRef`]
    /// checked), in id order: how a short id resolves.
    async fn episode_ids_with_prefix(&self, scope: &Scope, prefix: &str, now: DateTime<Utc>, limit: usize) -> Result<Vec<EpisodeId>>;
    /// The listed episodes that exist in `scope` and are live at `now`, in no particular order.
    async fn episodes(
        &self,
        scope: &Scope,
        ids: &[EpisodeId],
        now: DateTime<Utc>,
    ) -> Result<Vec<Episode>>;
    /// The sessions of `scope`, the latest started first (then by id), at
    /// most `limit` (the console's timeline).
    async fn sessions(&self, scope: &Scope, limit: usize) -> Result<Vec<Session>>;
    /// The scopes with recorded sessions whose user or agent id contains
    /// `search` (every scope for ""), the most recently active first, at
    /// most `limit` (operators: the console's scope list; crosses scopes).
    async fn scopes(&self, search: &str, limit: usize) -> Result<Vec<crate::model::ScopeActivity>>;
    /// Number of live episodes in `scope`.
    async fn count_episodes(&self, scope: &Scope) -> Result<usize>;
    /// Deletes episodes of `scope` (raw sessions stay). Returns how many rows went.
    async fn delete_episodes(&self, scope: &Scope, ids: &[EpisodeId]) -> Result<usize>;

    /// Pending events of the given kinds whose backoff has passed, oldest first (maintenance: crosses scopes).
    async fn pending_events(&self, kinds: &[EventKind], limit: usize) -> Result<Vec<OutboxEvent>>;
    /// Number of pending events of the given kinds (including those in backoff).
    async fn count_pending(&self, kinds: &[EventKind]) -> Result<usize>;
    /// Records a failed attempt and delays the event by an exponential backoff
    /// (0.5 s x 2^attempts, at most 60 s); after `park_after` attempts the event is
    /// parked (kept, visible, never dropped) and no longer pending, and
    /// `on_park` (the `job.parked` webhook deliveries) is written in the same
    /// transaction. Returns whether it was parked.
    async fn fail_event(&self, id: EventId, error: &str, park_after: u32, on_park: Vec<Event>) -> Result<bool>;
    /// Open sessions whose last activity (wall clock) is before `before` (maintenance).
    async fn idle_sessions(&self, before: DateTime<Utc>) -> Result<Vec<(Scope, SessionId)>>;
    /// Episodes whose `expires_at` is before `now` (maintenance).
    async fn expired_episodes(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<(Scope, EpisodeId)>>;

    /// Marks an event done and writes its follow-up events, in one transaction.
    async fn finish_event(&self, id: EventId, follow_ups: Vec<Event>) -> Result<()>;
    /// Writes `events` to the outbox in one transaction: notifications of a
    /// change another store committed (typed memories, erasure). Provided:
    /// [`RecordStore::finish_event`] of id 0, which no row has (ids start at 1).
    async fn enqueue(&self, events: Vec<Event>) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        self.finish_event(EventId(0), events).await
    }
    /// Deletes every row of a user (all agents) from the record tables;
    /// rows removed per table (erasure).
    async fn delete_user_records(&self, user_id: &str) -> Result<DeleteCounts>;
    /// Every (scope, episode id) of a user, all agents (erasure).
    async fn user_episodes(&self, user_id: &str) -> Result<Vec<(Scope, EpisodeId)>>;
    /// Appends judged dedup pairs of one entity to the audit log.
    async fn log_dedup(
        &self,
        scope: &Scope,
        entity: &crate::model::graph::EntityId,
        rows: Vec<crate::model::LoggedDecision>,
    ) -> Result<()>;
    /// Counts of dedup decisions in a scope, by decision (`merge`, `keep`, `skip`).
    async fn dedup_stats(&self, scope: &Scope)
        -> Result<std::collections::BTreeMap<String, usize>>;
    /// Appends the LLM call records of one job (cost accounting).
    async fn record_llm_calls(
        &self,
        scope: &Scope,
        session: Option<&SessionId>,
        event: Option<EventId>,
        calls: Vec<crate::model::CallRecord>,
    ) -> Result<()>;
    /// Cost totals of one scope, or of the whole store for `None` (operators).
    async fn usage_totals(&self, scope: Option<&Scope>) -> Result<UsageTotals>;
    /// The dead-letter table, oldest first (operators).
    async fn parked_jobs(&self, limit: usize) -> Result<Vec<ParkedJob>>;
    /// The outbox jobs of `scope` not yet done (pending, including those
    /// waiting out a retry backoff, or parked), oldest first, at most
    /// `limit`: what a session's promotion status reads
    /// ([`crate::Memory::session_status`]).
    async fn open_jobs(&self, scope: &Scope, limit: usize) -> Result<Vec<OpenJob>>;
    /// Puts parked jobs back in the queue with a fresh attempt budget: one
    /// id, or every parked job for `None`. Returns how many were re-queued.
    async fn retry_parked(&self, id: Option<EventId>) -> Result<usize>;
    /// Reads a key of the `meta` table (index bookkeeping such as the embedding model).
    async fn meta_get(&self, key: &str) -> Result<Option<String>>;
    /// Writes a key of the `meta` table.
    async fn meta_set(&self, key: &str, value: &str) -> Result<()>;
    /// Stores an API key: its record and the SHA-256 (hex) of its secret.
    async fn put_api_key(&self, key: &ApiKey, secret_sha256: &str) -> Result<()>;
    /// The key whose secret hashes to `secret_sha256` (revoked keys too;
    /// the caller checks `revoked_at`). Authentication only.
    async fn api_key_by_hash(&self, secret_sha256: &str) -> Result<Option<ApiKey>>;
    /// Every key, revoked ones included, oldest first (operators).
    async fn api_keys(&self) -> Result<Vec<ApiKey>>;
    /// Revokes a key (idempotent) and returns it.
    /// [`crate::Error::NotFound`] for an unknown id.
    async fn revoke_api_key(&self, id: &str, now: DateTime<Utc>) -> Result<ApiKey>;
    /// True once any key was ever created (revoked ones count: revoking
    /// every key never re-opens a server).
    async fn api_keys_created(&self) -> Result<bool>;
    /// Row counts of the whole store (operators, `/metrics`).
    async fn store_sizes(&self) -> Result<StoreSizes>;
    /// Takes the cluster-wide lock of one maintenance job (`prune`,
    /// `idle_sweep`) without waiting: `None` when another node holds it, so
    /// each job runs on one node at a time. The lock is held until the
    /// returned guard is dropped (and released by the server if the node
    /// dies). The default, for stores one process owns (SQLite), always
    /// grants it.
    async fn maintenance_lock(&self, _job: &str) -> Result<Option<MaintenanceLock>> {
        Ok(Some(MaintenanceLock::local()))
    }
    /// Every unexpired episode with its scope, in id order after `after`
    /// (keyset pagination for `strata reindex`; operators only).
    async fn all_episodes(
        &self,
        after: Option<EpisodeId>,
        limit: usize,
        now: DateTime<Utc>,
    ) -> Result<Vec<(Scope, Episode)>>;
}

/// The key of an index document: an episode id in the episodic indexes, a
/// memory id in the knowledge indexes of typed memories.
pub trait DocKey:
    Clone + Eq + Ord + std::hash::Hash + std::fmt::Debug + std::fmt::Display + Send + Sync + 'static
{
    /// The key as stored in the index.
    fn as_str(&self) -> &str;
    /// Parses a stored key.
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] when it is not a key of this kind.
    fn parse(s: &str) -> Result<Self>;
    /// The key's 128 bits (the vector point id of its first unit).
    fn as_u128(&self) -> u128;
}

impl DocKey for EpisodeId {
    fn as_str(&self) -> &str {
        EpisodeId::as_str(self)
    }
    fn parse(s: &str) -> Result<Self> {
        EpisodeId::parse(s)
    }
    fn as_u128(&self) -> u128 {
        self.as_uuid().as_u128()
    }
}

impl DocKey for MemoryId {
    fn as_str(&self) -> &str {
        MemoryId::as_str(self)
    }
    fn parse(s: &str) -> Result<Self> {
        MemoryId::parse(s)
    }
    fn as_u128(&self) -> u128 {
        u128::from_str_radix(&self.as_str()[4..], 16).unwrap_or(0)
    }
}

/// What [`TypedStore::put_memory`] did.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(tag = "outcome", content = "superseded", rename_all = "snake_case")]
pub enum PutOutcome {
    /// A new memory.
    Created,
    /// A new fact; the held fact with the same key (its id here) got `superseded_at`.
    Superseded(MemoryId),
    /// Merged into the held entity with the same `identity_key` (its id is returned).
    Merged,
    /// The held relation with the same (subject, predicate, object) was updated, or a
    /// fact shared again refreshed its copy in the shared store (its id is returned).
    Updated,
}

/// A read of typed memories (see [`crate::model::filter`]).
#[derive(Debug, Clone)]
pub struct MemoryQuery {
    /// Conditions.
    pub filter: Filter,
    /// Order by this path (`created_at`, `updated_at` or `metadata.*`);
    /// `None` = write order. A metadata sort returns only memories that hold
    /// a non-array value at the path.
    pub sort: Option<Field>,
    /// Direction of the order.
    pub direction: Direction,
    /// Page size.
    pub limit: usize,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Include facts replaced by a newer one with the same key.
    pub include_superseded: bool,
    /// Restrict to these ids (the candidates of a semantic query).
    pub only: Option<Vec<MemoryId>>,
}

/// Typed memories in a user's private store (the system of record).
///
/// Contract: every call is scoped; ids of other scopes behave as unknown ids.
#[async_trait]
pub trait TypedStore: Send + Sync + 'static {
    /// Stores `m` under `id` by its type's upsert rule (fact key supersedes,
    /// entity key merges, relation triple updates, event appends); returns the
    /// id that holds it and what happened. One transaction.
    async fn put_memory(
        &self,
        scope: &Scope,
        id: &MemoryId,
        m: &NewMemory,
        now: DateTime<Utc>,
    ) -> Result<(MemoryId, PutOutcome)>;
    /// A filtered, ordered page and the cursor of the next page.
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] for a malformed cursor.
    async fn query_memories(
        &self,
        scope: &Scope,
        q: &MemoryQuery,
    ) -> Result<(Vec<StoredMemory>, Option<String>)>;
    /// One memory. [`crate::Error::NotFound`] when unknown in `scope`.
    async fn memory(&self, scope: &Scope, id: &MemoryId) -> Result<StoredMemory>;
    /// Deletes one memory; returns what was deleted. NotFound as above.
    async fn delete_memory(&self, scope: &Scope, id: &MemoryId) -> Result<StoredMemory>;
    /// Adds `n` to the recall count of each `(memory, n)`, in one transaction.
    async fn count_recalls(&self, scope: &Scope, counts: &[(MemoryId, u64)]) -> Result<()>;
    /// Refreshes the query planner's statistics (SQLite `PRAGMA optimize`
    /// with `analysis_limit` 1000), so filters on selective metadata paths
    /// drive from the field index instead of scanning a type. Cheap when
    /// nothing changed; called by a background task.
    async fn optimize_memories(&self) -> Result<()>;
    /// Memories held per type (live and superseded).
    async fn memory_counts(&self, scope: &Scope) -> Result<Vec<(MemoryType, usize)>>;
    /// The private pools holding memories whose user or agent id contains
    /// `search` (every pool for ""): each scope with its memory count (live
    /// and superseded) and its latest `updated_at`, the most recently
    /// updated first, at most `limit` (operators: the console's scope list
    /// also shows scopes that only have typed memories; crosses scopes).
    async fn memory_scopes(&self, search: &str, limit: usize) -> Result<Vec<(Scope, usize, chrono::DateTime<chrono::Utc>)>>;
    /// Typed memories of every private scope together (`strata check`).
    async fn total_memories(&self) -> Result<usize>;
    /// Every memory of a user (all agents) with its scope: erasure clears
    /// the indexes with it before the rows go. Maintenance only.
    async fn user_memories(&self, user_id: &str) -> Result<Vec<(Scope, MemoryId)>>;
    /// Indexed, current knowledge of every scope after `after` (a sequence
    /// number; 0 to start), at most `limit`: `(scope, seq, id, content)`.
    /// Maintenance (`strata reindex`) only.
    async fn indexed_knowledge(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(Scope, i64, MemoryId, String)>>;
}

/// A document for the keyword index: one episode.
#[derive(Debug, Clone)]
pub struct KeywordDoc<K = EpisodeId> {
    /// Owner.
    pub scope: Scope,
    /// The document key: an episode id, or a memory id in the knowledge index.
    pub episode_id: K,
    /// Summary and abstract text (full weight).
    pub summary: String,
    /// The user turns of the raw transcript, `speaker: text` lines (weighted
    /// by `recall.user_text_boost`).
    pub user_text: String,
    /// The other turns (assistant, system) of the raw transcript (weighted by
    /// `recall.assistant_text_boost`, a third of the user's by default):
    /// what people say about themselves is what their memory is about, while
    /// an assistant's long answers repeat the question's words without being
    /// about the user.
    pub assistant_text: String,
    /// The days the session spans, "8 May 2023" one per line
    /// ([`crate::recall::dates::session_date_terms`]; weighted by `recall.date_boost`).
    pub dates: String,
    /// The same days as exact tokens, `day20230508 month202305 year2023`
    /// ([`crate::recall::dates::date_tokens`]); matched only by the dates a
    /// query names relative to its time ([`KeywordQuery::date_tokens`]).
    pub date_tokens: String,
}

/// A keyword query.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeywordQuery<'a> {
    /// The query text, searched in the summary, raw and dates fields.
    pub text: &'a str,
    /// Exact date tokens resolved from the text's relative dates
    /// ([`crate::recall::dates::resolve_relative`], space-separated; "" for
    /// none), searched only against [`KeywordDoc::date_tokens`] with weight
    /// `recall.relative_date_boost`.
    pub date_tokens: &'a str,
}

impl<'a> KeywordQuery<'a> {
    /// A query with no resolved dates.
    pub fn text(text: &'a str) -> Self {
        Self {
            text,
            date_tokens: "",
        }
    }
}

/// One scored hit from an index.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit<K = EpisodeId> {
    /// The document key (episode, or memory in the knowledge index).
    pub episode_id: K,
    /// Raw retriever score (BM25 for keyword, cosine for vectors).
    pub score: f32,
}

/// Keyword hits plus what calibration needs.
#[derive(Debug, Clone)]
pub struct KeywordResult<K = EpisodeId> {
    /// Hits, best first.
    pub hits: Vec<Hit<K>>,
    /// Distinct analysed query terms.
    pub query_terms: usize,
    /// The query's reference score: the BM25 a document would get by holding
    /// every query term once, at average length, in every field (Σ over terms
    /// and fields of boost × idf). Dividing by it makes scores comparable
    /// across queries of different lengths and rarity; 0 for an empty query.
    pub reference_score: f32,
}

impl<K> Default for KeywordResult<K> {
    fn default() -> Self {
        Self {
            hits: Vec::new(),
            query_terms: 0,
            reference_score: 0.0,
        }
    }
}

/// BM25 keyword index over episodes.
#[async_trait]
pub trait KeywordIndex<K: DocKey = EpisodeId>: Send + Sync + 'static {
    /// Adds or replaces documents (by episode id) and makes them searchable before returning.
    async fn upsert(&self, docs: Vec<KeywordDoc<K>>) -> Result<()>;
    /// Top `limit` episodes of `scope` for `query`.
    async fn search(
        &self,
        scope: &Scope,
        query: &KeywordQuery<'_>,
        limit: usize,
    ) -> Result<KeywordResult<K>>;
    /// Removes episodes of `scope`.
    async fn delete(&self, scope: &Scope, ids: &[K]) -> Result<()>;
    /// Every document the index holds, as (scope, key), each once, in no
    /// set order: what `strata check` compares with the system of record.
    /// One pass over the whole index; memory grows with the document count.
    async fn ids(&self) -> Result<Vec<(Scope, K)>>;
    /// Documents stored for `scope`.
    async fn count(&self, scope: &Scope) -> Result<usize>;
    /// Rewrites storage so deleted documents are gone from disk, not only
    /// hidden (called after an erasure). Default: nothing to do.
    async fn compact(&self) -> Result<()> {
        Ok(())
    }
}

/// A vector for the vector index: one unit of an episode (unit 0 is the
/// summary; units 1.. are turns of the raw session).
#[derive(Debug, Clone)]
pub struct VectorPoint<K = EpisodeId> {
    /// Owner.
    pub scope: Scope,
    /// The document key (episode, or memory in the knowledge index).
    pub episode_id: K,
    /// Unit number within the episode; (episode_id, unit) is the point key.
    pub unit: u32,
    /// Unit-length embedding.
    pub vector: Vec<f32>,
}

/// Dense vector index over episodes (cosine similarity).
#[async_trait]
pub trait VectorIndex<K: DocKey = EpisodeId>: Send + Sync + 'static {
    /// Dimension of every vector.
    fn dim(&self) -> usize;
    /// Adds or replaces points (by episode id), durable and searchable before returning.
    ///
    /// # Errors
    /// [`crate::Error::Vector`] when a vector's length is not [`VectorIndex::dim`].
    async fn upsert(&self, points: Vec<VectorPoint<K>>) -> Result<()>;
    /// Top `limit` episodes of `scope` by cosine similarity to `vector`; an
    /// episode's score is the best score of its units, each episode appears once.
    async fn search(&self, scope: &Scope, vector: &[f32], limit: usize) -> Result<Vec<Hit<K>>>;
    /// Removes episodes of `scope` (all their units).
    async fn delete(&self, scope: &Scope, ids: &[K]) -> Result<()>;
    /// Every document (episode or memory) with at least one point, as
    /// (scope, key), each once, in no set order: what `strata check`
    /// compares with the system of record. One pass over every point.
    async fn ids(&self) -> Result<Vec<(Scope, K)>>;
    /// Background maintenance (e.g. building the HNSW graph); called by
    /// workers when idle, never on the request path. Default: nothing.
    async fn optimize(&self) -> Result<()> {
        Ok(())
    }
    /// Rewrites storage so deleted points are gone from disk, not only
    /// hidden (called after an erasure; takes time in proportion to the
    /// whole index on qdrant-edge). Default: nothing to do (a server that
    /// purges deleted points itself).
    async fn compact(&self) -> Result<()> {
        Ok(())
    }
    /// Points (units) stored for `scope`.
    async fn count(&self, scope: &Scope) -> Result<usize>;
}

#[cfg(test)]
pub(crate) mod conformance;
