//! Records shared by the stores, the LLM layer and the graph: transcript
//! turns handed to a chat model, LLM call records, delete counts and the
//! dedup audit rows. In `model/` so those layers need not import each other.

use serde::{Deserialize, Serialize};

use super::graph::EntityId;

/// One turn of a session transcript handed to a chat model.
#[derive(Debug, Clone)]
pub struct TranscriptTurn {
    /// Speaker label (name or role).
    pub speaker: String,
    /// What was said.
    pub text: String,
    /// When it was said (the caller's timestamp), if known: facts extracted
    /// from the turn are dated by it.
    pub at: Option<chrono::DateTime<chrono::Utc>>,
}

impl From<&super::Message> for TranscriptTurn {
    /// The message's speaker label (name, else role), content and timestamp.
    fn from(m: &super::Message) -> Self {
        Self {
            speaker: m.message.speaker().to_string(),
            text: m.message.content.clone(),
            at: Some(m.message.timestamp),
        }
    }
}

/// One LLM request attempt, as recorded in the `llm_calls` table.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CallRecord {
    /// Prompt task name (`summarize`, `merge_summaries`, ...).
    pub task: &'static str,
    /// Model name sent to the server.
    pub model: String,
    /// The prompt file's `version`.
    pub prompt_version: u32,
    /// 1-based attempt number within one call's retries.
    pub attempt: u32,
    /// Why the attempt failed; `None` when it succeeded.
    pub error: Option<String>,
    /// Prompt tokens as the server reported them (estimated at 3 bytes per
    /// token when the server reports no usage).
    pub input_tokens: u32,
    /// Completion tokens as the server reported them (estimated likewise).
    pub output_tokens: u32,
    /// Wall time of the attempt, in ms.
    pub latency_ms: u64,
}

/// Counts of rows removed by an erasure or prune, per table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeleteCounts {
    /// Rows per table name.
    pub rows: std::collections::BTreeMap<String, usize>,
}

/// One judged pair, as written to the `dedup_log` table.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LoggedDecision {
    /// The other entity of the pair.
    pub candidate: EntityId,
    /// `merge`, `keep` or `skip`.
    pub decision: &'static str,
    /// Best similarity in [0, 1].
    pub similarity: f64,
    /// Why.
    pub reason: String,
}
