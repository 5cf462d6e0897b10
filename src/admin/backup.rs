//! `strata backup DIR` and `strata restore DIR` for embedded deployments.
//!
//! A backup holds the SQLite files (the system of record `strata.db` and
//! the team and public stores under `shared/`), each copied with SQLite's
//! online backup API in one step: a consistent snapshot taken under one
//! read transaction, while a server may keep writing (WAL readers do not
//! block writers), then verified with `PRAGMA integrity_check`. The indexes
//! are not copied: they are derived data, and a restore rebuilds them from
//! the records with the embedder configured then ([`super::reindex::reindex`]), so a
//! backup restores into a deployment with another embedding model too.
//! `backup.json` (the manifest) names the files, their sizes, the schema
//! version and the Strata version that wrote it.
//!
//! Deployments whose records live in PostgreSQL are backed up with
//! PostgreSQL's own tools (`pg_dump`); both commands refuse them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use crate::config::{Config, RecordsBackend};
use crate::error::{Error, Result};
use super::reindex::{reindex, ReindexReport};
use crate::runtime::Components;

/// Manifest file name inside a backup directory.
pub const MANIFEST: &str = "backup.json";
/// Version of the backup layout this build writes and reads.
pub const FORMAT: u32 = 1;

/// One SQLite file of a backup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackupFile {
    /// Path relative to the data directory (`strata.db`, `shared/public/strata.db`, ...).
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
}

/// `backup.json`: what a backup holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Layout version ([`FORMAT`]).
    pub format: u32,
    /// The Strata version that wrote it.
    pub strata: String,
    /// When the snapshot was taken.
    pub created_at: DateTime<Utc>,
    /// `PRAGMA user_version` of `strata.db` (its schema migrations).
    pub schema_version: i64,
    /// The SQLite files, `strata.db` first.
    pub files: Vec<BackupFile>,
}

/// Result of [`restore`].
#[derive(Debug, Clone, Serialize)]
pub struct RestoreReport {
    /// The manifest of the restored backup.
    pub manifest: Manifest,
    /// The indexes rebuilt from the restored records.
    pub reindex: ReindexReport,
}

fn embedded_only(config: &Config, what: &str) -> Result<()> {
    if config.stores.records != RecordsBackend::Sqlite {
        return Err(Error::InvalidInput(format!(
            "strata {what} copies embedded (SQLite) deployments; records on PostgreSQL are backed up with pg_dump"
        )));
    }
    Ok(())
}

/// The SQLite files of `data_dir`, relative, `strata.db` first.
fn sqlite_files(data_dir: &Path) -> Result<Vec<PathBuf>> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return Ok(());
        };
        for e in rd {
            let p = e?.path();
            if p.is_dir() {
                walk(&p, base, out)?;
            } else if p.file_name().is_some_and(|n| n == "strata.db") {
                out.push(p.strip_prefix(base).map_err(|e| Error::Task(e.to_string()))?.to_path_buf());
            }
        }
        Ok(())
    }
    let mut out = vec![PathBuf::from("strata.db")];
    let mut shared = Vec::new();
    walk(&data_dir.join("shared"), data_dir, &mut shared)?;
    shared.sort();
    out.extend(shared);
    Ok(out)
}

/// Copies `from` into a new file `to` with the online backup API in one
/// step, then checks the copy's integrity.
fn copy_db(from: &Path, to: &Path) -> Result<u64> {
    use rusqlite::backup::{Backup, StepResult};
    use rusqlite::{Connection, OpenFlags};
    if let Some(d) = to.parent() {
        std::fs::create_dir_all(d)?;
    }
    let src = Connection::open_with_flags(from, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    src.busy_timeout(std::time::Duration::from_secs(5))?;
    let mut dst = Connection::open(to)?;
    {
        // -1: every page in one step, under one read transaction (a snapshot);
        // a writer holding the lock at that moment makes the step wait and retry
        let b = Backup::new(&src, &mut dst)?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            match b.step(-1)? {
                StepResult::Done => break,
                StepResult::More => continue,
                _ if std::time::Instant::now() < deadline => std::thread::sleep(std::time::Duration::from_millis(50)),
                _ => return Err(Error::Data(format!("{} stayed locked for 30 s; backup not taken", from.display()))),
            }
        }
    }
    let check: String = dst.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    if check != "ok" {
        return Err(Error::Data(format!("the copy of {} failed its integrity check: {check}", from.display())));
    }
    // leave one self-contained file (no -wal beside it)
    dst.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    dst.pragma_update(None, "journal_mode", "DELETE")?;
    drop(dst);
    Ok(std::fs::metadata(to)?.len())
}

fn empty_or_missing(dir: &Path) -> Result<bool> {
    Ok(!dir.exists() || std::fs::read_dir(dir)?.next().is_none())
}

/// Takes a consistent online copy of the deployment's SQLite files into
/// `dir` (created; it must be empty or missing). Safe while a server runs
/// on the data directory.
///
/// # Errors
/// [`Error::InvalidInput`] for a PostgreSQL deployment, a non-empty `dir`
/// or a data directory without `strata.db`; SQLite and I/O errors;
/// [`Error::Data`] when a copy fails its integrity check.
pub async fn backup(config: &Config, dir: &Path) -> Result<Manifest> {
    embedded_only(config, "backup")?;
    let (data, dir) = (config.data_dir.clone(), dir.to_path_buf());
    tokio::task::spawn_blocking(move || {
        if !data.join("strata.db").is_file() {
            return Err(Error::InvalidInput(format!("{} holds no Strata deployment (no strata.db)", data.display())));
        }
        if !empty_or_missing(&dir)? {
            return Err(Error::InvalidInput(format!("{} is not empty; back up into a new directory", dir.display())));
        }
        std::fs::create_dir_all(&dir)?;
        let created_at = Utc::now();
        let mut files = Vec::new();
        for rel in sqlite_files(&data)? {
            let bytes = copy_db(&data.join(&rel), &dir.join(&rel))?;
            files.push(BackupFile { path: rel.to_string_lossy().replace('\\', "/"), bytes });
        }
        let schema_version: i64 = rusqlite::Connection::open(dir.join("strata.db"))?
            .pragma_query_value(None, "user_version", |r| r.get(0))?;
        let manifest = Manifest {
            format: FORMAT,
            strata: env!("CARGO_PKG_VERSION").to_string(),
            created_at,
            schema_version,
            files,
        };
        std::fs::write(dir.join(MANIFEST), serde_json::to_vec_pretty(&manifest)?)?;
        tracing::info!(dir = %dir.display(), files = manifest.files.len(), "backup written");
        Ok(manifest)
    })
    .await?
}

/// Reads a backup's manifest.
///
/// # Errors
/// [`Error::InvalidInput`] when `dir` is not a backup or one of a newer layout.
pub fn read_manifest(dir: &Path) -> Result<Manifest> {
    let raw = std::fs::read(dir.join(MANIFEST)).map_err(|e| {
        Error::InvalidInput(format!("{} is not a Strata backup (no readable {MANIFEST}: {e})", dir.display()))
    })?;
    let m: Manifest = serde_json::from_slice(&raw)
        .map_err(|e| Error::InvalidInput(format!("{MANIFEST} in {} is malformed: {e}", dir.display())))?;
    if m.format > FORMAT {
        return Err(Error::InvalidInput(format!(
            "the backup's layout {} is newer than this build reads ({FORMAT}); restore it with Strata {} or later",
            m.format, m.strata
        )));
    }
    Ok(m)
}

/// Restores the backup in `dir` into the configured data directory (which
/// must hold no deployment yet), migrating an older schema on open, and
/// rebuilds every index from the restored records.
///
/// # Errors
/// [`Error::InvalidInput`] for a PostgreSQL deployment, a data directory
/// that already holds `strata.db`, or `dir` not a backup; [`Error::Data`]
/// for a file missing from the backup or failing its integrity check;
/// [`Error::Config`] for a backup written by a newer schema; reindex errors.
pub async fn restore(config: Config, dir: &Path) -> Result<RestoreReport> {
    embedded_only(&config, "restore")?;
    let manifest = read_manifest(dir)?;
    let (data, src) = (config.data_dir.clone(), dir.to_path_buf());
    let files = manifest.files.clone();
    tokio::task::spawn_blocking(move || -> Result<()> {
        if data.join("strata.db").exists() {
            return Err(Error::InvalidInput(format!(
                "{} already holds a deployment; restore into an empty data directory (or move it aside)",
                data.display()
            )));
        }
        for f in &files {
            let rel = Path::new(&f.path);
            if rel.is_absolute() || rel.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
                return Err(Error::Data(format!("{MANIFEST} names a path outside the backup: {}", f.path)));
            }
            let from = src.join(rel);
            if !from.is_file() {
                return Err(Error::Data(format!("{} is missing from the backup", f.path)));
            }
            copy_db(&from, &data.join(rel))?;
        }
        Ok(())
    })
    .await??;
    let reindex = reindex(config, Components::default()).await?;
    tracing::info!(dir = %dir.display(), episodes = reindex.episodes, "backup restored");
    Ok(RestoreReport { manifest, reindex })
}
