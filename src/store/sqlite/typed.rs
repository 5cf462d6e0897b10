//! Typed memories in SQLite: the `memories` table (one row per memory) and
//! `memory_fields` (one row per metadata leaf: path, kind, number, text), so
//! any `metadata.*` filter or sort is an index lookup rather than a scan of
//! JSON. The same functions serve the private database and the team and
//! public stores ([`crate::store::shared`]), whose schema has no event type.
//!
//! Leaf kinds: `s` text, `t` RFC 3339 timestamp (text, and its instant in
//! ms in `num`), `n` number, `b` boolean (`num` 0/1), `z` null. An array's
//! elements share its path (`arr` = 1), so equality on it means "contains";
//! sorts use only non-array leaves.

use chrono::{DateTime, Utc};
use rusqlite::types::Value as Sql;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};
use serde_json::Value;

use super::super::typed_sql::{self as ts, Dialect, Param};
use super::SqliteStore;
use crate::error::{Error, Result};
use crate::model::typed::*;
use crate::model::Scope;
use crate::store::{MemoryQuery, PutOutcome, TypedStore};
use async_trait::async_trait;

macro_rules! memory_tables {
    ($types:literal) => {
        concat!(
            "CREATE TABLE memory_scopes (
                sid INTEGER PRIMARY KEY,
                user_id TEXT NOT NULL, agent_id TEXT NOT NULL,
                UNIQUE (user_id, agent_id)
            );
            CREATE TABLE memories (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                id TEXT NOT NULL UNIQUE,
                sid INTEGER NOT NULL REFERENCES memory_scopes (sid),
                type TEXT NOT NULL CHECK (type IN (",
            $types,
            ")),
                category TEXT NOT NULL,
                indexed INTEGER NOT NULL,
                content TEXT NOT NULL,
                metadata TEXT NOT NULL,
                upsert_key TEXT,
                origin TEXT,
                created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
                superseded_at INTEGER,
                recall_count INTEGER NOT NULL DEFAULT 0
            );
            CREATE INDEX memories_scope ON memories (sid, type, seq);
            CREATE UNIQUE INDEX memories_live_key ON memories (sid, type, upsert_key)
                WHERE upsert_key IS NOT NULL AND superseded_at IS NULL;
            CREATE TABLE memory_fields (
                sid INTEGER NOT NULL, path TEXT NOT NULL, kind TEXT NOT NULL,
                num REAL NOT NULL, txt TEXT NOT NULL, arr INTEGER NOT NULL,
                mem INTEGER NOT NULL REFERENCES memories (seq) ON DELETE CASCADE
            );
            CREATE INDEX memory_fields_txt ON memory_fields (sid, path, txt, mem);
            CREATE INDEX memory_fields_num ON memory_fields (sid, path, num, txt, mem);
            CREATE INDEX memory_fields_mem ON memory_fields (mem, path);"
        )
    };
}

/// Migration 7 of the private database: typed memories of all four types.
pub(crate) const MIGRATION: &str = memory_tables!("'fact','event','entity','relation'");
/// The whole schema of a team or public store: the same tables, but the
/// type column admits no event, and there is no table for messages,
/// sessions or events.
pub(crate) const SHARED_SCHEMA: &str = memory_tables!("'fact','entity','relation'");

pub(crate) use super::super::typed_sql::Pool;

fn sid(c: &Connection, p: Pool<'_>, create: bool) -> Result<Option<i64>> {
    let got: Option<i64> = c
        .query_row(
            "SELECT sid FROM memory_scopes WHERE user_id=?1 AND agent_id=?2",
            params![p.user_id, p.agent_id],
            |r| r.get(0),
        )
        .optional()?;
    if got.is_some() || !create {
        return Ok(got);
    }
    c.execute(
        "INSERT INTO memory_scopes (user_id, agent_id) VALUES (?1, ?2)",
        params![p.user_id, p.agent_id],
    )?;
    Ok(Some(c.last_insert_rowid()))
}

fn bind(p: Vec<Param>) -> Vec<Sql> {
    p.into_iter()
        .map(|v| match v {
            Param::Int(i) => Sql::Integer(i),
            Param::Real(f) => Sql::Real(f),
            Param::Bool(b) => Sql::Integer(b as i64),
            Param::Text(t) => Sql::Text(t),
            Param::OptText(t) => t.map_or(Sql::Null, Sql::Text),
            Param::Texts(ts) => Sql::Text(ts::json_list(&ts)),
        })
        .collect()
}

fn exec(c: &Connection, sql: &str, p: Vec<Param>) -> Result<usize> {
    Ok(c.prepare_cached(sql)?.execute(params_from_iter(bind(p)))?)
}

fn write_fields(c: &Connection, sid: i64, seq: i64, metadata: &Value) -> Result<()> {
    exec(c, ts::DELETE_FIELDS, vec![Param::Int(seq)])?;
    for l in ts::leaves(metadata) {
        exec(c, ts::INSERT_FIELD, l.params(sid, seq))?;
    }
    Ok(())
}

/// Stores `m` under the upsert rules of its type ([`ts::plan_put`]).
/// Returns the id that now holds it and what happened. `by` is the writing
/// user (entity provenance); `origin` is the private memory a shared copy
/// came from.
pub(crate) fn put(
    c: &mut Connection,
    pool: Pool<'_>,
    id: &MemoryId,
    m: &NewMemory,
    now: DateTime<Utc>,
    by: &str,
    origin: Option<&str>,
) -> Result<(MemoryId, PutOutcome)> {
    let tx = c.transaction()?;
    let sid = sid(&tx, pool, true)?.expect("created");
    let held = match m.kind.upsert_key() {
        Some(k) => tx
            .prepare_cached(ts::HELD)?
            .query_row(params![sid, m.kind.memory_type().as_str(), k], |r| {
                Ok(ts::Held { seq: r.get(0)?, id: r.get(1)?, metadata: r.get(2)? })
            })
            .optional()?,
        None => None,
    };
    let copy = match (&m.kind, origin) {
        (MemoryKind::Fact(_), Some(o)) => tx
            .prepare_cached(ts::COPY)?
            .query_row(params![sid, o], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?,
        _ => None,
    };
    let plan = ts::plan_put(Dialect::Sqlite, sid, pool.tier, id, m, now, by, origin, held, copy)?;
    for (sql, p) in plan.updates {
        exec(&tx, sql, p)?;
    }
    let seq = match plan.insert {
        Some(p) => tx
            .prepare_cached(ts::insert_memory(Dialect::Sqlite))?
            .query_row(params_from_iter(bind(p)), |r| r.get(0))?,
        None => plan.existing.expect("an update names its row"),
    };
    write_fields(&tx, sid, seq, &plan.metadata)?;
    tx.commit()?;
    Ok(plan.result)
}

fn raw(r: &rusqlite::Row<'_>) -> rusqlite::Result<ts::RawMemory> {
    Ok(ts::RawMemory {
        seq: r.get(0)?,
        id: r.get(1)?,
        memory_type: r.get(2)?,
        category: r.get(3)?,
        indexed: r.get(4)?,
        content: r.get(5)?,
        metadata: r.get(6)?,
        created_at: r.get(7)?,
        updated_at: r.get(8)?,
        superseded_at: r.get(9)?,
        recall_count: r.get(10)?,
        origin: r.get(11)?,
    })
}

/// One memory by id in `pool`; [`Error::NotFound`] when absent (other pools' ids included).
pub(crate) fn get(c: &Connection, pool: Pool<'_>, id: &MemoryId, source: &Visibility) -> Result<StoredMemory> {
    let Some(sid) = sid(c, pool, false)? else {
        return Err(Error::NotFound(format!("memory {id}")));
    };
    c.query_row(
        &format!("SELECT {} FROM memories m WHERE m.sid=?1 AND m.id=?2", ts::COLS),
        params![sid, id.as_str()],
        raw,
    )
    .optional()?
    .ok_or_else(|| Error::NotFound(format!("memory {id}")))?
    .into_memory(source)
}

/// Deletes one memory (and its fields); returns it. NotFound as [`get`].
pub(crate) fn delete(c: &mut Connection, pool: Pool<'_>, id: &MemoryId, source: &Visibility) -> Result<StoredMemory> {
    let held = get(c, pool, id, source)?;
    let tx = c.transaction()?;
    tx.execute(
        "DELETE FROM memory_fields WHERE mem=(SELECT seq FROM memories WHERE id=?1)",
        [id.as_str()],
    )?;
    tx.execute("DELETE FROM memories WHERE id=?1", [id.as_str()])?;
    tx.commit()?;
    Ok(held)
}

/// Adds `n` to the recall count of each `(id, n)` in `pool`, in one transaction.
pub(crate) fn bump_recalls(c: &mut Connection, pool: Pool<'_>, counts: &[(MemoryId, u64)]) -> Result<()> {
    let Some(sid) = sid(c, pool, false)? else { return Ok(()) };
    let tx = c.transaction()?;
    for (id, n) in counts {
        exec(&tx, ts::BUMP_RECALLS, vec![Param::Int(*n as i64), Param::Int(sid), Param::Text(id.as_str().to_string())])?;
    }
    tx.commit()?;
    Ok(())
}

/// Counts per type in `pool` (live and superseded).
pub(crate) fn counts(c: &Connection, pool: Pool<'_>) -> Result<Vec<(MemoryType, usize)>> {
    let Some(sid) = sid(c, pool, false)? else { return Ok(vec![]) };
    let mut st = c.prepare("SELECT type, COUNT(*) FROM memories WHERE sid=?1 GROUP BY type ORDER BY type")?;
    let rows = st.query_map([sid], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
    let mut out = Vec::new();
    for r in rows {
        let (t, n) = r?;
        out.push((MemoryType::parse(&t)?, n as usize));
    }
    Ok(out)
}

/// Indexed knowledge of every pool after `after` (seq), for `strata reindex`:
/// `(user_id, agent_id, seq, id, content)`.
pub(crate) fn indexed_page(c: &Connection, after: i64, limit: usize) -> Result<Vec<(String, String, i64, MemoryId, String)>> {
    let mut st = c.prepare(
        "SELECT s.user_id, s.agent_id, m.seq, m.id, m.content FROM memories m JOIN memory_scopes s ON s.sid = m.sid
         WHERE m.seq > ?1 AND m.indexed = 1 AND m.superseded_at IS NULL ORDER BY m.seq LIMIT ?2",
    )?;
    let rows = st.query_map(params![after, limit as i64], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get::<_, String>(3)?, r.get(4)?))
    })?;
    let mut out = Vec::new();
    for r in rows {
        let (u, a, s, id, content) = r?;
        out.push((u, a, s, MemoryId::parse(&id)?, content));
    }
    Ok(out)
}

/// Every memory id of a user's pools with its scope (erasure of the indexes).
pub(crate) fn user_memories(c: &Connection, user_id: &str) -> Result<Vec<(String, MemoryId)>> {
    let mut st = c.prepare(
        "SELECT s.agent_id, m.id FROM memories m JOIN memory_scopes s ON s.sid = m.sid WHERE s.user_id=?1",
    )?;
    let rows = st.query_map([user_id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
    let mut out = Vec::new();
    for r in rows {
        let (a, id) = r?;
        out.push((a, MemoryId::parse(&id)?));
    }
    Ok(out)
}

/// Deletes every memory of a user's pools (erasure); returns rows removed.
pub(crate) fn delete_user(tx: &Connection, user_id: &str) -> Result<usize> {
    tx.execute(
        "DELETE FROM memory_fields WHERE sid IN (SELECT sid FROM memory_scopes WHERE user_id=?1)",
        [user_id],
    )?;
    let n = tx.execute(
        "DELETE FROM memories WHERE sid IN (SELECT sid FROM memory_scopes WHERE user_id=?1)",
        [user_id],
    )?;
    tx.execute("DELETE FROM memory_scopes WHERE user_id=?1", [user_id])?;
    Ok(n)
}

/// What [`erase_contributor`] did in one shared store.
#[derive(Debug, Default)]
pub(crate) struct Erased {
    /// Memories deleted, with the agent of their pool (their index entries go too).
    pub deleted: Vec<(String, MemoryId)>,
    /// Federated entities that keep other members' attributes but lost the user's.
    pub rewritten: usize,
}

/// Erases everything `user_id` contributed to a shared store, in one
/// transaction, by [`ts::erase_action`]'s rule.
pub(crate) fn erase_contributor(c: &mut Connection, user_id: &str) -> Result<Erased> {
    let tx = c.transaction()?;
    let mut out = Erased::default();
    let rows: Vec<(i64, i64, String, String, String, String, Option<String>)> = {
        let mut st = tx.prepare(
            "SELECT m.seq, m.sid, s.agent_id, m.id, m.type, m.metadata, m.origin
             FROM memories m JOIN memory_scopes s ON s.sid = m.sid
             WHERE json_extract(m.origin, '$.user_id') = ?1
                OR (m.type = 'entity' AND EXISTS (
                    SELECT 1 FROM json_each(m.metadata, '$.provenance') p
                    WHERE json_extract(p.value, '$.by') = ?1))",
        )?;
        let got = st.query_map([user_id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?))
        })?;
        got.collect::<rusqlite::Result<_>>()?
    };
    for (seq, sid, agent, id, t, metadata, origin) in rows {
        let id = MemoryId::parse(&id)?;
        match ts::erase_action(user_id, &t, &metadata, origin.as_deref()) {
            ts::EraseAction::Delete => {
                exec(&tx, ts::DELETE_FIELDS, vec![Param::Int(seq)])?;
                tx.execute("DELETE FROM memories WHERE seq=?1", [seq])?;
                out.deleted.push((agent, id));
            }
            ts::EraseAction::Rewrite { metadata, content, clear_origin } => {
                exec(
                    &tx,
                    ts::REWRITE_ERASED,
                    vec![
                        Param::Text(metadata.to_string()),
                        Param::OptText(content),
                        Param::Bool(clear_origin),
                        Param::Int(seq),
                    ],
                )?;
                write_fields(&tx, sid, seq, &metadata)?;
                out.rewritten += 1;
            }
        }
    }
    tx.commit()?;
    Ok(out)
}

/// Every indexed, live memory of a shared store after `after` (seq), for
/// `strata reindex`: `(agent_id, seq, id, content)`.
pub(crate) fn shared_indexed_page(c: &Connection, after: i64, limit: usize) -> Result<Vec<(String, i64, MemoryId, String)>> {
    Ok(indexed_page(c, after, limit)?
        .into_iter()
        .map(|(_, a, s, id, content)| (a, s, id, content))
        .collect())
}

/// Runs a read ([`ts::build_select`]): the most selective equality may
/// drive it. Returns the page and the cursor of the next one.
pub(crate) fn query(c: &Connection, pool: Pool<'_>, q: &MemoryQuery, source: &Visibility) -> Result<(Vec<StoredMemory>, Option<String>)> {
    let Some(sid) = sid(c, pool, false)? else { return Ok((vec![], None)) };
    let mut counts = Vec::new();
    for (i, sql, p) in ts::driver_counts(q, sid) {
        let n: i64 = c.prepare_cached(&sql)?.query_row(params_from_iter(bind(p)), |r| r.get(0))?;
        counts.push((i, n));
    }
    let sel = ts::build_select(Dialect::Sqlite, q, sid, ts::pick_driver(&counts))?;
    let mut st = c.prepare_cached(&sel.sql)?;
    let mut rows = st.query(params_from_iter(bind(sel.params)))?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let leaf = if sel.order == ts::Order::Meta {
            Some((r.get::<_, f64>(12)?, r.get::<_, String>(13)?))
        } else {
            None
        };
        out.push((raw(r)?, leaf));
    }
    ts::finish_page(out, sel.order, q.limit, source)
}

/// Refreshes planner statistics (`PRAGMA optimize`, sampling at most 1000 rows per index).
pub(crate) fn optimize(c: &Connection) -> Result<()> {
    c.execute_batch("PRAGMA analysis_limit=1000; PRAGMA optimize=0x10002;")?;
    Ok(())
}

/// Table names of a database (schema assertions).
pub(crate) fn tables(c: &Connection) -> Result<Vec<String>> {
    let mut st = c.prepare("SELECT name FROM sqlite_master WHERE type IN ('table','view') ORDER BY name")?;
    let rows = st.query_map([], |r| r.get::<_, String>(0))?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

fn private(scope: &Scope) -> Pool<'_> {
    Pool {
        tier: ts::PRIVATE,
        user_id: scope.user_id(),
        agent_id: scope.agent_id(),
    }
}

#[async_trait]
impl TypedStore for SqliteStore {
    async fn put_memory(
        &self,
        scope: &Scope,
        id: &MemoryId,
        m: &NewMemory,
        now: DateTime<Utc>,
    ) -> Result<(MemoryId, PutOutcome)> {
        let (scope, id, m) = (scope.clone(), id.clone(), m.clone());
        self.run(move |c| put(c, private(&scope), &id, &m, now, scope.user_id(), None))
            .await
    }

    async fn query_memories(
        &self,
        scope: &Scope,
        q: &MemoryQuery,
    ) -> Result<(Vec<StoredMemory>, Option<String>)> {
        let (scope, q) = (scope.clone(), q.clone());
        self.run(move |c| query(c, private(&scope), &q, &Visibility::Private))
            .await
    }

    async fn memory(&self, scope: &Scope, id: &MemoryId) -> Result<StoredMemory> {
        let (scope, id) = (scope.clone(), id.clone());
        self.run(move |c| get(c, private(&scope), &id, &Visibility::Private))
            .await
    }

    async fn delete_memory(&self, scope: &Scope, id: &MemoryId) -> Result<StoredMemory> {
        let (scope, id) = (scope.clone(), id.clone());
        self.run(move |c| delete(c, private(&scope), &id, &Visibility::Private))
            .await
    }

    async fn count_recalls(&self, scope: &Scope, counts: &[(MemoryId, u64)]) -> Result<()> {
        if counts.is_empty() {
            return Ok(());
        }
        let (scope, counts) = (scope.clone(), counts.to_vec());
        self.run(move |c| bump_recalls(c, private(&scope), &counts)).await
    }

    async fn optimize_memories(&self) -> Result<()> {
        self.run(|c| optimize(c)).await
    }

    async fn memory_counts(&self, scope: &Scope) -> Result<Vec<(MemoryType, usize)>> {
        let scope = scope.clone();
        self.run(move |c| counts(c, private(&scope))).await
    }

    async fn memory_scopes(&self, search: &str, limit: usize) -> Result<Vec<(Scope, usize, chrono::DateTime<chrono::Utc>)>> {
        let search = search.to_string();
        self.run(move |c| {
            let mut st = c.prepare(
                "SELECT s.user_id, s.agent_id, COUNT(*), MAX(m.updated_at) FROM memories m JOIN memory_scopes s ON s.sid = m.sid
                 WHERE ?1 = '' OR instr(s.user_id, ?1) > 0 OR instr(s.agent_id, ?1) > 0
                 GROUP BY s.sid ORDER BY MAX(m.updated_at) DESC, s.user_id, s.agent_id LIMIT ?2",
            )?;
            let rows = st.query_map(rusqlite::params![search, limit as i64], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (user, agent, n, last) = row?;
                out.push((Scope::new(user, agent)?, n as usize, ts::from_ms(last)));
            }
            Ok(out)
        })
        .await
    }

    async fn total_memories(&self) -> Result<usize> {
        self.run(|c| Ok(c.query_row("SELECT COUNT(*) FROM memories", [], |r| r.get::<_, i64>(0))? as usize))
            .await
    }

    async fn user_memories(&self, user_id: &str) -> Result<Vec<(Scope, MemoryId)>> {
        let user = user_id.to_string();
        self.run(move |c| {
            user_memories(c, &user)?
                .into_iter()
                .map(|(a, id)| Ok((Scope::new(user.clone(), a)?, id)))
                .collect()
        })
        .await
    }

    async fn indexed_knowledge(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(Scope, i64, MemoryId, String)>> {
        self.run(move |c| {
            indexed_page(c, after, limit)?
                .into_iter()
                .map(|(u, a, seq, id, content)| Ok((Scope::new(u, a)?, seq, id, content)))
                .collect()
        })
        .await
    }
}
