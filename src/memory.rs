//! [`Memory`]: the facade. It opens the [`Runtime`], wires the capabilities
//! to it, starts the workers, and delegates every call:
//!
//! | calls | capability |
//! |---|---|
//! | `record`, `record_batch`, `end_session`, `session`, `memory_expand` | [`crate::episodic`] |
//! | `inject`, `memory_search` | [`crate::episodic::recall`] |
//! | `remember`, `retrieve`, `get_memory`, `forget_memory`, `share` | [`crate::typed`] |
//! | `knowledge_graph_search`, `graph_merges`, `graph_unmerge`, `graph_stats` | [`crate::graph::search`] and the graph store |
//! | jobs, usage, sizes, `reload`, `reindex`, `check`, `forget_user`, keys | [`crate::admin`], [`crate::keys`] |
//!
//! Architecture Invariant: no logic lives here beyond wiring and
//! delegation; workers and capabilities never import this module
//! (`tests/architecture.rs` checks both).

use chrono::{DateTime, Utc};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::episodic::Episodic;
use crate::error::{Error, Result};
use crate::graph::{GraphCounts, MergeRecord};
use crate::embed::Embedder;
use crate::model::typed::{MemoryId, NewMemory, StoredMemory, Visibility};
use crate::model::*;
use crate::store::{EventKind, ParkedJob, StoreSizes, UsageTotals};
use crate::typed::TypedMemories;
use crate::worker;

// The API's types, where callers have always found them.
pub use crate::admin::{check::CheckReport, erasure::ForgetReport, reindex::ReindexReport};
pub use crate::admin::reload::{ReloadReport, LIVE_RECALL_KEYS};
pub use crate::episodic::context::{render_context, render_section};
pub use crate::episodic::{
    BatchReport, Candidate, CandidateOutcome, Expanded, InjectResult, KnowledgeHit, SearchHit, SearchOptions,
    SearchResult, TimelineEntry, FACT_ABSTRACT_CHARS, MAX_BATCH_TURNS, MAX_TOP_K,
};
pub use crate::graph::search::{GraphSearch, GraphSearchResult, MAX_GRAPH_SEEDS};
pub use crate::model::MAX_QUERY_BYTES;
pub use crate::runtime::Components;
#[doc(hidden)]
pub use crate::runtime::{Runtime, Tunables};
pub use crate::typed::{ForgottenMemory, Remembered, RetrieveRequest, RetrieveResult, Shared};
pub use crate::worker::pruner::PruneReport;

/// The Strata runtime. Cheap to clone; all clones share one set of stores and workers.
///
/// ```no_run
/// # async fn f() -> strata::Result<()> {
/// use strata::{Config, Memory, NewMessage, Scope, SessionId};
/// let memory = Memory::open(Config::default()).await?;
/// let scope = Scope::new("alice", "support-bot")?;
/// let session = SessionId::new("thread-1")?;
/// memory.record(&scope, &session, NewMessage::user("I moved to Portland", chrono::Utc::now())).await?;
/// memory.end_session(&scope, &session).await?;
/// memory.shutdown().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Memory {
    rt: Arc<Runtime>,
    typed: Arc<TypedMemories>,
    episodic: Episodic,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
    stop: Arc<watch::Sender<bool>>,
    scheduler: Arc<tokio::sync::Mutex<Option<tokio_cron_scheduler::JobScheduler>>>,
    /// Background workers run (false with [`Components::no_workers`]).
    workers: bool,
    /// Has erased documents purged from the index files (by a task, or inline without workers).
    purger: Arc<crate::admin::erasure::Purger>,
}

impl Memory {
    /// Opens the embedded stores under `config.data_dir`, loads the local
    /// embedding model, replays pending outbox events and starts the workers.
    ///
    /// # Errors
    /// [`Error::Config`] for an invalid config, [`Error::Embedder`] when the
    /// model folder is missing (the message says how to fetch it), store errors.
    pub async fn open(config: Config) -> Result<Self> {
        Self::open_with(config, Components::default()).await
    }

    /// [`Memory::open`] with some components supplied by the caller.
    ///
    /// # Errors
    /// As [`Memory::open`].
    pub async fn open_with(config: Config, components: Components) -> Result<Self> {
        let no_workers = components.no_workers;
        // a webhook secret that is not set is an error now, not parked deliveries later
        crate::webhook::check_secrets(&config.webhooks)?;
        let (rt, parts) = Runtime::open(config, components, true).await?;
        let typed = TypedMemories::open(&rt, parts);
        let (stop, stop_rx) = watch::channel(false);
        let mut tasks = vec![typed.spawn_flusher(stop_rx.clone())];
        let mut scheduler = None;
        let purger = if no_workers {
            Arc::new(crate::admin::erasure::Purger::inline())
        } else {
            let (purger, task) = crate::admin::erasure::spawn_purger(rt.clone(), typed.clone(), stop_rx.clone());
            tasks.push(task);
            purger
        };
        if !no_workers {
            tasks.extend(worker::start(&rt, &stop_rx));
            if rt.config.pruner.enabled {
                scheduler = Some(worker::pruner::schedule(rt.clone()).await?);
            }
        }
        Ok(Memory {
            episodic: Episodic::new(rt.clone(), typed.clone()),
            rt,
            typed,
            tasks: Arc::new(Mutex::new(tasks)),
            stop: Arc::new(stop),
            scheduler: Arc::new(tokio::sync::Mutex::new(scheduler)),
            workers: !no_workers,
            purger,
        })
    }

    /// The embedder `[embedding]` names ([`crate::embed::load::embedder`]).
    ///
    /// # Errors
    /// As [`crate::embed::load::embedder`].
    pub async fn load_embedder(config: &Config) -> Result<Arc<dyn Embedder>> {
        crate::embed::load::embedder(config).await
    }

    /// Rebuilds every index from the system of record with the embedder now
    /// configured ([`crate::admin::reindex::reindex`]). Run it with no other
    /// process using `data_dir`.
    ///
    /// # Errors
    /// As [`crate::admin::reindex::reindex`].
    pub async fn reindex(config: Config, components: Components) -> Result<ReindexReport> {
        crate::admin::reindex::reindex(config, components).await
    }

    /// The system-prompt paragraph that tells the chatbot about its three
    /// levels of memory and when to call `memory_search`, `memory_expand`
    /// and `knowledge_graph_search` (`prompts/system.md`, or the file of the
    /// same name in `llm.prompts_dir`). Plain text, about 1,300 characters;
    /// append it to the chatbot's system prompt.
    pub fn system_prompt(&self) -> &str {
        self.rt.prompts.system_prompt()
    }

    /// The configuration opened with (see [`Memory::active_config`] for the one in force).
    pub fn config(&self) -> &Config {
        &self.rt.config
    }

    #[doc(hidden)]
    /// The runtime the capabilities and workers share (tools such as `strata eval`, tests).
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.rt
    }

    #[doc(hidden)]
    /// The typed-memory capability (tools and tests).
    pub fn typed(&self) -> &Arc<TypedMemories> {
        &self.typed
    }

    #[doc(hidden)]
    /// The episodic-recall capability.
    pub fn episodic(&self) -> &Episodic {
        &self.episodic
    }

    // --- episodic recall (crate::episodic) ---

    /// Records one message in the working tier ([`Episodic::record`]).
    ///
    /// # Errors
    /// As [`Episodic::record`].
    pub async fn record(&self, scope: &Scope, session: &SessionId, message: NewMessage) -> Result<MessageId> {
        self.episodic.record(scope, session, message).await
    }

    /// Records many turns in one transaction ([`Episodic::record_batch`]).
    ///
    /// # Errors
    /// As [`Episodic::record_batch`].
    pub async fn record_batch(&self, scope: &Scope, turns: Vec<ImportTurn>) -> Result<BatchReport> {
        self.episodic.record_batch(scope, turns).await
    }

    /// L0 auto-injection for one user turn ([`Episodic::inject`]).
    ///
    /// # Errors
    /// As [`Episodic::inject`].
    pub async fn inject(&self, scope: &Scope, session: &SessionId, user_message: &str) -> Result<InjectResult> {
        self.episodic.inject(scope, session, user_message).await
    }

    /// [`Memory::inject`] with retriever/fusion choices ([`Episodic::inject_with`]).
    ///
    /// # Errors
    /// As [`Episodic::inject`].
    pub async fn inject_with(&self, scope: &Scope, session: &SessionId, user_message: &str, opts: SearchOptions) -> Result<InjectResult> {
        self.episodic.inject_with(scope, session, user_message, opts).await
    }

    /// [`Memory::inject_with`] after the given earlier user turns instead of
    /// the session's ([`Episodic::inject_after`]); records nothing.
    ///
    /// # Errors
    /// As [`Episodic::inject`].
    pub async fn inject_after(&self, scope: &Scope, previous: Vec<String>, user_message: &str, opts: SearchOptions) -> Result<InjectResult> {
        self.episodic.inject_after(scope, previous, user_message, opts).await
    }

    /// A scope's sessions with their status and abstracts ([`Episodic::timeline`]).
    ///
    /// # Errors
    /// Store errors.
    pub async fn timeline(&self, scope: &Scope, limit: usize) -> Result<Vec<crate::episodic::TimelineEntry>> {
        self.episodic.timeline(scope, limit).await
    }

    /// The scopes whose user or agent id contains `search` and that hold
    /// recorded sessions ([`crate::store::RecordStore::scopes`]) or private
    /// typed memories ([`crate::store::TypedStore::memory_scopes`]; such a
    /// scope has 0 sessions and its latest memory update as
    /// `last_message_at`), most recently active first, at most `limit`
    /// (operators only: it crosses scopes).
    ///
    /// # Errors
    /// Store errors.
    pub async fn scopes(&self, search: &str, limit: usize) -> Result<Vec<crate::model::ScopeActivity>> {
        let mut out = self.runtime().records.scopes(search, limit).await?;
        let known: std::collections::HashSet<Scope> = out.iter().map(|a| a.scope.clone()).collect();
        for (scope, _, last) in self.typed.records().memory_scopes(search, limit).await? {
            if !known.contains(&scope) {
                out.push(crate::model::ScopeActivity { scope, sessions: 0, open_sessions: 0, episodes: 0, last_message_at: last });
            }
        }
        out.sort_by(|a, b| b.last_message_at.cmp(&a.last_message_at).then_with(|| a.scope.cmp(&b.scope)));
        out.truncate(limit);
        Ok(out)
    }

    /// L1 `memory_search` ([`Episodic::memory_search`]).
    ///
    /// # Errors
    /// As [`Episodic::memory_search`].
    pub async fn memory_search(&self, scope: &Scope, query: &str, top_k: usize) -> Result<Vec<SearchHit>> {
        self.episodic.memory_search(scope, query, top_k).await
    }

    /// [`Memory::memory_search`] with ablation options ([`Episodic::memory_search_with`]).
    ///
    /// # Errors
    /// As [`Episodic::memory_search`].
    pub async fn memory_search_with(&self, scope: &Scope, query: &str, top_k: usize, opts: SearchOptions) -> Result<Vec<SearchHit>> {
        self.episodic.memory_search_with(scope, query, top_k, opts).await
    }

    /// [`Memory::memory_search`] with knowledge and every candidate's scores
    /// ([`Episodic::memory_search_explained`]).
    ///
    /// # Errors
    /// As [`Episodic::memory_search`].
    pub async fn memory_search_explained(&self, scope: &Scope, query: &str, top_k: usize, opts: SearchOptions) -> Result<SearchResult> {
        self.episodic.memory_search_explained(scope, query, top_k, opts).await
    }

    /// L1 `memory_expand` ([`Episodic::memory_expand`]).
    ///
    /// # Errors
    /// As [`Episodic::memory_expand`].
    pub async fn memory_expand(&self, scope: &Scope, id: impl Into<EpisodeRef>, include_raw: bool) -> Result<Expanded> {
        self.episodic.memory_expand(scope, id.into(), include_raw).await
    }

    /// Ends a session and queues its promotion ([`Episodic::end_session`]).
    ///
    /// # Errors
    /// As [`Episodic::end_session`].
    pub async fn end_session(&self, scope: &Scope, session: &SessionId) -> Result<()> {
        self.episodic.end_session(scope, session).await
    }

    /// Session metadata ([`Episodic::session`]).
    ///
    /// # Errors
    /// As [`Episodic::session`].
    pub async fn session(&self, scope: &Scope, session: &SessionId) -> Result<Session> {
        self.episodic.session(scope, session).await
    }

    /// A session's promotion status ([`Episodic::session_status`]).
    ///
    /// # Errors
    /// As [`Episodic::session_status`].
    pub async fn session_status(&self, scope: &Scope, session: &SessionId) -> Result<crate::model::SessionState> {
        self.episodic.session_status(scope, session).await
    }

    /// A session's messages in recorded order ([`Episodic::messages`]).
    ///
    /// # Errors
    /// As [`Episodic::messages`].
    pub async fn session_messages(&self, scope: &Scope, session: &SessionId) -> Result<Vec<Message>> {
        self.episodic.messages(scope, session).await
    }

    // --- typed memories (crate::typed) ---

    /// Remembers a typed memory by its type's rules ([`TypedMemories::remember`]).
    ///
    /// # Errors
    /// As [`TypedMemories::remember`].
    pub async fn remember(&self, scope: &Scope, memory: NewMemory) -> Result<crate::typed::Remembered> {
        self.typed.remember(scope, memory).await
    }

    /// [`Memory::remember`] for a batch ([`TypedMemories::remember_batch`]).
    ///
    /// # Errors
    /// As [`TypedMemories::remember_batch`].
    pub async fn remember_batch(&self, scope: &Scope, memories: Vec<NewMemory>) -> Result<Vec<crate::typed::Remembered>> {
        self.typed.remember_batch(scope, memories).await
    }

    /// Metadata-first retrieval of typed memories ([`TypedMemories::retrieve`]).
    ///
    /// # Errors
    /// As [`TypedMemories::retrieve`].
    pub async fn retrieve(&self, scope: &Scope, req: &crate::typed::RetrieveRequest) -> Result<crate::typed::RetrieveResult> {
        self.typed.retrieve(scope, req).await
    }

    /// One typed memory by id ([`TypedMemories::get`]).
    ///
    /// # Errors
    /// As [`TypedMemories::get`].
    pub async fn get_memory(&self, scope: &Scope, id: &MemoryId) -> Result<StoredMemory> {
        self.typed.get(scope, id).await
    }

    /// Deletes one typed memory from every store it reached ([`TypedMemories::forget_memory`]).
    ///
    /// # Errors
    /// As [`TypedMemories::forget_memory`].
    pub async fn forget_memory(&self, scope: &Scope, id: &MemoryId) -> Result<crate::typed::ForgottenMemory> {
        self.typed.forget_memory(scope, id).await
    }

    /// Shares a private typed memory with a team or the public tier ([`TypedMemories::share`]).
    ///
    /// # Errors
    /// As [`TypedMemories::share`].
    pub async fn share(&self, scope: &Scope, id: &MemoryId, to: &Visibility) -> Result<crate::typed::Shared> {
        self.typed.share(scope, id, to).await
    }

    // --- the graph (crate::graph::search) ---

    /// L2 `knowledge_graph_search` ([`crate::graph::search::search`]).
    ///
    /// # Errors
    /// As [`crate::graph::search::search`].
    pub async fn knowledge_graph_search(&self, scope: &Scope, req: &GraphSearch) -> Result<GraphSearchResult> {
        crate::graph::search::search(self.rt.graph.as_ref(), &self.rt.config.graph, scope, req).await
    }

    /// The merge log of a scope, newest first (at most `limit`).
    ///
    /// # Errors
    /// Store errors.
    pub async fn graph_merges(&self, scope: &Scope, limit: usize) -> Result<Vec<MergeRecord>> {
        self.rt.graph.merges(scope, limit).await
    }

    /// Undoes a dedup merge: the merged entity, its aliases and its edges come back.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown id (or another scope's), [`Error::InvalidInput`] if already undone.
    pub async fn graph_unmerge(&self, scope: &Scope, merge_id: i64) -> Result<MergeRecord> {
        self.rt.graph.unmerge(scope, merge_id).await
    }

    /// Graph size and dedup decisions (by decision name) of a scope.
    ///
    /// # Errors
    /// Store errors.
    pub async fn graph_stats(&self, scope: &Scope) -> Result<(GraphCounts, std::collections::BTreeMap<String, usize>)> {
        Ok((self.rt.graph.graph_counts(scope).await?, self.rt.records.dedup_stats(scope).await?))
    }

    // --- administration (crate::admin, crate::keys) ---

    /// Parked jobs, oldest first ([`crate::admin::parked_jobs`]).
    ///
    /// # Errors
    /// Store errors.
    pub async fn parked_jobs(&self, limit: usize) -> Result<Vec<ParkedJob>> {
        crate::admin::parked_jobs(&self.rt, limit).await
    }

    /// Re-queues one parked job or all ([`crate::admin::retry_jobs`]).
    ///
    /// # Errors
    /// As [`crate::admin::retry_jobs`].
    pub async fn retry_jobs(&self, id: Option<EventId>) -> Result<usize> {
        crate::admin::retry_jobs(&self.rt, id).await
    }

    /// LLM cost totals of a scope or of the store ([`crate::admin::llm_usage`]).
    ///
    /// # Errors
    /// Store errors.
    pub async fn llm_usage(&self, scope: Option<&Scope>) -> Result<UsageTotals> {
        crate::admin::llm_usage(&self.rt, scope).await
    }

    /// Row counts of every store ([`crate::admin::store_sizes`]).
    ///
    /// # Errors
    /// Store errors.
    pub async fn store_sizes(&self) -> Result<(StoreSizes, GraphCounts)> {
        crate::admin::store_sizes(&self.rt).await
    }

    /// Jobs waiting per worker ([`crate::admin::queue_depths`]).
    ///
    /// # Errors
    /// Store errors.
    pub async fn queue_depths(&self) -> Result<Vec<(&'static str, usize)>> {
        crate::admin::queue_depths(&self.rt).await
    }

    /// Applies a re-read configuration ([`crate::admin::reload::reload`]).
    ///
    /// # Errors
    /// As [`crate::admin::reload::reload`].
    pub fn reload(&self, new: &Config) -> Result<ReloadReport> {
        crate::admin::reload::reload(&self.rt, new)
    }

    /// The configuration in force: the one opened with, with the recall
    /// tunables as last [`Memory::reload`]ed.
    pub fn active_config(&self) -> Config {
        self.rt.active_config()
    }

    /// Compares the indexes and the graph with the system of record and, with
    /// `repair`, fixes what disagrees ([`crate::admin::check::check`]).
    ///
    /// # Errors
    /// Store, index and embedder errors.
    pub async fn check(&self, repair: bool) -> Result<crate::admin::check::CheckReport> {
        crate::admin::check::check(&self.rt, &self.typed, repair).await
    }

    /// Erases a user from every store ([`crate::admin::erasure::erase`]): gone
    /// from every read when this returns, the index files rewritten just after.
    ///
    /// # Errors
    /// As [`crate::admin::erasure::forget_user`].
    pub async fn forget_user(&self, user_id: &str) -> Result<ForgetReport> {
        crate::admin::erasure::erase(&self.rt, &self.typed, &self.purger, user_id).await
    }

    /// Creates an API key; returns the record and the secret, which is not
    /// stored and cannot be shown again ([`crate::keys::create`]).
    ///
    /// # Errors
    /// As [`crate::keys::create`].
    pub async fn create_api_key(&self, grant: KeyGrant, label: &str) -> Result<(ApiKey, String)> {
        crate::keys::create(self.rt.records.as_ref(), grant, label).await
    }

    /// The live key a bearer secret belongs to ([`crate::keys::authenticate`]).
    ///
    /// # Errors
    /// [`Error::Unauthenticated`] for an unknown, malformed or revoked secret.
    pub async fn authenticate(&self, secret: &str) -> Result<ApiKey> {
        crate::keys::authenticate(self.rt.records.as_ref(), secret).await
    }

    /// True once any API key was ever created (then every request needs one).
    ///
    /// # Errors
    /// Store errors.
    pub async fn api_keys_created(&self) -> Result<bool> {
        self.rt.records.api_keys_created().await
    }

    // --- workers and lifecycle ---

    /// Removes expired episodes from every index now (the cron job does the same).
    ///
    /// # Errors
    /// Store errors.
    pub async fn prune(&self) -> Result<worker::pruner::PruneReport> {
        worker::pruner::prune(&self.rt, Utc::now()).await
    }

    /// Prune as if the time were `now` (tests, what-if).
    ///
    /// # Errors
    /// Store errors.
    pub async fn prune_at(&self, now: DateTime<Utc>) -> Result<worker::pruner::PruneReport> {
        worker::pruner::prune(&self.rt, now).await
    }

    /// Ends sessions idle at `now` (the idle sweeper does this periodically).
    ///
    /// # Errors
    /// Store errors.
    pub async fn sweep_idle_at(&self, now: DateTime<Utc>) -> Result<usize> {
        worker::idle::sweep(&self.rt, now).await
    }

    /// Runs promotion inline until no event is pending ([`worker::run_pending`]).
    ///
    /// # Errors
    /// Store errors.
    pub async fn run_pending(&self) -> Result<usize> {
        worker::run_pending(&self.rt).await
    }

    /// Waits until every queued job (promotion, deferred embeddings,
    /// extraction, dedup) is done or parked.
    ///
    /// # Errors
    /// Store errors.
    pub async fn wait_idle(&self) -> Result<()> {
        worker::wait_for(&self.rt, &worker::kinds(&self.rt.config)).await
    }

    /// Waits until every queued promotion is done or parked: each ended
    /// session has its episode, abstract and keyword document. With
    /// `episodes.defer_vectors` its vector units may still be queued
    /// ([`Memory::wait_idle`] waits for those too).
    ///
    /// # Errors
    /// Store errors.
    pub async fn wait_promoted(&self) -> Result<()> {
        worker::wait_for(&self.rt, &[EventKind::SessionCompleted]).await
    }

    /// Readiness: the stores answer and every background worker is running.
    ///
    /// # Errors
    /// [`Error::Shutdown`] once shutdown began; [`Error::Task`] when a worker
    /// stopped; store errors.
    pub async fn ready(&self) -> Result<()> {
        if *self.stop.borrow() {
            return Err(Error::Shutdown);
        }
        let stopped = self
            .tasks
            .lock()
            .map(|t| t.iter().any(|h| h.is_finished()))
            .unwrap_or(true);
        if stopped {
            return Err(Error::Task("a background worker has stopped".into()));
        }
        self.rt.records.meta_get("ready.probe").await?;
        Ok(())
    }

    /// Stops the pruner schedule and the workers after they process the
    /// queued jobs that can run now (promotion, then extraction, then dedup)
    /// for up to `workers.shutdown_grace_ms`; jobs left, or waiting out a
    /// retry backoff, stay in the outbox for the next open, so neither a
    /// failing endpoint nor a long queue holds up a shutdown.
    ///
    /// # Errors
    /// Store errors; [`Error::Task`] when a worker panicked.
    pub async fn shutdown(&self) -> Result<()> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(self.rt.config.workers.shutdown_grace_ms);
        let _ = self.stop.send(true);
        if let Some(mut s) = self.scheduler.lock().await.take() {
            let _ = s.shutdown().await;
        }
        let tasks: Vec<JoinHandle<()>> = std::mem::take(&mut *self.tasks.lock().expect("tasks mutex"));
        for t in tasks {
            t.await?;
        }
        self.typed.flush_recalls().await?;
        if self.workers {
            // a downstream worker may have stopped before its upstream one wrote the
            // last events (an episode for extraction, an entity for dedup): one inline
            // pass takes what is processable now, within the grace; events in backoff
            // or past it stay for the next open
            crate::worker::run_pending_until(&self.rt, Some(deadline)).await?;
        }
        Ok(())
    }
}
