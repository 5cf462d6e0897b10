//! `strata migrate --to FILE`: the command around [`crate::admin::migrate::migrate`]
//! (a progress bar per phase on a terminal, a summary or JSON at the end).

use std::path::Path;
use std::process::ExitCode;

use crate::config::Config;
use crate::error::Result;
use crate::memory::Components;
use crate::admin::migrate::{migrate, MigrateEvent, MigrateOptions, MigrateReport};

/// Migrates the deployment `source` describes into the one the config file
/// `to` describes; exit status 1 when a count differs at the end.
///
/// # Errors
/// As [`crate::admin::migrate::migrate`]; [`crate::Error::Config`] for a bad `to` file.
pub(crate) async fn run(source: Config, to: &Path, batch: usize, reindex: bool, json: bool) -> Result<ExitCode> {
    let target = Config::load(Some(to), &[])?;
    // a bar on a terminal only: indicatif draws nothing when stderr is not one
    let style = indicatif::ProgressStyle::with_template("{prefix:>8} {bar:40} {pos}/{len} {per_sec} eta {eta}")
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    let mut bar: Option<indicatif::ProgressBar> = None;
    let mut on_event = |e: MigrateEvent| match e {
        MigrateEvent::Phase { name, total, done } => {
            if let Some(b) = bar.take() {
                b.finish();
            }
            let b = if total == 0 { indicatif::ProgressBar::new_spinner() } else { indicatif::ProgressBar::new(total) };
            b.set_style(if total == 0 { indicatif::ProgressStyle::default_spinner() } else { style.clone() });
            b.set_prefix(name);
            b.set_message(name);
            b.set_position(done);
            if total == 0 {
                b.enable_steady_tick(std::time::Duration::from_millis(200));
            }
            tracing::info!(phase = name, total, done, "migrate phase");
            bar = Some(b);
        }
        MigrateEvent::Advance(n) => {
            if let Some(b) = &bar {
                b.inc(n);
            }
        }
    };
    let report = migrate(&source, target, &MigrateOptions { batch, reindex }, Components::default(), &mut on_event).await;
    if let Some(b) = bar.take() {
        b.finish();
    }
    let report = report?;
    if json {
        super::print_json(&report)?;
    } else {
        print_summary(&report);
    }
    Ok(if report.problems.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn print_summary(r: &MigrateReport) {
    let rows: u64 = r.tables.iter().map(|t| t.target).sum();
    println!(
        "{}copied {} rows ({} rows in {} tables in the target), the graph of {} scopes ({} entities, {} relations) to {}, in {:.1}s",
        if r.resumed { "resumed: " } else { "" },
        r.copied_rows,
        rows,
        r.tables.len(),
        r.graph.scopes,
        r.graph.target_counts.entities,
        r.graph.target_counts.relations,
        r.graph.target,
        r.seconds
    );
    match &r.reindex {
        Some(x) => println!(
            "indexes rebuilt: {} episodes ({} vector points) and {} typed memories with {}",
            x.episodes, x.vector_points, x.memories, x.embedder
        ),
        None => println!("indexes: rebuilt by an earlier run (add --reindex to rebuild them again)"),
    }
    if r.problems.is_empty() {
        println!("counts verified: every table and the graph hold as many rows as the source");
    }
    for p in &r.problems {
        println!("MISMATCH {p}");
    }
}
