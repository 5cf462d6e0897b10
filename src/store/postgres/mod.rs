//! PostgreSQL system of record ([`RecordStore`]) for deployments that
//! outgrow one machine: several Strata nodes share one database.
//!
//! - **Connections**: a deadpool-postgres pool over tokio-postgres (no TLS
//!   here; put a TLS-terminating proxy or a private network in front).
//!   Every connection's `search_path` is the store's schema, so one server
//!   can hold several deployments (and each test its own schema).
//! - **Migrations**: an ordered list of SQL scripts ([`MIGRATIONS`]); the
//!   table `strata_migrations` records which ran. They run on connect, in
//!   one transaction each, under a transaction-scoped advisory lock, so
//!   nodes starting together apply each script once.
//! - **Schema**: the tables and columns of the SQLite store (timestamps as
//!   BIGINT milliseconds since the Unix epoch, UTC), with identity columns
//!   for message, outbox, call-log and dedup-log ids, which PostgreSQL never
//!   reuses.
//! - **Outbox claims across nodes**: [`RecordStore::pending_events`] leases
//!   the events it returns (`FOR UPDATE SKIP LOCKED`, then `available_at`
//!   moved [`CLAIM_LEASE_MS`] ahead), so two nodes never take the same event
//!   at once, and an event whose node died mid-job is taken again when the
//!   lease expires. `finish_event` / `fail_event` end the lease.
//! - **Errors**: a server that cannot be reached is
//!   [`Error::Unavailable`] naming PostgreSQL (HTTP 503); a refused
//!   statement is [`Error::Postgres`].

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row};

use super::{
    DeleteCounts, Event, EventKind, OpenJob, OutboxEvent, ParkedJob, RecordStore, StoreSizes, UsageTotals,
};
use crate::error::{Error, Result};
use crate::model::*;

/// How long a claimed outbox event stays invisible to other nodes, in ms
/// (5 minutes: longer than any promotion job's LLM retries, short enough
/// that a dead node's work resumes soon).
pub const CLAIM_LEASE_MS: i64 = 5 * 60 * 1000;

/// Ordered schema migrations; index + 1 is the version recorded in `strata_migrations`.
pub const MIGRATIONS: &[&str] = &[
    // 1: the system of record of the SQLite store's migrations 1, 2, 4, 5 and 6
    r#"
    CREATE TABLE sessions (
        user_id TEXT NOT NULL, agent_id TEXT NOT NULL, session_id TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('open','completed')),
        started_at BIGINT NOT NULL, last_message_at BIGINT NOT NULL,
        last_activity_at BIGINT NOT NULL, message_count BIGINT NOT NULL,
        completed_at BIGINT,
        PRIMARY KEY (user_id, agent_id, session_id)
    );
    CREATE INDEX sessions_idle ON sessions (status, last_activity_at);
    CREATE TABLE messages (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        user_id TEXT NOT NULL, agent_id TEXT NOT NULL, session_id TEXT NOT NULL,
        seq BIGINT NOT NULL, role TEXT NOT NULL, name TEXT, content TEXT NOT NULL,
        ts BIGINT NOT NULL, recorded_at BIGINT NOT NULL,
        UNIQUE (user_id, agent_id, session_id, seq)
    );
    CREATE TABLE episodes (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL, agent_id TEXT NOT NULL, session_id TEXT NOT NULL,
        summary TEXT NOT NULL, abstract TEXT NOT NULL, summary_kind TEXT NOT NULL,
        started_at BIGINT NOT NULL, ended_at BIGINT NOT NULL,
        created_at BIGINT NOT NULL, expires_at BIGINT
    );
    CREATE INDEX episodes_scope ON episodes (user_id, agent_id);
    CREATE INDEX episodes_expiry ON episodes (expires_at) WHERE expires_at IS NOT NULL;
    CREATE TABLE outbox (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        kind TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL,
        payload TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending','done','parked')),
        attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT,
        available_at BIGINT NOT NULL DEFAULT 0,
        created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL,
        parked_at BIGINT
    );
    CREATE INDEX outbox_pending ON outbox (status, kind, id);
    CREATE TABLE llm_calls (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        user_id TEXT NOT NULL, agent_id TEXT NOT NULL, session_id TEXT, event_id BIGINT,
        task TEXT NOT NULL, model TEXT NOT NULL, prompt_version BIGINT NOT NULL, attempt BIGINT NOT NULL,
        error TEXT, input_tokens BIGINT NOT NULL, output_tokens BIGINT NOT NULL,
        latency_ms BIGINT NOT NULL, at BIGINT NOT NULL
    );
    CREATE INDEX llm_calls_scope ON llm_calls (user_id, agent_id, session_id);
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE dedup_log (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        user_id TEXT NOT NULL, agent_id TEXT NOT NULL,
        entity_id TEXT NOT NULL, candidate_id TEXT NOT NULL,
        decision TEXT NOT NULL, similarity DOUBLE PRECISION NOT NULL, reason TEXT NOT NULL, at BIGINT NOT NULL
    );
    CREATE INDEX dedup_log_scope ON dedup_log (user_id, agent_id);
    CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        secret_sha256 TEXT NOT NULL UNIQUE,
        admin BOOLEAN NOT NULL,
        user_id TEXT, agent_id TEXT,
        label TEXT NOT NULL,
        created_at BIGINT NOT NULL, revoked_at BIGINT,
        CHECK (admin OR user_id IS NOT NULL)
    );
    "#,
    // 2: typed memories of every tier
    typed::MIGRATION,
    // 3: idempotency keys of messages (a retried record stores nothing twice)
    r#"
    ALTER TABLE messages ADD COLUMN idem TEXT;
    CREATE UNIQUE INDEX messages_idem ON messages (user_id, agent_id, session_id, idem) WHERE idem IS NOT NULL;
    "#,
];

mod copy;
mod typed;
pub use typed::{PgSharedStore, WRITE_ATTEMPTS};

fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

fn from_ms(v: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(v).single().unwrap_or_default()
}

/// The error for a failed statement: unreachable server → [`Error::Unavailable`].
pub(crate) fn pe(e: tokio_postgres::Error) -> Error {
    if let Some(db) = e.as_db_error() {
        // the driver's Display says only "db error"; the server's message,
        // SQLSTATE and constraint are what an operator needs
        let constraint = db.constraint().map(|c| format!(", constraint {c}")).unwrap_or_default();
        Error::Postgres(format!("{} (SQLSTATE {}{constraint})", db.message(), db.code().code()))
    } else {
        Error::Unavailable {
            service: "postgresql".into(),
            message: e.to_string(),
        }
    }
}

/// The error for a connection that could not be had from the pool.
fn pool_err(e: deadpool_postgres::PoolError) -> Error {
    match e {
        deadpool_postgres::PoolError::Backend(b) => pe(b),
        other => Error::Unavailable {
            service: "postgresql".into(),
            message: other.to_string(),
        },
    }
}

/// Checks a schema name: lowercase ASCII letters, digits and `_`, starting
/// with a letter or `_`, at most 63 bytes (PostgreSQL's identifier limit).
fn check_schema(s: &str) -> Result<()> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Error::Config(format!(
            "postgres schema {s:?}: use lowercase letters, digits and _, starting with a letter (at most 63 bytes)"
        )))
    }
}

/// PostgreSQL-backed [`RecordStore`] (see the module docs).
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    schema: String,
    /// How long a claimed outbox event stays hidden from other nodes, ms.
    lease_ms: i64,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("schema", &self.schema).finish()
    }
}

impl PgStore {
    /// Connects to `url` (`postgres://user@host:port/db`, libpq key=value
    /// also accepted; the password, when needed, comes from `password`, never
    /// from a file), creates `schema` if missing, runs pending migrations and
    /// keeps a pool of at most `pool_size` connections.
    ///
    /// # Errors
    /// [`Error::Config`] for a malformed URL or schema name, or a database
    /// whose schema is newer than this build; [`Error::Unavailable`] naming
    /// PostgreSQL and the address when the server cannot be reached;
    /// [`Error::Postgres`] when a migration fails.
    pub async fn connect(
        url: &str,
        password: Option<&str>,
        schema: &str,
        pool_size: usize,
    ) -> Result<Self> {
        check_schema(schema)?;
        let mut cfg: tokio_postgres::Config = url
            .parse()
            .map_err(|e| Error::Config(format!("postgres url: {e}")))?;
        if let Some(p) = password {
            cfg.password(p);
        }
        cfg.options(format!("-c search_path={schema}"));
        cfg.application_name("strata");
        cfg.connect_timeout(std::time::Duration::from_secs(10));
        let hosts = format!("{:?}:{:?}", cfg.get_hosts(), cfg.get_ports());
        let mgr = Manager::from_config(
            cfg,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(mgr)
            .max_size(pool_size.max(1))
            .build()
            .map_err(|e| Error::Config(format!("postgres pool: {e}")))?;
        let store = Self {
            pool,
            schema: schema.to_string(),
            lease_ms: CLAIM_LEASE_MS,
        };
        store.migrate().await.map_err(|e| match e {
            Error::Unavailable { service, message } => Error::Unavailable {
                service,
                message: format!("cannot connect to {hosts}: {message}"),
            },
            other => other,
        })?;
        Ok(store)
    }

    /// Sets how long a claimed outbox event stays hidden from the other
    /// nodes before they may take it (`workers.claim_lease_ms`; default
    /// [`CLAIM_LEASE_MS`]). Keep it above the longest job (LLM timeout ×
    /// retries): a job still running when its lease ends may run twice
    /// (its effects are idempotent, its LLM cost is not).
    pub fn with_claim_lease_ms(mut self, ms: u64) -> Self {
        self.lease_ms = ms.min(i64::MAX as u64) as i64;
        self
    }

    /// The schema this store lives in.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// A pooled connection (its `search_path` is the store's schema).
    pub(crate) async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.map_err(pool_err)
    }

    async fn migrate(&self) -> Result<()> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pe)?;
        // one node migrates at a time; the others wait, then find nothing to do
        tx.execute("SELECT pg_advisory_xact_lock(hashtext('strata_migrations'))", &[])
            .await
            .map_err(pe)?;
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {0}; CREATE TABLE IF NOT EXISTS {0}.strata_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)",
            self.schema
        ))
        .await
        .map_err(pe)?;
        let done: i32 = tx
            .query_one("SELECT COALESCE(MAX(version), 0) FROM strata_migrations", &[])
            .await
            .map_err(pe)?
            .get(0);
        if done as usize > MIGRATIONS.len() {
            return Err(Error::Config(format!(
                "postgres schema {} is at version {done}, newer than this build ({})",
                self.schema,
                MIGRATIONS.len()
            )));
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(done as usize) {
            tx.batch_execute(sql).await.map_err(pe)?;
            tx.execute(
                "INSERT INTO strata_migrations (version, applied_at) VALUES ($1, $2)",
                &[&((i + 1) as i32), &ms(Utc::now())],
            )
            .await
            .map_err(pe)?;
            tracing::info!(version = i + 1, schema = %self.schema, "applied postgres migration");
        }
        tx.commit().await.map_err(pe)
    }

    /// Drops the store's schema with everything in it (tests and
    /// `strata migrate` rollbacks; never called by the runtime).
    ///
    /// # Errors
    /// As [`PgStore::connect`].
    pub async fn drop_schema(&self) -> Result<()> {
        let c = self.client().await?;
        c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema))
            .await
            .map_err(pe)
    }
}

const EPISODE_COLS: &str =
    "id, session_id, summary, abstract, summary_kind, started_at, ended_at, created_at, expires_at";

fn row_to_episode(r: &Row) -> Result<Episode> {
    let kind: String = r.get("summary_kind");
    Ok(Episode {
        id: EpisodeId::parse(r.get::<_, &str>("id"))?,
        session_id: SessionId::new(r.get::<_, String>("session_id"))?,
        summary: r.get("summary"),
        abstract_: r.get("abstract"),
        summary_kind: if kind == "llm" {
            SummaryKind::Llm
        } else {
            SummaryKind::Extractive
        },
        started_at: from_ms(r.get("started_at")),
        ended_at: from_ms(r.get("ended_at")),
        created_at: from_ms(r.get("created_at")),
        expires_at: r.get::<_, Option<i64>>("expires_at").map(from_ms),
    })
}

fn row_to_key(r: &Row) -> Result<ApiKey> {
    let user: Option<String> = r.get("user_id");
    let agent: Option<String> = r.get("agent_id");
    let admin: bool = r.get("admin");
    let grant = match (admin, user, agent) {
        (true, _, _) => KeyGrant::Admin,
        (false, Some(user_id), Some(agent_id)) => KeyGrant::Agent { user_id, agent_id },
        (false, Some(user_id), None) => KeyGrant::User { user_id },
        (false, None, _) => {
            return Err(Error::Postgres(
                "api key row with neither admin nor user".into(),
            ))
        }
    };
    Ok(ApiKey {
        id: r.get("id"),
        grant,
        label: r.get("label"),
        created_at: from_ms(r.get("created_at")),
        revoked_at: r.get::<_, Option<i64>>("revoked_at").map(from_ms),
    })
}

fn scoped_ids(rows: Vec<Row>) -> Result<Vec<(Scope, EpisodeId)>> {
    rows.iter()
        .map(|r| {
            Ok((
                Scope::new(r.get::<_, String>(0), r.get::<_, String>(1))?,
                EpisodeId::parse(r.get::<_, &str>(2))?,
            ))
        })
        .collect()
}

async fn insert_event<C: GenericClient>(c: &C, event: &Event, now: i64) -> Result<EventId> {
    let payload = serde_json::to_string(event)?;
    let row = c
        .query_one(
            "INSERT INTO outbox (kind, user_id, agent_id, payload, status, attempts, created_at, updated_at)
             VALUES ($1, $2, $3, $4, 'pending', 0, $5, $5) RETURNING id",
            &[&event.kind().as_str(), &event.scope().user_id(), &event.scope().agent_id(), &payload, &now],
        )
        .await
        .map_err(pe)?;
    Ok(EventId(row.get(0)))
}

/// Appends one message inside `tx` (creating the session when new). The
/// session row is locked first (`FOR UPDATE`), so concurrent appends to one
/// session from several nodes get consecutive `seq`s.
async fn append_in_tx<C: GenericClient>(
    tx: &C,
    scope: &Scope,
    session: &SessionId,
    msg: &NewMessage,
    now: DateTime<Utc>,
) -> Result<MessageId> {
    let (u, a, s) = (scope.user_id(), scope.agent_id(), session.as_str());
    let (ts, now_ms) = (ms(msg.timestamp), ms(now));
    // create-if-missing without a race: a second node's insert does nothing
    tx.execute(
        "INSERT INTO sessions (user_id, agent_id, session_id, status, started_at, last_message_at, last_activity_at, message_count)
         VALUES ($1, $2, $3, 'open', $4, $4, $5, 0) ON CONFLICT DO NOTHING",
        &[&u, &a, &s, &ts, &now_ms],
    )
    .await
    .map_err(pe)?;
    let row = tx
        .query_one(
            "SELECT status, message_count FROM sessions WHERE user_id=$1 AND agent_id=$2 AND session_id=$3 FOR UPDATE",
            &[&u, &a, &s],
        )
        .await
        .map_err(pe)?;
    let (status, seq): (String, i64) = (row.get(0), row.get(1));
    if let Some(k) = &msg.idempotency_key {
        // the session row is locked: a concurrent retry of the same key waits here, then sees it
        if let Some(held) = tx
            .query_opt(
                "SELECT id FROM messages WHERE user_id=$1 AND agent_id=$2 AND session_id=$3 AND idem=$4",
                &[&u, &a, &s, k],
            )
            .await
            .map_err(pe)?
        {
            return Ok(MessageId(held.get(0)));
        }
    }
    if status == "completed" {
        return Err(Error::Conflict(format!(
            "session {s} is already ended; record new messages under a new session id"
        )));
    }
    tx.execute(
        "UPDATE sessions SET message_count = message_count + 1,
            started_at = LEAST(started_at, $4), last_message_at = GREATEST(last_message_at, $4),
            last_activity_at = $5
         WHERE user_id=$1 AND agent_id=$2 AND session_id=$3",
        &[&u, &a, &s, &ts, &now_ms],
    )
    .await
    .map_err(pe)?;
    let row = tx
        .query_one(
            "INSERT INTO messages (user_id, agent_id, session_id, seq, role, name, content, ts, recorded_at, idem)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id",
            &[&u, &a, &s, &seq, &msg.role.as_str(), &msg.name, &msg.content, &ts, &now_ms, &msg.idempotency_key],
        )
        .await
        .map_err(pe)?;
    Ok(MessageId(row.get(0)))
}

#[async_trait]
impl RecordStore for PgStore {
    async fn maintenance_lock(&self, job: &str) -> Result<Option<super::MaintenanceLock>> {
        let c = self.client().await?;
        let got: bool = c
            .query_one(
                "SELECT pg_try_advisory_lock(hashtext('strata:' || current_schema() || ':' || $1))",
                &[&job],
            )
            .await
            .map_err(pe)?
            .get(0);
        if !got {
            return Ok(None);
        }
        // the lock belongs to this server session: the connection leaves the
        // pool with the guard, and closing it (drop) releases the lock, as
        // does the server when the node dies
        let client = deadpool_postgres::Object::take(c);
        Ok(Some(super::MaintenanceLock::holding(Box::new(client))))
    }

    async fn append_messages(
        &self,
        scope: &Scope,
        turns: Vec<(SessionId, NewMessage)>,
        now: DateTime<Utc>,
    ) -> Result<Vec<MessageId>> {
        for (_, m) in &turns {
            m.validate()?;
        }
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pe)?;
        let mut ids = Vec::with_capacity(turns.len());
        for (session, msg) in &turns {
            ids.push(append_in_tx(&tx, scope, session, msg, now).await?);
        }
        crate::error::fail_point!("store.append.before_commit");
        tx.commit().await.map_err(pe)?;
        Ok(ids)
    }

    async fn session(&self, scope: &Scope, session: &SessionId) -> Result<Session> {
        let c = self.client().await?;
        let row = c
            .query_opt(
                "SELECT status, started_at, last_message_at, message_count FROM sessions
                 WHERE user_id=$1 AND agent_id=$2 AND session_id=$3",
                &[&scope.user_id(), &scope.agent_id(), &session.as_str()],
            )
            .await
            .map_err(pe)?
            .ok_or_else(|| Error::NotFound(format!("session {session}")))?;
        let status: String = row.get(0);
        Ok(Session {
            id: session.clone(),
            status: if status == "open" {
                SessionStatus::Open
            } else {
                SessionStatus::Completed
            },
            started_at: from_ms(row.get(1)),
            last_message_at: from_ms(row.get(2)),
            message_count: row.get::<_, i64>(3) as _,
        })
    }

    async fn messages(&self, scope: &Scope, session: &SessionId) -> Result<Vec<Message>> {
        self.session(scope, session).await?;
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT id, seq, role, name, content, ts, idem FROM messages
                 WHERE user_id=$1 AND agent_id=$2 AND session_id=$3 ORDER BY seq",
                &[&scope.user_id(), &scope.agent_id(), &session.as_str()],
            )
            .await
            .map_err(pe)?;
        Ok(rows
            .iter()
            .map(|r| Message {
                id: MessageId(r.get(0)),
                session_id: session.clone(),
                seq: r.get::<_, i64>(1) as _,
                message: NewMessage {
                    role: Role::parse(r.get::<_, &str>(2)).unwrap_or(Role::System),
                    name: r.get(3),
                    content: r.get(4),
                    timestamp: from_ms(r.get(5)),
                    idempotency_key: r.get(6),
                },
            })
            .collect())
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
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT content FROM messages WHERE user_id=$1 AND agent_id=$2 AND session_id=$3 AND role='user'
                 ORDER BY seq DESC LIMIT $4",
                &[&scope.user_id(), &scope.agent_id(), &session.as_str(), &(n as i64)],
            )
            .await
            .map_err(pe)?;
        let mut v: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        v.reverse();
        Ok(v)
    }

    async fn complete_session(
        &self,
        scope: &Scope,
        session: &SessionId,
        now: DateTime<Utc>,
    ) -> Result<Option<EventId>> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pe)?;
        let status: Option<String> = tx
            .query_opt(
                "SELECT status FROM sessions WHERE user_id=$1 AND agent_id=$2 AND session_id=$3 FOR UPDATE",
                &[&scope.user_id(), &scope.agent_id(), &session.as_str()],
            )
            .await
            .map_err(pe)?
            .map(|r| r.get(0));
        match status.as_deref() {
            None => Err(Error::NotFound(format!("session {session}"))),
            Some("completed") => Ok(None),
            Some(_) => {
                tx.execute(
                    "UPDATE sessions SET status='completed', completed_at=$4 WHERE user_id=$1 AND agent_id=$2 AND session_id=$3",
                    &[&scope.user_id(), &scope.agent_id(), &session.as_str(), &ms(now)],
                )
                .await
                .map_err(pe)?;
                let id = insert_event(
                    &tx,
                    &Event::SessionCompleted {
                        scope: scope.clone(),
                        session_id: session.clone(),
                    },
                    ms(now),
                )
                .await?;
                crate::error::fail_point!("store.complete_session.before_commit");
                tx.commit().await.map_err(pe)?;
                Ok(Some(id))
            }
        }
    }

    async fn put_episode(
        &self,
        scope: &Scope,
        ep: &Episode,
        done: EventId,
        vectors_pending: bool,
        on_new: Vec<Event>,
    ) -> Result<()> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pe)?;
        let now = ms(Utc::now());
        // an erasure that ran while the session was being summarised took the
        // session: its episode must not come back (FOR SHARE holds off an
        // erasure until this transaction ends)
        let session = tx
            .query_opt(
                "SELECT 1 FROM sessions WHERE user_id=$1 AND agent_id=$2 AND session_id=$3 FOR SHARE",
                &[&scope.user_id(), &scope.agent_id(), &ep.session_id.as_str()],
            )
            .await
            .map_err(pe)?
            .is_some();
        if !session {
            return Err(Error::NotFound(format!("session {} (erased)", ep.session_id)));
        }
        let existed = tx
            .query_opt("SELECT 1 FROM episodes WHERE id=$1 FOR UPDATE", &[&ep.id.as_str()])
            .await
            .map_err(pe)?
            .is_some();
        tx.execute(
            "INSERT INTO episodes (id, user_id, agent_id, session_id, summary, abstract, summary_kind, started_at, ended_at, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
             ON CONFLICT (id) DO UPDATE SET summary=excluded.summary, abstract=excluded.abstract,
                summary_kind=excluded.summary_kind, started_at=excluded.started_at, ended_at=excluded.ended_at,
                expires_at=excluded.expires_at",
            &[
                &ep.id.as_str(), &scope.user_id(), &scope.agent_id(), &ep.session_id.as_str(), &ep.summary, &ep.abstract_,
                &ep.summary_kind.as_str(), &ms(ep.started_at), &ms(ep.ended_at), &ms(ep.created_at), &ep.expires_at.map(ms),
            ],
        )
        .await
        .map_err(pe)?;
        tx.execute("UPDATE outbox SET status='done', updated_at=$2 WHERE id=$1", &[&done.0, &now])
            .await
            .map_err(pe)?;
        if !existed {
            insert_event(
                &tx,
                &Event::EpisodeCreated {
                    scope: scope.clone(),
                    episode_id: ep.id.clone(),
                },
                now,
            )
            .await?;
            for e in &on_new {
                insert_event(&tx, e, now).await?;
            }
        }
        if vectors_pending {
            insert_event(
                &tx,
                &Event::EpisodeVectors {
                    scope: scope.clone(),
                    episode_id: ep.id.clone(),
                },
                now,
            )
            .await?;
        }
        crate::error::fail_point!("store.put_episode.before_commit");
        tx.commit().await.map_err(pe)
    }

    async fn episode_ids_with_prefix(&self, scope: &Scope, prefix: &str, now: DateTime<Utc>, limit: usize) -> Result<Vec<EpisodeId>> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT id FROM episodes WHERE user_id=$1 AND agent_id=$2 AND id LIKE $3
                 AND (expires_at IS NULL OR expires_at > $4) ORDER BY id LIMIT $5",
                &[&scope.user_id(), &scope.agent_id(), &format!("{prefix}%"), &ms(now), &(limit as i64)],
            )
            .await
            .map_err(pe)?;
        rows.iter().map(|r| EpisodeId::parse(r.get::<_, &str>(0))).collect()
    }

    async fn episode(&self, scope: &Scope, id: &EpisodeId, now: DateTime<Utc>) -> Result<Episode> {
        self.episodes(scope, std::slice::from_ref(id), now)
            .await?
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
        let ids: Vec<&str> = ids.iter().map(|i| i.as_str()).collect();
        let c = self.client().await?;
        let rows = c
            .query(
                &format!(
                    "SELECT {EPISODE_COLS} FROM episodes WHERE id = ANY($1) AND user_id=$2 AND agent_id=$3
                     AND (expires_at IS NULL OR expires_at > $4)"
                ),
                &[&ids, &scope.user_id(), &scope.agent_id(), &ms(now)],
            )
            .await
            .map_err(pe)?;
        rows.iter().map(row_to_episode).collect()
    }

    async fn sessions(&self, scope: &Scope, limit: usize) -> Result<Vec<Session>> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT session_id, status, started_at, last_message_at, message_count FROM sessions
                 WHERE user_id=$1 AND agent_id=$2 ORDER BY started_at DESC, session_id LIMIT $3",
                &[&scope.user_id(), &scope.agent_id(), &(limit as i64)],
            )
            .await
            .map_err(pe)?;
        rows.iter()
            .map(|r| {
                let status: String = r.get(1);
                Ok(Session {
                    id: SessionId::new(r.get::<_, String>(0))?,
                    status: if status == "open" { SessionStatus::Open } else { SessionStatus::Completed },
                    started_at: from_ms(r.get(2)),
                    last_message_at: from_ms(r.get(3)),
                    message_count: r.get::<_, i64>(4) as _,
                })
            })
            .collect()
    }

    async fn scopes(&self, search: &str, limit: usize) -> Result<Vec<ScopeActivity>> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT s.user_id, s.agent_id, COUNT(*)::BIGINT, (COUNT(*) FILTER (WHERE s.status = 'open'))::BIGINT,
                        MAX(s.last_message_at),
                        (SELECT COUNT(*) FROM episodes e WHERE e.user_id = s.user_id AND e.agent_id = s.agent_id)::BIGINT
                 FROM sessions s
                 WHERE $1 = '' OR strpos(s.user_id, $1) > 0 OR strpos(s.agent_id, $1) > 0
                 GROUP BY s.user_id, s.agent_id ORDER BY MAX(s.last_message_at) DESC, s.user_id, s.agent_id LIMIT $2",
                &[&search, &(limit as i64)],
            )
            .await
            .map_err(pe)?;
        rows.iter()
            .map(|r| {
                Ok(ScopeActivity {
                    scope: Scope::new(r.get::<_, String>(0), r.get::<_, String>(1))?,
                    sessions: r.get::<_, i64>(2) as usize,
                    open_sessions: r.get::<_, i64>(3) as usize,
                    last_message_at: from_ms(r.get(4)),
                    episodes: r.get::<_, i64>(5) as usize,
                })
            })
            .collect()
    }

    async fn count_episodes(&self, scope: &Scope) -> Result<usize> {
        let c = self.client().await?;
        let n: i64 = c
            .query_one(
                "SELECT COUNT(*) FROM episodes WHERE user_id=$1 AND agent_id=$2",
                &[&scope.user_id(), &scope.agent_id()],
            )
            .await
            .map_err(pe)?
            .get(0);
        Ok(n as usize)
    }

    async fn delete_episodes(&self, scope: &Scope, ids: &[EpisodeId]) -> Result<usize> {
        let ids: Vec<&str> = ids.iter().map(|i| i.as_str()).collect();
        let c = self.client().await?;
        let n = c
            .execute(
                "DELETE FROM episodes WHERE id = ANY($1) AND user_id=$2 AND agent_id=$3",
                &[&ids, &scope.user_id(), &scope.agent_id()],
            )
            .await
            .map_err(pe)?;
        Ok(n as usize)
    }

    async fn pending_events(&self, kinds: &[EventKind], limit: usize) -> Result<Vec<OutboxEvent>> {
        let kinds: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        let now = ms(Utc::now());
        let c = self.client().await?;
        // claim: rows another node holds are skipped, and the lease hides
        // what this node took until it finishes, fails, or dies and expires
        let rows = c
            .query(
                "UPDATE outbox SET available_at = $3 + $4, updated_at = $3 WHERE id IN (
                    SELECT id FROM outbox WHERE status='pending' AND available_at <= $3 AND kind = ANY($1)
                    ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
                 RETURNING id, payload, attempts",
                &[&kinds, &(limit as i64), &now, &self.lease_ms],
            )
            .await
            .map_err(pe)?;
        let mut out = Vec::new();
        for r in &rows {
            let (id, payload, attempts): (i64, String, i32) = (r.get(0), r.get(1), r.get(2));
            match serde_json::from_str::<Event>(&payload) {
                Ok(event) => out.push(OutboxEvent {
                    id: EventId(id),
                    event,
                    attempts: attempts as u32,
                }),
                Err(e) => {
                    // unreadable payload: park it, never drop it
                    tracing::error!(event_id = id, error = %e, "parking unreadable outbox event");
                    c.execute(
                        "UPDATE outbox SET status='parked', last_error=$2, parked_at=$3 WHERE id=$1",
                        &[&id, &format!("unreadable payload: {e}"), &now],
                    )
                    .await
                    .map_err(pe)?;
                }
            }
        }
        out.sort_by_key(|e| e.id.0);
        Ok(out)
    }

    async fn count_pending(&self, kinds: &[EventKind]) -> Result<usize> {
        let kinds: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        let c = self.client().await?;
        let n: i64 = c
            .query_one(
                "SELECT COUNT(*) FROM outbox WHERE status='pending' AND kind = ANY($1)",
                &[&kinds],
            )
            .await
            .map_err(pe)?
            .get(0);
        Ok(n as usize)
    }

    async fn fail_event(&self, id: EventId, error: &str, park_after: u32, on_park: Vec<Event>) -> Result<bool> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pe)?;
        let now = ms(Utc::now());
        let parked = tx
            .query_opt(
                "UPDATE outbox SET attempts = attempts + 1, last_error = $2, updated_at = $4,
                    available_at = $4 + LEAST(60000, 500 * (1::BIGINT << LEAST(attempts, 7))),
                    status = CASE WHEN attempts + 1 >= $3 THEN 'parked' ELSE status END,
                    parked_at = CASE WHEN attempts + 1 >= $3 THEN $4 ELSE parked_at END
                 WHERE id = $1 RETURNING status = 'parked'",
                &[&id.0, &error, &(park_after as i32), &now],
            )
            .await
            .map_err(pe)?
            .is_some_and(|r| r.get::<_, bool>(0));
        if parked {
            for e in &on_park {
                insert_event(&tx, e, now).await?;
            }
        }
        tx.commit().await.map_err(pe)?;
        Ok(parked)
    }

    async fn idle_sessions(&self, before: DateTime<Utc>) -> Result<Vec<(Scope, SessionId)>> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT user_id, agent_id, session_id FROM sessions WHERE status='open' AND last_activity_at < $1 LIMIT 1000",
                &[&ms(before)],
            )
            .await
            .map_err(pe)?;
        rows.iter()
            .map(|r| {
                Ok((
                    Scope::new(r.get::<_, String>(0), r.get::<_, String>(1))?,
                    SessionId::new(r.get::<_, String>(2))?,
                ))
            })
            .collect()
    }

    async fn expired_episodes(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<(Scope, EpisodeId)>> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT user_id, agent_id, id FROM episodes WHERE expires_at IS NOT NULL AND expires_at <= $1 LIMIT $2",
                &[&ms(now), &(limit as i64)],
            )
            .await
            .map_err(pe)?;
        scoped_ids(rows)
    }

    async fn finish_event(&self, id: EventId, follow_ups: Vec<Event>) -> Result<()> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pe)?;
        let now = ms(Utc::now());
        tx.execute(
            "UPDATE outbox SET status='done', updated_at=$2 WHERE id=$1",
            &[&id.0, &now],
        )
        .await
        .map_err(pe)?;
        for e in &follow_ups {
            insert_event(&tx, e, now).await?;
        }
        tx.commit().await.map_err(pe)
    }

    async fn delete_user_records(&self, user_id: &str) -> Result<DeleteCounts> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pe)?;
        let mut counts = DeleteCounts::default();
        for table in ["messages", "sessions", "episodes", "outbox", "llm_calls", "dedup_log"] {
            let n = tx
                .execute(&format!("DELETE FROM {table} WHERE user_id = $1"), &[&user_id])
                .await
                .map_err(pe)?;
            counts.rows.insert(table.to_string(), n as usize);
        }
        counts.rows.insert("memories".into(), typed::delete_user(&tx, user_id).await?);
        tx.commit().await.map_err(pe)?;
        Ok(counts)
    }

    async fn user_episodes(&self, user_id: &str) -> Result<Vec<(Scope, EpisodeId)>> {
        let c = self.client().await?;
        let rows = c
            .query("SELECT user_id, agent_id, id FROM episodes WHERE user_id=$1", &[&user_id])
            .await
            .map_err(pe)?;
        scoped_ids(rows)
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
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pe)?;
        let now = ms(Utc::now());
        for r in &rows {
            tx.execute(
                "INSERT INTO dedup_log (user_id, agent_id, entity_id, candidate_id, decision, similarity, reason, at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                &[&scope.user_id(), &scope.agent_id(), &entity.as_str(), &r.candidate.as_str(), &r.decision, &(r.similarity as f64), &r.reason, &now],
            )
            .await
            .map_err(pe)?;
        }
        tx.commit().await.map_err(pe)
    }

    async fn dedup_stats(
        &self,
        scope: &Scope,
    ) -> Result<std::collections::BTreeMap<String, usize>> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT decision, COUNT(*) FROM dedup_log WHERE user_id=$1 AND agent_id=$2 GROUP BY decision",
                &[&scope.user_id(), &scope.agent_id()],
            )
            .await
            .map_err(pe)?;
        Ok(rows
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1) as usize))
            .collect())
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
        let session = session.map(|s| s.as_str().to_string());
        let event = event.map(|e| e.0);
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pe)?;
        let now = ms(Utc::now());
        for r in &calls {
            let params: [&(dyn ToSql + Sync); 13] = [
                &scope.user_id(),
                &scope.agent_id(),
                &session,
                &event,
                &r.task,
                &r.model,
                &(r.prompt_version as i64),
                &(r.attempt as i64),
                &r.error,
                &(r.input_tokens as i64),
                &(r.output_tokens as i64),
                &(r.latency_ms as i64),
                &now,
            ];
            tx.execute(
                "INSERT INTO llm_calls (user_id, agent_id, session_id, event_id, task, model, prompt_version, attempt, error,
                    input_tokens, output_tokens, latency_ms, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
                &params,
            )
            .await
            .map_err(pe)?;
        }
        tx.commit().await.map_err(pe)
    }

    async fn usage_totals(&self, scope: Option<&Scope>) -> Result<UsageTotals> {
        let c = self.client().await?;
        let sql = "SELECT COUNT(*), COUNT(error), COALESCE(SUM(input_tokens), 0)::BIGINT, COALESCE(SUM(output_tokens), 0)::BIGINT,
            COUNT(DISTINCT (user_id, agent_id, COALESCE(session_id, ''))) FROM llm_calls";
        let row = match scope {
            Some(s) => c
                .query_one(
                    &format!("{sql} WHERE user_id=$1 AND agent_id=$2"),
                    &[&s.user_id(), &s.agent_id()],
                )
                .await,
            None => c.query_one(sql, &[]).await,
        }
        .map_err(pe)?;
        Ok(UsageTotals {
            calls: row.get::<_, i64>(0) as u64,
            failed_calls: row.get::<_, i64>(1) as u64,
            input_tokens: row.get::<_, i64>(2) as u64,
            output_tokens: row.get::<_, i64>(3) as u64,
            sessions: row.get::<_, i64>(4) as u64,
        })
    }

    async fn parked_jobs(&self, limit: usize) -> Result<Vec<ParkedJob>> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT id, payload, attempts, COALESCE(last_error, ''), parked_at, created_at FROM outbox
                 WHERE status = 'parked' ORDER BY id LIMIT $1",
                &[&(limit as i64)],
            )
            .await
            .map_err(pe)?;
        let mut out = Vec::new();
        for r in &rows {
            let id: i64 = r.get(0);
            let Some(event) = super::listed_event(id, r.get::<_, &str>(1), "dead-letter row") else {
                continue;
            };
            out.push(ParkedJob {
                id: EventId(id),
                event,
                attempts: r.get::<_, i32>(2) as u32,
                last_error: r.get(3),
                parked_at: r.get::<_, Option<i64>>(4).map(from_ms),
                created_at: from_ms(r.get(5)),
            });
        }
        Ok(out)
    }

    async fn open_jobs(&self, scope: &Scope, limit: usize) -> Result<Vec<OpenJob>> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT id, payload, status, attempts, last_error FROM outbox
                 WHERE status IN ('pending', 'parked') AND user_id = $1 AND agent_id = $2 ORDER BY id LIMIT $3",
                &[&scope.user_id(), &scope.agent_id(), &(limit as i64)],
            )
            .await
            .map_err(pe)?;
        let mut out = Vec::new();
        for r in &rows {
            let id: i64 = r.get(0);
            let Some(event) = super::listed_event(id, r.get::<_, &str>(1), "outbox row") else {
                continue;
            };
            out.push(OpenJob {
                id: EventId(id),
                event,
                parked: r.get::<_, &str>(2) == "parked",
                attempts: r.get::<_, i32>(3) as u32,
                last_error: r.get(4),
            });
        }
        Ok(out)
    }

    async fn retry_parked(&self, id: Option<EventId>) -> Result<usize> {
        let c = self.client().await?;
        let now = ms(Utc::now());
        let n = match id {
            Some(id) => c
                .execute(
                    "UPDATE outbox SET status='pending', attempts=0, available_at=$2, parked_at=NULL, updated_at=$2
                     WHERE id=$1 AND status='parked'",
                    &[&id.0, &now],
                )
                .await,
            None => c
                .execute(
                    "UPDATE outbox SET status='pending', attempts=0, available_at=$1, parked_at=NULL, updated_at=$1
                     WHERE status='parked'",
                    &[&now],
                )
                .await,
        }
        .map_err(pe)?;
        Ok(n as usize)
    }

    async fn meta_get(&self, key: &str) -> Result<Option<String>> {
        let c = self.client().await?;
        Ok(c
            .query_opt("SELECT value FROM meta WHERE key=$1", &[&key])
            .await
            .map_err(pe)?
            .map(|r| r.get(0)))
    }

    async fn meta_set(&self, key: &str, value: &str) -> Result<()> {
        let c = self.client().await?;
        c.execute(
            "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value=excluded.value",
            &[&key, &value],
        )
        .await
        .map_err(pe)?;
        Ok(())
    }

    async fn put_api_key(&self, key: &ApiKey, secret_sha256: &str) -> Result<()> {
        let (admin, user, agent) = match &key.grant {
            KeyGrant::Admin => (true, None, None),
            KeyGrant::User { user_id } => (false, Some(user_id.clone()), None),
            KeyGrant::Agent { user_id, agent_id } => {
                (false, Some(user_id.clone()), Some(agent_id.clone()))
            }
        };
        let c = self.client().await?;
        c.execute(
            "INSERT INTO api_keys (id, secret_sha256, admin, user_id, agent_id, label, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[&key.id, &secret_sha256, &admin, &user, &agent, &key.label, &ms(key.created_at)],
        )
        .await
        .map_err(pe)?;
        Ok(())
    }

    async fn api_key_by_hash(&self, secret_sha256: &str) -> Result<Option<ApiKey>> {
        let c = self.client().await?;
        c.query_opt(
            "SELECT id, admin, user_id, agent_id, label, created_at, revoked_at FROM api_keys WHERE secret_sha256 = $1",
            &[&secret_sha256],
        )
        .await
        .map_err(pe)?
        .as_ref()
        .map(row_to_key)
        .transpose()
    }

    async fn api_keys(&self) -> Result<Vec<ApiKey>> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT id, admin, user_id, agent_id, label, created_at, revoked_at FROM api_keys ORDER BY created_at, id",
                &[],
            )
            .await
            .map_err(pe)?;
        rows.iter().map(row_to_key).collect()
    }

    async fn revoke_api_key(&self, id: &str, now: DateTime<Utc>) -> Result<ApiKey> {
        let c = self.client().await?;
        c.execute(
            "UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
            &[&id, &ms(now)],
        )
        .await
        .map_err(pe)?;
        c.query_opt(
            "SELECT id, admin, user_id, agent_id, label, created_at, revoked_at FROM api_keys WHERE id = $1",
            &[&id],
        )
        .await
        .map_err(pe)?
        .as_ref()
        .map(row_to_key)
        .transpose()?
        .ok_or_else(|| Error::NotFound(format!("api key {id}")))
    }

    async fn api_keys_created(&self) -> Result<bool> {
        let c = self.client().await?;
        Ok(c
            .query_one("SELECT EXISTS (SELECT 1 FROM api_keys)", &[])
            .await
            .map_err(pe)?
            .get(0))
    }

    async fn store_sizes(&self) -> Result<StoreSizes> {
        let c = self.client().await?;
        let r = c
            .query_one(
                "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM sessions WHERE status = 'open'),
                        (SELECT COUNT(*) FROM messages), (SELECT COUNT(*) FROM episodes),
                        (SELECT COUNT(*) FROM outbox WHERE status = 'parked')",
                &[],
            )
            .await
            .map_err(pe)?;
        Ok(StoreSizes {
            sessions: r.get::<_, i64>(0) as u64,
            open_sessions: r.get::<_, i64>(1) as u64,
            messages: r.get::<_, i64>(2) as u64,
            episodes: r.get::<_, i64>(3) as u64,
            parked_jobs: r.get::<_, i64>(4) as u64,
        })
    }

    async fn all_episodes(
        &self,
        after: Option<EpisodeId>,
        limit: usize,
        now: DateTime<Utc>,
    ) -> Result<Vec<(Scope, Episode)>> {
        let after = after.map(|a| a.as_str().to_string()).unwrap_or_default();
        let c = self.client().await?;
        let rows = c
            .query(
                &format!(
                    "SELECT user_id, agent_id, {EPISODE_COLS} FROM episodes WHERE id COLLATE \"C\" > $1 AND (expires_at IS NULL OR expires_at > $2)
                     ORDER BY id COLLATE \"C\" LIMIT $3"
                ),
                &[&after, &ms(now), &(limit as i64)],
            )
            .await
            .map_err(pe)?;
        rows.iter()
            .map(|r| {
                Ok((
                    Scope::new(r.get::<_, String>("user_id"), r.get::<_, String>("agent_id"))?,
                    row_to_episode(r)?,
                ))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_server_that_is_down_is_named() {
        // nothing listens on port 1 of loopback
        let e = PgStore::connect("postgres://strata@127.0.0.1:1/postgres", None, "strata", 1)
            .await
            .unwrap_err();
        match &e {
            Error::Unavailable { service, message } => {
                assert_eq!(service, "postgresql");
                assert!(message.contains("127.0.0.1") && message.contains('1'), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert!(e.to_string().starts_with("postgresql unavailable"), "{e}");
    }

    #[tokio::test]
    async fn bad_urls_and_schema_names_are_config_errors() {
        for (url, schema) in [("postgres://x@127.0.0.1:1/db", "Bad-Name"), ("postgres://x@127.0.0.1:1/db", "a;drop"), ("not a url ===", "strata")] {
            let e = PgStore::connect(url, None, schema, 1).await.unwrap_err();
            assert!(matches!(e, Error::Config(_)), "{url} {schema}: {e:?}");
        }
    }
}
