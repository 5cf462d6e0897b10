//! `strata demo`: replays `examples/demo_conversation.json` the way a
//! chatbot backend uses Strata — `inject` then `record` on every user turn,
//! `record` for the assistant's reply, `end_session` after each session —
//! and prints each non-empty Memory Context and a few `memory_search` answers.
//! It runs in a fresh temporary data directory (printed, removed at the end),
//! so it can be re-run; with `--data-dir DIR` it writes into DIR instead and
//! keeps the data, so `strata --data-dir DIR search ...` can look at it (DIR
//! must not hold the demo's sessions already).

use chrono::{DateTime, Utc};
use serde::Deserialize;
use std::path::Path;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::model::{NewMessage, Role, Scope, SessionId};
use crate::Memory;

#[derive(Deserialize)]
struct DemoFile {
    user_id: String,
    agent_id: String,
    sessions: Vec<DemoSession>,
    queries: Vec<String>,
    /// Questions for `knowledge_graph_search` (L2), shown after the L1 searches.
    #[serde(default)]
    graph_queries: Vec<String>,
}

#[derive(Deserialize)]
struct DemoSession {
    session_id: String,
    messages: Vec<DemoMessage>,
}

#[derive(Deserialize)]
struct DemoMessage {
    role: Role,
    /// Speaker name (optional; a named user lets the graph link "I" and "my sister" to them).
    #[serde(default)]
    name: Option<String>,
    content: String,
    timestamp: DateTime<Utc>,
}

/// The example conversation, built in: `strata demo` without `--file` runs
/// it from any directory.
const BUILT_IN: &str = include_str!("../../examples/demo_conversation.json");

/// Runs the demo (`file`, else [`BUILT_IN`]): in a temporary data directory, or in `config.data_dir`
/// when `keep` (the user gave `--data-dir`).
///
/// # Errors
/// [`Error::Data`] for an unreadable or malformed file;
/// [`Error::InvalidInput`] when the kept data directory already holds one of
/// the demo's sessions.
pub async fn run(mut config: Config, file: Option<&Path>, json: bool, keep: bool) -> Result<()> {
    let (text, name) = match file {
        Some(f) => (
            std::fs::read_to_string(f).map_err(|e| Error::Data(format!("cannot read {}: {e}", f.display())))?,
            f.display().to_string(),
        ),
        None => (BUILT_IN.to_string(), "the built-in examples/demo_conversation.json".to_string()),
    };
    let demo: DemoFile = serde_json::from_str(&text).map_err(|e| Error::Data(format!("{name}: {e}")))?;
    let temp = if keep {
        None
    } else {
        Some(tempfile::Builder::new().prefix("strata-demo-").tempdir()?)
    };
    if let Some(t) = &temp {
        config.data_dir = t.path().to_path_buf();
    }
    let data_dir = config.data_dir.clone();
    let mem = Memory::open(config).await?;
    let scope = Scope::new(demo.user_id, demo.agent_id)?;
    for s in &demo.sessions {
        if mem
            .session(&scope, &SessionId::new(s.session_id.clone())?)
            .await
            .is_ok()
        {
            mem.shutdown().await?;
            return Err(Error::InvalidInput(format!(
                "{} already holds the demo's session {} of {scope}; give an empty --data-dir (or none, for a temporary one)",
                data_dir.display(),
                s.session_id
            )));
        }
    }
    let mut out = serde_json::Map::new();
    let mut injections = Vec::new();
    if !json {
        println!(
            "Strata demo: {} sessions for {scope} (data in {})\n",
            demo.sessions.len(),
            data_dir.display()
        );
    }
    for s in &demo.sessions {
        let sid = SessionId::new(s.session_id.clone())?;
        if !json {
            println!(
                "=== session {sid} ({}) ===",
                s.messages
                    .first()
                    .map(|m| m.timestamp.format("%Y-%m-%d").to_string())
                    .unwrap_or_default()
            );
        }
        for m in &s.messages {
            if m.role == Role::User {
                let r = mem.inject(&scope, &sid, &m.content).await?;
                if !json {
                    println!("user: {}", m.content);
                    if r.trivial {
                        println!("  (trivial: no recall)");
                    } else if r.injected > 0 {
                        println!("{}", indent(&r.section));
                    } else {
                        println!(
                            "  (no memory above threshold; top score {:.2})",
                            r.top_score
                        );
                    }
                }
                injections.push(serde_json::json!({"session": sid, "message": m.content, "injected": r.injected, "top_score": r.top_score, "section": r.section}));
            }
            let msg = NewMessage {
                role: m.role,
                name: m.name.clone(),
                content: m.content.clone(),
                timestamp: m.timestamp,
                idempotency_key: None,
            };
            mem.record(&scope, &sid, msg).await?;
        }
        mem.end_session(&scope, &sid).await?;
        // let promotion finish before the next session so its memories can be recalled
        mem.wait_idle().await?;
        if !json {
            match mem
                .memory_expand(
                    &scope,
                    &crate::model::EpisodeId::for_session(&scope, &sid),
                    false,
                )
                .await
            {
                Ok(ex) => println!(
                    "  -> episode ({} summary): {}",
                    ex.episode.summary_kind.as_str(),
                    ex.episode.summary.replace('\n', " ")
                ),
                Err(_) => println!("  -> not promoted (see `strata jobs list`)"),
            }
            println!();
        }
    }
    let mut answers = Vec::new();
    if !json {
        println!("=== memory_search ===");
    }
    for q in &demo.queries {
        let hits = mem.memory_search(&scope, q, 3).await?;
        if !json {
            println!("? {q}");
            for h in &hits {
                println!(
                    "  {:.2} [{}] {}",
                    h.score,
                    h.when.format("%Y-%m-%d"),
                    h.abstract_
                );
            }
        }
        answers.push(serde_json::json!({"query": q, "hits": hits}));
    }
    if let Some(top) = answers
        .first()
        .and_then(|a| a["hits"][0]["id"].as_str().map(str::to_string))
    {
        let ex = mem
            .memory_expand(&scope, &crate::model::EpisodeId::parse(&top)?, false)
            .await?;
        if !json {
            println!("\n=== memory_expand {top} ===\n{}", ex.episode.summary);
        }
        out.insert("expanded".into(), serde_json::to_value(&ex)?);
    }
    let mut graph = Vec::new();
    for q in &demo.graph_queries {
        let req = crate::memory::GraphSearch {
            query: Some(q.clone()),
            hops: 1,
            ..Default::default()
        };
        let r = mem.knowledge_graph_search(&scope, &req).await?;
        if !json {
            println!("\n=== knowledge_graph_search {q:?} ===");
            let name = |id: &crate::graph::EntityId| {
                r.subgraph
                    .entities
                    .iter()
                    .find(|e| &e.id == id)
                    .map(|e| e.name.as_str())
                    .unwrap_or("?")
            };
            for rel in r
                .subgraph
                .relations
                .iter()
                .take(8)
            {
                let since = rel
                    .valid_from
                    .map(|t| t.format("%Y-%m-%d").to_string())
                    .unwrap_or_default();
                println!(
                    "  {} -[{}]-> {} (since {since})",
                    name(&rel.source),
                    rel.predicate,
                    name(&rel.target)
                );
            }
            if r.subgraph.entities.is_empty() {
                println!("  (no entity found)");
            }
        }
        graph.push(serde_json::json!({"query": q, "result": r}));
    }
    let usage = mem.llm_usage(Some(&scope)).await?;
    let parked = mem.parked_jobs(100).await?;
    if !json {
        println!(
            "\n=== cost ===\nsummariser {}: {} LLM calls ({} failed), {} input + {} output tokens for {} sessions; {} parked jobs",
            mem.runtime().summarizer.id(),
            usage.calls,
            usage.failed_calls,
            usage.input_tokens,
            usage.output_tokens,
            demo.sessions.len(),
            parked.len()
        );
        for p in &parked {
            println!(
                "  parked job {} after {} attempts: {}",
                p.id, p.attempts, p.last_error
            );
        }
    }
    mem.shutdown().await?;
    if json {
        out.insert("llm_usage".into(), serde_json::to_value(usage)?);
        out.insert("graph".into(), graph.into());
        out.insert("parked_jobs".into(), serde_json::to_value(&parked)?);
        out.insert("injections".into(), injections.into());
        out.insert("searches".into(), answers.into());
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    Ok(())
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("  | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
