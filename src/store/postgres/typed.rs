//! Typed memories in PostgreSQL: the private [`TypedStore`] and the team
//! and public tiers ([`SharedStore`]) in one set of tables, told apart by
//! the `tier` of each pool (`private`, `team:<id>`, `public`). The write
//! rules, the filter compiler and the page builder are the SQLite store's
//! ([`crate::store::typed_sql`]); this module runs them with numbered,
//! typed placeholders (`$1::bigint`).
//!
//! Across nodes: a write locks the live row of its upsert key (`FOR
//! UPDATE`), so two entity merges never lose one another's attributes, and
//! two first writes of one key race on the live-key unique index; the loser
//! retries its transaction ([`WRITE_ATTEMPTS`]) and then merges, supersedes
//! or updates like any later write. A CHECK refuses events outside the
//! private tier, so events stay structurally private here too.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::{pe, PgStore};
use crate::error::{Error, Result};
use crate::model::typed::{MemoryId, MemoryKind, MemoryType, NewMemory, Shareable, StoredMemory, Visibility};
use crate::model::Scope;
use crate::store::shared::{SharedStore, SharedStores};
use crate::store::typed_sql::{pool as shared_pool, shared_write};
use crate::store::typed_sql::{self as ts, Dialect, Param, Pool as MemPool};
use crate::store::{MemoryQuery, PutOutcome, TypedStore};

/// Migration 2: typed memories of every tier (see the module docs). Text
/// leaves sort bytewise (`COLLATE "C"`), as SQLite's do.
pub(crate) const MIGRATION: &str = r#"
    CREATE TABLE memory_scopes (
        sid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        tier TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL,
        UNIQUE (tier, user_id, agent_id)
    );
    CREATE TABLE memories (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        sid BIGINT NOT NULL REFERENCES memory_scopes (sid),
        tier TEXT NOT NULL,
        type TEXT NOT NULL CHECK (type IN ('fact','event','entity','relation')),
        category TEXT NOT NULL,
        indexed BOOLEAN NOT NULL,
        content TEXT NOT NULL,
        metadata TEXT NOT NULL,
        upsert_key TEXT,
        origin TEXT,
        created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL,
        superseded_at BIGINT,
        recall_count BIGINT NOT NULL DEFAULT 0,
        CHECK (tier = 'private' OR type <> 'event')
    );
    CREATE INDEX memories_scope ON memories (sid, type, seq);
    CREATE UNIQUE INDEX memories_live_key ON memories (sid, type, upsert_key)
        WHERE upsert_key IS NOT NULL AND superseded_at IS NULL;
    CREATE TABLE memory_fields (
        sid BIGINT NOT NULL, path TEXT NOT NULL, kind TEXT NOT NULL,
        num DOUBLE PRECISION NOT NULL, txt TEXT COLLATE "C" NOT NULL, arr BOOLEAN NOT NULL,
        mem BIGINT NOT NULL REFERENCES memories (seq) ON DELETE CASCADE
    );
    CREATE INDEX memory_fields_txt ON memory_fields (sid, path, txt, mem);
    CREATE INDEX memory_fields_num ON memory_fields (sid, path, num, txt, mem);
    CREATE INDEX memory_fields_mem ON memory_fields (mem, path);
"#;

/// Tries of a write transaction that lost a race for a new upsert key
/// (unique violation) before the error is returned: the second try sees
/// the winner's row and merges into it.
pub const WRITE_ATTEMPTS: usize = 3;

/// `sql` with its `?`s numbered and typed for PostgreSQL (`$1::bigint`).
fn numbered(sql: &str, params: &[Param]) -> String {
    let mut out = String::with_capacity(sql.len() + params.len() * 10);
    let mut i = 0;
    for ch in sql.chars() {
        if ch != '?' {
            out.push(ch);
            continue;
        }
        let ty = match params.get(i) {
            Some(Param::Int(_)) => "bigint",
            Some(Param::Real(_)) => "float8",
            Some(Param::Bool(_)) => "boolean",
            Some(Param::Texts(_)) => "text[]",
            _ => "text",
        };
        i += 1;
        out.push_str(&format!("${i}::{ty}"));
    }
    out
}

type Boxed = Box<dyn ToSql + Sync + Send>;

fn boxed(params: Vec<Param>) -> Vec<Boxed> {
    params
        .into_iter()
        .map(|p| -> Boxed {
            match p {
                Param::Int(v) => Box::new(v),
                Param::Real(v) => Box::new(v),
                Param::Bool(v) => Box::new(v),
                Param::Text(v) => Box::new(v),
                Param::OptText(v) => Box::new(v),
                Param::Texts(v) => Box::new(v),
            }
        })
        .collect()
}

/// The prepared (cached) statement of `sql` with its `?` numbered and cast,
/// and `params` boxed for binding.
async fn prepare<C: GenericClient>(c: &C, sql: &str, params: Vec<Param>) -> Result<(tokio_postgres::Statement, Vec<Boxed>)> {
    let sql = numbered(sql, &params);
    let st = c.prepare_cached(&sql).await.map_err(pe)?;
    Ok((st, boxed(params)))
}

fn refs(b: &[Boxed]) -> Vec<&(dyn ToSql + Sync)> {
    b.iter().map(|x| x.as_ref() as &(dyn ToSql + Sync)).collect()
}

async fn query<C: GenericClient>(c: &C, sql: &str, params: Vec<Param>) -> Result<Vec<Row>> {
    let (st, b) = prepare(c, sql, params).await?;
    c.query(&st, &refs(&b)).await.map_err(pe)
}

async fn exec<C: GenericClient>(c: &C, sql: &str, params: Vec<Param>) -> Result<u64> {
    let (st, b) = prepare(c, sql, params).await?;
    c.execute(&st, &refs(&b)).await.map_err(pe)
}

async fn sid<C: GenericClient>(c: &C, p: MemPool<'_>, create: bool) -> Result<Option<i64>> {
    let key = vec![
        Param::Text(p.tier.into()),
        Param::Text(p.user_id.into()),
        Param::Text(p.agent_id.into()),
    ];
    if create {
        exec(
            c,
            "INSERT INTO memory_scopes (tier, user_id, agent_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            key.clone(),
        )
        .await?;
    }
    let rows = query(c, "SELECT sid FROM memory_scopes WHERE tier=? AND user_id=? AND agent_id=?", key).await?;
    Ok(rows.first().map(|r| r.get(0)))
}

fn raw(r: &Row) -> ts::RawMemory {
    ts::RawMemory {
        seq: r.get(0),
        id: r.get(1),
        memory_type: r.get(2),
        category: r.get(3),
        indexed: r.get(4),
        content: r.get(5),
        metadata: r.get(6),
        created_at: r.get(7),
        updated_at: r.get(8),
        superseded_at: r.get(9),
        recall_count: r.get(10),
        origin: r.get(11),
    }
}

async fn write_fields<C: GenericClient>(c: &C, sid: i64, seq: i64, metadata: &serde_json::Value) -> Result<()> {
    exec(c, ts::DELETE_FIELDS, vec![Param::Int(seq)]).await?;
    for l in ts::leaves(metadata) {
        exec(c, ts::INSERT_FIELD, l.params(sid, seq)).await?;
    }
    Ok(())
}

/// One try of [`put`] in one transaction.
async fn try_put(
    st: &PgStore,
    pool: MemPool<'_>,
    id: &MemoryId,
    m: &NewMemory,
    now: DateTime<Utc>,
    by: &str,
    origin: Option<&str>,
) -> Result<(MemoryId, PutOutcome)> {
    let mut c = st.client().await?;
    let tx = c.transaction().await.map_err(pe)?;
    let sid = sid(&tx, pool, true).await?.expect("created");
    let held = match m.kind.upsert_key() {
        Some(k) => query(
            &tx,
            &format!("{} FOR UPDATE", ts::HELD),
            vec![Param::Int(sid), Param::Text(m.kind.memory_type().as_str().into()), Param::Text(k)],
        )
        .await?
        .first()
        .map(|r| ts::Held { seq: r.get(0), id: r.get(1), metadata: r.get(2) }),
        None => None,
    };
    let copy = match (&m.kind, origin) {
        (MemoryKind::Fact(_), Some(o)) => query(&tx, &format!("{} FOR UPDATE", ts::COPY), vec![Param::Int(sid), Param::Text(o.into())])
            .await?
            .first()
            .map(|r| (r.get(0), r.get(1))),
        _ => None,
    };
    let plan = ts::plan_put(Dialect::Postgres, sid, pool.tier, id, m, now, by, origin, held, copy)?;
    for (sql, p) in plan.updates {
        exec(&tx, sql, p).await?;
    }
    let seq: i64 = match plan.insert {
        Some(p) => query(&tx, ts::insert_memory(Dialect::Postgres), p).await?[0].get(0),
        None => plan.existing.expect("an update names its row"),
    };
    write_fields(&tx, sid, seq, &plan.metadata).await?;
    tx.commit().await.map_err(pe)?;
    Ok(plan.result)
}

/// Stores `m` in `pool` by its type's upsert rule ([`ts::plan_put`]),
/// retrying a lost race for a new key ([`WRITE_ATTEMPTS`]).
async fn put(
    st: &PgStore,
    pool: MemPool<'_>,
    id: &MemoryId,
    m: &NewMemory,
    now: DateTime<Utc>,
    by: &str,
    origin: Option<&str>,
) -> Result<(MemoryId, PutOutcome)> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match try_put(st, pool, id, m, now, by, origin).await {
            Ok(done) => return Ok(done),
            // the unique index on live keys names the race; any other error is final
            Err(Error::Postgres(e)) if attempt < WRITE_ATTEMPTS && e.contains("memories_live_key") => {
                tracing::debug!(attempt, error = %e, "lost a race for a new upsert key; trying again");
            }
            Err(e) => return Err(e),
        }
    }
}

async fn get(st: &PgStore, pool: MemPool<'_>, id: &MemoryId, source: &Visibility) -> Result<StoredMemory> {
    let c = st.client().await?;
    let Some(sid) = sid(&c, pool, false).await? else {
        return Err(Error::NotFound(format!("memory {id}")));
    };
    let rows = query(
        &c,
        &format!("SELECT {} FROM memories m WHERE m.sid=? AND m.id=?", ts::COLS),
        vec![Param::Int(sid), Param::Text(id.as_str().into())],
    )
    .await?;
    match rows.first() {
        Some(r) => raw(r).into_memory(source),
        None => Err(Error::NotFound(format!("memory {id}"))),
    }
}

async fn delete(st: &PgStore, pool: MemPool<'_>, id: &MemoryId, source: &Visibility) -> Result<StoredMemory> {
    let held = get(st, pool, id, source).await?;
    let c = st.client().await?;
    // the field rows go with it (ON DELETE CASCADE)
    exec(&c, "DELETE FROM memories WHERE id=?", vec![Param::Text(id.as_str().into())]).await?;
    Ok(held)
}

async fn bump_recalls(st: &PgStore, pool: MemPool<'_>, counts: &[(MemoryId, u64)]) -> Result<()> {
    if counts.is_empty() {
        return Ok(());
    }
    let mut c = st.client().await?;
    let Some(sid) = sid(&c, pool, false).await? else { return Ok(()) };
    let tx = c.transaction().await.map_err(pe)?;
    for (id, n) in counts {
        exec(&tx, ts::BUMP_RECALLS, vec![Param::Int(*n as i64), Param::Int(sid), Param::Text(id.as_str().into())]).await?;
    }
    tx.commit().await.map_err(pe)
}

async fn counts(st: &PgStore, pool: MemPool<'_>) -> Result<Vec<(MemoryType, usize)>> {
    let c = st.client().await?;
    let Some(sid) = sid(&c, pool, false).await? else { return Ok(vec![]) };
    let rows = query(&c, "SELECT type, COUNT(*) FROM memories WHERE sid=? GROUP BY type ORDER BY type", vec![Param::Int(sid)]).await?;
    rows.iter()
        .map(|r| Ok((MemoryType::parse(r.get::<_, &str>(0))?, r.get::<_, i64>(1) as usize)))
        .collect()
}

async fn read(st: &PgStore, pool: MemPool<'_>, q: &MemoryQuery, source: &Visibility) -> Result<(Vec<StoredMemory>, Option<String>)> {
    let c = st.client().await?;
    let Some(sid) = sid(&c, pool, false).await? else { return Ok((vec![], None)) };
    let mut n = Vec::new();
    for (i, sql, p) in ts::driver_counts(q, sid) {
        n.push((i, query(&c, &sql, p).await?[0].get::<_, i64>(0)));
    }
    let sel = ts::build_select(Dialect::Postgres, q, sid, ts::pick_driver(&n))?;
    let rows = query(&c, &sel.sql, sel.params).await?;
    let page = rows
        .iter()
        .map(|r| {
            let leaf = (sel.order == ts::Order::Meta).then(|| (r.get::<_, f64>(12), r.get::<_, String>(13)));
            (raw(r), leaf)
        })
        .collect();
    ts::finish_page(page, sel.order, q.limit, source)
}

/// Indexed, live memories of the pools of `tier` after `after` (seq):
/// `(user_id, agent_id, seq, id, content)`.
async fn indexed_page(st: &PgStore, tier: &str, after: i64, limit: usize) -> Result<Vec<(String, String, i64, MemoryId, String)>> {
    let c = st.client().await?;
    let rows = query(
        &c,
        "SELECT s.user_id, s.agent_id, m.seq, m.id, m.content FROM memories m JOIN memory_scopes s ON s.sid = m.sid
         WHERE s.tier=? AND m.seq > ? AND m.indexed AND m.superseded_at IS NULL ORDER BY m.seq LIMIT ?",
        vec![Param::Text(tier.into()), Param::Int(after), Param::Int(limit as i64)],
    )
    .await?;
    rows.iter()
        .map(|r| Ok((r.get(0), r.get(1), r.get(2), MemoryId::parse(r.get::<_, &str>(3))?, r.get(4))))
        .collect()
}

/// Deletes every private memory of a user inside the erasure transaction
/// `tx`; returns rows removed.
pub(super) async fn delete_user<C: GenericClient>(tx: &C, user_id: &str) -> Result<usize> {
    let user = || vec![Param::Text(ts::PRIVATE.into()), Param::Text(user_id.into())];
    let n = exec(
        tx,
        "DELETE FROM memories WHERE sid IN (SELECT sid FROM memory_scopes WHERE tier=? AND user_id=?)",
        user(),
    )
    .await?;
    exec(tx, "DELETE FROM memory_scopes WHERE tier=? AND user_id=?", user()).await?;
    Ok(n as usize)
}

fn private(scope: &Scope) -> MemPool<'_> {
    MemPool {
        tier: ts::PRIVATE,
        user_id: scope.user_id(),
        agent_id: scope.agent_id(),
    }
}

#[async_trait]
impl TypedStore for PgStore {
    async fn put_memory(&self, scope: &Scope, id: &MemoryId, m: &NewMemory, now: DateTime<Utc>) -> Result<(MemoryId, PutOutcome)> {
        put(self, private(scope), id, m, now, scope.user_id(), None).await
    }

    async fn query_memories(&self, scope: &Scope, q: &MemoryQuery) -> Result<(Vec<StoredMemory>, Option<String>)> {
        read(self, private(scope), q, &Visibility::Private).await
    }

    async fn memory(&self, scope: &Scope, id: &MemoryId) -> Result<StoredMemory> {
        get(self, private(scope), id, &Visibility::Private).await
    }

    async fn delete_memory(&self, scope: &Scope, id: &MemoryId) -> Result<StoredMemory> {
        delete(self, private(scope), id, &Visibility::Private).await
    }

    async fn count_recalls(&self, scope: &Scope, counts: &[(MemoryId, u64)]) -> Result<()> {
        bump_recalls(self, private(scope), counts).await
    }

    /// PostgreSQL's autovacuum keeps the planner statistics; nothing to do.
    async fn optimize_memories(&self) -> Result<()> {
        Ok(())
    }

    async fn memory_counts(&self, scope: &Scope) -> Result<Vec<(MemoryType, usize)>> {
        counts(self, private(scope)).await
    }

    async fn memory_scopes(&self, search: &str, limit: usize) -> Result<Vec<(Scope, usize, chrono::DateTime<chrono::Utc>)>> {
        let c = self.client().await?;
        let rows = query(
            &c,
            "SELECT s.user_id, s.agent_id, COUNT(*), MAX(m.updated_at) FROM memories m JOIN memory_scopes s ON s.sid = m.sid
             WHERE s.tier=? AND (?='' OR strpos(s.user_id, ?) > 0 OR strpos(s.agent_id, ?) > 0)
             GROUP BY s.sid, s.user_id, s.agent_id ORDER BY MAX(m.updated_at) DESC, s.user_id, s.agent_id LIMIT ?",
            vec![
                Param::Text(ts::PRIVATE.into()),
                Param::Text(search.into()),
                Param::Text(search.into()),
                Param::Text(search.into()),
                Param::Int(limit as i64),
            ],
        )
        .await?;
        rows.iter()
            .map(|r| Ok((Scope::new(r.get::<_, &str>(0), r.get::<_, &str>(1))?, r.get::<_, i64>(2) as usize, ts::from_ms(r.get::<_, i64>(3)))))
            .collect()
    }

    async fn total_memories(&self) -> Result<usize> {
        let c = self.client().await?;
        let rows = query(
            &c,
            "SELECT COUNT(*) FROM memories m JOIN memory_scopes s ON s.sid = m.sid WHERE s.tier=?",
            vec![Param::Text(ts::PRIVATE.into())],
        )
        .await?;
        Ok(rows.first().map_or(0, |r| r.get::<_, i64>(0)) as usize)
    }

    async fn user_memories(&self, user_id: &str) -> Result<Vec<(Scope, MemoryId)>> {
        let c = self.client().await?;
        let rows = query(
            &c,
            "SELECT s.agent_id, m.id FROM memories m JOIN memory_scopes s ON s.sid = m.sid WHERE s.tier=? AND s.user_id=?",
            vec![Param::Text(ts::PRIVATE.into()), Param::Text(user_id.into())],
        )
        .await?;
        rows.iter()
            .map(|r| Ok((Scope::new(user_id, r.get::<_, &str>(0))?, MemoryId::parse(r.get::<_, &str>(1))?)))
            .collect()
    }

    async fn indexed_knowledge(&self, after: i64, limit: usize) -> Result<Vec<(Scope, i64, MemoryId, String)>> {
        indexed_page(self, ts::PRIVATE, after, limit)
            .await?
            .into_iter()
            .map(|(u, a, seq, id, content)| Ok((Scope::new(u, a)?, seq, id, content)))
            .collect()
    }
}

/// One team or public tier in PostgreSQL (rows whose pool has its tier).
#[derive(Debug, Clone)]
pub struct PgSharedStore {
    store: PgStore,
    tier: Visibility,
    label: String,
}

#[async_trait]
impl SharedStore for PgSharedStore {
    fn tier(&self) -> &Visibility {
        &self.tier
    }

    async fn put(
        &self,
        member: &Scope,
        content: &str,
        memory: Shareable,
        indexed: bool,
        origin: &MemoryId,
        now: DateTime<Utc>,
    ) -> Result<(MemoryId, PutOutcome)> {
        let (m, id, origin) = shared_write(member, content, memory, indexed, origin);
        put(&self.store, shared_pool(&self.label, member), &id, &m, now, member.user_id(), Some(&origin)).await
    }

    async fn query(&self, member: &Scope, q: &MemoryQuery) -> Result<(Vec<StoredMemory>, Option<String>)> {
        read(&self.store, shared_pool(&self.label, member), q, &self.tier).await
    }

    async fn get(&self, member: &Scope, id: &MemoryId) -> Result<StoredMemory> {
        get(&self.store, shared_pool(&self.label, member), id, &self.tier).await
    }

    async fn delete(&self, member: &Scope, id: &MemoryId) -> Result<StoredMemory> {
        delete(&self.store, shared_pool(&self.label, member), id, &self.tier).await
    }

    async fn count_recalls(&self, member: &Scope, counts: &[(MemoryId, u64)]) -> Result<()> {
        bump_recalls(&self.store, shared_pool(&self.label, member), counts).await
    }

    async fn counts(&self, member: &Scope) -> Result<Vec<(MemoryType, usize)>> {
        counts(&self.store, shared_pool(&self.label, member)).await
    }

    async fn optimize(&self) -> Result<()> {
        Ok(())
    }

    async fn erase_contributor(&self, user_id: &str) -> Result<(Vec<(String, MemoryId)>, usize)> {
        let mut c = self.store.client().await?;
        let tx = c.transaction().await.map_err(pe)?;
        let rows = query(
            &tx,
            "SELECT m.seq, m.sid, s.agent_id, m.id, m.type, m.metadata, m.origin
             FROM memories m JOIN memory_scopes s ON s.sid = m.sid
             WHERE s.tier = ? AND ((m.origin::jsonb ->> 'user_id') = ?
                OR (m.type = 'entity' AND EXISTS (
                    SELECT 1 FROM jsonb_each(CASE WHEN jsonb_typeof(m.metadata::jsonb -> 'provenance') = 'object'
                                                  THEN m.metadata::jsonb -> 'provenance' ELSE '{}'::jsonb END) p
                    WHERE p.value ->> 'by' = ?)))
             FOR UPDATE OF m",
            vec![Param::Text(self.label.clone()), Param::Text(user_id.into()), Param::Text(user_id.into())],
        )
        .await?;
        let (mut deleted, mut rewritten) = (Vec::new(), 0);
        for r in rows {
            let (seq, sid, agent): (i64, i64, String) = (r.get(0), r.get(1), r.get(2));
            let id = MemoryId::parse(r.get::<_, &str>(3))?;
            match ts::erase_action(user_id, r.get(4), r.get(5), r.get(6)) {
                ts::EraseAction::Delete => {
                    exec(&tx, "DELETE FROM memories WHERE seq=?", vec![Param::Int(seq)]).await?;
                    deleted.push((agent, id));
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
                    )
                    .await?;
                    write_fields(&tx, sid, seq, &metadata).await?;
                    rewritten += 1;
                }
            }
        }
        tx.commit().await.map_err(pe)?;
        Ok((deleted, rewritten))
    }

    async fn indexed_page(&self, after: i64, limit: usize) -> Result<Vec<(String, i64, MemoryId, String)>> {
        Ok(indexed_page(&self.store, &self.label, after, limit)
            .await?
            .into_iter()
            .map(|(_, a, s, id, content)| (a, s, id, content))
            .collect())
    }
}

#[async_trait]
impl SharedStores for PgStore {
    fn open(&self, tier: &Visibility) -> Result<std::sync::Arc<dyn SharedStore>> {
        if *tier == Visibility::Private {
            return Err(Error::InvalidInput("the private store is not a shared tier".into()));
        }
        Ok(std::sync::Arc::new(PgSharedStore {
            store: self.clone(),
            label: tier.label(),
            tier: tier.clone(),
        }))
    }

    async fn tiers(&self) -> Result<Vec<Visibility>> {
        let c = self.client().await?;
        let rows = query(&c, "SELECT DISTINCT tier FROM memory_scopes WHERE tier <> ? ORDER BY tier", vec![Param::Text(ts::PRIVATE.into())]).await?;
        let mut teams = Vec::new();
        let mut public = false;
        for r in rows {
            let label: &str = r.get(0);
            match label.strip_prefix("team:") {
                Some(t) => teams.push(Visibility::Team(t.to_string())),
                None if label == "public" => public = true,
                None => return Err(Error::Postgres(format!("unknown tier {label:?} in memory_scopes"))),
            }
        }
        if public {
            teams.push(Visibility::Public);
        }
        Ok(teams)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_and_typed() {
        let p = vec![Param::Int(1), Param::Real(0.5), Param::Bool(true), Param::Text("a".into()), Param::OptText(None), Param::Texts(vec![])];
        assert_eq!(
            numbered("a=? b=? c=? d=? e=? f=ANY(?)", &p),
            "a=$1::bigint b=$2::float8 c=$3::boolean d=$4::text e=$5::text f=ANY($6::text[])"
        );
    }
}
