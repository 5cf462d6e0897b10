//! Copying an embedded system of record into PostgreSQL (`strata migrate`):
//! the SQLite tables of the records, the typed memories and the team and
//! public stores, row for row, into the [`super`] schema, which
//! mirrors them column for column (plus a `tier` column on the typed
//! tables, since PostgreSQL keeps every tier in one set of tables).
//!
//! - **Batches**: each table is read in key order (`rowid`, or the primary
//!   key of a `WITHOUT ROWID` table), [`CopyPlan::batch`] rows at a time,
//!   and each batch is written with one `INSERT … SELECT … FROM
//!   json_populate_recordset(…)` in a transaction that also records the
//!   last key copied (`meta` key `migrate.copied.<tier>.<table>`). A copy
//!   killed at any point resumes after the last committed batch; rows are
//!   inserted `ON CONFLICT DO NOTHING` besides, so no row is written twice.
//! - **Ids**: message, outbox, call-log, dedup-log, scope (`sid`) and
//!   memory (`seq`) ids are kept (`OVERRIDING SYSTEM VALUE`), then each
//!   identity sequence is moved past the highest id and past SQLite's
//!   `AUTOINCREMENT` high-water mark, so ids are never reused. The team
//!   and public files number their scopes and memories from 1 like the
//!   private one; their ids are shifted by the highest ids of the files
//!   copied before them (offsets fixed at the first run and kept in
//!   `meta` key `migrate.plan`).
//! - **Target**: must hold no records when a copy begins (a second
//!   deployment's rows would clash); a copy already begun is resumed.
//! - **Not copied**: `meta` (index bookkeeping: the indexes are rebuilt
//!   from the records after the copy) and the graph (copied through
//!   [`crate::graph::GraphStore::export_graph`]).
//!
//! The source is read through its own read-only connections; run the copy
//! with no Strata process writing to the source.

use rusqlite::types::Value as Sql;
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use std::path::Path;

use super::{pe, PgStore};
use crate::error::{Error, Result};
use crate::store::copy::{CopySource, CopyPlan, CopyStep, CopyTarget, TableCount};
use crate::store::RecordStore;

/// A table to copy: its name and whether it is keyed by `rowid`.
struct TableSpec {
    name: &'static str,
    /// Key columns for a `WITHOUT ROWID` table; empty: `rowid`.
    keys: &'static [&'static str],
    /// Has an identity column (kept with `OVERRIDING SYSTEM VALUE`).
    identity: Option<&'static str>,
    /// Typed-memory table: its ids are shifted per file (and see [`tiered`]).
    typed: bool,
}

/// The tables of the private file, in copy order (parents before children).
const RECORD_TABLES: &[TableSpec] = &[
    TableSpec { name: "sessions", keys: &["user_id", "agent_id", "session_id"], identity: None, typed: false },
    TableSpec { name: "messages", keys: &[], identity: Some("id"), typed: false },
    TableSpec { name: "episodes", keys: &[], identity: None, typed: false },
    TableSpec { name: "outbox", keys: &[], identity: Some("id"), typed: false },
    TableSpec { name: "llm_calls", keys: &[], identity: Some("id"), typed: false },
    TableSpec { name: "dedup_log", keys: &[], identity: Some("id"), typed: false },
    TableSpec { name: "api_keys", keys: &[], identity: None, typed: false },
];

/// The typed-memory tables of every file, in copy order.
const TYPED_TABLES: &[TableSpec] = &[
    TableSpec { name: "memory_scopes", keys: &[], identity: Some("sid"), typed: true },
    TableSpec { name: "memories", keys: &[], identity: Some("seq"), typed: true },
    TableSpec { name: "memory_fields", keys: &[], identity: None, typed: true },
];

/// Identity columns whose sequences are moved past the copied ids, with
/// the SQLite table whose `AUTOINCREMENT` high-water mark also counts.
const SEQUENCES: &[(&str, &str)] = &[
    ("messages", "id"),
    ("outbox", "id"),
    ("llm_calls", "id"),
    ("dedup_log", "id"),
    ("memory_scopes", "sid"),
    ("memories", "seq"),
];

/// Tables that must be empty in the target when a copy begins.
const MUST_BE_EMPTY: &[&str] = &["sessions", "messages", "episodes", "outbox", "api_keys", "memories"];

/// `meta` key of the plan (sources and offsets) of a copy begun.
const META_PLAN: &str = "migrate.plan";

fn read_only(path: &Path) -> Result<Connection> {
    let c = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    c.busy_timeout(std::time::Duration::from_secs(30))?;
    Ok(c)
}

fn specs(tier: &str) -> impl Iterator<Item = &'static TableSpec> {
    let records: &'static [TableSpec] = if tier == "private" { RECORD_TABLES } else { &[] };
    records.iter().chain(TYPED_TABLES.iter())
}

fn spec(table: &str) -> Result<&'static TableSpec> {
    RECORD_TABLES
        .iter()
        .chain(TYPED_TABLES.iter())
        .find(|s| s.name == table)
        .ok_or_else(|| Error::InvalidInput(format!("no table {table:?} to copy")))
}

fn count(c: &Connection, table: &str) -> Result<u64> {
    Ok(c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get::<_, i64>(0))? as u64)
}

fn max_of(c: &Connection, table: &str, col: &str) -> Result<i64> {
    Ok(c.query_row(&format!("SELECT coalesce(max({col}), 0) FROM {table}"), [], |r| r.get(0))?)
}

/// SQLite's `AUTOINCREMENT` high-water mark of `table` (0 when none).
fn high_water(c: &Connection, table: &str) -> Result<i64> {
    let seq: Option<i64> = c
        .query_row("SELECT seq FROM sqlite_sequence WHERE name = ?1", [table], |r| r.get(0))
        .optional()
        .or_else(|e| match e {
            // a file with no AUTOINCREMENT table has no sqlite_sequence
            rusqlite::Error::SqliteFailure(..) => Ok(None),
            other => Err(other),
        })?;
    Ok(seq.unwrap_or(0))
}

/// Plans a copy of `sources` (private first) into `pg`, `batch` rows at a
/// time: counts the rows, and fixes the id offsets of each file's typed
/// rows. A copy begun earlier is resumed with the offsets it chose then.
///
/// # Errors
/// [`Error::Config`] when the target holds records and no copy was begun
/// there, or when the source changed since the copy began (its offsets
/// would differ); SQLite and PostgreSQL errors.
async fn plan(pg: &PgStore, sources: Vec<CopySource>, batch: usize) -> Result<CopyPlan> {
    if sources.first().map(|s| s.tier.as_str()) != Some("private") {
        return Err(Error::InvalidInput("the first source of a copy is the private file".into()));
    }
    let read = sources.clone();
    let (steps, offsets) = tokio::task::spawn_blocking(move || -> Result<(Vec<CopyStep>, Vec<(i64, i64)>)> {
        let (mut steps, mut offsets, mut next) = (Vec::new(), Vec::new(), (0i64, 0i64));
        for s in &read {
            let c = read_only(&s.path)?;
            for t in specs(&s.tier) {
                steps.push(CopyStep { tier: s.tier.clone(), table: t.name.into(), rows: count(&c, t.name)? });
            }
            offsets.push(next);
            next.0 += max_of(&c, "memory_scopes", "sid")?;
            next.1 += max_of(&c, "memories", "seq")?.max(high_water(&c, "memories")?);
        }
        Ok((steps, offsets))
    })
    .await??;
    let client = pg.client().await?;
    let resumed = match pg.meta_get(META_PLAN).await? {
        Some(text) => {
            let begun: (Vec<CopySource>, Vec<(i64, i64)>) = serde_json::from_str(&text)?;
            if begun.0.iter().map(|s| &s.path).ne(sources.iter().map(|s| &s.path)) {
                return Err(Error::Config(format!(
                    "the target PostgreSQL schema holds a copy of another deployment ({}); migrate into an empty schema",
                    begun.0.first().map(|s| s.path.display().to_string()).unwrap_or_default()
                )));
            }
            if begun.0 != sources || begun.1 != offsets {
                return Err(Error::Config(
                    "the source changed since this copy began (other team stores or more typed memories); \
                     drop the target schema and copy again"
                        .into(),
                ));
            }
            true
        }
        None => {
            for t in MUST_BE_EMPTY {
                let any: bool = client
                    .query_one(&format!("SELECT EXISTS (SELECT 1 FROM {t})"), &[])
                    .await
                    .map_err(pe)?
                    .get(0);
                if any {
                    return Err(Error::Config(format!(
                        "the target PostgreSQL schema already holds records (table {t}); migrate into an empty schema"
                    )));
                }
            }
            pg.meta_set(META_PLAN, &serde_json::to_string(&(&sources, &offsets))?).await?;
            false
        }
    };
    Ok(CopyPlan { sources, offsets, steps, batch: batch.max(1), resumed })
}

fn checkpoint_key(tier: &str, table: &str) -> String {
    format!("migrate.copied.{tier}.{table}")
}

fn to_json(v: Sql, table: &str, col: &str) -> Result<serde_json::Value> {
    Ok(match v {
        Sql::Null => serde_json::Value::Null,
        Sql::Integer(i) => i.into(),
        Sql::Real(f) => serde_json::Number::from_f64(f).map(serde_json::Value::Number).unwrap_or(serde_json::Value::Null),
        Sql::Text(s) => s.into(),
        Sql::Blob(_) => return Err(Error::InvalidInput(format!("{table}.{col} holds a blob, which no Strata table has"))),
    })
}

/// One batch read from the source: rows as JSON objects, and the key of
/// the last one.
type Batch = (Vec<serde_json::Value>, Option<Vec<serde_json::Value>>);

/// The columns of a source table, in table order.
fn columns(c: &Connection, table: &str) -> Result<Vec<String>> {
    Ok(c.prepare(&format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid"))?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?)
}

/// Typed tables but `memory_fields` (whose rows follow their memory, and
/// its tier, through `mem`) gain a `tier` column in PostgreSQL.
fn tiered(t: &TableSpec) -> bool {
    t.typed && t.name != "memory_fields"
}

fn read_batch(
    c: &Connection,
    t: &TableSpec,
    cols: &[String],
    after: &Option<Vec<serde_json::Value>>,
    limit: usize,
    tier: &str,
    offsets: (i64, i64),
) -> Result<Batch> {
    let keys: Vec<&str> = if t.keys.is_empty() { vec!["rowid"] } else { t.keys.to_vec() };
    let list = |v: &[&str]| v.join(", ");
    let marks = (1..=keys.len()).map(|i| format!("?{i}")).collect::<Vec<_>>().join(", ");
    let filter = match after {
        Some(_) => format!("WHERE ({}) > ({marks})", list(&keys)),
        None => String::new(),
    };
    let sql = format!(
        "SELECT {}, {} FROM {} {filter} ORDER BY {} LIMIT {limit}",
        list(&keys),
        cols.join(", "),
        t.name,
        list(&keys)
    );
    let params: Vec<Sql> = after
        .iter()
        .flatten()
        .map(|v| match v {
            serde_json::Value::Number(n) => Sql::Integer(n.as_i64().unwrap_or_default()),
            serde_json::Value::String(s) => Sql::Text(s.clone()),
            _ => Sql::Null,
        })
        .collect();
    let mut st = c.prepare(&sql)?;
    let mut rows = st.query(rusqlite::params_from_iter(params))?;
    let (mut out, mut last) = (Vec::new(), None);
    while let Some(r) = rows.next()? {
        let mut key = Vec::with_capacity(keys.len());
        for (i, k) in keys.iter().enumerate() {
            key.push(to_json(r.get(i)?, t.name, k)?);
        }
        let mut obj = serde_json::Map::new();
        for (i, col) in cols.iter().enumerate() {
            let mut v = to_json(r.get(keys.len() + i)?, t.name, col)?;
            if t.typed {
                let shift = match col.as_str() {
                    "sid" => offsets.0,
                    "seq" | "mem" => offsets.1,
                    _ => 0,
                };
                if let (true, Some(n)) = (shift != 0, v.as_i64()) {
                    v = (n + shift).into();
                }
            }
            obj.insert(col.clone(), v);
        }
        if tiered(t) {
            obj.insert("tier".into(), tier.into());
        }
        out.push(serde_json::Value::Object(obj));
        last = Some(key);
    }
    Ok((out, last))
}

/// Copies one step of `plan` (resuming after its checkpoint), calling
/// `progress` with the rows of each committed batch. Returns the rows
/// copied by this call.
///
/// # Errors
/// SQLite errors; [`Error::Unavailable`] / [`Error::Postgres`] from the
/// target (a failed batch is rolled back with its checkpoint: rerun to go on).
async fn copy_step(pg: &PgStore, plan: &CopyPlan, step: usize, progress: &mut (dyn FnMut(u64) + Send)) -> Result<u64> {
    let s = plan.steps.get(step).ok_or_else(|| Error::InvalidInput(format!("no step {step}")))?;
    let t = spec(&s.table)?;
    let source = plan.sources.iter().position(|x| x.tier == s.tier).expect("planned from these sources");
    let (path, offsets, tier, limit) = (plan.sources[source].path.clone(), plan.offsets[source], s.tier.clone(), plan.batch);
    let key = checkpoint_key(&s.tier, &s.table);
    let mut client = pg.client().await?;
    let mut after: Option<Vec<serde_json::Value>> = pg.meta_get(&key).await?.map(|v| serde_json::from_str(&v)).transpose()?;
    let overriding = if t.identity.is_some() { "OVERRIDING SYSTEM VALUE" } else { "" };
    let conn = read_only(&path)?;
    let cols = std::sync::Arc::new(columns(&conn, t.name)?);
    let conn = std::sync::Arc::new(std::sync::Mutex::new(conn));
    let list = cols
        .iter()
        .map(String::as_str)
        .chain(tiered(t).then_some("tier"))
        .map(|c| format!("\"{c}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "INSERT INTO {table} ({list}) {overriding} SELECT {list} FROM json_populate_recordset(NULL::{table}, $1::json) ON CONFLICT DO NOTHING",
        table = t.name
    );
    let mut copied = 0u64;
    loop {
        let (conn, cols, from, tier) = (conn.clone(), cols.clone(), after.clone(), tier.clone());
        let (rows, last) = tokio::task::spawn_blocking(move || {
            let c = conn.lock().unwrap_or_else(|p| p.into_inner());
            read_batch(&c, t, &cols, &from, limit, &tier, offsets)
        })
        .await??;
        let Some(last) = last else { break };
        let n = rows.len() as u64;
        let body = serde_json::Value::Array(rows);
        let mark = serde_json::to_string(&last)?;
        let tx = client.transaction().await.map_err(pe)?;
        tx.execute(&sql, &[&body]).await.map_err(pe)?;
        tx.execute(
            "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            &[&key, &mark],
        )
        .await
        .map_err(pe)?;
        tx.commit().await.map_err(pe)?;
        copied += n;
        progress(n);
        after = Some(last);
    }
    Ok(copied)
}

/// Moves every identity sequence of the target past the ids copied (and
/// past each source's `AUTOINCREMENT` high-water mark), so no id is
/// handed out twice. Run after every step has been copied.
///
/// # Errors
/// SQLite and PostgreSQL errors.
async fn finish(pg: &PgStore, plan: &CopyPlan) -> Result<()> {
    let read = plan.clone();
    let marks = tokio::task::spawn_blocking(move || -> Result<Vec<i64>> {
        let mut marks = vec![0i64; SEQUENCES.len()];
        for (s, off) in read.sources.iter().zip(&read.offsets) {
            let c = read_only(&s.path)?;
            for (i, (table, _)) in SEQUENCES.iter().enumerate() {
                if s.tier != "private" && !TYPED_TABLES.iter().any(|t| t.name == *table) {
                    continue;
                }
                let shift = match *table {
                    "memory_scopes" => off.0,
                    "memories" => off.1,
                    _ => 0,
                };
                marks[i] = marks[i].max(high_water(&c, table)? + shift);
            }
        }
        Ok(marks)
    })
    .await??;
    let client = pg.client().await?;
    for ((table, col), mark) in SEQUENCES.iter().zip(marks) {
        client
            .query_one(
                &format!(
                    "SELECT setval(pg_get_serial_sequence('{table}', '{col}'), greatest(coalesce(max({col}), 0), $1::bigint, 1),
                       greatest(coalesce(max({col}), 0), $1::bigint) > 0) FROM {table}"
                ),
                &[&mark],
            )
            .await
            .map_err(pe)?;
    }
    Ok(())
}

/// Row counts of every step in the source now and in the target (the
/// target's typed rows counted per tier).
///
/// # Errors
/// SQLite and PostgreSQL errors.
async fn verify(pg: &PgStore, plan: &CopyPlan) -> Result<Vec<TableCount>> {
    let read = plan.clone();
    let sources = tokio::task::spawn_blocking(move || -> Result<Vec<u64>> {
        read.steps
            .iter()
            .map(|s| {
                let path = &read.sources.iter().find(|x| x.tier == s.tier).expect("planned").path;
                count(&read_only(path)?, &s.table)
            })
            .collect()
    })
    .await??;
    let client = pg.client().await?;
    let mut out = Vec::new();
    for (s, source) in plan.steps.iter().zip(sources) {
        let row = match s.table.as_str() {
            "memory_fields" => {
                let sql = "SELECT count(*) FROM memory_fields f JOIN memories m ON m.seq = f.mem WHERE m.tier = $1";
                client.query_one(sql, &[&s.tier]).await
            }
            t if spec(t)?.typed => client.query_one(&format!("SELECT count(*) FROM {t} WHERE tier = $1"), &[&s.tier]).await,
            t => client.query_one(&format!("SELECT count(*) FROM {t}"), &[]).await,
        };
        let target: i64 = row.map_err(pe)?.get(0);
        out.push(TableCount { tier: s.tier.clone(), table: s.table.clone(), source, target: target as u64 });
    }
    Ok(out)
}
#[async_trait::async_trait]
impl CopyTarget for PgStore {
    async fn plan(&self, sources: Vec<CopySource>, batch: usize) -> Result<CopyPlan> {
        plan(self, sources, batch).await
    }
    async fn copy_step(&self, plan: &CopyPlan, step: usize, progress: &mut (dyn FnMut(u64) + Send)) -> Result<u64> {
        copy_step(self, plan, step, progress).await
    }
    async fn finish(&self, plan: &CopyPlan) -> Result<()> {
        finish(self, plan).await
    }
    async fn verify(&self, plan: &CopyPlan) -> Result<Vec<TableCount>> {
        verify(self, plan).await
    }
}

