//! What the SQLite and PostgreSQL typed-memory stores share: the write
//! rules of each type ([`plan_put`], [`merge_entity`], [`erase_action`]),
//! the flattening of metadata into field rows ([`leaves`]), the filter
//! compiler and the page builder ([`build_select`], [`finish_page`]). The
//! stores only run the statements: SQL here is written with `?`
//! placeholders and a [`Param`] list; SQLite binds them as they are, the
//! PostgreSQL store numbers them (`$1::bigint`, ...).
//!
//! Both stores have the same tables (`memory_scopes`, `memories`,
//! `memory_fields`, see [`crate::store::sqlite`] migration 7 and
//! [`crate::store::postgres::MIGRATIONS`] 2) with the same column names.
//!
//! Leaf kinds: `s` text, `t` RFC 3339 timestamp (text, and its instant in
//! ms in `num`), `n` number, `b` boolean (`num` 0/1), `z` null. An array's
//! elements share its path (`arr` true), so equality on it means "contains";
//! sorts use only non-array leaves.

use chrono::{DateTime, TimeZone, Utc};
use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::model::filter::{Direction, Field, Filter, Scalar};
use crate::model::Scope;
use crate::model::typed::{
    Category, EntityMetadata, MemoryId, MemoryKind, MemoryType, NewMemory, Shareable, StoredMemory, Visibility,
};
use crate::store::{MemoryQuery, PutOutcome};

/// Whose memories a call reads or writes: a user's private pool (`tier`
/// "private"), or a shared tier's pool for one agent (`user_id` = "",
/// `tier` the [`Visibility::label`]). The SQLite store keeps each tier in
/// its own file and ignores `tier`; PostgreSQL keeps them all in one table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pool<'a> {
    pub tier: &'a str,
    pub user_id: &'a str,
    pub agent_id: &'a str,
}

/// The tier label of the private pools.
pub(crate) const PRIVATE: &str = "private";

/// A bound value of a statement.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Param {
    /// 64-bit integer (ms timestamps, sequence numbers, counts).
    Int(i64),
    /// Double.
    Real(f64),
    /// Boolean (an INTEGER 0/1 in SQLite, a BOOLEAN in PostgreSQL).
    Bool(bool),
    /// Text.
    Text(String),
    /// A text that may be NULL.
    OptText(Option<String>),
    /// A list of texts (a JSON array for SQLite's `json_each`, a `text[]`
    /// for PostgreSQL's `= ANY`).
    Texts(Vec<String>),
}

/// The SQL dialect a statement is built for (the few places they differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// SQLite 3.35+ (RETURNING, row values).
    Sqlite,
    /// PostgreSQL 13+.
    Postgres,
}

/// The columns every memory read selects, in [`RawMemory`] order.
pub(crate) const COLS: &str = "m.seq, m.id, m.type, m.category, m.indexed, m.content, m.metadata, m.created_at, m.updated_at, m.superseded_at, m.recall_count, m.origin";

/// The live memory holding an upsert key: `(sid, type, key)` → `seq, id, metadata`.
pub(crate) const HELD: &str = "SELECT seq, id, metadata FROM memories WHERE sid=? AND type=? AND upsert_key=? AND superseded_at IS NULL";
/// The live copy of a shared fact: `(sid, origin)` → `seq, id`.
pub(crate) const COPY: &str = "SELECT seq, id FROM memories WHERE sid=? AND type='fact' AND origin=? AND superseded_at IS NULL";
/// Removes a memory's field rows: `(seq)`.
pub(crate) const DELETE_FIELDS: &str = "DELETE FROM memory_fields WHERE mem=?";
/// One field row: `(sid, path, kind, num, txt, arr, mem)`.
pub(crate) const INSERT_FIELD: &str =
    "INSERT INTO memory_fields (sid, path, kind, num, txt, arr, mem) VALUES (?, ?, ?, ?, ?, ?, ?)";
/// Adds to a recall count: `(n, sid, id)`.
pub(crate) const BUMP_RECALLS: &str = "UPDATE memories SET recall_count = recall_count + ? WHERE sid=? AND id=?";
/// Rewrites an entity a contributor left: `(metadata, content or NULL, clear origin, seq)`.
pub(crate) const REWRITE_ERASED: &str = "UPDATE memories SET metadata=?, content=COALESCE(?, content),
     origin=CASE WHEN ? THEN NULL ELSE origin END WHERE seq=?";

/// ms since the epoch.
pub(crate) fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// The instant of ms since the epoch (the epoch for an out-of-range value).
pub(crate) fn from_ms(v: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(v).single().unwrap_or_default()
}

/// One metadata leaf (a `memory_fields` row).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Leaf {
    pub path: String,
    pub kind: &'static str,
    pub num: f64,
    pub txt: String,
    pub arr: bool,
}

impl Leaf {
    /// The [`INSERT_FIELD`] parameters of this leaf.
    pub(crate) fn params(&self, sid: i64, seq: i64) -> Vec<Param> {
        vec![
            Param::Int(sid),
            Param::Text(self.path.clone()),
            Param::Text(self.kind.to_string()),
            Param::Real(self.num),
            Param::Text(self.txt.clone()),
            Param::Bool(self.arr),
            Param::Int(seq),
        ]
    }
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

/// The field rows of a memory's metadata (`provenance` is bookkeeping, not
/// data to filter on, and is left out).
pub(crate) fn leaves(metadata: &Value) -> Vec<Leaf> {
    let mut out = Vec::new();
    if let Value::Object(m) = metadata {
        for (k, v) in m.iter().filter(|(k, _)| k.as_str() != "provenance") {
            flatten(k, v, false, &mut out);
        }
    }
    out
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn parse_stamp(v: Option<&Value>) -> Option<DateTime<Utc>> {
    v.and_then(Value::as_str)
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
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
    let field = |out: &serde_json::Map<String, Value>, k: &str| {
        out.get(k).and_then(Value::as_object).cloned().unwrap_or_default()
    };
    let (mut attrs, mut prov, mut rels) = (
        field(&out, "attributes"),
        field(&out, "provenance"),
        field(&out, "relations"),
    );
    let stamp_v = json!({"observed_at": stamp(observed), "by": by, "from": from});
    for (k, v) in &new.attributes {
        let held = parse_stamp(prov.get(k).and_then(|p| p.get("observed_at")));
        if held.is_none_or(|h| observed >= h) {
            attrs.insert(k.clone(), v.clone());
            prov.insert(k.clone(), stamp_v.clone());
        }
    }
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
    if parse_stamp(out.get("observed_at")).is_none_or(|h| observed >= h) {
        out.insert("entity_type".into(), json!(new.entity_type));
        out.insert("observed_at".into(), json!(stamp(observed)));
    }
    out.entry("identity_key").or_insert(json!(new.identity_key));
    out.insert("attributes".into(), Value::Object(attrs));
    out.insert("relations".into(), Value::Object(rels));
    out.insert("provenance".into(), Value::Object(prov));
    Value::Object(out)
}

/// The live row holding a write's upsert key, read by the store first.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    pub seq: i64,
    pub id: String,
    pub metadata: String,
}

/// What a write does, decided from what the store holds ([`plan_put`]).
#[derive(Debug)]
pub(crate) struct PutPlan {
    /// Statements to run first, in order (an update of the held row, or
    /// the supersede of an older fact).
    pub updates: Vec<(&'static str, Vec<Param>)>,
    /// The row whose fields to rewrite when nothing is inserted.
    pub existing: Option<i64>,
    /// The parameters of the insert ([`insert_memory`]) when a row is added.
    pub insert: Option<Vec<Param>>,
    /// The metadata the row ends with (its fields are rewritten from it).
    pub metadata: Value,
    /// The id that holds the memory and what happened.
    pub result: (MemoryId, PutOutcome),
}

/// The insert of a new memory, in a pool of `tier` (PostgreSQL keeps the
/// tier on the row, so a CHECK can refuse events outside the private tier):
/// `(id, sid, type, category, indexed, content, metadata, upsert_key, origin, created_at)`
/// (+ tier) → `seq`.
pub(crate) fn insert_memory(d: Dialect) -> &'static str {
    match d {
        Dialect::Sqlite => "INSERT INTO memories (id, sid, type, category, indexed, content, metadata, upsert_key, origin, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
        Dialect::Postgres => "INSERT INTO memories (id, sid, type, category, indexed, content, metadata, upsert_key, origin, created_at, updated_at, tier)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
    }
}

/// Decides a write by its type's upsert rule: a fact with a held key
/// supersedes it, an entity merges into the held one ([`merge_entity`]), a
/// relation updates its triple, an event appends; re-sharing a private fact
/// (`copy` held for the same `origin`) refreshes the copy. `held` and `copy`
/// are what [`HELD`] and [`COPY`] found; `by` is the writing user (entity
/// provenance); `tier` is appended to the insert for PostgreSQL.
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan_put(
    d: Dialect,
    sid: i64,
    tier: &str,
    id: &MemoryId,
    m: &NewMemory,
    now: DateTime<Utc>,
    by: &str,
    origin: Option<&str>,
    held: Option<Held>,
    copy: Option<(i64, String)>,
) -> Result<PutPlan> {
    let t = m.kind.memory_type();
    let key = m.kind.upsert_key();
    let now_ms = ms(now);
    let mut metadata = m.kind.metadata_json();
    if let (MemoryKind::Fact(_), Some((seq, copy_id))) = (&m.kind, copy) {
        return Ok(PutPlan {
            updates: vec![(
                "UPDATE memories SET content=?, metadata=?, indexed=?, upsert_key=?, updated_at=? WHERE seq=?",
                vec![
                    Param::Text(m.content.clone()),
                    Param::Text(metadata.to_string()),
                    Param::Bool(m.is_indexed()),
                    Param::OptText(key),
                    Param::Int(now_ms),
                    Param::Int(seq),
                ],
            )],
            existing: Some(seq),
            insert: None,
            metadata,
            result: (MemoryId::parse(&copy_id)?, PutOutcome::Updated),
        });
    }
    let mut supersede = None;
    let outcome = match (&m.kind, held) {
        (MemoryKind::Entity(e), Some(h)) => {
            let old: Value = serde_json::from_str(&h.metadata).unwrap_or(Value::Null);
            let observed = e.observed_at.unwrap_or(now);
            metadata = merge_entity(&old, e, observed, by, &m.content);
            let newest = metadata.get("observed_at") == Some(&json!(stamp(observed)));
            return Ok(PutPlan {
                updates: vec![(
                    "UPDATE memories SET metadata=?, updated_at=?, content=CASE WHEN ? THEN ? ELSE content END WHERE seq=?",
                    vec![
                        Param::Text(metadata.to_string()),
                        Param::Int(now_ms),
                        Param::Bool(newest),
                        Param::Text(m.content.clone()),
                        Param::Int(h.seq),
                    ],
                )],
                existing: Some(h.seq),
                insert: None,
                metadata,
                result: (MemoryId::parse(&h.id)?, PutOutcome::Merged),
            });
        }
        (MemoryKind::Relation(_), Some(h)) => {
            return Ok(PutPlan {
                updates: vec![(
                    "UPDATE memories SET metadata=?, updated_at=?, content=? WHERE seq=?",
                    vec![
                        Param::Text(metadata.to_string()),
                        Param::Int(now_ms),
                        Param::Text(m.content.clone()),
                        Param::Int(h.seq),
                    ],
                )],
                existing: Some(h.seq),
                insert: None,
                metadata,
                result: (MemoryId::parse(&h.id)?, PutOutcome::Updated),
            });
        }
        (MemoryKind::Fact(_), Some(h)) => {
            supersede = Some(h.seq);
            PutOutcome::Superseded(MemoryId::parse(&h.id)?)
        }
        (MemoryKind::Entity(e), None) => {
            metadata = merge_entity(&json!({}), e, e.observed_at.unwrap_or(now), by, &m.content);
            PutOutcome::Created
        }
        _ => PutOutcome::Created,
    };
    let updates = supersede
        .map(|seq| ("UPDATE memories SET superseded_at=? WHERE seq=?", vec![Param::Int(now_ms), Param::Int(seq)]))
        .into_iter()
        .collect();
    let mut insert = vec![
        Param::Text(id.as_str().to_string()),
        Param::Int(sid),
        Param::Text(t.as_str().to_string()),
        Param::Text(t.category().as_str().to_string()),
        Param::Bool(m.is_indexed()),
        Param::Text(m.content.clone()),
        Param::Text(metadata.to_string()),
        Param::OptText(key),
        Param::OptText(origin.map(str::to_string)),
        Param::Int(now_ms),
        Param::Int(now_ms),
    ];
    if d == Dialect::Postgres {
        insert.push(Param::Text(tier.to_string()));
    }
    Ok(PutPlan {
        updates,
        existing: None,
        insert: Some(insert),
        metadata,
        result: (id.clone(), outcome),
    })
}

/// A memory row as both stores read it ([`COLS`]).
#[derive(Debug, Clone)]
pub(crate) struct RawMemory {
    pub seq: i64,
    pub id: String,
    pub memory_type: String,
    pub category: String,
    pub indexed: bool,
    pub content: String,
    pub metadata: String,
    pub created_at: i64,
    pub updated_at: i64,
    pub superseded_at: Option<i64>,
    pub recall_count: i64,
    pub origin: Option<String>,
}

impl RawMemory {
    /// The memory, labelled with the tier it was read from.
    pub(crate) fn into_memory(self, source: &Visibility) -> Result<StoredMemory> {
        Ok(StoredMemory {
            id: MemoryId::parse(&self.id)?,
            memory_type: MemoryType::parse(&self.memory_type)?,
            category: Category::parse(&self.category)?,
            indexed: self.indexed,
            content: self.content,
            metadata: serde_json::from_str(&self.metadata).unwrap_or(Value::Null),
            created_at: from_ms(self.created_at),
            updated_at: from_ms(self.updated_at),
            superseded_at: self.superseded_at.map(from_ms),
            recall_count: self.recall_count.max(0) as u64,
            source: source.clone(),
            shared_by: self
                .origin
                .and_then(|o| serde_json::from_str::<Value>(&o).ok())
                .and_then(|o| o.get("user_id").and_then(Value::as_str).map(str::to_string)),
            score: None,
        })
    }
}

/// What erasing a contributor does to one shared row ([`erase_action`]).
#[derive(Debug, PartialEq)]
pub(crate) enum EraseAction {
    /// The row goes (a copy or relation they shared, an entity only they fed).
    Delete,
    /// A federated entity keeps the others' attributes: the new metadata,
    /// the content of the newest remaining attribute, and whether the origin
    /// (theirs) is cleared.
    Rewrite {
        metadata: Value,
        content: Option<String>,
        clear_origin: bool,
    },
}

/// Erasure of `user_id` from one shared row (found by their origin or by
/// an attribute's provenance): fact copies and relations they shared go; a
/// federated entity loses the attributes whose provenance names them (and
/// goes when no other member's attribute remains); an entity they first
/// shared but others extended keeps the others' attributes, with its origin
/// cleared and its content and observation time taken from the newest
/// remaining attribute. Relation-name lists are not attributed to members
/// and stay.
pub(crate) fn erase_action(user_id: &str, memory_type: &str, metadata: &str, origin: Option<&str>) -> EraseAction {
    let mut md: Value = serde_json::from_str(metadata).unwrap_or(Value::Null);
    let by_user = |p: &Value| p.get("by").and_then(Value::as_str) == Some(user_id);
    let others = memory_type == "entity"
        && md
            .get("provenance")
            .and_then(Value::as_object)
            .is_some_and(|p| p.values().any(|f| !by_user(f)));
    if !others {
        return EraseAction::Delete;
    }
    let mut newest: Option<(String, String)> = None;
    if let Some(o) = md.as_object_mut() {
        let mine: Vec<String> = o
            .get("provenance")
            .and_then(Value::as_object)
            .map(|p| p.iter().filter(|(_, f)| by_user(f)).map(|(k, _)| k.clone()).collect())
            .unwrap_or_default();
        for k in &mine {
            for part in ["attributes", "provenance"] {
                if let Some(a) = o.get_mut(part).and_then(Value::as_object_mut) {
                    a.remove(k);
                }
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
    let clear_origin = origin
        .and_then(|o| serde_json::from_str::<Value>(o).ok())
        .is_some_and(|o| o.get("user_id").and_then(Value::as_str) == Some(user_id));
    EraseAction::Rewrite {
        metadata: md,
        content: newest.map(|(_, from)| from),
        clear_origin,
    }
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

fn top_value(s: &Scalar) -> Param {
    match s {
        Scalar::Str(t) => Param::Text(t.clone()),
        Scalar::Time(_, t) => Param::Int(*t),
        Scalar::Num(n) => Param::Real(*n),
        Scalar::Bool(b) => Param::Bool(*b),
        Scalar::Null => Param::OptText(None),
    }
}

/// Appends the matchers of `vs`, grouped by kind so each group is one
/// index-friendly `IN` list: `((kind='s' AND txt IN (?, ?)) OR (kind='n' AND num IN (?)))`.
fn matchers(vs: &[Scalar], sql: &mut String, p: &mut Vec<Param>) {
    let mut groups: Vec<(&str, &str, Vec<Param>)> = Vec::new();
    let mut null = false;
    for v in vs {
        let (kind, col, val) = match v {
            Scalar::Str(t) => ("s", "txt", Param::Text(t.clone())),
            Scalar::Time(_, t) => ("t", "num", Param::Real(*t as f64)),
            Scalar::Num(n) => ("n", "num", Param::Real(*n)),
            Scalar::Bool(b) => ("b", "num", Param::Real(if *b { 1.0 } else { 0.0 })),
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
fn open_path(path: &str, sid: i64, drive: bool, sql: &mut String, p: &mut Vec<Param>) {
    if drive {
        sql.push_str("m.seq IN (SELECT mem FROM memory_fields WHERE sid=? AND path=?");
        p.push(Param::Int(sid));
    } else {
        sql.push_str("EXISTS (SELECT 1 FROM memory_fields WHERE mem=m.seq AND path=?");
    }
    p.push(Param::Text(path.to_string()));
}

/// Appends the SQL of `f` (a boolean expression over `m`) to `sql`;
/// `drive` as in [`open_path`] for equalities.
fn compile(f: &Filter, sid: i64, drive: bool, sql: &mut String, p: &mut Vec<Param>) {
    match f {
        Filter::All => sql.push_str("TRUE"),
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
                sql.push_str(if neg { "TRUE" } else { "FALSE" });
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
            _ => sql.push_str(if *want { "TRUE" } else { "FALSE" }),
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
                    p.push(Param::Real(v));
                }
                other => {
                    let col = column(other).expect("top-level field");
                    sql.push_str(&format!("({col} {} ?)", cmp.sql()));
                    p.push(match s {
                        Scalar::Time(_, t) => Param::Int(*t),
                        _ => Param::Real(v),
                    });
                }
            }
        }
    }
}

/// Above this many matching field rows an equality does not drive a
/// query: walking the type's memories newest first and probing each finds
/// `top_k` matches sooner than reading every match.
pub(crate) const DRIVE_CAP: i64 = 500;

fn parts(f: &Filter) -> Vec<&Filter> {
    match f {
        Filter::And(fs) => fs.iter().collect(),
        f => vec![f],
    }
}

/// The capped count queries of the top-level equalities (and `$in`s) on
/// metadata paths, by part index: the store runs each and passes the
/// counts to [`pick_driver`]. Empty when the read is sorted (an index order
/// drives it then).
pub(crate) fn driver_counts(q: &MemoryQuery, sid: i64) -> Vec<(usize, String, Vec<Param>)> {
    if q.sort.is_some() {
        return vec![];
    }
    let mut out = Vec::new();
    for (i, f) in parts(&q.filter).into_iter().enumerate() {
        let (path, vs) = match f {
            Filter::Eq(Field::Meta(path), v) => (path, std::slice::from_ref(v)),
            Filter::In(Field::Meta(path), vs) if !vs.is_empty() => (path, vs.as_slice()),
            _ => continue,
        };
        let mut sql = String::from("SELECT count(*) FROM (SELECT 1 FROM memory_fields WHERE sid=? AND path=? AND ");
        let mut p = vec![Param::Int(sid), Param::Text(path.clone())];
        matchers(vs, &mut sql, &mut p);
        sql.push_str(" LIMIT ?) AS d");
        p.push(Param::Int(DRIVE_CAP));
        out.push((i, sql, p));
    }
    out
}

/// The part matching the fewest field rows, if fewer than [`DRIVE_CAP`]:
/// the query is driven from it.
pub(crate) fn pick_driver(counts: &[(usize, i64)]) -> Option<usize> {
    let mut best: Option<(usize, i64)> = None;
    for &(i, n) in counts {
        if n < DRIVE_CAP && best.is_none_or(|(_, b)| n < b) {
            best = Some((i, n));
        }
    }
    best.map(|(i, _)| i)
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

/// How a page is ordered (what its cursor holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// By a metadata path: the row also selects the sort leaf's `num, txt`.
    Meta,
    /// By `created_at`.
    Created,
    /// By `updated_at`.
    Updated,
    /// Write order.
    Seq,
}

/// A read ready to run: SQL, parameters, and how its rows are keyed.
#[derive(Debug)]
pub(crate) struct Select {
    pub sql: String,
    pub params: Vec<Param>,
    pub order: Order,
}

/// Builds a read of pool `sid`: the filter (compiled over the field index,
/// the `driver` part driving), the order, keyset pagination from the
/// cursor, `limit + 1` rows (the extra one tells whether a next page exists).
///
/// # Errors
/// [`Error::InvalidInput`] for a malformed cursor.
pub(crate) fn build_select(d: Dialect, q: &MemoryQuery, sid: i64, driver: Option<usize>) -> Result<Select> {
    let mut p: Vec<Param> = Vec::new();
    let mut sql;
    let desc = q.direction == Direction::Desc;
    let (dir, cmp) = if desc { ("DESC", "<") } else { ("ASC", ">") };
    let meta_sort = match &q.sort {
        Some(Field::Meta(path)) => Some(path.clone()),
        _ => None,
    };
    if let Some(path) = &meta_sort {
        sql = format!("SELECT {COLS}, s.num, s.txt FROM memory_fields s JOIN memories m ON m.seq = s.mem WHERE s.sid=? AND s.path=? AND s.arr=FALSE AND m.sid=?");
        p.extend([Param::Int(sid), Param::Text(path.clone()), Param::Int(sid)]);
        // a range on the sort path bounds the index walk itself ("events since
        // a date, newest first" starts at the date instead of probing each row)
        for f in parts(&q.filter) {
            if let Filter::Range(Field::Meta(rp), cmp, v) = f {
                let (kind, n) = match v {
                    Scalar::Time(_, t) => ("t", *t as f64),
                    Scalar::Num(n) => ("n", *n),
                    _ => continue,
                };
                if rp == path {
                    sql.push_str(&format!(" AND s.kind='{kind}' AND s.num {} ?", cmp.sql()));
                    p.push(Param::Real(n));
                }
            }
        }
    } else {
        sql = format!("SELECT {COLS} FROM memories m WHERE m.sid=?");
        p.push(Param::Int(sid));
    }
    if !q.include_superseded {
        sql.push_str(" AND m.superseded_at IS NULL");
    }
    if let Some(ids) = &q.only {
        // one parameter whatever the count (a widened semantic search can
        // pass more ids than SQLite allows variables), one cached statement
        sql.push_str(match d {
            Dialect::Sqlite => " AND m.id IN (SELECT value FROM json_each(?))",
            Dialect::Postgres => " AND m.id = ANY(?)",
        });
        p.push(Param::Texts(ids.iter().map(|i| i.as_str().to_string()).collect()));
    }
    if q.filter != Filter::All {
        // with an index order driving (a sort), every condition is a probe of
        // the row at hand; otherwise the most selective equality may drive
        sql.push_str(" AND (");
        for (i, f) in parts(&q.filter).into_iter().enumerate() {
            if i > 0 {
                sql.push_str(" AND ");
            }
            compile(f, sid, driver == Some(i), &mut sql, &mut p);
        }
        sql.push(')');
    }
    let order = match (&meta_sort, &q.sort) {
        (Some(_), _) => Order::Meta,
        (None, Some(Field::CreatedAt)) => Order::Created,
        (None, Some(Field::UpdatedAt)) => Order::Updated,
        _ => Order::Seq,
    };
    let order_col = match order {
        Order::Created => Some("m.created_at"),
        Order::Updated => Some("m.updated_at"),
        _ => None,
    };
    if let Some(cur) = q.cursor.as_deref() {
        if order == Order::Meta {
            let v = decode_cursor(cur, "nsi")?;
            sql.push_str(&format!(" AND (s.num, s.txt, s.mem) {cmp} (?, ?, ?)"));
            p.push(Param::Real(v[0].as_f64().unwrap_or(0.0)));
            p.push(Param::Text(v[1].as_str().unwrap_or("").to_string()));
            p.push(Param::Int(v[2].as_i64().unwrap_or(0)));
        } else if let Some(col) = order_col {
            let v = decode_cursor(cur, "ii")?;
            sql.push_str(&format!(" AND ({col}, m.seq) {cmp} (?, ?)"));
            p.push(Param::Int(v[0].as_i64().unwrap_or(0)));
            p.push(Param::Int(v[1].as_i64().unwrap_or(0)));
        } else {
            let v = decode_cursor(cur, "i")?;
            sql.push_str(&format!(" AND m.seq {cmp} ?"));
            p.push(Param::Int(v[0].as_i64().unwrap_or(0)));
        }
    }
    if order == Order::Meta {
        // s.mem (= m.seq) keeps the whole order in the index: ordering by m.seq
        // made SQLite sort each group of equal values in a temporary b-tree
        sql.push_str(&format!(" ORDER BY s.num {dir}, s.txt {dir}, s.mem {dir}"));
    } else if let Some(col) = order_col {
        sql.push_str(&format!(" ORDER BY {col} {dir}, m.seq {dir}"));
    } else {
        sql.push_str(&format!(" ORDER BY m.seq {dir}"));
    }
    sql.push_str(" LIMIT ?");
    p.push(Param::Int(q.limit as i64 + 1));
    Ok(Select { sql, params: p, order })
}

/// One row of a [`Select`]: the memory, its seq, and for [`Order::Meta`]
/// the sort leaf's `(num, txt)`.
pub(crate) type PageRow = (RawMemory, Option<(f64, String)>);

/// The page of `limit` memories and the cursor of the next page (when a
/// `limit + 1`-th row came back).
///
/// # Errors
/// A row holding an unknown type or category.
pub(crate) fn finish_page(
    rows: Vec<PageRow>,
    order: Order,
    limit: usize,
    source: &Visibility,
) -> Result<(Vec<StoredMemory>, Option<String>)> {
    let mut out: Vec<(StoredMemory, Vec<Value>)> = Vec::with_capacity(rows.len());
    for (raw, leaf) in rows {
        let seq = raw.seq;
        let (created, updated) = (raw.created_at, raw.updated_at);
        let key = match (order, leaf) {
            (Order::Meta, Some((num, txt))) => vec![json!(num), json!(txt), json!(seq)],
            (Order::Created, _) => vec![json!(created), json!(seq)],
            (Order::Updated, _) => vec![json!(updated), json!(seq)],
            _ => vec![json!(seq)],
        };
        out.push((raw.into_memory(source)?, key));
    }
    let next = if out.len() > limit {
        out.truncate(limit);
        out.last().map(|(_, k)| encode_cursor(k))
    } else {
        None
    };
    Ok((out.into_iter().map(|(m, _)| m).collect(), next))
}

/// The id list of a [`Param::Texts`] as SQLite's `json_each` reads it.
pub(crate) fn json_list(items: &[String]) -> String {
    Value::Array(items.iter().map(|s| Value::String(s.clone())).collect()).to_string()
}

/// The memory, its fresh id and the origin JSON of a shared write.
pub(crate) fn shared_write(
    member: &Scope,
    content: &str,
    memory: Shareable,
    indexed: bool,
    origin: &MemoryId,
) -> (NewMemory, MemoryId, String) {
    let m = NewMemory {
        content: content.to_string(),
        kind: memory.into_kind(),
        indexed: Some(indexed),
    };
    let origin = serde_json::json!({"user_id": member.user_id(), "memory_id": origin.as_str()}).to_string();
    (m, MemoryId::new(), origin)
}

/// The pool of a member's agent in a shared tier labelled `tier`.
pub(crate) fn pool<'a>(tier: &'a str, member: &'a Scope) -> Pool<'a> {
    Pool {
        tier,
        user_id: "",
        agent_id: member.agent_id(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_flatten_paths_arrays_and_times_and_skip_provenance() {
        let got = leaves(&json!({
            "a": {"b": 1, "t": "2026-01-02T00:00:00Z"},
            "tags": ["x", "y"],
            "n": null,
            "provenance": {"a": {"by": "u"}}
        }));
        let paths: Vec<(&str, &str, bool)> = got.iter().map(|l| (l.path.as_str(), l.kind, l.arr)).collect();
        assert_eq!(
            paths,
            vec![("a.b", "n", false), ("a.t", "t", false), ("tags", "s", true), ("tags", "s", true), ("n", "z", false)]
        );
        assert_eq!(got[1].num, 1_767_312_000_000.0);
    }

    #[test]
    fn the_driver_is_the_most_selective_part_under_the_cap() {
        assert_eq!(pick_driver(&[(0, 40), (2, 3), (3, 600)]), Some(2));
        assert_eq!(pick_driver(&[(1, DRIVE_CAP)]), None);
        assert_eq!(pick_driver(&[]), None);
    }

    #[test]
    fn erasure_keeps_other_members_attributes() {
        let md = json!({"attributes": {"a": 1, "b": 2}, "provenance": {
            "a": {"by": "u1", "observed_at": "2026-01-01T00:00:00.000Z", "from": "first"},
            "b": {"by": "u2", "observed_at": "2026-01-02T00:00:00.000Z", "from": "second"}}});
        let origin = json!({"user_id": "u1"}).to_string();
        match erase_action("u1", "entity", &md.to_string(), Some(&origin)) {
            EraseAction::Rewrite { metadata, content, clear_origin } => {
                assert_eq!(metadata["attributes"], json!({"b": 2}));
                assert_eq!(content.as_deref(), Some("second"));
                assert!(clear_origin);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(erase_action("u2", "fact", "{}", None), EraseAction::Delete);
        let only_mine = json!({"provenance": {"a": {"by": "u1"}}}).to_string();
        assert_eq!(erase_action("u1", "entity", &only_mine, None), EraseAction::Delete);
    }
}
