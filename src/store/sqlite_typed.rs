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
use serde_json::{json, Value};

use super::{from_ms, ms, SqliteStore};
use crate::store::{MemoryQuery, PutOutcome, TypedStore};
use crate::model::Scope;
use async_trait::async_trait;
use crate::error::{Error, Result};
use crate::model::filter::{Direction, Field, Filter, Scalar};
use crate::model::typed::*;

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

/// Whose memories a call reads or writes: a user's private pool, or a
/// shared store's pool for one agent (`user_id` = "").
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pool<'a> {
    pub user_id: &'a str,
    pub agent_id: &'a str,
}

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

/// One metadata leaf.
struct Leaf {
    path: String,
    kind: &'static str,
    num: f64,
    txt: String,
    arr: bool,
}

fn flatten(prefix: &str, v: &Value, arr: bool, out: &mut Vec<Leaf>) {
    let leaf = |kind, num, txt: String| Leaf {
        path: prefix.to_string(),
        kind,
        num,
        txt,
        arr,
    };
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&p, v, arr, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|v| flatten(prefix, v, true, out)),
        Value::String(s) => out.push(match DateTime::parse_from_rfc3339(s) {
            Ok(t) => leaf("t", t.timestamp_millis() as f64, s.clone()),
            Err(_) => leaf("s", 0.0, s.clone()),
        }),
        Value::Number(n) => out.push(leaf("n", n.as_f64().unwrap_or(0.0), String::new())),
        Value::Bool(b) => out.push(leaf("b", if *b { 1.0 } else { 0.0 }, b.to_string())),
        Value::Null => out.push(leaf("z", 0.0, String::new())),
    }
}

fn write_fields(c: &Connection, sid: i64, seq: i64, metadata: &Value) -> Result<()> {
    c.execute("DELETE FROM memory_fields WHERE mem=?1", [seq])?;
    let mut leaves = Vec::new();
    // provenance is bookkeeping, not data to filter on
    if let Value::Object(m) = metadata {
        for (k, v) in m.iter().filter(|(k, _)| k.as_str() != "provenance") {
            flatten(k, v, false, &mut leaves);
        }
    }
    let mut st = c.prepare_cached(
        "INSERT INTO memory_fields (sid, path, kind, num, txt, arr, mem) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for l in leaves {
        st.execute(params![sid, l.path, l.kind, l.num, l.txt, l.arr, seq])?;
    }
    Ok(())
}

/// The rule entities merge by, in the private store and across team
/// members: per attribute, the value with the newest `observed_at` wins; on
/// a tie, the later write wins. Each attribute keeps `provenance.<name>` =
/// `{observed_at, by (user id), from (the write's content)}`. Relation lists
/// are unioned (first-seen order); `entity_type` and `content` follow the
/// newest observation.
pub(crate) fn merge_entity(
    old: &Value,
    new: &EntityMetadata,
    observed: DateTime<Utc>,
    by: &str,
    from: &str,
) -> Value {
    let mut out = old.as_object().cloned().unwrap_or_default();
    let mut attrs = out
        .get("attributes")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut prov = out
        .get("provenance")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let stamp = json!({"observed_at": observed.to_rfc3339_opts(chrono::SecondsFormat::Millis, true), "by": by, "from": from});
    for (k, v) in &new.attributes {
        let held = prov
            .get(k)
            .and_then(|p| p.get("observed_at"))
            .and_then(Value::as_str)
            .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
            .map(|t| t.with_timezone(&Utc));
        if held.is_none_or(|h| observed >= h) {
            attrs.insert(k.clone(), v.clone());
            prov.insert(k.clone(), stamp.clone());
        }
    }
    let mut rels = out
        .get("relations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (name, keys) in &new.relations {
        let list = rels.entry(name.clone()).or_insert_with(|| json!([]));
        if let Value::Array(a) = list {
            for k in keys {
                if !a.iter().any(|x| x.as_str() == Some(k)) {
                    a.push(Value::String(k.clone()));
                }
            }
        }
    }
    let held_at = out
        .get("observed_at")
        .and_then(Value::as_str)
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc));
    if held_at.is_none_or(|h| observed >= h) {
        out.insert("entity_type".into(), json!(new.entity_type));
        out.insert(
            "observed_at".into(),
            json!(observed.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
        );
    }
    out.entry("identity_key").or_insert(json!(new.identity_key));
    out.insert("attributes".into(), Value::Object(attrs));
    out.insert("relations".into(), Value::Object(rels));
    out.insert("provenance".into(), Value::Object(prov));
    Value::Object(out)
}

/// Stores `m` under the upsert rules of its type (supersede, merge, update,
/// append). Returns the id that now holds it and what happened. `by` is the
/// writing user (entity provenance); `origin` is the private memory a shared
/// copy came from.
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
    let t = m.kind.memory_type();
    let key = m.kind.upsert_key();
    let now_ms = ms(now);
    let held: Option<(i64, String, String, i64)> = match &key {
        Some(k) => tx
            .query_row(
                "SELECT seq, id, metadata, updated_at FROM memories
                 WHERE sid=?1 AND type=?2 AND upsert_key=?3 AND superseded_at IS NULL",
                params![sid, t.as_str(), k],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()?,
        None => None,
    };
    let mut metadata = m.kind.metadata_json();
    // sharing the same private fact again refreshes its copy (same id, same
    // recall count) instead of adding a second one
    if let (MemoryKind::Fact(_), Some(o)) = (&m.kind, origin) {
        let copy: Option<(i64, String)> = tx
            .query_row(
                "SELECT seq, id FROM memories WHERE sid=?1 AND type='fact' AND origin=?2 AND superseded_at IS NULL",
                params![sid, o],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        if let Some((seq, copy_id)) = copy {
            tx.execute(
                "UPDATE memories SET content=?2, metadata=?3, indexed=?4, upsert_key=?5, updated_at=?6 WHERE seq=?1",
                params![seq, m.content, metadata.to_string(), m.is_indexed(), key, now_ms],
            )?;
            write_fields(&tx, sid, seq, &metadata)?;
            tx.commit()?;
            return Ok((MemoryId::parse(&copy_id)?, PutOutcome::Updated));
        }
    }
    let outcome = match (&m.kind, held) {
        (MemoryKind::Entity(e), Some((seq, held_id, old, _))) => {
            let old: Value = serde_json::from_str(&old).unwrap_or(Value::Null);
            let observed = e.observed_at.unwrap_or(now);
            metadata = merge_entity(&old, e, observed, by, &m.content);
            let newest = metadata.get("observed_at") == Some(&json!(observed.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)));
            tx.execute(
                "UPDATE memories SET metadata=?2, updated_at=?3, content=CASE WHEN ?5 THEN ?4 ELSE content END WHERE seq=?1",
                params![seq, metadata.to_string(), now_ms, m.content, newest],
            )?;
            write_fields(&tx, sid, seq, &metadata)?;
            tx.commit()?;
            return Ok((MemoryId::parse(&held_id)?, PutOutcome::Merged));
        }
        (MemoryKind::Relation(_), Some((seq, held_id, _, _))) => {
            tx.execute(
                "UPDATE memories SET metadata=?2, updated_at=?3, content=?4 WHERE seq=?1",
                params![seq, metadata.to_string(), now_ms, m.content],
            )?;
            write_fields(&tx, sid, seq, &metadata)?;
            tx.commit()?;
            return Ok((MemoryId::parse(&held_id)?, PutOutcome::Updated));
        }
        (MemoryKind::Fact(_), Some((seq, held_id, _, _))) => {
            tx.execute(
                "UPDATE memories SET superseded_at=?2 WHERE seq=?1",
                params![seq, now_ms],
            )?;
            PutOutcome::Superseded(MemoryId::parse(&held_id)?)
        }
        (MemoryKind::Entity(e), None) => {
            metadata = merge_entity(&json!({}), e, e.observed_at.unwrap_or(now), by, &m.content);
            PutOutcome::Created
        }
        _ => PutOutcome::Created,
    };
    tx.execute(
        "INSERT INTO memories (id, sid, type, category, indexed, content, metadata, upsert_key, origin, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)",
        params![id.as_str(), sid, t.as_str(), t.category().as_str(), m.is_indexed(), m.content, metadata.to_string(), key, origin, now_ms],
    )?;
    let seq = tx.last_insert_rowid();
    write_fields(&tx, sid, seq, &metadata)?;
    tx.commit()?;
    Ok((id.clone(), outcome))
}

const COLS: &str = "m.seq, m.id, m.type, m.category, m.indexed, m.content, m.metadata, m.created_at, m.updated_at, m.superseded_at, m.recall_count, m.origin";

fn row(r: &rusqlite::Row<'_>, source: &Visibility) -> rusqlite::Result<(i64, StoredMemory)> {
    let conv = |e: Error| rusqlite::Error::InvalidParameterName(e.to_string());
    let t: String = r.get(2)?;
    let c: String = r.get(3)?;
    let md: String = r.get(6)?;
    Ok((
        r.get(0)?,
        StoredMemory {
            id: MemoryId::parse(&r.get::<_, String>(1)?).map_err(conv)?,
            memory_type: MemoryType::parse(&t).map_err(conv)?,
            category: Category::parse(&c).map_err(conv)?,
            indexed: r.get(4)?,
            content: r.get(5)?,
            metadata: serde_json::from_str(&md).unwrap_or(Value::Null),
            created_at: from_ms(r.get(7)?),
            updated_at: from_ms(r.get(8)?),
            superseded_at: r.get::<_, Option<i64>>(9)?.map(from_ms),
            recall_count: r.get::<_, i64>(10)? as u64,
            source: source.clone(),
            shared_by: r
                .get::<_, Option<String>>(11)?
                .and_then(|o| serde_json::from_str::<Value>(&o).ok())
                .and_then(|o| o.get("user_id").and_then(Value::as_str).map(str::to_string)),
            score: None,
        },
    ))
}

/// One memory by id in `pool`; [`Error::NotFound`] when absent (other pools' ids included).
pub(crate) fn get(c: &Connection, pool: Pool<'_>, id: &MemoryId, source: &Visibility) -> Result<StoredMemory> {
    let Some(sid) = sid(c, pool, false)? else {
        return Err(Error::NotFound(format!("memory {id}")));
    };
    c.query_row(
        &format!("SELECT {COLS} FROM memories m WHERE m.sid=?1 AND m.id=?2"),
        params![sid, id.as_str()],
        |r| row(r, source),
    )
    .optional()?
    .map(|(_, m)| m)
    .ok_or_else(|| Error::NotFound(format!("memory {id}")))
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
    {
        let mut st = tx.prepare_cached("UPDATE memories SET recall_count = recall_count + ?3 WHERE sid=?1 AND id=?2")?;
        for (id, n) in counts {
            st.execute(params![sid, id.as_str(), *n as i64])?;
        }
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
/// transaction: fact copies and relations they shared are deleted; a
/// federated entity loses the attributes whose provenance names them (and
/// is deleted when no other member's attribute remains); an entity they
/// first shared but others extended keeps the others' attributes, with its
/// origin cleared and its content and observation time taken from the
/// newest remaining attribute. Relation-name lists of entities are not
/// attributed to members and stay.
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
        let mut md: Value = serde_json::from_str(&metadata).unwrap_or(Value::Null);
        let by_user = |p: &Value| p.get("by").and_then(Value::as_str) == Some(user_id);
        let others = t == "entity"
            && md
                .get("provenance")
                .and_then(Value::as_object)
                .is_some_and(|p| p.values().any(|f| !by_user(f)));
        if !others {
            tx.execute("DELETE FROM memory_fields WHERE mem=?1", [seq])?;
            tx.execute("DELETE FROM memories WHERE seq=?1", [seq])?;
            out.deleted.push((agent, id));
            continue;
        }
        let mut newest: Option<(String, String)> = None;
        if let Some(o) = md.as_object_mut() {
            let mine: Vec<String> = o
                .get("provenance")
                .and_then(Value::as_object)
                .map(|p| p.iter().filter(|(_, f)| by_user(f)).map(|(k, _)| k.clone()).collect())
                .unwrap_or_default();
            for k in &mine {
                if let Some(a) = o.get_mut("attributes").and_then(Value::as_object_mut) {
                    a.remove(k);
                }
                if let Some(p) = o.get_mut("provenance").and_then(Value::as_object_mut) {
                    p.remove(k);
                }
            }
            if let Some(p) = o.get("provenance").and_then(Value::as_object) {
                for f in p.values() {
                    let at = f.get("observed_at").and_then(Value::as_str).unwrap_or_default();
                    if newest.as_ref().is_none_or(|(n, _)| at > n.as_str()) {
                        let from = f.get("from").and_then(Value::as_str).unwrap_or_default();
                        newest = Some((at.to_string(), from.to_string()));
                    }
                }
            }
            if let Some((at, _)) = &newest {
                o.insert("observed_at".into(), json!(at));
            }
        }
        let shared_by_user = origin
            .as_deref()
            .and_then(|o| serde_json::from_str::<Value>(o).ok())
            .is_some_and(|o| o.get("user_id").and_then(Value::as_str) == Some(user_id));
        tx.execute(
            "UPDATE memories SET metadata=?2, content=COALESCE(?3, content),
                 origin=CASE WHEN ?4 THEN NULL ELSE origin END WHERE seq=?1",
            params![seq, md.to_string(), newest.map(|(_, from)| from), shared_by_user],
        )?;
        write_fields(&tx, sid, seq, &md)?;
        out.rewritten += 1;
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

fn column(f: &Field) -> Option<&'static str> {
    Some(match f {
        Field::Type => "m.type",
        Field::Category => "m.category",
        Field::Id => "m.id",
        Field::Indexed => "m.indexed",
        Field::CreatedAt => "m.created_at",
        Field::UpdatedAt => "m.updated_at",
        Field::Meta(_) => return None,
    })
}

fn top_value(s: &Scalar) -> Sql {
    match s {
        Scalar::Str(t) => Sql::Text(t.clone()),
        Scalar::Time(_, t) => Sql::Integer(*t),
        Scalar::Num(n) => Sql::Real(*n),
        Scalar::Bool(b) => Sql::Integer(*b as i64),
        Scalar::Null => Sql::Null,
    }
}

/// Appends the matchers of `vs`, grouped by kind so each group is one
/// index-friendly `IN` list: `((kind='s' AND txt IN (?, ?)) OR (kind='n' AND num IN (?)))`.
fn matchers(vs: &[Scalar], sql: &mut String, p: &mut Vec<Sql>) {
    let mut groups: Vec<(&str, &str, Vec<Sql>)> = Vec::new();
    let mut null = false;
    for v in vs {
        let (kind, col, val) = match v {
            Scalar::Str(t) => ("s", "txt", Sql::Text(t.clone())),
            Scalar::Time(_, t) => ("t", "num", Sql::Real(*t as f64)),
            Scalar::Num(n) => ("n", "num", Sql::Real(*n)),
            Scalar::Bool(b) => ("b", "num", Sql::Real(if *b { 1.0 } else { 0.0 })),
            Scalar::Null => {
                null = true;
                continue;
            }
        };
        match groups.iter_mut().find(|g| g.0 == kind) {
            Some(g) => g.2.push(val),
            None => groups.push((kind, col, vec![val])),
        }
    }
    sql.push('(');
    let mut first = true;
    for (kind, col, vals) in groups {
        if !first {
            sql.push_str(" OR ");
        }
        first = false;
        sql.push_str(&format!("(kind='{kind}' AND {col} IN ("));
        for (i, v) in vals.into_iter().enumerate() {
            sql.push_str(if i == 0 { "?" } else { ", ?" });
            p.push(v);
        }
        sql.push_str("))");
    }
    if null {
        if !first {
            sql.push_str(" OR ");
        }
        sql.push_str("kind='z'");
    }
    sql.push(')');
}

/// Opens a condition on a metadata path. `drive`: as `m.seq IN (SELECT mem
/// ...)`, which the planner can use to drive the query from the field index
/// (selective equalities with no sort); otherwise as a correlated `EXISTS`
/// probe of one memory's fields (when an index order drives, and for
/// negations and ranges, which select much). Close with `)`.
fn open_path(path: &str, sid: i64, drive: bool, sql: &mut String, p: &mut Vec<Sql>) {
    if drive {
        sql.push_str("m.seq IN (SELECT mem FROM memory_fields WHERE sid=? AND path=?");
        p.push(Sql::Integer(sid));
    } else {
        sql.push_str("EXISTS (SELECT 1 FROM memory_fields WHERE mem=m.seq AND path=?");
    }
    p.push(Sql::Text(path.to_string()));
}

/// Appends the SQL of `f` (a boolean expression over `m`) to `sql`;
/// `drive` as in [`open_path`] for equalities.
fn compile(f: &Filter, sid: i64, drive: bool, sql: &mut String, p: &mut Vec<Sql>) {
    match f {
        Filter::All => sql.push('1'),
        Filter::And(fs) | Filter::Or(fs) => {
            let op = if matches!(f, Filter::And(_)) { " AND " } else { " OR " };
            sql.push('(');
            for (i, g) in fs.iter().enumerate() {
                if i > 0 {
                    sql.push_str(op);
                }
                compile(g, sid, drive, sql, p);
            }
            sql.push(')');
        }
        Filter::Eq(field, s) | Filter::Ne(field, s) => {
            let neg = matches!(f, Filter::Ne(..));
            match (column(field), field) {
                (Some(col), _) => {
                    sql.push_str(&format!("({col} {} ?)", if neg { "!=" } else { "=" }));
                    p.push(top_value(s));
                }
                (None, Field::Meta(path)) => {
                    if neg {
                        sql.push_str("NOT ");
                    }
                    open_path(path, sid, drive && !neg, sql, p);
                    sql.push_str(" AND ");
                    matchers(std::slice::from_ref(s), sql, p);
                    sql.push(')');
                }
                _ => unreachable!("column() covers every top-level field"),
            }
        }
        Filter::In(field, vs) | Filter::Nin(field, vs) => {
            let neg = matches!(f, Filter::Nin(..));
            if vs.is_empty() {
                sql.push_str(if neg { "1" } else { "0" });
                return;
            }
            match (column(field), field) {
                (Some(col), _) => {
                    sql.push_str(&format!("({col} {}IN (", if neg { "NOT " } else { "" }));
                    for (i, v) in vs.iter().enumerate() {
                        sql.push_str(if i == 0 { "?" } else { ", ?" });
                        p.push(top_value(v));
                    }
                    sql.push_str("))");
                }
                (None, Field::Meta(path)) => {
                    if neg {
                        sql.push_str("NOT ");
                    }
                    open_path(path, sid, drive && !neg, sql, p);
                    sql.push_str(" AND ");
                    matchers(vs, sql, p);
                    sql.push(')');
                }
                _ => unreachable!("column() covers every top-level field"),
            }
        }
        Filter::Exists(field, want) => match field {
            Field::Meta(path) => {
                if !want {
                    sql.push_str("NOT ");
                }
                open_path(path, sid, false, sql, p);
                sql.push(')');
            }
            _ => sql.push_str(if *want { "1" } else { "0" }),
        },
        Filter::Range(field, cmp, s) => {
            let (kind, v) = match s {
                Scalar::Time(_, t) => ("t", *t as f64),
                Scalar::Num(n) => ("n", *n),
                _ => unreachable!("the parser admits only numbers and timestamps in ranges"),
            };
            match field {
                Field::Meta(path) => {
                    open_path(path, sid, false, sql, p);
                    sql.push_str(&format!(" AND kind='{kind}' AND num {} ?)", cmp.sql()));
                    p.push(Sql::Real(v));
                }
                other => {
                    let col = column(other).expect("top-level field");
                    sql.push_str(&format!("({col} {} ?)", cmp.sql()));
                    p.push(match s {
                        Scalar::Time(_, t) => Sql::Integer(*t),
                        _ => Sql::Real(v),
                    });
                }
            }
        }
    }
}

/// Above this many matching field rows an equality does not drive a
/// query: walking the type's memories newest first and probing each finds
/// `top_k` matches sooner than reading every match.
const DRIVE_CAP: i64 = 500;

/// The top-level equality (or `$in`) on a metadata path that matches the
/// fewest field rows, if fewer than [`DRIVE_CAP`]: the query is driven from
/// it. One capped index count per candidate.
fn pick_driver(c: &Connection, sid: i64, parts: &[&Filter]) -> Result<Option<usize>> {
    let mut best: Option<(usize, i64)> = None;
    for (i, f) in parts.iter().enumerate() {
        let (path, vs) = match f {
            Filter::Eq(Field::Meta(path), v) => (path, std::slice::from_ref(v)),
            Filter::In(Field::Meta(path), vs) if !vs.is_empty() => (path, vs.as_slice()),
            _ => continue,
        };
        let mut sql = String::from("SELECT count(*) FROM (SELECT 1 FROM memory_fields WHERE sid=? AND path=? AND ");
        let mut p = vec![Sql::Integer(sid), Sql::Text(path.clone())];
        matchers(vs, &mut sql, &mut p);
        sql.push_str(" LIMIT ?)");
        p.push(Sql::Integer(DRIVE_CAP));
        let n: i64 = c.prepare_cached(&sql)?.query_row(params_from_iter(p.iter()), |r| r.get(0))?;
        if n < DRIVE_CAP && best.is_none_or(|(_, b)| n < b) {
            best = Some((i, n));
        }
    }
    Ok(best.map(|(i, _)| i))
}

fn encode_cursor(parts: &[Value]) -> String {
    format!("c{}", hex::encode(Value::Array(parts.to_vec()).to_string()))
}

/// Decodes a cursor whose parts must have the kinds of `shape`: `n` a
/// number, `s` text, `i` an integer (a cursor of another read, or forged,
/// is refused rather than answered with a wrong page).
fn decode_cursor(s: &str, shape: &str) -> Result<Vec<Value>> {
    let bad = || Error::InvalidInput(format!("malformed cursor {s:?}: pass back the next_cursor of the previous page unchanged, with the same sort_by"));
    let hex = s.strip_prefix('c').ok_or_else(bad)?;
    let bytes = hex::decode(hex).map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    match v {
        Value::Array(a)
            if a.len() == shape.len()
                && a.iter().zip(shape.chars()).all(|(v, k)| match k {
                    'n' => v.is_number(),
                    's' => v.is_string(),
                    _ => v.is_i64(),
                }) =>
        {
            Ok(a)
        }
        _ => Err(bad()),
    }
}

/// Runs a read: the filter (compiled to SQL over the field index), the
/// order, keyset pagination. Returns the page and the cursor of the next one.
pub(crate) fn query(c: &Connection, pool: Pool<'_>, q: &MemoryQuery, source: &Visibility) -> Result<(Vec<StoredMemory>, Option<String>)> {
    let Some(sid) = sid(c, pool, false)? else { return Ok((vec![], None)) };
    let mut p: Vec<Sql> = Vec::new();
    let mut sql;
    let desc = q.direction == Direction::Desc;
    let (dir, cmp) = if desc { ("DESC", "<") } else { ("ASC", ">") };
    let meta_sort = match &q.sort {
        Some(Field::Meta(path)) => Some(path.clone()),
        _ => None,
    };
    if let Some(path) = &meta_sort {
        sql = format!("SELECT {COLS}, s.num, s.txt FROM memory_fields s JOIN memories m ON m.seq = s.mem WHERE s.sid=? AND s.path=? AND s.arr=0 AND m.sid=?");
        p.extend([Sql::Integer(sid), Sql::Text(path.clone()), Sql::Integer(sid)]);
        // a range on the sort path bounds the index walk itself ("events since
        // a date, newest first" starts at the date instead of probing each row)
        let parts: Vec<&Filter> = match &q.filter {
            Filter::And(fs) => fs.iter().collect(),
            f => vec![f],
        };
        for f in parts {
            if let Filter::Range(Field::Meta(rp), cmp, v) = f {
                let (kind, n) = match v {
                    Scalar::Time(_, t) => ("t", *t as f64),
                    Scalar::Num(n) => ("n", *n),
                    _ => continue,
                };
                if rp == path {
                    sql.push_str(&format!(" AND s.kind='{kind}' AND s.num {} ?", cmp.sql()));
                    p.push(Sql::Real(n));
                }
            }
        }
    } else {
        sql = format!("SELECT {COLS} FROM memories m WHERE m.sid=?");
        p.push(Sql::Integer(sid));
    }
    if !q.include_superseded {
        sql.push_str(" AND m.superseded_at IS NULL");
    }
    if let Some(ids) = &q.only {
        // one parameter whatever the count (a widened semantic search can
        // pass more ids than SQLite allows variables), one cached statement
        sql.push_str(" AND m.id IN (SELECT value FROM json_each(?))");
        p.push(Sql::Text(Value::Array(ids.iter().map(|i| Value::String(i.as_str().to_string())).collect()).to_string()));
    }
    if q.filter != Filter::All {
        sql.push_str(" AND ");
        // with an index order driving (a sort), every condition is a probe of
        // the row at hand; otherwise the most selective equality may drive
        let parts: Vec<&Filter> = match &q.filter {
            Filter::And(fs) => fs.iter().collect(),
            f => vec![f],
        };
        let driver = if q.sort.is_none() { pick_driver(c, sid, &parts)? } else { None };
        sql.push('(');
        for (i, f) in parts.iter().enumerate() {
            if i > 0 {
                sql.push_str(" AND ");
            }
            compile(f, sid, driver == Some(i), &mut sql, &mut p);
        }
        sql.push(')');
    }
    let order_col = match q.sort {
        Some(Field::CreatedAt) => Some("m.created_at"),
        Some(Field::UpdatedAt) => Some("m.updated_at"),
        _ => None,
    };
    if let Some(cur) = q.cursor.as_deref() {
        if meta_sort.is_some() {
            let v = decode_cursor(cur, "nsi")?;
            sql.push_str(&format!(" AND (s.num, s.txt, s.mem) {cmp} (?, ?, ?)"));
            p.push(Sql::Real(v[0].as_f64().unwrap_or(0.0)));
            p.push(Sql::Text(v[1].as_str().unwrap_or("").to_string()));
            p.push(Sql::Integer(v[2].as_i64().unwrap_or(0)));
        } else if let Some(col) = order_col {
            let v = decode_cursor(cur, "ii")?;
            sql.push_str(&format!(" AND ({col}, m.seq) {cmp} (?, ?)"));
            p.push(Sql::Integer(v[0].as_i64().unwrap_or(0)));
            p.push(Sql::Integer(v[1].as_i64().unwrap_or(0)));
        } else {
            let v = decode_cursor(cur, "i")?;
            sql.push_str(&format!(" AND m.seq {cmp} ?"));
            p.push(Sql::Integer(v[0].as_i64().unwrap_or(0)));
        }
    }
    if meta_sort.is_some() {
        // s.mem (= m.seq) keeps the whole order in the index: ordering by m.seq
        // made SQLite sort each group of equal values in a temporary b-tree
        sql.push_str(&format!(" ORDER BY s.num {dir}, s.txt {dir}, s.mem {dir}"));
    } else if let Some(col) = order_col {
        sql.push_str(&format!(" ORDER BY {col} {dir}, m.seq {dir}"));
    } else {
        sql.push_str(&format!(" ORDER BY m.seq {dir}"));
    }
    sql.push_str(" LIMIT ?");
    p.push(Sql::Integer(q.limit as i64 + 1));
    let mut st = c.prepare_cached(&sql)?;
    let mut rows = st.query(params_from_iter(p.iter()))?;
    let mut out: Vec<(StoredMemory, Vec<Value>)> = Vec::new();
    while let Some(r) = rows.next()? {
        let (seq, m) = row(r, source)?;
        let key = if meta_sort.is_some() {
            vec![json!(r.get::<_, f64>(12)?), json!(r.get::<_, String>(13)?), json!(seq)]
        } else if let Some(col) = order_col {
            let t = if col == "m.created_at" { m.created_at } else { m.updated_at };
            vec![json!(ms(t)), json!(seq)]
        } else {
            vec![json!(seq)]
        };
        out.push((m, key));
    }
    let next = if out.len() > q.limit {
        out.truncate(q.limit);
        out.last().map(|(_, k)| encode_cursor(k))
    } else {
        None
    };
    Ok((out.into_iter().map(|(m, _)| m).collect(), next))
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
