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

/// The line `strata inject` prints when nothing went in: which gate kept
/// memory quiet. With the acceptor on, the best candidate's acceptance
/// against its model's `accept_min` (the fused score does not decide);
/// without it, the top score against `min_score`.
fn why_empty(r: &crate::episodic::InjectResult, acceptor: &crate::config::AcceptorConfig, min_score: f64) -> String {
    let judged = r.explain.as_deref().unwrap_or_default().iter().find(|c| c.outcome == crate::episodic::CandidateOutcome::NotAccepted);
    match judged {
        Some(c) if acceptor.enabled => {
            let foreign = c.features.is_some_and(|f| f.foreign > 0.0 || f.cross > 0.0);
            let model = acceptor.model(foreign);
            format!(
                "(nothing injected: memory is not sure enough; the best candidate, episode {} at score {:.3}, has acceptance {:.3} < accept_min {:.2} of the {} model)",
                c.id.short(),
                c.score,
                c.acceptance.unwrap_or(0.0),
                model.accept_min,
                if foreign { "foreign" } else { "English" }
            )
        }
        _ if r.top_score == 0.0 => "(nothing injected: no candidate found)".to_string(),
        _ => format!("(nothing injected: nothing above min_score {min_score:.2}; top score {:.3})", r.top_score),
    }
}

/// `strata inject`: the Memory Context a message would get (L0).
pub(super) async fn inject(config: Config, scope: ScopeArgs, session: String, message: String, json: bool) -> Result<ExitCode> {
    let scope = scope.scope()?;
    let session = SessionId::new(session)?;
    let acceptor = config.recall.acceptor.clone();
    let min_score = config.recall.min_score;
    let mem = open_for_reads(config).await?;
    // explained, so an empty answer can say which gate kept memory quiet (and
    // --json shows every judged candidate with its features)
    let opts = crate::episodic::SearchOptions { explain: true, ..Default::default() };
    let r = mem.inject_with(&scope, &session, &message, opts).await;
    mem.shutdown().await?;
    let r = r?;
    if json {
        print_json(&r)?;
    } else if r.trivial {
        println!("(trivial message: nothing injected)");
    } else if r.injected == 0 {
        println!("{}", why_empty(&r, &acceptor, min_score));
    } else {
        print!("{}", r.section);
    }
    Ok(ExitCode::SUCCESS)
}
