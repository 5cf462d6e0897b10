//! The recall commands: `strata search`, `expand` and `inject`.

use std::process::ExitCode;

use super::{open_for_reads, print_json, typed, ScopeArgs};
use crate::config::Config;
use crate::error::Result;
use crate::model::{EpisodeRef, SessionId};

/// `strata search`: episodes and facts for a query (L1 `memory_search`).
pub(super) async fn search(config: Config, scope: ScopeArgs, query: String, top_k: usize, visibility: typed::Reads, json: bool) -> Result<ExitCode> {
    let scope = scope.scope()?;
    let mem = open_for_reads(config).await?;
    let opts = crate::memory::SearchOptions {
        visibility: visibility.into(),
        ..Default::default()
    };
    let found = mem.memory_search_explained(&scope, &query, top_k, opts).await;
    mem.shutdown().await?;
    let found = found?;
    if json {
        print_json(&found)?;
    } else if found.results.is_empty() && found.knowledge.is_empty() {
        println!("no episodes or facts found");
    } else {
        for h in &found.results {
            println!(
                "{:.3}  {}  [{}]  {}",
                h.score,
                h.id,
                h.when.format("%Y-%m-%d"),
                h.abstract_
            );
        }
        for h in &found.knowledge {
            println!(
                "{:.3}  {}  [{}] ({})  {}",
                h.score,
                h.id,
                h.when.format("%Y-%m-%d"),
                h.source.label(),
                h.abstract_
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `strata expand`: an episode's full summary, with its raw session on `--raw`.
pub(super) async fn expand(config: Config, scope: ScopeArgs, id: String, raw: bool, json: bool) -> Result<ExitCode> {
    let scope = scope.scope()?;
    let id = EpisodeRef::parse(&id)?;
    let mem = open_for_reads(config).await?;
    let ex = mem.memory_expand(&scope, id, raw).await;
    mem.shutdown().await?;
    let ex = ex?;
    if json {
        print_json(&ex)?;
    } else {
        let e = &ex.episode;
        println!(
            "episode {} (session {}, {} to {}, {} summary)",
            e.id,
            e.session_id,
            e.started_at,
            e.ended_at,
            e.summary_kind.as_str()
        );
        println!("abstract: {}\n\n{}", e.abstract_, e.summary);
        if let Some(msgs) = &ex.raw {
            println!("\n--- raw session ({} messages) ---", msgs.len());
            for m in msgs {
                println!(
                    "[{}] {}: {}",
                    m.message.timestamp.format("%Y-%m-%d %H:%M"),
                    m.message.speaker(),
                    m.message.content
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `strata inject`: the Memory Context a message would get (L0).
pub(super) async fn inject(config: Config, scope: ScopeArgs, session: String, message: String, json: bool) -> Result<ExitCode> {
    let scope = scope.scope()?;
    let session = SessionId::new(session)?;
    let mem = open_for_reads(config).await?;
    let r = mem.inject(&scope, &session, &message).await;
    mem.shutdown().await?;
    let r = r?;
    if json {
        print_json(&r)?;
    } else if r.trivial {
        println!("(trivial message: nothing injected)");
    } else if r.injected == 0 {
        println!("(nothing above min_score; top score {:.3})", r.top_score);
    } else {
        print!("{}", r.section);
    }
    Ok(ExitCode::SUCCESS)
}
