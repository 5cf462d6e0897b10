//! `strata graph`: the semantic tier from the command line (search, walk, merges).

use super::{open_for_reads, print_json, GraphCommand};
use std::process::ExitCode;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::Memory;

fn print_subgraph(r: &crate::memory::GraphSearchResult) {
    use std::collections::HashMap;
    if r.subgraph.entities.is_empty() {
        println!("no entity found");
        return;
    }
    let names: HashMap<&str, &str> = r
        .subgraph
        .entities
        .iter()
        .map(|e| (e.id.as_str(), e.name.as_str()))
        .collect();
    println!("entities:");
    for e in &r.subgraph.entities {
        let seed = if r.seeds.contains(&e.id) { "*" } else { " " };
        let aliases = if e.aliases.is_empty() {
            String::new()
        } else {
            format!(" (aka {})", e.aliases.join(", "))
        };
        println!(
            "{seed} {} [{}]{aliases}  {}  from {} episode(s)",
            e.name,
            e.kind,
            e.id,
            e.episodes.len()
        );
    }
    if !r.subgraph.relations.is_empty() {
        println!("relations:");
    }
    for rel in &r.subgraph.relations {
        let from = rel
            .valid_from
            .map(|t| t.format("%Y-%m-%d").to_string())
            .unwrap_or_else(|| "?".into());
        let until = rel
            .invalid_at
            .map(|t| format!(" until {}", t.format("%Y-%m-%d")))
            .unwrap_or_default();
        println!(
            "  {} -[{}]-> {}  (since {from}{until}; {})",
            names
                .get(rel.source.as_str())
                .unwrap_or(&rel.source.as_str()),
            rel.predicate,
            names
                .get(rel.target.as_str())
                .unwrap_or(&rel.target.as_str()),
            match (&rel.episode_id, &rel.memory_id) {
                (Some(e), _) => format!("episode {e}"),
                (None, Some(m)) => format!("memory {m}"),
                (None, None) => "no source".into(),
            }
        );
    }
    if !r.related.is_empty() {
        println!("said together (a hint, not a fact):");
    }
    let name = |id: &crate::graph::EntityId| names.get(id.as_str()).copied().unwrap_or(id.as_str()).to_string();
    for c in &r.related {
        let last = c.last_seen.map(|t| format!(", last {}", t.format("%Y-%m-%d"))).unwrap_or_default();
        println!("  {} ~ {}  ({} time(s) in {} episode(s){last})", name(&c.source), name(&c.target), c.weight, c.episodes.len());
    }
}

pub(super) async fn graph_command(config: Config, action: GraphCommand) -> Result<ExitCode> {
    let mem = open_for_reads(config).await?;
    let out = graph_action(&mem, action).await;
    mem.shutdown().await?;
    out
}

async fn graph_action(mem: &Memory, action: GraphCommand) -> Result<ExitCode> {
    use crate::memory::GraphSearch;
    match action {
        GraphCommand::Search {
            scope,
            query,
            hops,
            predicate,
            include_invalid,
            json,
        } => {
            let req = GraphSearch {
                query: Some(query),
                hops,
                predicate,
                include_invalid,
                ..Default::default()
            };
            let r = mem.knowledge_graph_search(&scope.scope()?, &req).await?;
            if json {
                print_json(&r)?
            } else {
                print_subgraph(&r)
            }
        }
        GraphCommand::Show {
            scope,
            entity,
            hops,
            json,
        } => {
            let req = GraphSearch {
                entity: Some(entity),
                hops,
                include_invalid: true,
                ..Default::default()
            };
            let r = mem.knowledge_graph_search(&scope.scope()?, &req).await?;
            if r.seeds.is_empty() {
                return Err(Error::NotFound("entity".into()));
            }
            if json {
                print_json(&r)?
            } else {
                print_subgraph(&r)
            }
        }
        GraphCommand::Merges { scope, json } => {
            let merges = mem.graph_merges(&scope.scope()?, 1000).await?;
            if json {
                print_json(&merges)?;
            } else if merges.is_empty() {
                println!("no merges");
            } else {
                for m in merges {
                    let undone = m
                        .undone_at
                        .map(|t| format!(" (undone {})", t.format("%Y-%m-%d %H:%M")))
                        .unwrap_or_default();
                    println!(
                        "{:>6}  {} <- {}  ({} <- {}; {}){undone}",
                        m.id, m.survivor_name, m.merged_name, m.survivor, m.merged, m.reason
                    );
                }
            }
        }
        GraphCommand::Unmerge { scope, id } => {
            let m = mem.graph_unmerge(&scope.scope()?, id).await?;
            println!(
                "merge {} undone: {} and {} are separate again",
                m.id, m.survivor_name, m.merged_name
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
