//! The operator's commands: `strata forget`, `jobs`, `usage`, `check`, `backup`, `restore`,
//! `reindex` and `prune`.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{open_for_reads, print_json};
use crate::config::Config;
use crate::error::Result;
use crate::memory::Components;
use crate::model::{EventId, Scope};
use crate::store::Event;
use crate::Memory;

/// `strata forget`: erases a user everywhere.
pub(super) async fn forget(config: Config, user: String, json: bool) -> Result<ExitCode> {
    let mem = open_for_reads(config).await?;
    let r = mem.forget_user(&user).await;
    mem.shutdown().await?;
    let r = r?;
    if json {
        print_json(&r)?;
    } else {
        println!(
            "erased user {user:?}: {} scopes, {} keyword documents, {} vector points",
            r.scopes, r.keyword_docs, r.vector_points
        );
        for (table, n) in r.records.rows.iter().chain(r.graph.rows.iter()) {
            println!("  {table}: {n} rows");
        }
        let sh = &r.shared;
        println!(
            "  shared stores: {} memories removed, {} federated entities rewritten ({} keyword documents, {} vector points)",
            sh.memories, sh.rewritten, sh.keyword_docs, sh.vector_points
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `strata jobs list`: the parked jobs.
pub(super) async fn jobs_list(config: Config, limit: usize, json: bool) -> Result<ExitCode> {
    let mem = open_for_reads(config).await?;
    let jobs = mem.parked_jobs(limit).await;
    mem.shutdown().await?;
    let jobs = jobs?;
    if json {
        print_json(&jobs)?;
    } else if jobs.is_empty() {
        println!("no parked jobs");
    } else {
        println!(
            "{:>6}  {:<18}  {:<24}  {:>8}  {:<20}  last error",
            "id", "kind", "user/agent/session", "attempts", "parked at"
        );
        for j in jobs {
            let kind = j.event.kind().as_str();
            let scope = j.event.scope();
            let item = match &j.event {
                Event::SessionCompleted { session_id, .. } => session_id.to_string(),
                Event::EpisodeCreated { episode_id, .. }
                | Event::EpisodeVectors { episode_id, .. } => episode_id.to_string(),
                Event::EntityUpserted { entity_id, .. } => entity_id.to_string(),
                Event::WebhookDelivery { url, webhook, .. } => format!("{} → {url}", webhook.event_type),
            };
            let target = format!("{}/{}/{item}", scope.user_id(), scope.agent_id());
            let parked = j
                .parked_at
                .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
                .unwrap_or_default();
            println!(
                "{:>6}  {kind:<18}  {target:<24}  {:>8}  {parked:<20}  {}",
                j.id.0, j.attempts, j.last_error
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `strata jobs retry`: re-queues parked jobs and runs them; exit 2 when some park again.
pub(super) async fn jobs_retry(config: Config, id: Option<i64>) -> Result<ExitCode> {
    let mem = Memory::open(config).await?;
    // only the jobs retried now count as "parked again"
    let retried: Vec<i64> = match id {
        Some(i) => vec![i],
        None => mem
            .parked_jobs(100_000)
            .await?
            .iter()
            .map(|j| j.id.0)
            .collect(),
    };
    let r = mem.retry_jobs(id.map(EventId)).await;
    let outcome = match r {
        Ok(n) => {
            println!("re-queued {n} job(s); running them now");
            let waited = mem.wait_idle().await;
            let still = mem
                .parked_jobs(100_000)
                .await
                .map(|j| j.iter().filter(|j| retried.contains(&j.id.0)).count())
                .unwrap_or(0);
            waited.map(|_| still)
        }
        Err(e) => Err(e),
    };
    mem.shutdown().await?;
    let still = outcome?;
    if still > 0 {
        println!("{still} job(s) parked again; see `strata jobs list`");
        return Ok(ExitCode::from(2));
    }
    println!("all re-queued jobs done");
    Ok(ExitCode::SUCCESS)
}

/// `strata usage`: LLM calls and tokens, per session.
pub(super) async fn usage(config: Config, user: Option<String>, agent: Option<String>, json: bool) -> Result<ExitCode> {
    let scope = match (user, agent) {
        (Some(u), Some(a)) => Some(Scope::new(u, a)?),
        _ => None,
    };
    let mem = open_for_reads(config).await?;
    let u = mem.llm_usage(scope.as_ref()).await;
    mem.shutdown().await?;
    let u = u?;
    if json {
        print_json(&u)?;
    } else {
        let per = |x: u64| {
            if u.sessions == 0 {
                0.0
            } else {
                x as f64 / u.sessions as f64
            }
        };
        println!(
            "{} LLM calls ({} failed) for {} sessions: {:.2} calls/session, {:.0} input + {:.0} output tokens/session ({} + {} in all)",
            u.calls, u.failed_calls, u.sessions, per(u.calls), per(u.input_tokens), per(u.output_tokens), u.input_tokens, u.output_tokens
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `strata check`: the derived stores against the system of record; exit 1 while a problem remains.
pub(super) async fn check(config: Config, repair: bool, json: bool) -> Result<ExitCode> {
    let mem = open_for_reads(config).await?;
    let r = mem.check(repair).await;
    mem.shutdown().await?;
    let r = r?;
    if json {
        print_json(&r)?;
    } else {
        let c = &r.counts;
        println!(
            "{} sessions, {} messages, {} episodes; keyword {} docs, vectors {} episodes ({} points); {} entities, {} relations; {} typed memories ({} indexed facts: keyword {}, vectors {})",
            c.sessions, c.messages, c.episodes, c.keyword_documents, c.vector_documents, c.vector_points,
            c.entities, c.relations, c.typed_memories, c.knowledge, c.knowledge_keyword_documents, c.knowledge_vector_documents
        );
        if r.pending_vectors > 0 {
            println!("{} episodes wait for their vectors in the outbox (not a problem)", r.pending_vectors);
        }
        for p in &r.problems {
            println!("{:?} {:?}: {}/{} {}", p.store, p.kind, p.user_id, p.agent_id, p.id);
        }
        if repair {
            println!("repaired {}", r.repaired);
        }
        println!("{}", if r.ok() { "ok" } else { "problems remain" });
    }
    Ok(if r.ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `strata backup`: copies the SQLite files into `dir`.
pub(super) async fn backup(config: Config, dir: PathBuf, json: bool) -> Result<ExitCode> {
    let m = crate::admin::backup::backup(&config, &dir).await?;
    if json {
        print_json(&m)?;
    } else {
        let bytes: u64 = m.files.iter().map(|f| f.bytes).sum();
        println!("backed up {} SQLite files ({bytes} bytes, schema {}) into {}", m.files.len(), m.schema_version, dir.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `strata restore`: restores a backup and reindexes.
pub(super) async fn restore(config: Config, dir: PathBuf, json: bool) -> Result<ExitCode> {
    let r = crate::admin::backup::restore(config, &dir).await?;
    if json {
        print_json(&r)?;
    } else {
        println!(
            "restored the backup of {} ({} files, written by Strata {}); reindexed {} episodes and {} typed memories in {:.1}s",
            r.manifest.created_at, r.manifest.files.len(), r.manifest.strata, r.reindex.episodes, r.reindex.memories, r.reindex.seconds
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `strata reindex`: rebuilds the indexes with the embedder now configured.
pub(super) async fn reindex(config: Config, json: bool) -> Result<ExitCode> {
    let r = Memory::reindex(config, Components::default()).await?;
    if json {
        print_json(&r)?;
    } else {
        println!(
            "reindexed {} episodes ({} vector points) and {} typed memories with {} in {:.1}s",
            r.episodes, r.vector_points, r.memories, r.embedder, r.seconds
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `strata prune`: removes expired episodes now.
pub(super) async fn prune(config: Config, json: bool) -> Result<ExitCode> {
    let mem = Memory::open(config).await?;
    let r = mem.prune().await;
    mem.shutdown().await?;
    let r = r?;
    if json {
        print_json(&r)?;
    } else {
        println!(
            "removed {} expired episodes in {} scopes",
            r.episodes_removed, r.scopes
        );
    }
    Ok(ExitCode::SUCCESS)
}
