//! Episodic recall: the turn path and the L0/L1 tools. Recording messages
//! into the working tier, ending sessions (promotion runs in the workers),
//! `memory_expand` ([`Episodic`] here); `inject` and `memory_search`
//! ([`recall`]); the Memory Context renderer ([`context`]).
//!
//! Architecture Invariant: nothing here awaits a chat model; promotion runs
//! in the workers. The request path awaits only the system of record, the
//! two indexes and (for the vector half of recall) one query embedding,
//! bounded by `embedding.query_timeout_ms`.

pub mod context;
pub mod recall;
mod stages;

use chrono::{DateTime, Utc};
use serde::Serialize;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::model::typed::{MemoryId, Visibility};
use crate::model::*;
use crate::recall::fusion::Retrievers;
use crate::runtime::Runtime;
use crate::store::{Event, EventKind};
use crate::typed::TypedMemories;

/// Largest `top_k` accepted by [`Episodic::memory_search`].
pub const MAX_TOP_K: usize = 100;

/// Why a recall candidate was kept or cut (`explain: true`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CandidateOutcome {
    /// Returned (injected, or in the search results).
    Kept,
    /// Its calibrated score was below `recall.min_score` (`memory_search`, or
    /// inject without the acceptor), or, in inject, below
    /// `recall.acceptor.companion_min_score` beside an accepted best candidate.
    BelowMinScore,
    /// Above the threshold but past the limit (`max_entries` or `top_k`).
    OverLimit,
    /// In an index but no longer in the system of record (expired, not yet pruned).
    Expired,
    /// Inject only: the earlier turns found it, the message itself did not
    /// (message-only score below `recall.message_evidence_min`).
    NoMessageEvidence,
    /// Inject only: below `recall.relative_cut` × the best injected score.
    BelowRelativeCut,
    /// Inject only: the best candidate's acceptance probability was below
    /// its model's `accept_min` ([`crate::recall::evidence`]), so nothing
    /// went in.
    NotAccepted,
}

/// One candidate of a recall, with every score that decided its fate (`explain: true`).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Candidate {
    /// The episode.
    pub id: EpisodeId,
    /// Raw BM25 score, when the keyword retriever returned it.
    pub bm25: Option<f32>,
    /// Calibrated keyword probability (from `bm25`), when present.
    pub keyword_probability: Option<f64>,
    /// Raw cosine similarity, when the vector retriever returned it.
    pub cosine: Option<f32>,
    /// Calibrated vector probability (from `cosine`), when present.
    pub vector_probability: Option<f64>,
    /// For an episode in another language than the query, its vector-alone
    /// probability under `recall.cross_lingual_calibration` (the score is
    /// the larger of it and the weighted one; [`crate::recall::language`]).
    pub cross_lingual_probability: Option<f64>,
    /// The fused calibrated score compared with `min_score`, in [0, 1].
    pub score: f64,
    /// Inject with the acceptor on: the acceptor's probability that memory
    /// has the answer were this candidate the best one, under the model that
    /// judged the message; the best candidate's decides (compared with that
    /// model's `accept_min`), the others' are shown for comparison.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acceptance: Option<f64>,
    /// Its session, for the candidates the acceptor judged (they were read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// The features the acceptor read ([`crate::recall::evidence::Features`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub features: Option<crate::config::AcceptorFeatures>,
    /// What happened to it.
    pub outcome: CandidateOutcome,
}

/// Longest abstract of a typed fact in `memory_search` and `inject`, in
/// graphemes (the longest an episode abstract may be; the whole fact is
/// read with `GET .../memories/{id}` or `retrieve`).
pub const FACT_ABSTRACT_CHARS: usize = 200;

/// A knowledge hit (a typed fact) of `memory_search` or `inject`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct KnowledgeHit {
    /// Memory id (`retrieve` or `GET .../memories/{id}` reads it whole).
    pub id: MemoryId,
    /// The memory type (`fact`).
    #[serde(rename = "type")]
    pub memory_type: crate::model::typed::MemoryType,
    /// The fact's abstract: its content, clipped to [`FACT_ABSTRACT_CHARS`]
    /// graphemes (with an ellipsis when cut).
    #[serde(rename = "abstract")]
    pub abstract_: String,
    /// Calibrated fused score in [0, 1], comparable with episodes' scores.
    pub score: f64,
    /// When it was observed (`metadata.observed_at`, else when remembered).
    pub when: DateTime<Utc>,
    /// The store it came from: `private`, `team:<id>` or `public`.
    #[schema(value_type = String)]
    #[serde(serialize_with = "crate::model::typed::serialize_label")]
    pub source: Visibility,
}

/// Result of [`Episodic::memory_search_explained`].
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SearchResult {
    /// The hits, best first (what `memory_search` returns).
    pub results: Vec<SearchHit>,
    /// Typed knowledge (facts) matching the query, best first, at most `top_k`.
    pub knowledge: Vec<KnowledgeHit>,
    /// Every candidate with its scores, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<Vec<Candidate>>,
}

/// Result of [`Episodic::record_batch`].
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct BatchReport {
    /// Messages recorded (all of the batch: it is one transaction).
    pub recorded: usize,
    /// The ids of the recorded messages, in the batch's order.
    pub message_ids: Vec<MessageId>,
    /// The distinct sessions written to, in first-seen order.
    pub sessions: Vec<SessionId>,
}

/// Most turns in one [`Episodic::record_batch`] call.
pub const MAX_BATCH_TURNS: usize = 10_000;

/// Result of [`Episodic::inject`].
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct InjectResult {
    /// The "## Memory Context" section to add to the system prompt; empty when nothing qualified.
    pub section: String,
    /// Abstracts injected (0 when trivial or below threshold).
    pub injected: usize,
    /// Best fused score seen (even when below threshold), for tuning `min_score`; 0 when none.
    pub top_score: f64,
    /// The injected episodes.
    pub entries: Vec<SearchHit>,
    /// The injected knowledge (typed facts), competing with episodes for
    /// `max_entries` by score.
    pub knowledge: Vec<KnowledgeHit>,
    /// True when the message was trivial and recall was skipped.
    pub trivial: bool,
    /// The recall query: earlier user turns and the message, as
    /// [`crate::recall::query::build_query`] joins them (empty when trivial).
    pub query: String,
    /// True when the message was read as leaning on the earlier turns, so
    /// they counted fully ([`crate::recall::query::is_dependent`]).
    pub dependent: bool,
    /// Every candidate with its keyword, vector and calibrated scores and
    /// why it was cut, when asked for ([`SearchOptions::explain`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<Vec<Candidate>>,
}

/// One session of a scope's timeline ([`Episodic::timeline`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineEntry {
    /// The session's promotion status, dates and message count.
    pub state: SessionState,
    /// The episode's abstract, once promoted (and not expired).
    #[serde(rename = "abstract")]
    pub abstract_: Option<String>,
}

/// One L1 search result.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct SearchHit {
    /// Episode id (pass to `memory_expand`).
    pub id: EpisodeId,
    /// The session the episode summarises.
    pub session_id: SessionId,
    /// One-line abstract.
    #[serde(rename = "abstract")]
    pub abstract_: String,
    /// Calibrated fused score in [0, 1].
    pub score: f64,
    /// When the session happened (caller's clock, first message).
    pub when: DateTime<Utc>,
    /// L0 only: the sentence of the session that best matches the message,
    /// as `speaker: sentence` (at most [`crate::recall::snippet::SNIPPET_CHARS`]
    /// graphemes after the speaker), when one holds a term of the message
    /// and the abstract does not already say it. Absent from L1 results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
}

/// Result of [`Episodic::memory_expand`].
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Expanded {
    /// The episode with its full summary.
    pub episode: Episode,
    /// The raw session, when asked for.
    pub raw: Option<Vec<Message>>,
}

/// Search options beyond `query` and `top_k` (ablations, tuning).
#[derive(Debug, Clone, Copy)]
pub struct SearchOptions {
    /// Which retrievers run.
    pub retrievers: Retrievers,
    /// Fusion override (`None` = config).
    pub fusion: Option<crate::config::Fusion>,
    /// Drop results below `recall.min_score` (inject does; L1 search does not by default).
    pub apply_threshold: bool,
    /// When the question is asked: relative dates in it ("last Saturday",
    /// "two weeks ago") resolve against this time
    /// ([`crate::recall::dates::resolve_relative`]). `None` = now.
    pub as_of: Option<DateTime<Utc>>,
    /// Return every candidate with its scores and outcome (operators tuning `min_score`).
    pub explain: bool,
    /// Which stores' typed knowledge takes part: the private store
    /// (default) or `all` (private + the user's teams + public). Episodes
    /// are always the caller's own.
    pub visibility: crate::model::typed::ReadVisibility,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            retrievers: Retrievers::Hybrid,
            fusion: None,
            apply_threshold: false,
            as_of: None,
            explain: false,
            visibility: Default::default(),
        }
    }
}

/// The episodic-recall capability: the runtime's stores and, for the
/// knowledge that competes with episodes in recall, the typed memories.
/// Cheap to clone.
#[derive(Clone)]
pub struct Episodic {
    rt: Arc<Runtime>,
    typed: Arc<TypedMemories>,
}

impl Episodic {
    /// The capability over `rt` and `typed`.
    pub fn new(rt: Arc<Runtime>, typed: Arc<TypedMemories>) -> Self {
        Self { rt, typed }
    }

    /// Records one message in the working tier (durable on return; < 1 ms typical).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for empty/whitespace or over-long content, or
    /// a session that was already ended.
    pub async fn record(
        &self,
        scope: &Scope,
        session: &SessionId,
        message: NewMessage,
    ) -> Result<MessageId> {
        message.validate()?;
        self.rt
            .records
            .append_message(scope, session, &message, Utc::now())
            .await
    }

    /// Records many turns at once (back-filling history): the `strata import`
    /// line shape, across sessions of one scope, in one transaction (all
    /// stored or none). Sessions stay open; end them with
    /// [`Episodic::end_session`] to promote them.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the first bad turn by its index (from 0):
    /// an invalid message, a `user_id`/`agent_id` that differs from `scope`,
    /// an empty batch or one over [`MAX_BATCH_TURNS`] turns;
    /// [`Error::Conflict`] when a turn targets a session already ended.
    /// Nothing is stored on error.
    pub async fn record_batch(&self, scope: &Scope, turns: Vec<ImportTurn>) -> Result<BatchReport> {
        if turns.is_empty() || turns.len() > MAX_BATCH_TURNS {
            return Err(Error::InvalidInput(format!(
                "a batch holds 1..={MAX_BATCH_TURNS} turns, got {}",
                turns.len()
            )));
        }
        let mut sessions: Vec<SessionId> = Vec::new();
        let mut seen: std::collections::HashSet<SessionId> = std::collections::HashSet::new();
        let mut items = Vec::with_capacity(turns.len());
        for (i, t) in turns.into_iter().enumerate() {
            for (field, given, want) in [
                ("user_id", &t.user_id, scope.user_id()),
                ("agent_id", &t.agent_id, scope.agent_id()),
            ] {
                if given.as_deref().is_some_and(|g| g != want) {
                    return Err(Error::InvalidInput(format!(
                        "turn {i}: {field} differs from the scope of the request"
                    )));
                }
            }
            let (session, m) = t.into_parts();
            m.validate()
                .map_err(|e| Error::InvalidInput(format!("turn {i}: {e}")))?;
            if seen.insert(session.clone()) {
                sessions.push(session.clone());
            }
            items.push((session, m));
        }
        let message_ids = self
            .rt
            .records
            .append_messages(scope, items, Utc::now())
            .await?;
        Ok(BatchReport {
            recorded: message_ids.len(),
            message_ids,
            sessions,
        })
    }

    /// L1 `memory_expand`: the full summary of an episode, and its raw
    /// session messages when `include_raw`. The episode is named by its
    /// whole id or by a prefix such as the short id the Memory Context shows
    /// ([`EpisodeId::short`]), resolved among the scope's live episodes.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the id is unknown in this scope (ids of other
    /// scopes are indistinguishable from unknown ids); [`Error::InvalidInput`]
    /// when a prefix names two episodes of the scope.
    pub async fn memory_expand(
        &self,
        scope: &Scope,
        id: EpisodeRef,
        include_raw: bool,
    ) -> Result<Expanded> {
        let now = Utc::now();
        let id = match id {
            EpisodeRef::Id(id) => id,
            EpisodeRef::Prefix(p) => {
                // two are enough to tell one from an ambiguous prefix
                let mut ids = self.rt.records.episode_ids_with_prefix(scope, &p, now, 2).await?;
                match ids.len() {
                    1 => ids.remove(0),
                    0 => return Err(Error::NotFound(format!("episode {p}"))),
                    _ => {
                        return Err(Error::InvalidInput(format!(
                            "episode id {p} is ambiguous in this scope: give the whole id (memory_search returns it)"
                        )))
                    }
                }
            }
        };
        let episode = self.rt.records.episode(scope, &id, now).await?;
        let raw = if include_raw {
            Some(
                self.rt
                    .records
                    .messages(scope, &episode.session_id)
                    .await?,
            )
        } else {
            None
        };
        Ok(Expanded { episode, raw })
    }

    /// Ends a session: marks it completed and queues promotion (returns at
    /// once; summarising happens in the background). Ending twice is a no-op.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the session has no recorded message in this scope.
    pub async fn end_session(&self, scope: &Scope, session: &SessionId) -> Result<()> {
        if self
            .rt
            .records
            .complete_session(scope, session, Utc::now())
            .await?
            .is_some()
        {
            self.rt.bus.publish(EventKind::SessionCompleted);
        }
        Ok(())
    }

    /// The messages of a session (the working tier), in the order they were
    /// recorded, whether the session is open or ended; kept until the user
    /// is erased.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the session has no recorded message in this scope.
    pub async fn messages(&self, scope: &Scope, session: &SessionId) -> Result<Vec<Message>> {
        // the store's read is already NotFound for a session this scope never recorded
        self.rt.records.messages(scope, session).await
    }

    /// Session metadata (status, dates, count).
    ///
    /// # Errors
    /// [`Error::NotFound`] when unknown in this scope.
    pub async fn session(&self, scope: &Scope, session: &SessionId) -> Result<Session> {
        self.rt.records.session(scope, session).await
    }

    /// The sessions of a scope, the latest started first, at most `limit`,
    /// each with its promotion status ([`Episodic::session_status`]) and,
    /// once promoted, its episode's abstract (the console's timeline).
    ///
    /// # Errors
    /// Store errors.
    pub async fn timeline(&self, scope: &Scope, limit: usize) -> Result<Vec<TimelineEntry>> {
        let sessions = self.rt.records.sessions(scope, limit).await?;
        // the scope's open jobs once for the page, then one episode read per session
        let jobs = self.rt.records.open_jobs(scope, OPEN_JOBS_READ).await?;
        let mut out = Vec::with_capacity(sessions.len());
        for meta in sessions {
            let episode = self.episode_of(scope, &meta.id).await?;
            let abstract_ = episode.as_ref().map(|e| e.abstract_.clone());
            out.push(TimelineEntry { state: session_state(scope, meta, &jobs, episode.as_ref()), abstract_ });
        }
        Ok(out)
    }

    /// The live episode of a session, if any.
    async fn episode_of(&self, scope: &Scope, session: &SessionId) -> Result<Option<Episode>> {
        match self.rt.records.episode(scope, &EpisodeId::for_session(scope, session), Utc::now()).await {
            Ok(e) => Ok(Some(e)),
            Err(Error::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A session's promotion status: open, completed (promotion queued),
    /// promoted (with the episode id, and whether its vectors are indexed),
    /// failed (the promotion job is parked) or expired (promoted, and the
    /// episode gone since), with the outbox jobs still open for it.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the session is unknown in this scope.
    pub async fn session_status(&self, scope: &Scope, session: &SessionId) -> Result<SessionState> {
        let meta = self.rt.records.session(scope, session).await?;
        let jobs = self.rt.records.open_jobs(scope, OPEN_JOBS_READ).await?;
        let episode = self.episode_of(scope, session).await?;
        Ok(session_state(scope, meta, &jobs, episode.as_ref()))
    }
}

/// Open outbox jobs read per scope for promotion statuses: a scope's open
/// jobs are few (the queue drains in seconds); 1,000 bounds a stuck backlog.
const OPEN_JOBS_READ: usize = 1_000;

/// The promotion status of the session `meta` from the scope's open jobs
/// and the session's live episode (see [`Episodic::session_status`]).
fn session_state(scope: &Scope, meta: Session, open_jobs: &[crate::store::OpenJob], episode: Option<&Episode>) -> SessionState {
    let session = &meta.id;
    let episode_id = EpisodeId::for_session(scope, session);
    let jobs: Vec<SessionJob> = open_jobs
        .iter()
        .filter_map(|j| {
            let kind = match &j.event {
                Event::SessionCompleted { session_id, .. } if session_id == session => SessionJobKind::Promotion,
                Event::EpisodeVectors { episode_id: e, .. } if *e == episode_id => SessionJobKind::Vectors,
                Event::EpisodeCreated { episode_id: e, .. } if *e == episode_id => SessionJobKind::Graph,
                _ => return None,
            };
            Some(SessionJob { id: j.id.0, kind, parked: j.parked, attempts: j.attempts, last_error: j.last_error.clone() })
        })
        .collect();
    let episode = episode.map(|e| e.id.clone());
    let job = |k: SessionJobKind| jobs.iter().find(|j| j.kind == k);
    let status = match (meta.status, &episode, job(SessionJobKind::Promotion)) {
        (SessionStatus::Open, ..) => PromotionStatus::Open,
        (_, _, Some(j)) if j.parked => PromotionStatus::Failed,
        (_, Some(_), _) => PromotionStatus::Promoted,
        (_, None, Some(_)) => PromotionStatus::Completed,
        // ending writes the promotion job in the same transaction: with
        // neither job nor episode, the episode existed and is gone
        (_, None, None) => PromotionStatus::Expired,
    };
    let vectors_indexed = episode.is_some() && job(SessionJobKind::Vectors).is_none();
    SessionState {
        session_id: meta.id,
        status,
        vectors_indexed,
        episode_id: episode,
        message_count: meta.message_count,
        first_message_at: meta.started_at,
        last_message_at: meta.last_message_at,
        jobs,
    }
}
