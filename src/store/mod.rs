//! Store traits, one per role, and their embedded backends.
//!
//! | role | trait | embedded default |
//! |---|---|---|
//! | system of record | [`RecordStore`] | [`sqlite::SqliteStore`] |
//! | keyword (BM25) | [`KeywordIndex`] | [`tantivy_index::TantivyIndex`] |
//! | vectors | [`VectorIndex`] | [`qdrant_edge::EdgeVectorIndex`] |
//!
//! Architecture Invariant: every method that reads or writes user data takes
//! a [`Scope`] (or items that carry one); a store never returns another
//! scope's rows. The few maintenance methods that enumerate across scopes
//! (`pending_events`, `idle_sessions`, `expired_episodes`) return only ids
//! paired with their scope, never content, and are called only by workers.
//! Stores never call the LLM. All write operations are idempotent.

pub mod analyzer;
pub mod qdrant_edge;
pub mod sqlite;
pub mod tantivy_index;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::Result;
pub use crate::model::DeleteCounts;
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
    /// An entity was created or updated by extraction (consumed by the dedup worker).
    EntityUpserted {
        /// Owner.
        scope: Scope,
        /// The entity.
        entity_id: crate::model::graph::EntityId,
    },
}

impl Event {
    /// The kind's stored name.
    pub fn kind(&self) -> EventKind {
        match self {
            Event::SessionCompleted { .. } => EventKind::SessionCompleted,
            Event::EpisodeCreated { .. } => EventKind::EpisodeCreated,
            Event::EntityUpserted { .. } => EventKind::EntityUpserted,
        }
    }
    /// The event's scope.
    pub fn scope(&self) -> &Scope {
        match self {
            Event::SessionCompleted { scope, .. }
            | Event::EpisodeCreated { scope, .. }
            | Event::EntityUpserted { scope, .. } => scope,
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
    /// See [`Event::EntityUpserted`].
    EntityUpserted,
}

impl EventKind {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::SessionCompleted => "session_completed",
            EventKind::EpisodeCreated => "episode_created",
            EventKind::EntityUpserted => "entity_upserted",
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
    async fn append_message(
        &self,
        scope: &Scope,
        session: &SessionId,
        msg: &NewMessage,
        now: DateTime<Utc>,
    ) -> Result<MessageId>;
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
    /// `EpisodeCreated`, in one transaction.
    async fn put_episode(&self, scope: &Scope, episode: &Episode, done: EventId) -> Result<()>;
    /// The episode, if it exists in `scope` and has not expired at `now`.
    /// NotFound otherwise.
    async fn episode(&self, scope: &Scope, id: &EpisodeId, now: DateTime<Utc>) -> Result<Episode>;
    /// The listed episodes that exist in `scope` and are live at `now`, in no particular order.
    async fn episodes(
        &self,
        scope: &Scope,
        ids: &[EpisodeId],
        now: DateTime<Utc>,
    ) -> Result<Vec<Episode>>;
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
    /// parked (kept, visible, never dropped) and no longer pending.
    async fn fail_event(&self, id: EventId, error: &str, park_after: u32) -> Result<()>;
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
    /// Every unexpired episode with its scope, in id order after `after`
    /// (keyset pagination for `strata reindex`; operators only).
    async fn all_episodes(
        &self,
        after: Option<EpisodeId>,
        limit: usize,
        now: DateTime<Utc>,
    ) -> Result<Vec<(Scope, Episode)>>;
}

/// A document for the keyword index: one episode.
#[derive(Debug, Clone)]
pub struct KeywordDoc {
    /// Owner.
    pub scope: Scope,
    /// Episode id (the document key).
    pub episode_id: EpisodeId,
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
pub struct Hit {
    /// The episode.
    pub episode_id: EpisodeId,
    /// Raw retriever score (BM25 for keyword, cosine for vectors).
    pub score: f32,
}

/// Keyword hits plus what calibration needs.
#[derive(Debug, Clone, Default)]
pub struct KeywordResult {
    /// Hits, best first.
    pub hits: Vec<Hit>,
    /// Distinct analysed query terms.
    pub query_terms: usize,
    /// The query's reference score: the BM25 a document would get by holding
    /// every query term once, at average length, in every field (Σ over terms
    /// and fields of boost × idf). Dividing by it makes scores comparable
    /// across queries of different lengths and rarity; 0 for an empty query.
    pub reference_score: f32,
}

/// BM25 keyword index over episodes.
#[async_trait]
pub trait KeywordIndex: Send + Sync + 'static {
    /// Adds or replaces documents (by episode id) and makes them searchable before returning.
    async fn upsert(&self, docs: Vec<KeywordDoc>) -> Result<()>;
    /// Top `limit` episodes of `scope` for `query`.
    async fn search(
        &self,
        scope: &Scope,
        query: &KeywordQuery<'_>,
        limit: usize,
    ) -> Result<KeywordResult>;
    /// Removes episodes of `scope`.
    async fn delete(&self, scope: &Scope, ids: &[EpisodeId]) -> Result<()>;
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
pub struct VectorPoint {
    /// Owner.
    pub scope: Scope,
    /// Episode id.
    pub episode_id: EpisodeId,
    /// Unit number within the episode; (episode_id, unit) is the point key.
    pub unit: u32,
    /// Unit-length embedding.
    pub vector: Vec<f32>,
}

/// Dense vector index over episodes (cosine similarity).
#[async_trait]
pub trait VectorIndex: Send + Sync + 'static {
    /// Dimension of every vector.
    fn dim(&self) -> usize;
    /// Adds or replaces points (by episode id), durable and searchable before returning.
    ///
    /// # Errors
    /// [`crate::Error::Vector`] when a vector's length is not [`VectorIndex::dim`].
    async fn upsert(&self, points: Vec<VectorPoint>) -> Result<()>;
    /// Top `limit` episodes of `scope` by cosine similarity to `vector`; an
    /// episode's score is the best score of its units, each episode appears once.
    async fn search(&self, scope: &Scope, vector: &[f32], limit: usize) -> Result<Vec<Hit>>;
    /// Removes episodes of `scope` (all their units).
    async fn delete(&self, scope: &Scope, ids: &[EpisodeId]) -> Result<()>;
    /// Background maintenance (e.g. building the HNSW graph); called by
    /// workers when idle, never on the request path. Default: nothing.
    async fn optimize(&self) -> Result<()> {
        Ok(())
    }
    /// Points (units) stored for `scope`.
    async fn count(&self, scope: &Scope) -> Result<usize>;
}

#[cfg(test)]
pub(crate) mod conformance;
