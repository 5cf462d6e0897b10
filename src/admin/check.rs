//! `strata check`: do the derived stores agree with the system of record?
//!
//! The system of record (sessions, messages, episodes, typed memories) is
//! the truth; the keyword index, the vector index, the knowledge indexes
//! and the graph are derived from it. A check reads every index whole
//! ([`crate::store::KeywordIndex::ids`], [`crate::store::VectorIndex::ids`])
//! and compares it with the records:
//!
//! - **missing**: a live episode (or indexed fact) the index lacks;
//! - **extra**: an index entry whose episode or memory is gone (erased,
//!   pruned, or written by a crash between two stores);
//! - **stale**: an index entry for an episode that expired but is still
//!   held (the pruner has not run yet);
//! - graph **extra**: a user with entities or relations but no episode
//!   and no typed memory left to have produced them (an erasure cut short).
//!
//! Episodes whose vectors wait in the outbox (`episodes.defer_vectors`) are
//! counted in [`CheckReport::pending_vectors`], not as missing. Repair
//! rebuilds what is missing from the records (the same code as promotion
//! and `strata reindex`), deletes what is extra, prunes what is stale and
//! erases orphaned graph users, then checks again: the report's problems
//! are those that remain. The team and public tiers are not checked (their
//! copies are rebuilt by `strata reindex`).

use chrono::Utc;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};

use crate::error::Result;
use crate::runtime::Runtime;
use crate::typed::TypedMemories;
use crate::model::typed::MemoryId;
use crate::model::{Episode, EpisodeId, Scope};
use crate::store::{Event, EventKind};

/// Episodes per page read from the system of record.
const PAGE: usize = 1000;
/// Outbox rows read to find deferred vector jobs (more than any backlog a
/// node builds: one row per episode awaiting its embeddings).
const MAX_PENDING_SCAN: usize = 1_000_000;

/// What each store holds (the `counts` object of `strata check --json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CheckCounts {
    /// Sessions, open and completed.
    pub sessions: u64,
    /// Recorded messages.
    pub messages: u64,
    /// Episodes in the system of record (expired ones until pruned).
    pub episodes: u64,
    /// Documents in the episodic keyword index.
    pub keyword_documents: usize,
    /// Episodes with at least one point in the vector index.
    pub vector_documents: usize,
    /// Points in the vector index (summary and turn units).
    pub vector_points: usize,
    /// Live entities in the graph.
    pub entities: usize,
    /// Relations in the graph (valid and invalidated).
    pub relations: usize,
    /// Typed memories of the private scopes.
    pub typed_memories: usize,
    /// Indexed facts in the system of record.
    pub knowledge: usize,
    /// Documents in the knowledge keyword index.
    pub knowledge_keyword_documents: usize,
    /// Facts with a point in the knowledge vector index.
    pub knowledge_vector_documents: usize,
}

/// The derived store a problem was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckedStore {
    /// The episodic BM25 index.
    Keyword,
    /// The episodic vector index.
    Vectors,
    /// The BM25 index of typed knowledge.
    KnowledgeKeyword,
    /// The vector index of typed knowledge.
    KnowledgeVectors,
    /// The entity/relation graph.
    Graph,
}

/// How a derived store disagrees with the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// In the records, not in the store.
    Missing,
    /// In the store, not in the records.
    Extra,
    /// In the store for an expired episode.
    Stale,
}

/// One disagreement.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Problem {
    /// Where.
    pub store: CheckedStore,
    /// What.
    pub kind: ProblemKind,
    /// The owner.
    pub user_id: String,
    /// The owner's agent (empty for a graph problem, which is per user).
    pub agent_id: String,
    /// The episode or memory id (empty for a graph problem).
    pub id: String,
}

/// Result of [`check`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct CheckReport {
    /// What each store holds (after repair, when repairing).
    pub counts: CheckCounts,
    /// Every disagreement found (after repair: those that remain).
    pub problems: Vec<Problem>,
    /// Episodes whose vectors wait in the outbox: not yet indexed, not lost.
    pub pending_vectors: usize,
    /// Problems a repair fixed (0 without `repair`).
    pub repaired: usize,
}

impl CheckReport {
    /// True when the stores agree.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Compares every derived store with the system of record; with `repair`,
/// fixes what disagrees and checks again. Run it on a quiet node (`strata
/// check` opens the stores without workers): an episode promoted during the
/// scan can show as missing from an index it is being written to.
///
/// # Errors
/// Store and index errors; the embedder's when repairing.
pub async fn check(shared: &Runtime, typed: &TypedMemories, repair: bool) -> Result<CheckReport> {
    let found = scan(shared, typed).await?;
    if !repair || found.report.problems.is_empty() {
        return Ok(found.report);
    }
    let before = found.report.problems.len();
    fix(shared, typed, &found).await?;
    let mut after = scan(shared, typed).await?.report;
    after.repaired = before.saturating_sub(after.problems.len());
    Ok(after)
}

/// A scan's report and what a repair needs.
struct Scan {
    report: CheckReport,
    episodes: HashMap<(Scope, EpisodeId), Episode>,
    facts: HashMap<(Scope, MemoryId), String>,
}

fn problem(store: CheckedStore, kind: ProblemKind, scope: &Scope, id: &str) -> Problem {
    Problem {
        store,
        kind,
        user_id: scope.user_id().to_string(),
        agent_id: scope.agent_id().to_string(),
        id: id.to_string(),
    }
}

/// `have` against `want`: missing (want − have, less `excused`) and extra
/// (have − want; stale when in `stale`).
fn diff<K: crate::store::DocKey>(
    store: CheckedStore,
    want: &HashSet<(Scope, K)>,
    have: &HashSet<(Scope, K)>,
    excused: &HashSet<(Scope, K)>,
    stale: &HashSet<(Scope, K)>,
    out: &mut Vec<Problem>,
) {
    for k in want.difference(have).filter(|k| !excused.contains(*k)) {
        out.push(problem(store, ProblemKind::Missing, &k.0, k.1.as_str()));
    }
    for k in have.difference(want) {
        let kind = if stale.contains(k) { ProblemKind::Stale } else { ProblemKind::Extra };
        out.push(problem(store, kind, &k.0, k.1.as_str()));
    }
}

async fn scan(shared: &Runtime, typed: &TypedMemories) -> Result<Scan> {
    let now = Utc::now();
    let sizes = shared.records.store_sizes().await?;
    let graph = shared.graph.total_counts().await?;
    let mut episodes = HashMap::new();
    let mut after = None;
    loop {
        let page = shared.records.all_episodes(after.clone(), PAGE, now).await?;
        let Some(last) = page.last() else { break };
        after = Some(last.1.id.clone());
        for (scope, ep) in page {
            episodes.insert((scope, ep.id.clone()), ep);
        }
    }
    let live: HashSet<(Scope, EpisodeId)> = episodes.keys().cloned().collect();
    let expired: HashSet<(Scope, EpisodeId)> = shared
        .records
        .expired_episodes(now, MAX_PENDING_SCAN)
        .await?
        .into_iter()
        .collect();
    let pending: HashSet<(Scope, EpisodeId)> = shared
        .records
        .pending_events(&[EventKind::EpisodeVectors], MAX_PENDING_SCAN)
        .await?
        .into_iter()
        .filter_map(|e| match e.event {
            Event::EpisodeVectors { scope, episode_id } => Some((scope, episode_id)),
            _ => None,
        })
        .collect();
    let keyword: HashSet<_> = shared.keyword.ids().await?.into_iter().collect();
    let vectors: HashSet<_> = shared.vectors.ids().await?.into_iter().collect();
    let mut vector_points = 0;
    for scope in vectors.iter().map(|k| &k.0).collect::<HashSet<_>>() {
        vector_points += shared.vectors.count(scope).await?;
    }
    let none = HashSet::new();
    let mut problems = Vec::new();
    diff(CheckedStore::Keyword, &live, &keyword, &none, &expired, &mut problems);
    diff(CheckedStore::Vectors, &live, &vectors, &pending, &expired, &mut problems);

    let mut facts = HashMap::new();
    let mut after = 0i64;
    loop {
        let page = typed.records().indexed_knowledge(after, PAGE).await?;
        let Some(last) = page.last() else { break };
        after = last.1;
        for (scope, _, id, content) in page {
            facts.insert((scope, id), content);
        }
    }
    let want: HashSet<(Scope, MemoryId)> = facts.keys().cloned().collect();
    let kk: HashSet<_> = typed.index().keyword.ids().await?.into_iter().collect();
    let kv: HashSet<_> = typed.index().vectors.ids().await?.into_iter().collect();
    let no_facts = HashSet::new();
    diff(CheckedStore::KnowledgeKeyword, &want, &kk, &no_facts, &no_facts, &mut problems);
    diff(CheckedStore::KnowledgeVectors, &want, &kv, &no_facts, &no_facts, &mut problems);

    // graph rows need a source: an episode or a typed memory of their user
    let users: HashSet<String> = shared
        .graph
        .graph_scopes()
        .await?
        .into_iter()
        .map(|s| s.user_id().to_string())
        .collect();
    for user in users {
        if shared.records.user_episodes(&user).await?.is_empty()
            && typed.records().user_memories(&user).await?.is_empty()
        {
            problems.push(Problem {
                store: CheckedStore::Graph,
                kind: ProblemKind::Extra,
                user_id: user,
                agent_id: String::new(),
                id: String::new(),
            });
        }
    }
    problems.sort();
    let counts = CheckCounts {
        sessions: sizes.sessions,
        messages: sizes.messages,
        episodes: sizes.episodes,
        keyword_documents: keyword.len(),
        vector_documents: vectors.len(),
        vector_points,
        entities: graph.entities,
        relations: graph.relations,
        typed_memories: typed.records().total_memories().await?,
        knowledge: facts.len(),
        knowledge_keyword_documents: kk.len(),
        knowledge_vector_documents: kv.len(),
    };
    if !problems.is_empty() {
        tracing::warn!(problems = problems.len(), "stores disagree with the system of record");
    }
    Ok(Scan {
        report: CheckReport {
            counts,
            problems,
            pending_vectors: pending.len(),
            repaired: 0,
        },
        episodes,
        facts,
    })
}

/// Repairs what `found` lists: rebuild missing entries from the records,
/// delete extra ones, prune stale ones, erase orphaned graph users.
async fn fix(shared: &Runtime, typed: &TypedMemories, found: &Scan) -> Result<()> {
    let mut rebuild: Vec<(Scope, Episode)> = Vec::new();
    let mut seen = HashSet::new();
    let mut seen_facts = HashSet::new();
    let mut extra: BTreeMap<(CheckedStore, Scope), Vec<String>> = BTreeMap::new();
    let mut facts: HashMap<Scope, Vec<(MemoryId, String)>> = HashMap::new();
    let mut stale = false;
    for p in &found.report.problems {
        if p.store == CheckedStore::Graph {
            let n = shared.graph.delete_user_graph(&p.user_id).await?;
            tracing::info!(user_id = %p.user_id, ?n, "orphaned graph rows erased");
            continue;
        }
        let scope = Scope::new(p.user_id.clone(), p.agent_id.clone())?;
        match (p.kind, p.store) {
            (ProblemKind::Stale, _) => stale = true,
            (ProblemKind::Extra, s) => extra.entry((s, scope)).or_default().push(p.id.clone()),
            (ProblemKind::Missing, CheckedStore::Keyword | CheckedStore::Vectors) => {
                let key = (scope, EpisodeId::parse(&p.id)?);
                if let (Some(ep), true) = (found.episodes.get(&key), seen.insert(key.clone())) {
                    rebuild.push((key.0, ep.clone()));
                }
            }
            (ProblemKind::Missing, _) => {
                let key = (scope, MemoryId::parse(&p.id)?);
                if let (Some(c), true) = (found.facts.get(&key), seen_facts.insert(key.clone())) {
                    facts.entry(key.0).or_default().push((key.1, c.clone()));
                }
            }
        }
    }
    for chunk in rebuild.chunks(shared.config.workers.batch_size.max(1)) {
        crate::worker::episodic::reindex_batch(shared, chunk).await?;
    }
    for (scope, items) in &facts {
        typed.index().add(scope, items, shared.embedder.as_ref()).await?;
    }
    let mut keyword_deleted = false;
    for ((store, scope), ids) in &extra {
        match store {
            CheckedStore::Keyword => {
                let ids = ids.iter().map(|i| EpisodeId::parse(i)).collect::<Result<Vec<_>>>()?;
                shared.keyword.delete(scope, &ids).await?;
                keyword_deleted = true;
            }
            CheckedStore::Vectors => {
                let ids = ids.iter().map(|i| EpisodeId::parse(i)).collect::<Result<Vec<_>>>()?;
                shared.vectors.delete(scope, &ids).await?;
            }
            CheckedStore::KnowledgeKeyword => {
                let ids = ids.iter().map(|i| MemoryId::parse(i)).collect::<Result<Vec<_>>>()?;
                typed.index().keyword.delete(scope, &ids).await?;
            }
            CheckedStore::KnowledgeVectors => {
                let ids = ids.iter().map(|i| MemoryId::parse(i)).collect::<Result<Vec<_>>>()?;
                typed.index().vectors.delete(scope, &ids).await?;
            }
            CheckedStore::Graph => {}
        }
    }
    if keyword_deleted {
        // deleted documents leave the disk too (they may be an erased user's)
        shared.keyword.compact().await?;
    }
    if stale {
        crate::worker::pruner::prune(shared, Utc::now()).await?;
    }
    tracing::info!(rebuilt = rebuild.len(), "check repaired the indexes");
    Ok(())
}
