//! Errors: one enum for the crate, with a variant per failing layer.
//!
//! Messages are lowercase without trailing punctuation.

/// Crate-wide result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in Strata.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller passed bad input (empty text, malformed id, ...). Nothing was stored.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The id does not exist in this scope (or belongs to another scope, which
    /// is reported the same way so that scopes cannot probe each other).
    #[error("not found: {0}")]
    NotFound(String),
    /// Configuration could not be loaded or failed validation.
    #[error("config: {0}")]
    Config(String),
    /// The system of record (SQLite) failed.
    #[error("record store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL (the cluster system of record) refused a statement.
    #[error("record store (postgresql): {0}")]
    Postgres(String),
    /// The graph server (Neo4j, or a Bolt server such as ArcadeDB) refused a statement.
    #[error("graph store (neo4j): {0}")]
    GraphServer(String),
    /// A server Strata depends on (PostgreSQL, Qdrant, the graph server)
    /// cannot be reached (HTTP 503); `service` names it. Work that needs it
    /// waits in the outbox; nothing acknowledged is lost.
    #[error("{service} unavailable: {message}")]
    Unavailable {
        /// The server: `postgresql`, `qdrant`, `neo4j`.
        service: String,
        /// What the client library said.
        message: String,
    },
    /// The keyword index (tantivy) failed.
    #[error("keyword index: {0}")]
    Keyword(String),
    /// The vector index failed.
    #[error("vector index: {0}")]
    Vector(String),
    /// The embedding model failed or is missing.
    #[error("embedder: {0}")]
    Embedder(String),
    /// The chat model (summariser) failed.
    #[error("chat model: {0}")]
    Chat(String),
    /// A webhook endpoint refused a delivery or could not be reached (the
    /// delivery is retried, then parked; never an answer to a request).
    #[error("webhook delivery: {0}")]
    Webhook(String),
    /// A file could not be read or written.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// JSON (de)serialisation failed.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// A benchmark data file could not be read.
    #[error("data: {0}")]
    Data(String),
    /// A background task panicked or was cancelled.
    #[error("task: {0}")]
    Task(String),
    /// The runtime is shutting down.
    #[error("memory is shut down")]
    Shutdown,
    /// No credential, or one that is unknown or revoked (HTTP 401).
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// The credential is valid but does not cover this scope or operation
    /// (HTTP 403). Empty from a key check (the API answers a generic message
    /// that never says whether the scope exists); typed-memory refusals say
    /// why (not a member of the team named, another user's public memory).
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// The request conflicts with the state of the target, e.g. a message
    /// recorded into a session that was already ended (HTTP 409).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The caller exceeded its request budget (HTTP 429); retry after the
    /// number of seconds given.
    #[error("rate limited: retry after {retry_after_secs} s")]
    RateLimited {
        /// Seconds until a request would be admitted again.
        retry_after_secs: u64,
    },
}

impl From<tokio::task::JoinError> for Error {
    fn from(e: tokio::task::JoinError) -> Self {
        Error::Task(e.to_string())
    }
}

/// A fail point named `$name` at a commit boundary (the `fail` crate; see
/// `tests/failpoints.rs`): when a test configures it with `return`, the
/// enclosing function returns `Err(Error::Task("fail point $name"))`, as if
/// the process had stopped there. Without the `failpoints` feature it
/// compiles to nothing.
macro_rules! fail_point {
    ($name:literal) => {
        fail::fail_point!($name, |_| Err($crate::error::Error::Task(
            concat!("fail point ", $name).into()
        )))
    };
}
pub(crate) use fail_point;
