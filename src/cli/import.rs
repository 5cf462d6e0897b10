//! `strata import FILE.jsonl`: bulk-loads history. Each line is one message
//! `{"user_id","agent_id","session_id","role","content","timestamp"}` with an
//! RFC 3339 timestamp. A malformed line is reported with its line number and
//! skipped; the valid lines are still imported and the exit status is 1.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::io::BufRead;
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
    timestamp: DateTime<Utc>,
    #[serde(default)]
    name: Option<String>,
}

/// Runs the import.
pub async fn run(config: Config, file: &Path, end_sessions: bool, wait: bool, json: bool) -> Result<ExitCode> {
    let f = std::fs::File::open(file).map_err(|e| Error::Data(format!("cannot open {}: {e}", file.display())))?;
    let mem = Memory::open(config).await?;
    let mut imported = 0usize;
    let mut errors: Vec<(usize, String)> = Vec::new();
    let mut sessions: BTreeSet<(Scope, SessionId)> = BTreeSet::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let n = i + 1;
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                errors.push((n, format!("unreadable line: {e}")));
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let result = async {
            let l: Line = serde_json::from_str(&line).map_err(|e| Error::InvalidInput(format!("malformed JSON: {e}")))?;
            let scope = Scope::new(l.user_id, l.agent_id)?;
            let sid = SessionId::new(l.session_id)?;
            let msg = NewMessage { role: l.role, name: l.name, content: l.content, timestamp: l.timestamp };
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
    if wait {
        mem.wait_idle().await?;
    }
    mem.shutdown().await?;
    for (n, e) in &errors {
        eprintln!("{}:{n}: {e}", file.display());
    }
    if json {
        let errs: Vec<_> = errors.iter().map(|(n, e)| serde_json::json!({"line": n, "error": e})).collect();
        println!("{}", serde_json::json!({"imported": imported, "sessions": sessions.len(), "ended": ended, "errors": errs}));
    } else {
        println!("imported {imported} messages in {} sessions ({ended} ended); {} bad lines", sessions.len(), errors.len());
    }
    Ok(if errors.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
