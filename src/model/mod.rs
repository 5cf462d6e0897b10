//! Domain model: scopes, ids, messages, sessions and episodes.
//!
//! Architecture Invariant: this module imports nothing else from the crate
//! except the errors ([`crate::Error`]) and [`crate::text`], so every other layer can depend on it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

use crate::error::{Error, Result};

pub mod graph;
pub mod keys;
pub mod filter;
pub mod records;
pub mod typed;
pub mod webhook;
pub use keys::{ApiKey, KeyGrant};
pub use records::{CallRecord, DeleteCounts, LoggedDecision, TranscriptTurn};

/// Longest accepted `user_id` / `agent_id` / `session_id`, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// True when `s` has nothing visible: empty, or only whitespace and
/// invisible format characters (zero-width space/joiners U+200B..U+200D,
/// direction marks U+200E/U+200F and U+202A..U+202E, word joiner and
/// invisible operators U+2060..U+2064, U+FEFF, soft hyphen U+00AD,
/// Mongolian vowel separator U+180E). Text like that would be stored,
/// indexed and injected as an empty memory.
pub fn is_blank(s: &str) -> bool {
    s.chars().all(|c| {
        c.is_whitespace()
            || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}' | '\u{00AD}' | '\u{180E}')
    })
}

/// Longest accepted free-text query, in bytes (64 KiB); longer queries are an error.
pub const MAX_QUERY_BYTES: usize = 64 * 1024;

/// Checks a free-text query (recall, graph search, typed retrieve): not
/// empty, whitespace or only invisible characters ([`is_blank`]), at most
/// [`MAX_QUERY_BYTES`] bytes.
///
/// # Errors
/// [`Error::InvalidInput`] saying which rule failed.
pub fn check_query(q: &str) -> Result<()> {
    if is_blank(q) {
        return Err(Error::InvalidInput(
            "query must not be empty, whitespace or only invisible characters".into(),
        ));
    }
    if q.len() > MAX_QUERY_BYTES {
        return Err(Error::InvalidInput(format!(
            "query is {} bytes, longer than the {MAX_QUERY_BYTES}-byte limit",
            q.len()
        )));
    }
    Ok(())
}

fn validate_id(kind: &'static str, value: &str) -> Result<()> {
    if is_blank(value) {
        return Err(Error::InvalidInput(format!("{kind} must not be empty")));
    }
    if value.len() > MAX_ID_BYTES {
        return Err(Error::InvalidInput(format!(
            "{kind} is {} bytes, longer than the {MAX_ID_BYTES}-byte limit",
            value.len()
        )));
    }
    if value.chars().any(|c| c.is_control()) {
        return Err(Error::InvalidInput(format!(
            "{kind} must not contain control characters"
        )));
    }
    if value.trim() != value {
        // "alice " and "alice" would otherwise be two different owners
        return Err(Error::InvalidInput(format!(
            "{kind} must not start or end with whitespace"
        )));
    }
    Ok(())
}

/// Who a piece of memory belongs to: one end user talking to one agent.
///
/// Every read and every write in Strata takes a `Scope`; no store method
/// exists without one, so an unscoped query cannot be expressed. Construct it
/// with [`Scope::new`], which rejects empty, whitespace-only, over-long
/// (> [`MAX_ID_BYTES`] bytes), control-character and space-padded ids.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(try_from = "RawScope")]
pub struct Scope {
    user_id: String,
    agent_id: String,
}

#[derive(Deserialize)]
struct RawScope {
    user_id: String,
    agent_id: String,
}

impl TryFrom<RawScope> for Scope {
    type Error = Error;
    fn try_from(r: RawScope) -> Result<Self> {
        Scope::new(r.user_id, r.agent_id)
    }
}

impl Scope {
    /// Builds a validated scope.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when either id is empty, whitespace-only,
    /// longer than [`MAX_ID_BYTES`] bytes, starts or ends with whitespace, or
    /// contains control characters.
    pub fn new(user_id: impl Into<String>, agent_id: impl Into<String>) -> Result<Self> {
        let user_id = user_id.into();
        let agent_id = agent_id.into();
        validate_id("user_id", &user_id)?;
        validate_id("agent_id", &agent_id)?;
        Ok(Self { user_id, agent_id })
    }
    /// The end user's id.
    pub fn user_id(&self) -> &str {
        &self.user_id
    }
    /// The agent's id.
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }
    /// A single string key for indexes that filter on one field:
    /// `user_id`, U+001F (unit separator), `agent_id`. Control characters are
    /// rejected in ids, so the key is unambiguous.
    pub fn key(&self) -> String {
        format!("{}\u{1f}{}", self.user_id, self.agent_id)
    }

    /// The scope whose [`Scope::key`] is `key` (indexes store scopes as keys;
    /// ids hold no control characters, so the split is unambiguous).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `key` is not a scope key.
    pub fn from_key(key: &str) -> Result<Self> {
        let (user, agent) = key
            .split_once('\u{1f}')
            .ok_or_else(|| Error::InvalidInput(format!("{key:?} is not a scope key")))?;
        Self::new(user, agent)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.user_id, self.agent_id)
    }
}

/// Session id chosen by the caller (e.g. a chat thread id). Validated like
/// scope ids: non-empty, at most [`MAX_ID_BYTES`] bytes, no control characters.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(try_from = "String")]
pub struct SessionId(String);

impl TryFrom<String> for SessionId {
    type Error = Error;
    fn try_from(s: String) -> Result<Self> {
        SessionId::new(s)
    }
}

impl SessionId {
    /// Builds a validated session id.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on an empty, over-long or control-character id.
    pub fn new(id: impl Into<String>) -> Result<Self> {
        let id = id.into();
        validate_id("session_id", &id)?;
        Ok(Self(id))
    }
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

macro_rules! int_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema)]
        #[serde(transparent)]
        pub struct $name(pub i64);
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

int_id!(
    /// Id of a recorded message (SQLite rowid; unique across scopes).
    MessageId
);
int_id!(
    /// Id of an outbox event (SQLite rowid).
    EventId
);

/// A deterministic id: `prefix` + the first 32 hex digits (128 bits) of the
/// BLAKE3 hash of `parts` joined by the record separator U+001E. Shared by
/// episodes, entities and relations.
pub fn hashed_id(prefix: &str, parts: &[&str]) -> String {
    let mut h = blake3::Hasher::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            h.update(b"\x1e");
        }
        h.update(p.as_bytes());
    }
    format!("{prefix}{}", &h.finalize().to_hex()[..32])
}

/// True when `s` is `prefix` followed by exactly 32 lowercase hex digits (see [`hashed_id`]).
pub fn is_hex_id(s: &str, prefix: &str) -> bool {
    s.len() == prefix.len() + 32 && s.strip_prefix(prefix).is_some_and(is_lower_hex)
}

/// True when every byte of `s` is a lowercase hex digit.
fn is_lower_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Id of an episode: `ep_` followed by 32 hex digits (128 bits) of the BLAKE3
/// hash of (scope key, session id). Deterministic, so re-running promotion for the
/// same session overwrites the same episode (workers are idempotent).
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(try_from = "String")]
pub struct EpisodeId(String);

impl TryFrom<String> for EpisodeId {
    type Error = Error;
    fn try_from(s: String) -> Result<Self> {
        EpisodeId::parse(&s)
    }
}

impl EpisodeId {
    /// The episode id of `session` in `scope`.
    pub fn for_session(scope: &Scope, session: &SessionId) -> Self {
        Self(hashed_id("ep_", &[&scope.key(), session.as_str()]))
    }
    /// Parses an id given by a caller.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] unless it is `ep_` + 32 lowercase hex digits.
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.trim();
        if is_hex_id(s, "ep_") {
            Ok(Self(s.to_string()))
        } else {
            Err(Error::InvalidInput(format!(
                "malformed episode id {:?}: expected ep_ and 32 hex digits",
                shown(s)
            )))
        }
    }
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// The id's 128 bits as a UUID, used as the point id in vector indexes.
    pub fn as_uuid(&self) -> uuid::Uuid {
        uuid::Uuid::from_u128(u128::from_str_radix(&self.0[3..], 16).unwrap_or(0))
    }
}

impl fmt::Display for EpisodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// At most the first 64 characters of a malformed id, for its error (an
/// error does not echo 10 KB back).
fn shown(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Hex digits of the short episode id the Memory Context shows (48 bits:
/// among 100,000 episodes of one scope, two share a short id with
/// probability about 2 × 10⁻⁵, and then the short id is refused as ambiguous).
pub const SHORT_ID_HEX: usize = 12;

impl EpisodeId {
    /// The short form the Memory Context shows: `ep_` and the first
    /// [`SHORT_ID_HEX`] hex digits (20 characters less a line); `memory_expand`
    /// takes it as well as the whole id ([`EpisodeRef`]).
    pub fn short(&self) -> &str {
        &self.0[..3 + SHORT_ID_HEX]
    }
}

/// An episode as a caller names it: its whole id, or a prefix of one
/// (`ep_` + at least [`SHORT_ID_HEX`] hex digits, such as
/// [`EpisodeId::short`]), which the store resolves within the scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EpisodeRef {
    /// The whole id.
    Id(EpisodeId),
    /// `ep_` + 12 to 31 lowercase hex digits.
    Prefix(String),
}

impl From<&EpisodeId> for EpisodeRef {
    fn from(id: &EpisodeId) -> Self {
        Self::Id(id.clone())
    }
}

impl From<EpisodeId> for EpisodeRef {
    fn from(id: EpisodeId) -> Self {
        Self::Id(id)
    }
}

impl EpisodeRef {
    /// Parses an id or a short id given by a caller.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] unless it is `ep_` and 12 to 32 lowercase hex digits.
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.trim();
        let digits = s.strip_prefix("ep_").unwrap_or("");
        let hex = is_lower_hex(digits);
        match digits.len() {
            32 if hex => Ok(Self::Id(EpisodeId(s.to_string()))),
            n if hex && (SHORT_ID_HEX..32).contains(&n) => Ok(Self::Prefix(s.to_string())),
            _ => Err(Error::InvalidInput(format!(
                "malformed episode id {:?}: expected ep_ and 32 hex digits (or the first {SHORT_ID_HEX} or more of them)",
                shown(s)
            ))),
        }
    }
}

/// Who spoke a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The end user.
    User,
    /// The chatbot.
    Assistant,
    /// A system or tool message.
    System,
}

impl Role {
    /// Lowercase name as stored and serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
        }
    }
    /// Parses `user`, `assistant` or `system`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on anything else.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "user" => Ok(Role::User),
            "assistant" => Ok(Role::Assistant),
            "system" => Ok(Role::System),
            other => Err(Error::InvalidInput(format!(
                "unknown role {other:?}: expected user, assistant or system"
            ))),
        }
    }
}

/// Longest accepted message, in bytes (16 MiB). Larger messages are an error.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// A message to record in the working tier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NewMessage {
    /// Who spoke.
    pub role: Role,
    /// Optional display name of the speaker (e.g. "Caroline"); used when
    /// rendering the raw session and summaries.
    #[serde(default)]
    pub name: Option<String>,
    /// The text, stored whole (up to [`MAX_MESSAGE_BYTES`]).
    pub content: String,
    /// The caller's timestamp of the message (RFC 3339). Replays pass the
    /// original time, so each session keeps its own date; when a caller
    /// leaves it out (JSON), the time of arrival is used.
    #[serde(default = "Utc::now")]
    pub timestamp: DateTime<Utc>,
    /// A key the caller chooses for this message, unique within its session
    /// (at most [`MAX_ID_BYTES`] bytes, no control characters, unpadded).
    /// Recording a message whose key the session already holds stores
    /// nothing and returns the held message's id, so a caller may retry a
    /// write whose answer it never got (a timeout, a node that died) without
    /// a second copy. Without a key, every call appends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

impl NewMessage {
    /// A user message at `timestamp`.
    pub fn user(content: impl Into<String>, timestamp: DateTime<Utc>) -> Self {
        Self {
            role: Role::User,
            name: None,
            content: content.into(),
            timestamp,
            idempotency_key: None,
        }
    }
    /// An assistant message at `timestamp`.
    pub fn assistant(content: impl Into<String>, timestamp: DateTime<Utc>) -> Self {
        Self {
            role: Role::Assistant,
            name: None,
            content: content.into(),
            timestamp,
            idempotency_key: None,
        }
    }
    /// Sets the speaker's display name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Checks the message before it is stored.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the content is empty or whitespace-only,
    /// or longer than [`MAX_MESSAGE_BYTES`] bytes; or when a speaker name is
    /// given but empty, padded, longer than [`MAX_ID_BYTES`] bytes or holds
    /// control characters.
    pub fn validate(&self) -> Result<()> {
        if let Some(n) = &self.name {
            if n.trim().is_empty()
                || n.trim() != n
                || n.len() > MAX_ID_BYTES
                || n.chars().any(char::is_control)
            {
                return Err(Error::InvalidInput(format!(
                    "speaker name {n:?} must be non-empty, unpadded, at most {MAX_ID_BYTES} bytes and free of control characters (or left out)"
                )));
            }
        }
        if let Some(k) = &self.idempotency_key {
            validate_id("idempotency_key", k)?;
        }
        if is_blank(&self.content) {
            return Err(Error::InvalidInput(
                "message content must not be empty, whitespace or only invisible characters".into(),
            ));
        }
        if self.content.len() > MAX_MESSAGE_BYTES {
            return Err(Error::InvalidInput(format!(
                "message is {} bytes, larger than the {MAX_MESSAGE_BYTES}-byte limit",
                self.content.len()
            )));
        }
        Ok(())
    }
    /// The idempotency key a message gets when its source names none (the
    /// importer's lines without `message_id`): `"h:"` and 32 hex digits of a
    /// BLAKE3 hash over the scope, session, timestamp (ms), role and content
    /// (the speaker name is left out: it labels, it does not distinguish).
    /// Two lines equal in all of these are one message said once, so a file
    /// re-imported after a kill adds nothing twice.
    pub fn content_key(&self, scope: &Scope, session: &SessionId) -> String {
        let mut h = blake3::Hasher::new();
        let ts = self.timestamp.timestamp_millis().to_string();
        for part in [
            scope.user_id(),
            scope.agent_id(),
            session.as_str(),
            ts.as_str(),
            self.role.as_str(),
            self.content.as_str(),
        ] {
            // length-prefixed, so ("ab","c") and ("a","bc") differ
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        format!("h:{}", &h.finalize().to_hex()[..32])
    }
    /// The speaker label used in transcripts: the name, else the role.
    pub fn speaker(&self) -> &str {
        self.name.as_deref().unwrap_or(self.role.as_str())
    }
}

/// One turn of a bulk load: the `strata import` JSONL line as JSON, for
/// back-filling history. `user_id` and `agent_id` may be left out when the
/// scope is given by the caller (the HTTP path); when present they must
/// equal it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportTurn {
    /// End user (optional where the scope is implied).
    #[serde(default)]
    pub user_id: Option<String>,
    /// Agent (optional where the scope is implied).
    #[serde(default)]
    pub agent_id: Option<String>,
    /// The session the turn belongs to.
    pub session_id: SessionId,
    /// Who spoke.
    pub role: Role,
    /// Optional display name of the speaker.
    #[serde(default)]
    pub name: Option<String>,
    /// The text.
    pub content: String,
    /// When it was said (RFC 3339); the time of arrival when left out.
    #[serde(default = "Utc::now")]
    pub timestamp: DateTime<Utc>,
    /// See [`NewMessage::idempotency_key`]; `message_id` is accepted as
    /// its other name (the field exporters of chat logs use).
    #[serde(default, alias = "message_id", skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

impl ImportTurn {
    /// The session this turn goes to and the message it records.
    pub fn into_parts(self) -> (SessionId, NewMessage) {
        (
            self.session_id,
            NewMessage {
                role: self.role,
                name: self.name,
                content: self.content,
                timestamp: self.timestamp,
                idempotency_key: self.idempotency_key,
            },
        )
    }
}

/// A stored message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Message {
    /// Row id.
    pub id: MessageId,
    /// Session it belongs to.
    pub session_id: SessionId,
    /// Position in the session, from 0, in record order.
    pub seq: i64,
    /// The recorded message.
    #[serde(flatten)]
    pub message: NewMessage,
}

/// Lifecycle of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SessionStatus {
    /// Still taking messages (working tier).
    Open,
    /// Ended by the caller or the idle timeout; promotion is queued or done.
    Completed,
}

/// A session's metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Session {
    /// The caller's session id.
    pub id: SessionId,
    /// Open or completed.
    pub status: SessionStatus,
    /// Timestamp (caller's clock) of the first message.
    pub started_at: DateTime<Utc>,
    /// Timestamp (caller's clock) of the last message.
    pub last_message_at: DateTime<Utc>,
    /// Number of messages.
    pub message_count: i64,
}

/// A scope's activity in the system of record (the console's scope list,
/// [`crate::store::RecordStore::scopes`]; `Memory::scopes` adds the scopes
/// that only hold typed memories, with 0 sessions).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScopeActivity {
    /// The user and agent.
    pub scope: Scope,
    /// Sessions recorded.
    pub sessions: usize,
    /// Of which still open.
    pub open_sessions: usize,
    /// Episodes stored (expired ones until the pruner removes them).
    pub episodes: usize,
    /// Timestamp (caller's clock) of the scope's latest message; for a scope
    /// without sessions, its latest typed-memory update.
    pub last_message_at: DateTime<Utc>,
}

/// Where a session is on its way to an episode (`GET …/sessions/{session_id}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PromotionStatus {
    /// Still taking messages.
    Open,
    /// Ended; promotion is queued or running (or waits out a retry backoff).
    Completed,
    /// Its episode is written: `memory_search` and `memory_expand` find it
    /// (by BM25 at once, by vector once `vectors_indexed`).
    Promoted,
    /// Promotion failed every attempt and is parked in the dead-letter
    /// table (`GET /v1/jobs`, `strata jobs retry ID`); the messages are kept.
    Failed,
    /// It was promoted, and the episode is gone since: its TTL passed
    /// (`episodes.ttl_days`) or it was deleted.
    Expired,
}

/// What the outbox still has to do for a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SessionJobKind {
    /// Summarise the session into its episode.
    Promotion,
    /// Embed the episode's vector units (`episodes.defer_vectors`).
    Vectors,
    /// Extract entities and relations from the episode (the semantic tier).
    Graph,
}

/// One outbox job of a session not yet done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SessionJob {
    /// Outbox row id (`strata jobs retry ID`, `POST /v1/jobs/retry` once parked).
    pub id: i64,
    /// What it does.
    pub kind: SessionJobKind,
    /// Parked after its last attempt failed (else pending).
    pub parked: bool,
    /// Failed attempts so far.
    pub attempts: u32,
    /// The last error, when an attempt failed.
    pub last_error: Option<String>,
}

/// A session's promotion status: [`Session`]'s metadata, its episode once
/// promoted, and what the background workers still have to do for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SessionState {
    /// The caller's session id.
    pub session_id: SessionId,
    /// Open, completed, promoted, failed (parked) or expired.
    pub status: PromotionStatus,
    /// The episode's id, once promoted (deterministic: the same id
    /// `memory_search` returns for this session).
    pub episode_id: Option<EpisodeId>,
    /// Number of messages recorded.
    pub message_count: i64,
    /// Timestamp (caller's clock) of the first message.
    pub first_message_at: DateTime<Utc>,
    /// Timestamp (caller's clock) of the last message.
    pub last_message_at: DateTime<Utc>,
    /// The episode's vectors are in the vector index (false before
    /// promotion and while a deferred embedding job is open).
    pub vectors_indexed: bool,
    /// The session's outbox jobs not yet done, oldest first.
    pub jobs: Vec<SessionJob>,
}

/// How an episode's summary was produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SummaryKind {
    /// Offline extractive summariser: selected sentences of the session, not an LLM.
    Extractive,
    /// An LLM wrote the summary.
    Llm,
}

impl SummaryKind {
    /// Lowercase name as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            SummaryKind::Extractive => "extractive",
            SummaryKind::Llm => "llm",
        }
    }
}

/// One finished session, summarised: the episodic tier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Episode {
    /// Deterministic id (see [`EpisodeId::for_session`]).
    pub id: EpisodeId,
    /// The session it summarises.
    pub session_id: SessionId,
    /// Full summary (L1 `memory_expand`).
    pub summary: String,
    /// One-line abstract: the summary's first sentence of 20–200 characters (L0).
    #[serde(rename = "abstract")]
    pub abstract_: String,
    /// Extractive or LLM.
    pub summary_kind: SummaryKind,
    /// Caller timestamp of the session's first message.
    pub started_at: DateTime<Utc>,
    /// Caller timestamp of the session's last message.
    pub ended_at: DateTime<Utc>,
    /// Wall-clock time the episode was written.
    pub created_at: DateTime<Utc>,
    /// Wall-clock expiry (created_at + `episodes.ttl_days`); `None` = never.
    pub expires_at: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_rejects_bad_ids() {
        assert!(Scope::new("", "a").is_err());
        assert!(Scope::new("u", "  ").is_err());
        assert!(Scope::new("u\u{1f}x", "a").is_err());
        assert!(Scope::new("x".repeat(300), "a").is_err());
        assert!(
            Scope::new("alice ", "a").is_err(),
            "padded ids would alias distinct owners"
        );
        assert!(Scope::new("alice smith", "a").is_ok());
        let s = Scope::new("민지", "bot").unwrap();
        assert_eq!(s.key(), "민지\u{1f}bot");
        assert!(serde_json::from_str::<Scope>(r#"{"user_id":"","agent_id":"a"}"#).is_err());
        // ids that arrive as JSON are validated like the ones built in code
        for bad in [r#""""#, r#""   ""#, r#""ab""#] {
            assert!(serde_json::from_str::<SessionId>(bad).is_err(), "{bad}");
        }
        assert!(serde_json::from_str::<SessionId>(&format!("{:?}", "s".repeat(300))).is_err());
        assert_eq!(
            serde_json::to_string(&SessionId::new("s 1").unwrap()).unwrap(),
            r#""s 1""#
        );
        assert!(serde_json::from_str::<EpisodeId>(r#""ep_nope""#).is_err());
    }

    #[test]
    fn episode_ids_are_deterministic_and_parse() {
        let s = Scope::new("u", "a").unwrap();
        let a = EpisodeId::for_session(&s, &SessionId::new("s1").unwrap());
        let b = EpisodeId::for_session(&s, &SessionId::new("s1").unwrap());
        let other = EpisodeId::for_session(
            &Scope::new("u2", "a").unwrap(),
            &SessionId::new("s1").unwrap(),
        );
        assert_eq!(a, b);
        assert_ne!(a, other);
        assert_eq!(EpisodeId::parse(a.as_str()).unwrap(), a);
        assert!(EpisodeId::parse("ep_xyz").is_err());
        // the short form: a prefix of 12 to 31 digits; fewer, more or not hex is refused
        assert_eq!(a.short().len(), 15);
        assert_eq!(EpisodeRef::parse(a.as_str()).unwrap(), EpisodeRef::Id(a.clone()));
        assert_eq!(EpisodeRef::parse(a.short()).unwrap(), EpisodeRef::Prefix(a.short().to_string()));
        let long = "a".repeat(10_000);
        assert!(EpisodeRef::parse(&long).unwrap_err().to_string().len() < 200, "an error does not echo a long id whole");
        for bad in ["ep_0123456789a", "ep_0123456789aG", "0123456789abcdef", "ep_", &format!("{}0", a.as_str())] {
            assert!(matches!(EpisodeRef::parse(bad), Err(Error::InvalidInput(_))), "{bad}");
        }
        // stored ids must never change: BLAKE3(scope key, U+001E, session id)
        let mut h = blake3::Hasher::new();
        h.update(s.key().as_bytes());
        h.update(b"\x1e");
        h.update(b"s1");
        assert_eq!(a.as_str(), format!("ep_{}", &h.finalize().to_hex()[..32]));
    }

    #[test]
    fn empty_messages_rejected() {
        let t = Utc::now();
        assert!(NewMessage::user("   \n", t).validate().is_err());
        // invisible characters alone are as empty as whitespace
        for blank in ["\u{200B}", "\u{200B}\u{200D} \u{FEFF}", "\u{2060}\u{00AD}\t"] {
            assert!(is_blank(blank) && NewMessage::user(blank, t).validate().is_err(), "{blank:?}");
        }
        assert!(!is_blank("a\u{200B}") && !is_blank("👍") && !is_blank("\u{200D}민"));
        assert!(NewMessage::user("hi", t).validate().is_ok());
        let named = |n: &str| NewMessage {
            name: Some(n.into()),
            ..NewMessage::user("hi", t)
        };
        assert!(named("Mina").validate().is_ok());
        assert!(named("민지 박").validate().is_ok());
        for bad in ["", "  ", " Mina", "Mi\u{0}na", "Mi\nna"] {
            assert!(named(bad).validate().is_err(), "{bad:?}");
        }
        assert!(named(&"x".repeat(300)).validate().is_err());
    }
}
