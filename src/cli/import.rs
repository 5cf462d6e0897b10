//! `strata import FILE.jsonl`: bulk-loads history. Each line is one message
//! `{"user_id","agent_id","session_id","role","content","timestamp"}` with an
//! RFC 3339 timestamp. A malformed line is reported with its line number and
//! skipped; the valid lines are still imported and the exit status is 1.
//!
//! Idempotent: each line is recorded under an idempotency key, its
//! `message_id` when it has one, else [`NewMessage::content_key`] (a hash of
//! scope, session, timestamp, role and content). Re-running a file after a
//! kill or a failure midway adds nothing twice; sessions it already ended
//! stay ended and are promoted once.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::io::BufRead as _;
use std::path::Path;
use std::process::ExitCode;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::model::{NewMessage, Role, Scope, SessionId};
use crate::Memory;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    user_id: String,
    agent_id: String,
    session_id: String,
    role: Role,
    content: String,
    timestamp: String,
    #[serde(default)]
    name: Option<String>,
    /// [`NewMessage::idempotency_key`] (`message_id` is its other name);
    /// without one the line's content hash is its key.
    #[serde(default, alias = "message_id")]
    idempotency_key: Option<String>,
}

/// Parses and validates one line of an import file: its scope, session and
/// message, keyed by its `message_id` or else by [`NewMessage::content_key`].
///
/// # Errors
/// [`Error::InvalidInput`] for malformed JSON, an unknown or missing field,
/// a timestamp that is not RFC 3339 with a zone, an invalid id, or a message
/// [`NewMessage::validate`] refuses.
pub fn parse_line(line: &str) -> Result<(Scope, SessionId, NewMessage)> {
    let l: Line = serde_json::from_str(line).map_err(|e| Error::InvalidInput(format!("malformed JSON: {e}")))?;
    let timestamp = DateTime::parse_from_rfc3339(l.timestamp.trim())
        .map_err(|e| Error::InvalidInput(format!("timestamp {:?} is not RFC 3339 with a zone, e.g. 2026-03-02T09:00:00Z ({e})", l.timestamp)))?
        .with_timezone(&Utc);
    let scope = Scope::new(l.user_id, l.agent_id)?;
    let sid = SessionId::new(l.session_id)?;
    let mut msg = NewMessage { role: l.role, name: l.name, content: l.content, timestamp, idempotency_key: l.idempotency_key };
    if msg.idempotency_key.is_none() {
        msg.idempotency_key = Some(msg.content_key(&scope, &sid));
    }
    msg.validate()?;
    Ok((scope, sid, msg))
}

/// Runs the import.
pub async fn run(
    config: Config,
    file: &Path,
    end_sessions: bool,
    wait: bool,
    json: bool,
) -> Result<ExitCode> {
    if !file.is_file() {
        return Err(Error::Data(format!(
            "{} is not a readable file",
            file.display()
        )));
    }
    let f = std::fs::File::open(file)
        .map_err(|e| Error::Data(format!("cannot open {}: {e}", file.display())))?;
    let mem = Memory::open(config).await?;
    let parked_before: std::collections::HashSet<i64> = mem
        .parked_jobs(100_000)
        .await?
        .iter()
        .map(|j| j.id.0)
        .collect();
    let mut imported = 0usize;
    let mut errors: Vec<(usize, String)> = Vec::new();
    let mut sessions: BTreeSet<(Scope, SessionId)> = BTreeSet::new();
    for (i, raw) in std::io::BufReader::new(f).split(b'\n').enumerate() {
        let n = i + 1;
        // an I/O error is not a bad line: stop (it would repeat forever)
        let mut raw =
            raw.map_err(|e| Error::Data(format!("{}:{n}: read failed: {e}", file.display())))?;
        if raw.last() == Some(&b'\r') {
            raw.pop();
        }
        if n == 1 && raw.starts_with(&[0xEF, 0xBB, 0xBF]) {
            raw.drain(..3); // UTF-8 byte order mark
        }
        let line = match String::from_utf8(raw) {
            Ok(l) => l,
            Err(_) => {
                errors.push((n, "line is not valid UTF-8".to_string()));
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let result = async {
            let (scope, sid, msg) = parse_line(&line)?;
            mem.record(&scope, &sid, msg).await?;
            Ok::<_, Error>((scope, sid))
        }
        .await;
        match result {
            Ok(key) => {
                imported += 1;
                sessions.insert(key);
            }
            Err(e) => errors.push((n, e.to_string())),
        }
    }
    let mut ended = 0;
    if end_sessions {
        for (scope, sid) in &sessions {
            mem.end_session(scope, sid).await?;
            ended += 1;
        }
    }
    let mut parked = Vec::new();
    // seconds from the end of the sessions to all promoted / all indexed (vectors included)
    let mut timing: Option<(f64, f64)> = None;
    if wait {
        let t0 = std::time::Instant::now();
        mem.wait_promoted().await?;
        let promoted = t0.elapsed().as_secs_f64();
        mem.wait_idle().await?;
        timing = Some((promoted, t0.elapsed().as_secs_f64()));
        parked = mem
            .parked_jobs(100_000)
            .await?
            .into_iter()
            .filter(|j| !parked_before.contains(&j.id.0))
            .collect();
    }
    mem.shutdown().await?;
    for j in &parked {
        eprintln!(
            "job {} parked after {} attempts: {} (see `strata jobs list`)",
            j.id, j.attempts, j.last_error
        );
    }
    for (n, e) in &errors {
        eprintln!("{}:{n}: {e}", file.display());
    }
    if json {
        let errs: Vec<_> = errors
            .iter()
            .map(|(n, e)| serde_json::json!({"line": n, "error": e}))
            .collect();
        let mut out = serde_json::json!({"imported": imported, "sessions": sessions.len(), "ended": ended, "errors": errs, "parked_jobs": parked.len()});
        if let Some((promoted, indexed)) = timing {
            out["promoted_secs"] = serde_json::json!(promoted);
            out["indexed_secs"] = serde_json::json!(indexed);
        }
        println!("{out}");
    } else {
        println!("imported {imported} messages in {} sessions ({ended} ended); {} bad lines; {} jobs parked", sessions.len(), errors.len(), parked.len());
        if let (Some((promoted, indexed)), true) = (timing, ended > 0) {
            // searchable by keyword once promoted, by vector once indexed
            println!(
                "promoted in {promoted:.1} s ({:.1} sessions/s); fully indexed (vectors too) in {indexed:.1} s ({:.1} sessions/s)",
                ended as f64 / promoted.max(1e-9),
                ended as f64 / indexed.max(1e-9)
            );
        }
    }
    // bad lines: 1; everything imported but some promotion parked: 2
    Ok(if !errors.is_empty() {
        ExitCode::FAILURE
    } else if !parked.is_empty() {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}
