//! SQLite system of record (rusqlite, bundled SQLite, WAL journal).
//!
//! Schema migrations are an ordered list of SQL scripts; `PRAGMA user_version`
//! records how many have run. Timestamps are stored as integer milliseconds
//! since the Unix epoch (UTC). One connection behind a mutex serialises
//! writes; calls run on tokio's blocking pool, never on executor threads.

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::{
    DeleteCounts, Event, EventKind, OpenJob, OutboxEvent, ParkedJob, RecordStore, StoreSizes, UsageTotals,
};
use crate::error::{Error, Result};
use crate::model::*;

/// Ordered schema migrations; index + 1 is the resulting `user_version`.
const MIGRATIONS: &[&str] = &[
    // 1: working tier, episodes, outbox
    r#"
    CREATE TABLE sessions (
        user_id TEXT NOT NULL, agent_id TEXT NOT NULL, session_id TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('open','completed')),
        started_at INTEGER NOT NULL, last_message_at INTEGER NOT NULL,
        last_activity_at INTEGER NOT NULL, message_count INTEGER NOT NULL,
        completed_at INTEGER,
        PRIMARY KEY (user_id, agent_id, session_id)
    ) WITHOUT ROWID;
    CREATE INDEX sessions_idle ON sessions (status, last_activity_at);
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        user_id TEXT NOT NULL, agent_id TEXT NOT NULL, session_id TEXT NOT NULL,
        seq INTEGER NOT NULL, role TEXT NOT NULL, name TEXT, content TEXT NOT NULL,
        ts INTEGER NOT NULL, recorded_at INTEGER NOT NULL,
        UNIQUE (user_id, agent_id, session_id, seq)
    );
    CREATE TABLE episodes (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL, agent_id TEXT NOT NULL, session_id TEXT NOT NULL,
        summary TEXT NOT NULL, abstract TEXT NOT NULL, summary_kind TEXT NOT NULL,
        started_at INTEGER NOT NULL, ended_at INTEGER NOT NULL,
        created_at INTEGER NOT NULL, expires_at INTEGER
    );
    CREATE INDEX episodes_scope ON episodes (user_id, agent_id);
    CREATE INDEX episodes_expiry ON episodes (expires_at) WHERE expires_at IS NOT NULL;
    CREATE TABLE outbox (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL,
        payload TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending','done','parked')),
        attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT,
        available_at INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL
    );
    CREATE INDEX outbox_pending ON outbox (status, kind, id);
    "#,
    // 2: LLM cost accounting, dead-letter view, index bookkeeping
    r#"
    CREATE TABLE llm_calls (
        id INTEGER PRIMARY KEY,
        user_id TEXT NOT NULL, agent_id TEXT NOT NULL, session_id TEXT, event_id INTEGER,
        task TEXT NOT NULL, model TEXT NOT NULL, prompt_version INTEGER NOT NULL, attempt INTEGER NOT NULL,
        error TEXT, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
        latency_ms INTEGER NOT NULL, at INTEGER NOT NULL
    );
    CREATE INDEX llm_calls_scope ON llm_calls (user_id, agent_id, session_id);
    ALTER TABLE outbox ADD COLUMN parked_at INTEGER;
    CREATE VIEW dead_letter AS
        SELECT id, kind, user_id, agent_id, payload, attempts, last_error, parked_at, created_at
        FROM outbox WHERE status = 'parked';
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
    "#,
    // 3: semantic tier
    graph::MIGRATION,
    // 4: dedup decisions (audit of every candidate pair judged)
    r#"
    CREATE TABLE dedup_log (
        id INTEGER PRIMARY KEY,
        user_id TEXT NOT NULL, agent_id TEXT NOT NULL,
        entity_id TEXT NOT NULL, candidate_id TEXT NOT NULL,
        decision TEXT NOT NULL, similarity REAL NOT NULL, reason TEXT NOT NULL, at INTEGER NOT NULL
    );
    CREATE INDEX dedup_log_scope ON dedup_log (user_id, agent_id);
    "#,
    // 5: API keys of the HTTP and MCP server (only the SHA-256 of each secret)
    r#"
    CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        secret_sha256 TEXT NOT NULL UNIQUE,
        admin INTEGER NOT NULL CHECK (admin IN (0, 1)),
        user_id TEXT, agent_id TEXT,
        label TEXT NOT NULL,
        created_at INTEGER NOT NULL, revoked_at INTEGER,
        CHECK (admin = 1 OR user_id IS NOT NULL)
    );
    "#,
    // 6: message ids are never reused. A plain rowid key hands the next message the
    // id of the newest one deleted (an erased user's), so an id a client kept could
    // name someone else's message; AUTOINCREMENT keeps the high-water mark.
    r#"
    CREATE TABLE messages_v6 (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        user_id TEXT NOT NULL, agent_id TEXT NOT NULL, session_id TEXT NOT NULL,
        seq INTEGER NOT NULL, role TEXT NOT NULL, name TEXT, content TEXT NOT NULL,
        ts INTEGER NOT NULL, recorded_at INTEGER NOT NULL,
        UNIQUE (user_id, agent_id, session_id, seq)
    );
    INSERT INTO messages_v6 (id, user_id, agent_id, session_id, seq, role, name, content, ts, recorded_at)
        SELECT id, user_id, agent_id, session_id, seq, role, name, content, ts, recorded_at FROM messages;
    DROP TABLE messages;
    ALTER TABLE messages_v6 RENAME TO messages;
    "#,
    // 7: typed memories (fact / event / entity / relation) and their field index
    typed::MIGRATION,
    // 8: idempotency keys of messages (a retried record stores nothing twice)
    r#"
    ALTER TABLE messages ADD COLUMN idem TEXT;
    CREATE UNIQUE INDEX messages_idem ON messages (user_id, agent_id, session_id, idem) WHERE idem IS NOT NULL;
    "#,
];

mod graph;
pub mod shared;
pub(crate) mod typed;

/// The connection settings every Strata SQLite file uses (the system of
/// record and the shared stores): WAL with `synchronous = NORMAL`, foreign
/// keys, secure delete (erased rows are overwritten on disk, not left in free
/// pages), a 5 s busy timeout.
pub(crate) fn configure(conn: &Connection) -> Result<()> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.pragma_update(None, "secure_delete", "ON")?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(())
}

/// Runs `f` with the locked connection on tokio's blocking pool.
pub(crate) async fn run_locked<T, F>(conn: &Arc<Mutex<Connection>>, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
{
    let conn = conn.clone();
    tokio::task::spawn_blocking(move || {
        let mut guard = conn
            .lock()
            .map_err(|_| Error::Task("sqlite mutex poisoned".into()))?;
        f(&mut guard)
    })
    .await?
}

fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

fn from_ms(v: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(v).single().unwrap_or_default()
}

/// SQLite-backed [`RecordStore`].
#[derive(Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, enables WAL and runs
    /// pending migrations.
    ///
    /// # Errors
    /// [`Error::Sqlite`] when the file cannot be opened or a migration fails;
    /// [`Error::Config`] when the database is newer than this build.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let conn = Connection::open(path)?;
        Self::init(conn)
    }

    /// An in-memory database (tests and throwaway runs).
    pub fn open_in_memory() -> Result<Self> {
        Self::init(Connection::open_in_memory()?)
    }

    fn init(mut conn: Connection) -> Result<Self> {
        configure(&conn)?;
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if version as usize > MIGRATIONS.len() {
            return Err(Error::Config(format!(
                "database schema version {version} is newer than this build ({})",
                MIGRATIONS.len()
            )));
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            let tx = conn.transaction()?;
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)?;
            tx.commit()?;
            tracing::info!(version = i + 1, "applied schema migration");
        }
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Runs `f` with the connection on the blocking pool.
    async fn run<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        run_locked(&self.conn, f).await
    }

    /// Runs `f` synchronously with the connection (for callers already on a blocking thread).
    pub fn with_conn<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        let mut guard = self
            .conn
            .lock()
            .map_err(|_| Error::Task("sqlite mutex poisoned".into()))?;
        f(&mut guard)
    }

    /// Reads a key of the `meta` table, synchronously (for callers on a blocking thread).
    pub fn meta_blocking(&self, key: &str) -> Result<Option<String>> {
        self.with_conn(|c| meta_read(c, key))
    }

    /// Writes a key of the `meta` table, synchronously (for callers on a blocking thread).
    pub fn set_meta_blocking(&self, key: &str, value: &str) -> Result<()> {
        self.with_conn(|c| meta_write(c, key, value))
    }
}

fn meta_read(c: &Connection, key: &str) -> Result<Option<String>> {
    Ok(
        c.query_row("SELECT value FROM meta WHERE key=?1", [key], |r| r.get(0))
            .optional()?,
    )
}

fn meta_write(c: &Connection, key: &str, value: &str) -> Result<()> {
    c.execute("INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value=excluded.value", params![key, value])?;
    Ok(())
}

/// Collects `(user_id, agent_id, episode id)` rows into scoped episode ids.
fn scoped_episode_ids(
    st: &mut rusqlite::Statement<'_>,
    params: impl rusqlite::Params,
) -> Result<Vec<(Scope, EpisodeId)>> {
    let rows = st.query_map(params, |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
        ))
    })?;
    let mut out = Vec::new();
    for r in rows {
        let (u, a, id) = r?;
        out.push((Scope::new(u, a)?, EpisodeId::parse(&id)?));
    }
    Ok(out)
}

fn row_to_episode(r: &rusqlite::Row<'_>) -> rusqlite::Result<(String, Episode)> {
    let id: String = r.get("id")?;
    let kind: String = r.get("summary_kind")?;
    let session: String = r.get("session_id")?;
    Ok((
        id.clone(),
        Episode {
            id: EpisodeId::parse(&id)
                .map_err(|e| rusqlite::Error::InvalidParameterName(e.to_string()))?,
            session_id: SessionId::new(session)
                .map_err(|e| rusqlite::Error::InvalidParameterName(e.to_string()))?,
            summary: r.get("summary")?,
            abstract_: r.get("abstract")?,
            summary_kind: if kind == "llm" {
                SummaryKind::Llm
            } else {
                SummaryKind::Extractive
            },
            started_at: from_ms(r.get("started_at")?),
            ended_at: from_ms(r.get("ended_at")?),
            created_at: from_ms(r.get("created_at")?),
            expires_at: r.get::<_, Option<i64>>("expires_at")?.map(from_ms),
        },
    ))
}

const EPISODE_COLS: &str =
    "id, session_id, summary, abstract, summary_kind, started_at, ended_at, created_at, expires_at";

fn insert_event(tx: &rusqlite::Transaction<'_>, event: &Event, now: i64) -> Result<EventId> {
    let payload = serde_json::to_string(event)?;
    tx.execute(
        "INSERT INTO outbox (kind, user_id, agent_id, payload, status, attempts, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, 'pending', 0, ?5, ?5)",
        params![event.kind().as_str(), event.scope().user_id(), event.scope().agent_id(), payload, now],
    )?;
    Ok(EventId(tx.last_insert_rowid()))
}

/// Appends one message inside `tx` (creating the session when new).
fn append_in_tx(
    tx: &rusqlite::Transaction<'_>,
    scope: &Scope,
    session: &SessionId,
    msg: &NewMessage,
    now: DateTime<Utc>,
) -> Result<MessageId> {
    let (u, a, s) = (scope.user_id(), scope.agent_id(), session.as_str());
    if let Some(k) = &msg.idempotency_key {
        // no race: the store's one connection runs one transaction at a time
        let held: Option<i64> = tx
            .query_row(
                "SELECT id FROM messages WHERE user_id=?1 AND agent_id=?2 AND session_id=?3 AND idem=?4",
                params![u, a, s, k],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(id) = held {
            return Ok(MessageId(id));
        }
    }
    let existing: Option<(String, i64)> = tx
        .query_row(
            "SELECT status, message_count FROM sessions WHERE user_id=?1 AND agent_id=?2 AND session_id=?3",
            params![u, a, s],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let ts = ms(msg.timestamp);
    let seq = match existing {
        Some((status, _)) if status == "completed" => {
            return Err(Error::Conflict(format!(
                "session {s} is already ended; record new messages under a new session id"
            )))
        }
        Some((_, count)) => {
            tx.execute(
                "UPDATE sessions SET message_count = message_count + 1,
                    started_at = MIN(started_at, ?4), last_message_at = MAX(last_message_at, ?4),
                    last_activity_at = ?5
                 WHERE user_id=?1 AND agent_id=?2 AND session_id=?3",
                params![u, a, s, ts, ms(now)],
            )?;
            count
        }
        None => {
            tx.execute(
                "INSERT INTO sessions (user_id, agent_id, session_id, status, started_at, last_message_at, last_activity_at, message_count)
                 VALUES (?1, ?2, ?3, 'open', ?4, ?4, ?5, 1)",
                params![u, a, s, ts, ms(now)],
            )?;
            0
        }
    };
    tx.execute(
        "INSERT INTO messages (user_id, agent_id, session_id, seq, role, name, content, ts, recorded_at, idem)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![u, a, s, seq, msg.role.as_str(), msg.name, msg.content, ts, ms(now), msg.idempotency_key],
    )?;
    Ok(MessageId(tx.last_insert_rowid()))
}

fn row_to_key(r: &rusqlite::Row<'_>) -> rusqlite::Result<ApiKey> {
    let user: Option<String> = r.get("user_id")?;
    let agent: Option<String> = r.get("agent_id")?;
    let admin: bool = r.get("admin")?;
    let grant = match (admin, user, agent) {
        (true, _, _) => KeyGrant::Admin,
        (false, Some(user_id), Some(agent_id)) => KeyGrant::Agent { user_id, agent_id },
        (false, Some(user_id), None) => KeyGrant::User { user_id },
        (false, None, _) => {
            return Err(rusqlite::Error::InvalidParameterName(
                "api key row with neither admin nor user".into(),
            ))
        }
    };
    Ok(ApiKey {
        id: r.get("id")?,
        grant,
        label: r.get("label")?,
        created_at: from_ms(r.get("created_at")?),
        revoked_at: r.get::<_, Option<i64>>("revoked_at")?.map(from_ms),
    })
}

#[async_trait]
impl RecordStore for SqliteStore {
    async fn append_messages(
        &self,
        scope: &Scope,
        turns: Vec<(SessionId, NewMessage)>,
        now: DateTime<Utc>,
    ) -> Result<Vec<MessageId>> {
        for (_, m) in &turns {
            m.validate()?;
        }
        let scope = scope.clone();
        self.run(move |c| {
            let tx = c.transaction()?;
            let mut ids = Vec::with_capacity(turns.len());
            for (session, msg) in &turns {
                ids.push(append_in_tx(&tx, &scope, session, msg, now)?);
            }
            crate::error::fail_point!("store.append.before_commit");
            tx.commit()?;
            Ok(ids)
        })
        .await
    }

    async fn session(&self, scope: &Scope, session: &SessionId) -> Result<Session> {
        let (scope, session) = (scope.clone(), session.clone());
        self.run(move |c| {
            c.query_row(
                "SELECT status, started_at, last_message_at, message_count FROM sessions
                 WHERE user_id=?1 AND agent_id=?2 AND session_id=?3",
                params![scope.user_id(), scope.agent_id(), session.as_str()],
                |r| {
                    let status: String = r.get(0)?;
                    Ok(Session {
                        id: session.clone(),
                        status: if status == "open" {
                            SessionStatus::Open
                        } else {
                            SessionStatus::Completed
                        },
                        started_at: from_ms(r.get(1)?),
                        last_message_at: from_ms(r.get(2)?),
                        message_count: r.get(3)?,
                    })
                },
            )
            .optional()?
            .ok_or_else(|| Error::NotFound(format!("session {session}")))
        })
        .await
    }

    async fn messages(&self, scope: &Scope, session: &SessionId) -> Result<Vec<Message>> {
        self.session(scope, session).await?;
        let (scope, session) = (scope.clone(), session.clone());
        self.run(move |c| {
            let mut st = c.prepare_cached(
                "SELECT id, seq, role, name, content, ts, idem FROM messages
                 WHERE user_id=?1 AND agent_id=?2 AND session_id=?3 ORDER BY seq",
            )?;
            let rows = st.query_map(
                params![scope.user_id(), scope.agent_id(), session.as_str()],
                |r| {
                    let role: String = r.get(2)?;
                    Ok(Message {
                        id: MessageId(r.get(0)?),
                        session_id: session.clone(),
                        seq: r.get(1)?,
                        message: NewMessage {
                            role: Role::parse(&role).unwrap_or(Role::System),
                            name: r.get(3)?,
                            content: r.get(4)?,
                            timestamp: from_ms(r.get(5)?),
                            idempotency_key: r.get(6)?,
                        },
                    })
                },
            )?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
    }

    async fn recent_user_turns(
        &self,
        scope: &Scope,
        session: &SessionId,
        n: usize,
    ) -> Result<Vec<String>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let (scope, session) = (scope.clone(), session.clone());
        self.run(move |c| {
            let mut st = c.prepare_cached(
                "SELECT content FROM messages WHERE user_id=?1 AND agent_id=?2 AND session_id=?3 AND role='user'
                 ORDER BY seq DESC LIMIT ?4",
            )?;
            let rows = st.query_map(params![scope.user_id(), scope.agent_id(), session.as_str(), n as i64], |r| r.get::<_, String>(0))?;
            let mut v = rows.collect::<rusqlite::Result<Vec<_>>>()?;
            v.reverse();
            Ok(v)
        })
        .await
    }

    async fn complete_session(
        &self,
        scope: &Scope,
        session: &SessionId,
        now: DateTime<Utc>,
    ) -> Result<Option<EventId>> {
        let (scope, session) = (scope.clone(), session.clone());
        self.run(move |c| {
            let tx = c.transaction()?;
            let status: Option<String> = tx
                .query_row(
                    "SELECT status FROM sessions WHERE user_id=?1 AND agent_id=?2 AND session_id=?3",
                    params![scope.user_id(), scope.agent_id(), session.as_str()],
                    |r| r.get(0),
                )
                .optional()?;
            match status.as_deref() {
                None => Err(Error::NotFound(format!("session {session}"))),
                Some("completed") => Ok(None),
                Some(_) => {
                    tx.execute(
                        "UPDATE sessions SET status='completed', completed_at=?4 WHERE user_id=?1 AND agent_id=?2 AND session_id=?3",
                        params![scope.user_id(), scope.agent_id(), session.as_str(), ms(now)],
                    )?;
                    let id = insert_event(&tx, &Event::SessionCompleted { scope: scope.clone(), session_id: session.clone() }, ms(now))?;
                    crate::error::fail_point!("store.complete_session.before_commit");
                    tx.commit()?;
                    Ok(Some(id))
                }
            }
        })
        .await
    }

    async fn put_episode(
        &self,
        scope: &Scope,
        episode: &Episode,
        done: EventId,
        vectors_pending: bool,
        on_new: Vec<Event>,
    ) -> Result<()> {
        let (scope, ep) = (scope.clone(), episode.clone());
        self.run(move |c| {
            let tx = c.transaction()?;
            let now = ms(Utc::now());
            // an erasure that ran while the session was being summarised took
            // the session: its episode must not come back
            let session: bool = tx
                .query_row(
                    "SELECT 1 FROM sessions WHERE user_id=?1 AND agent_id=?2 AND session_id=?3",
                    params![scope.user_id(), scope.agent_id(), ep.session_id.as_str()],
                    |_| Ok(()),
                )
                .optional()?
                .is_some();
            if !session {
                return Err(Error::NotFound(format!("session {} (erased)", ep.session_id)));
            }
            let existed: bool = tx
                .query_row("SELECT 1 FROM episodes WHERE id=?1", [ep.id.as_str()], |_| Ok(()))
                .optional()?
                .is_some();
            tx.execute(
                "INSERT INTO episodes (id, user_id, agent_id, session_id, summary, abstract, summary_kind, started_at, ended_at, created_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                 ON CONFLICT(id) DO UPDATE SET summary=excluded.summary, abstract=excluded.abstract,
                    summary_kind=excluded.summary_kind, started_at=excluded.started_at, ended_at=excluded.ended_at,
                    expires_at=excluded.expires_at",
                params![
                    ep.id.as_str(), scope.user_id(), scope.agent_id(), ep.session_id.as_str(), ep.summary, ep.abstract_,
                    ep.summary_kind.as_str(), ms(ep.started_at), ms(ep.ended_at), ms(ep.created_at), ep.expires_at.map(ms)
                ],
            )?;
            tx.execute("UPDATE outbox SET status='done', updated_at=?2 WHERE id=?1", params![done.0, now])?;
            if !existed {
                insert_event(&tx, &Event::EpisodeCreated { scope: scope.clone(), episode_id: ep.id.clone() }, now)?;
                for e in &on_new {
                    insert_event(&tx, e, now)?;
                }
            }
            if vectors_pending {
                insert_event(&tx, &Event::EpisodeVectors { scope: scope.clone(), episode_id: ep.id.clone() }, now)?;
            }
            crate::error::fail_point!("store.put_episode.before_commit");
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn episode_ids_with_prefix(&self, scope: &Scope, prefix: &str, now: DateTime<Utc>, limit: usize) -> Result<Vec<EpisodeId>> {
        let (scope, pattern) = (scope.clone(), format!("{prefix}%"));
        self.run(move |c| {
            let mut st = c.prepare_cached(
                "SELECT id FROM episodes WHERE user_id=?1 AND agent_id=?2 AND id LIKE ?3
                 AND (expires_at IS NULL OR expires_at > ?4) ORDER BY id LIMIT ?5",
            )?;
            let ids = st
                .query_map(params![scope.user_id(), scope.agent_id(), pattern, ms(now), limit as i64], |r| r.get::<_, String>(0))?
                .collect::<std::result::Result<Vec<_>, _>>()?;
            ids.iter().map(|i| EpisodeId::parse(i)).collect()
        })
        .await
    }

    async fn episode(&self, scope: &Scope, id: &EpisodeId, now: DateTime<Utc>) -> Result<Episode> {
        let found = self.episodes(scope, std::slice::from_ref(id), now).await?;
        found
            .into_iter()
            .next()
            .ok_or_else(|| Error::NotFound(format!("episode {id}")))
    }

    async fn episodes(
        &self,
        scope: &Scope,
        ids: &[EpisodeId],
        now: DateTime<Utc>,
    ) -> Result<Vec<Episode>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let (scope, ids) = (scope.clone(), ids.to_vec());
        self.run(move |c| {
            let mut st = c.prepare_cached(&format!(
                "SELECT {EPISODE_COLS} FROM episodes WHERE id=?1 AND user_id=?2 AND agent_id=?3
                 AND (expires_at IS NULL OR expires_at > ?4)"
            ))?;
            let mut out = Vec::with_capacity(ids.len());
            for id in &ids {
                if let Some((_, ep)) = st
                    .query_row(
                        params![id.as_str(), scope.user_id(), scope.agent_id(), ms(now)],
                        row_to_episode,
                    )
                    .optional()?
                {
                    out.push(ep);
                }
            }
            Ok(out)
        })
        .await
    }

    async fn sessions(&self, scope: &Scope, limit: usize) -> Result<Vec<Session>> {
        let scope = scope.clone();
        self.run(move |c| {
            let mut st = c.prepare(
                "SELECT session_id, status, started_at, last_message_at, message_count FROM sessions
                 WHERE user_id=?1 AND agent_id=?2 ORDER BY started_at DESC, session_id LIMIT ?3",
            )?;
            let rows = st.query_map(params![scope.user_id(), scope.agent_id(), limit as i64], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?, r.get::<_, i64>(4)?))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (id, status, started, last, count) = row?;
                out.push(Session {
                    id: SessionId::new(id)?,
                    status: if status == "open" { SessionStatus::Open } else { SessionStatus::Completed },
                    started_at: from_ms(started),
                    last_message_at: from_ms(last),
                    message_count: count,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn scopes(&self, search: &str, limit: usize) -> Result<Vec<ScopeActivity>> {
        let search = search.to_string();
        self.run(move |c| {
            let mut st = c.prepare(
                "SELECT s.user_id, s.agent_id, COUNT(*), SUM(s.status = 'open'), MAX(s.last_message_at),
                        (SELECT COUNT(*) FROM episodes e WHERE e.user_id = s.user_id AND e.agent_id = s.agent_id)
                 FROM sessions s
                 WHERE ?1 = '' OR instr(s.user_id, ?1) > 0 OR instr(s.agent_id, ?1) > 0
                 GROUP BY s.user_id, s.agent_id ORDER BY MAX(s.last_message_at) DESC, s.user_id, s.agent_id LIMIT ?2",
            )?;
            let rows = st.query_map(params![search, limit as i64], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?, r.get::<_, i64>(4)?, r.get::<_, i64>(5)?))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (user, agent, sessions, open, last, episodes) = row?;
                out.push(ScopeActivity {
                    scope: Scope::new(user, agent)?,
                    sessions: sessions as usize,
                    open_sessions: open as usize,
                    episodes: episodes as usize,
                    last_message_at: from_ms(last),
                });
            }
            Ok(out)
        })
        .await
    }

    async fn count_episodes(&self, scope: &Scope) -> Result<usize> {
        let scope = scope.clone();
        self.run(move |c| {
            let n: i64 = c.query_row(
                "SELECT COUNT(*) FROM episodes WHERE user_id=?1 AND agent_id=?2",
                params![scope.user_id(), scope.agent_id()],
                |r| r.get(0),
            )?;
            Ok(n as usize)
        })
        .await
    }

    async fn delete_episodes(&self, scope: &Scope, ids: &[EpisodeId]) -> Result<usize> {
        let (scope, ids) = (scope.clone(), ids.to_vec());
        self.run(move |c| {
            let tx = c.transaction()?;
            let mut n = 0;
            for id in &ids {
                n += tx.execute(
                    "DELETE FROM episodes WHERE id=?1 AND user_id=?2 AND agent_id=?3",
                    params![id.as_str(), scope.user_id(), scope.agent_id()],
                )?;
            }
            tx.commit()?;
            Ok(n)
        })
        .await
    }

    async fn pending_events(&self, kinds: &[EventKind], limit: usize) -> Result<Vec<OutboxEvent>> {
        let kinds: Vec<&'static str> = kinds.iter().map(|k| k.as_str()).collect();
        let now = ms(Utc::now());
        self.run(move |c| {
            let marks = vec!["?"; kinds.len()].join(",");
            let mut st = c.prepare(&format!(
                "SELECT id, payload, attempts FROM outbox WHERE status='pending' AND available_at <= {now} AND kind IN ({marks}) ORDER BY id LIMIT {limit}"
            ))?;
            let rows = st.query_map(rusqlite::params_from_iter(kinds.iter()), |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (id, payload, attempts) = row?;
                match serde_json::from_str::<Event>(&payload) {
                    Ok(event) => out.push(OutboxEvent { id: EventId(id), event, attempts: attempts as u32 }),
                    Err(e) => {
                        // unreadable payload: park it, never drop it
                        tracing::error!(event_id = id, error = %e, "parking unreadable outbox event");
                        c.execute(
                            "UPDATE outbox SET status='parked', last_error=?2, parked_at=?3 WHERE id=?1",
                            params![id, format!("unreadable payload: {e}"), now],
                        )?;
                    }
                }
            }
            Ok(out)
        })
        .await
    }

    async fn count_pending(&self, kinds: &[EventKind]) -> Result<usize> {
        let kinds: Vec<&'static str> = kinds.iter().map(|k| k.as_str()).collect();
        self.run(move |c| {
            let marks = vec!["?"; kinds.len()].join(",");
            let n: i64 = c.query_row(
                &format!(
                    "SELECT COUNT(*) FROM outbox WHERE status='pending' AND kind IN ({marks})"
                ),
                rusqlite::params_from_iter(kinds.iter()),
                |r| r.get(0),
            )?;
            Ok(n as usize)
        })
        .await
    }

    async fn fail_event(&self, id: EventId, error: &str, park_after: u32, on_park: Vec<Event>) -> Result<bool> {
        let error = error.to_string();
        self.run(move |c| {
            let tx = c.transaction()?;
            let now = ms(Utc::now());
            tx.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ?2, updated_at = ?4,
                    available_at = ?4 + MIN(60000, 500 * (1 << MIN(attempts, 7))),
                    status = CASE WHEN attempts + 1 >= ?3 THEN 'parked' ELSE status END,
                    parked_at = CASE WHEN attempts + 1 >= ?3 THEN ?4 ELSE parked_at END
                 WHERE id = ?1",
                params![id.0, error, park_after, now],
            )?;
            let parked = tx
                .query_row("SELECT status = 'parked' FROM outbox WHERE id = ?1", [id.0], |r| r.get::<_, bool>(0))
                .optional()?
                .unwrap_or(false);
            if parked {
                for e in &on_park {
                    insert_event(&tx, e, now)?;
                }
            }
            tx.commit()?;
            Ok(parked)
        })
        .await
    }

    async fn idle_sessions(&self, before: DateTime<Utc>) -> Result<Vec<(Scope, SessionId)>> {
        self.run(move |c| {
            let mut st = c.prepare_cached(
                "SELECT user_id, agent_id, session_id FROM sessions WHERE status='open' AND last_activity_at < ?1 LIMIT 1000",
            )?;
            let rows = st.query_map([ms(before)], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)))?;
            let mut out = Vec::new();
            for r in rows {
                let (u, a, s) = r?;
                out.push((Scope::new(u, a)?, SessionId::new(s)?));
            }
            Ok(out)
        })
        .await
    }

    async fn expired_episodes(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<(Scope, EpisodeId)>> {
        self.run(move |c| {
            let mut st = c.prepare_cached(
                "SELECT user_id, agent_id, id FROM episodes WHERE expires_at IS NOT NULL AND expires_at <= ?1 LIMIT ?2",
            )?;
            scoped_episode_ids(&mut st, params![ms(now), limit as i64])
        })
        .await
    }

    async fn delete_user_records(&self, user_id: &str) -> Result<DeleteCounts> {
        let user = user_id.to_string();
        self.run(move |c| {
            let tx = c.transaction()?;
            let mut counts = DeleteCounts::default();
            for table in [
                "messages",
                "sessions",
                "episodes",
                "outbox",
                "llm_calls",
                "dedup_log",
            ] {
                let n = tx.execute(&format!("DELETE FROM {table} WHERE user_id = ?1"), [&user])?;
                counts.rows.insert(table.to_string(), n);
            }
            counts.rows.insert("memories".into(), typed::delete_user(&tx, &user)?);
            tx.commit()?;
            // move the WAL into the (securely deleted) main file and empty it, so no
            // copy of the erased pages stays in the write-ahead log
            c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
            Ok(counts)
        })
        .await
    }

    async fn finish_event(&self, id: EventId, follow_ups: Vec<Event>) -> Result<()> {
        self.run(move |c| {
            let tx = c.transaction()?;
            let now = ms(Utc::now());
            tx.execute(
                "UPDATE outbox SET status='done', updated_at=?2 WHERE id=?1",
                params![id.0, now],
            )?;
            for e in &follow_ups {
                insert_event(&tx, e, now)?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn user_episodes(&self, user_id: &str) -> Result<Vec<(Scope, EpisodeId)>> {
        let user = user_id.to_string();
        self.run(move |c| {
            let mut st =
                c.prepare("SELECT user_id, agent_id, id FROM episodes WHERE user_id=?1")?;
            scoped_episode_ids(&mut st, [&user])
        })
        .await
    }

    async fn log_dedup(
        &self,
        scope: &Scope,
        entity: &crate::model::graph::EntityId,
        rows: Vec<crate::model::LoggedDecision>,
    ) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let (scope, entity) = (scope.clone(), entity.as_str().to_string());
        self.run(move |c| {
            let tx = c.transaction()?;
            let now = ms(Utc::now());
            for r in &rows {
                tx.execute(
                    "INSERT INTO dedup_log (user_id, agent_id, entity_id, candidate_id, decision, similarity, reason, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    params![scope.user_id(), scope.agent_id(), entity, r.candidate.as_str(), r.decision, r.similarity, r.reason, now],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn dedup_stats(
        &self,
        scope: &Scope,
    ) -> Result<std::collections::BTreeMap<String, usize>> {
        let scope = scope.clone();
        self.run(move |c| {
            let mut st = c.prepare("SELECT decision, COUNT(*) FROM dedup_log WHERE user_id=?1 AND agent_id=?2 GROUP BY decision")?;
            let rows = st.query_map(params![scope.user_id(), scope.agent_id()], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as usize)))?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })
        .await
    }

    async fn record_llm_calls(
        &self,
        scope: &Scope,
        session: Option<&SessionId>,
        event: Option<EventId>,
        calls: Vec<crate::model::CallRecord>,
    ) -> Result<()> {
        if calls.is_empty() {
            return Ok(());
        }
        let (scope, session) = (scope.clone(), session.map(|s| s.as_str().to_string()));
        self.run(move |c| {
            let tx = c.transaction()?;
            let now = ms(Utc::now());
            {
                let mut st = tx.prepare_cached(
                    "INSERT INTO llm_calls (user_id, agent_id, session_id, event_id, task, model, prompt_version, attempt, error,
                        input_tokens, output_tokens, latency_ms, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                )?;
                for r in &calls {
                    st.execute(params![
                        scope.user_id(), scope.agent_id(), session, event.map(|e| e.0), r.task, r.model, r.prompt_version,
                        r.attempt, r.error, r.input_tokens, r.output_tokens, r.latency_ms as i64, now
                    ])?;
                }
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn usage_totals(&self, scope: Option<&Scope>) -> Result<UsageTotals> {
        let scope = scope.cloned();
        self.run(move |c| {
            let sql = "SELECT COUNT(*), COUNT(error), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
                COUNT(DISTINCT user_id || char(31) || agent_id || char(31) || COALESCE(session_id, '')) FROM llm_calls";
            let map = |r: &rusqlite::Row<'_>| {
                Ok(UsageTotals {
                    calls: r.get::<_, i64>(0)? as u64,
                    failed_calls: r.get::<_, i64>(1)? as u64,
                    input_tokens: r.get::<_, i64>(2)? as u64,
                    output_tokens: r.get::<_, i64>(3)? as u64,
                    sessions: r.get::<_, i64>(4)? as u64,
                })
            };
            Ok(match &scope {
                Some(s) => c.query_row(&format!("{sql} WHERE user_id=?1 AND agent_id=?2"), params![s.user_id(), s.agent_id()], map)?,
                None => c.query_row(sql, [], map)?,
            })
        })
        .await
    }

    async fn parked_jobs(&self, limit: usize) -> Result<Vec<ParkedJob>> {
        self.run(move |c| {
            let mut st = c.prepare(
                "SELECT id, payload, attempts, COALESCE(last_error, ''), parked_at, created_at FROM dead_letter ORDER BY id LIMIT ?1",
            )?;
            let rows = st.query_map([limit as i64], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?, r.get::<_, String>(3)?, r.get::<_, Option<i64>>(4)?, r.get::<_, i64>(5)?))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (id, payload, attempts, last_error, parked_at, created_at) = row?;
                let Some(event) = super::listed_event(id, &payload, "dead-letter row") else {
                    continue;
                };
                out.push(ParkedJob { id: EventId(id), event, attempts: attempts as u32, last_error, parked_at: parked_at.map(from_ms), created_at: from_ms(created_at) });
            }
            Ok(out)
        })
        .await
    }

    async fn open_jobs(&self, scope: &Scope, limit: usize) -> Result<Vec<OpenJob>> {
        let (user, agent) = (scope.user_id().to_string(), scope.agent_id().to_string());
        self.run(move |c| {
            let mut st = c.prepare(
                "SELECT id, payload, status, attempts, last_error FROM outbox
                 WHERE status IN ('pending', 'parked') AND user_id = ?1 AND agent_id = ?2 ORDER BY id LIMIT ?3",
            )?;
            let rows = st.query_map(params![user, agent, limit as i64], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, i64>(3)?, r.get::<_, Option<String>>(4)?))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (id, payload, status, attempts, last_error) = row?;
                let Some(event) = super::listed_event(id, &payload, "outbox row") else {
                    continue;
                };
                out.push(OpenJob { id: EventId(id), event, parked: status == "parked", attempts: attempts as u32, last_error });
            }
            Ok(out)
        })
        .await
    }

    async fn retry_parked(&self, id: Option<EventId>) -> Result<usize> {
        self.run(move |c| {
            let now = ms(Utc::now());
            let n = match id {
                Some(id) => c.execute(
                    "UPDATE outbox SET status='pending', attempts=0, available_at=?2, parked_at=NULL, updated_at=?2 WHERE id=?1 AND status='parked'",
                    params![id.0, now],
                )?,
                None => c.execute(
                    "UPDATE outbox SET status='pending', attempts=0, available_at=?1, parked_at=NULL, updated_at=?1 WHERE status='parked'",
                    params![now],
                )?,
            };
            Ok(n)
        })
        .await
    }

    async fn meta_get(&self, key: &str) -> Result<Option<String>> {
        let key = key.to_string();
        self.run(move |c| meta_read(c, &key)).await
    }

    async fn meta_set(&self, key: &str, value: &str) -> Result<()> {
        let (key, value) = (key.to_string(), value.to_string());
        self.run(move |c| meta_write(c, &key, &value)).await
    }

    async fn put_api_key(&self, key: &ApiKey, secret_sha256: &str) -> Result<()> {
        let (key, hash) = (key.clone(), secret_sha256.to_string());
        self.run(move |c| {
            let (admin, user, agent) = match &key.grant {
                KeyGrant::Admin => (true, None, None),
                KeyGrant::User { user_id } => (false, Some(user_id.clone()), None),
                KeyGrant::Agent { user_id, agent_id } => {
                    (false, Some(user_id.clone()), Some(agent_id.clone()))
                }
            };
            c.execute(
                "INSERT INTO api_keys (id, secret_sha256, admin, user_id, agent_id, label, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![key.id, hash, admin, user, agent, key.label, ms(key.created_at)],
            )?;
            Ok(())
        })
        .await
    }

    async fn api_key_by_hash(&self, secret_sha256: &str) -> Result<Option<ApiKey>> {
        let hash = secret_sha256.to_string();
        self.run(move |c| {
            let mut st = c.prepare_cached(
                "SELECT id, admin, user_id, agent_id, label, created_at, revoked_at
                 FROM api_keys WHERE secret_sha256 = ?1",
            )?;
            Ok(st.query_row([&hash], row_to_key).optional()?)
        })
        .await
    }

    async fn api_keys(&self) -> Result<Vec<ApiKey>> {
        self.run(|c| {
            let mut st = c.prepare(
                "SELECT id, admin, user_id, agent_id, label, created_at, revoked_at
                 FROM api_keys ORDER BY created_at, id",
            )?;
            let rows = st.query_map([], row_to_key)?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
    }

    async fn revoke_api_key(&self, id: &str, now: DateTime<Utc>) -> Result<ApiKey> {
        let id = id.to_string();
        self.run(move |c| {
            c.execute(
                "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
                params![id, ms(now)],
            )?;
            c.query_row(
                "SELECT id, admin, user_id, agent_id, label, created_at, revoked_at FROM api_keys WHERE id = ?1",
                [&id],
                row_to_key,
            )
            .optional()?
            .ok_or_else(|| Error::NotFound(format!("api key {id}")))
        })
        .await
    }

    async fn api_keys_created(&self) -> Result<bool> {
        self.run(|c| {
            Ok(
                c.query_row("SELECT EXISTS (SELECT 1 FROM api_keys)", [], |r| {
                    r.get::<_, bool>(0)
                })?,
            )
        })
        .await
    }

    async fn store_sizes(&self) -> Result<StoreSizes> {
        self.run(|c| {
            let one = |sql: &str| -> Result<u64> {
                Ok(c.query_row(sql, [], |r| r.get::<_, i64>(0))? as u64)
            };
            Ok(StoreSizes {
                sessions: one("SELECT COUNT(*) FROM sessions")?,
                open_sessions: one("SELECT COUNT(*) FROM sessions WHERE status = 'open'")?,
                messages: one("SELECT COUNT(*) FROM messages")?,
                episodes: one("SELECT COUNT(*) FROM episodes")?,
                parked_jobs: one("SELECT COUNT(*) FROM outbox WHERE status = 'parked'")?,
            })
        })
        .await
    }

    async fn all_episodes(
        &self,
        after: Option<EpisodeId>,
        limit: usize,
        now: DateTime<Utc>,
    ) -> Result<Vec<(Scope, Episode)>> {
        self.run(move |c| {
            let mut st = c.prepare(&format!(
                "SELECT user_id, agent_id, {EPISODE_COLS} FROM episodes WHERE id > ?1 AND (expires_at IS NULL OR expires_at > ?2)
                 ORDER BY id LIMIT ?3"
            ))?;
            let after = after.map(|a| a.as_str().to_string()).unwrap_or_default();
            let rows = st.query_map(params![after, ms(now), limit as i64], |r| {
                let (_, ep) = row_to_episode(r)?;
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, ep))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (u, a, ep) = row?;
                out.push((Scope::new(u, a)?, ep));
            }
            Ok(out)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(u: &str) -> Scope {
        Scope::new(u, "bot").unwrap()
    }

    #[tokio::test]
    async fn migrations_are_versioned_and_rerunnable() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.db");
        SqliteStore::open(&p).unwrap();
        let s = SqliteStore::open(&p).unwrap();
        let v: i64 = s
            .with_conn(|c| Ok(c.pragma_query_value(None, "user_version", |r| r.get(0))?))
            .unwrap();
        assert_eq!(v as usize, MIGRATIONS.len());
        let mode: String = s
            .with_conn(|c| Ok(c.pragma_query_value(None, "journal_mode", |r| r.get(0))?))
            .unwrap();
        assert_eq!(mode, "wal");
    }

    #[tokio::test]
    async fn message_ids_are_not_reused_after_an_erasure() {
        let s = SqliteStore::open_in_memory().unwrap();
        let t = Utc::now();
        let sid = SessionId::new("s").unwrap();
        let a = s
            .append_message(&scope("a"), &sid, &NewMessage::user("one", t), t)
            .await
            .unwrap();
        let b = s
            .append_message(&scope("b"), &sid, &NewMessage::user("two", t), t)
            .await
            .unwrap();
        s.delete_user_records("b").await.unwrap();
        let c = s
            .append_message(&scope("c"), &sid, &NewMessage::user("three", t), t)
            .await
            .unwrap();
        assert!(a < b && b < c, "{a:?} {b:?} {c:?}");
    }

    #[tokio::test]
    async fn messages_survive_the_v6_migration() {
        // a database at schema 5 with messages, then opened by this build
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("old.db");
        {
            let mut c = Connection::open(&p).unwrap();
            for (i, sql) in MIGRATIONS.iter().enumerate().take(5) {
                let tx = c.transaction().unwrap();
                tx.execute_batch(sql).unwrap();
                tx.pragma_update(None, "user_version", (i + 1) as i64)
                    .unwrap();
                tx.commit().unwrap();
            }
            c.execute(
                "INSERT INTO messages (id, user_id, agent_id, session_id, seq, role, content, ts, recorded_at)
                 VALUES (41, 'u', 'a', 's', 0, 'user', 'kept', 1, 1)",
                [],
            )
            .unwrap();
        }
        let s = SqliteStore::open(&p).unwrap();
        let (id, content): (i64, String) = s
            .with_conn(|c| {
                Ok(c.query_row("SELECT id, content FROM messages", [], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?)
            })
            .unwrap();
        assert_eq!((id, content.as_str()), (41, "kept"));
        let next = s
            .append_message(
                &scope("u"),
                &SessionId::new("s2").unwrap(),
                &NewMessage::user("x", Utc::now()),
                Utc::now(),
            )
            .await
            .unwrap();
        assert_eq!(next, MessageId(42));
    }

    #[tokio::test]
    async fn record_complete_and_outbox_in_one_place() {
        let s = SqliteStore::open_in_memory().unwrap();
        let (sc, sid) = (scope("u"), SessionId::new("s1").unwrap());
        let t = Utc.with_ymd_and_hms(2023, 5, 8, 13, 56, 0).unwrap();
        s.append_message(
            &sc,
            &sid,
            &NewMessage::user("I moved to Berlin", t),
            Utc::now(),
        )
        .await
        .unwrap();
        s.append_message(&sc, &sid, &NewMessage::assistant("Nice", t), Utc::now())
            .await
            .unwrap();
        let sess = s.session(&sc, &sid).await.unwrap();
        assert_eq!(sess.message_count, 2);
        assert_eq!(sess.started_at, t, "caller timestamp, not ingestion time");
        assert!(s.session(&scope("other"), &sid).await.is_err());
        let ev = s.complete_session(&sc, &sid, Utc::now()).await.unwrap();
        assert!(ev.is_some());
        assert_eq!(
            s.complete_session(&sc, &sid, Utc::now()).await.unwrap(),
            None
        );
        let err = s
            .append_message(&sc, &sid, &NewMessage::user("more", t), Utc::now())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Conflict(_)));
        let pending = s
            .pending_events(&[EventKind::SessionCompleted], 10)
            .await
            .unwrap();
        assert_eq!(pending.len(), 1);
        s.fail_event(pending[0].id, "boom", 2, vec![]).await.unwrap();
        assert_eq!(
            s.count_pending(&[EventKind::SessionCompleted])
                .await
                .unwrap(),
            1
        );
        s.fail_event(pending[0].id, "boom", 2, vec![]).await.unwrap();
        assert_eq!(
            s.count_pending(&[EventKind::SessionCompleted])
                .await
                .unwrap(),
            0,
            "parked after 2 attempts"
        );
        let parked: i64 = s
            .with_conn(|c| {
                Ok(c.query_row(
                    "SELECT COUNT(*) FROM outbox WHERE status='parked'",
                    [],
                    |r| r.get(0),
                )?)
            })
            .unwrap();
        assert_eq!(parked, 1, "parked, not dropped");
    }

    #[tokio::test]
    async fn unknown_session_is_not_found() {
        let s = SqliteStore::open_in_memory().unwrap();
        let e = s
            .complete_session(&scope("u"), &SessionId::new("nope").unwrap(), Utc::now())
            .await
            .unwrap_err();
        assert!(matches!(e, Error::NotFound(_)));
    }
}
