//! The chat model: [`ChatModel`] (summarisation, graph extraction, merge
//! questions) behind one trait so an OpenAI-compatible backend can replace
//! the offline default. Embeddings are [`crate::embed`]'s.
//!
//! - [`offline::OfflineChat`]: extractive summariser, used when no LLM endpoint is configured.
//! - [`openai::OpenAiChat`]: any OpenAI-compatible endpoint (its retries and
//!   client are shared with [`crate::embed::remote`]).
//! - [`prompts`]: the versioned prompt files and their JSON schemas.
//! - [`CallLog`]: per-call cost records (tokens, latency, errors) that the
//!   workers persist in the `llm_calls` table.

pub mod load;
pub mod offline;
pub mod openai;
pub mod prompts;
pub mod repair;

use async_trait::async_trait;
use std::sync::Mutex;

pub use crate::model::{CallRecord, TranscriptTurn};

use crate::error::Result;
use crate::model::SummaryKind;

/// A summary produced by a [`ChatModel`].
#[derive(Debug, Clone)]
pub struct Summary {
    /// The summary text.
    pub text: String,
    /// Extractive (offline) or LLM.
    pub kind: SummaryKind,
    /// The one-line abstract, when the summariser chose it (the extractive
    /// one picks the line covering the session's main topic); `None` = the
    /// first long-enough sentence ([`crate::recall::abstracts::make_abstract`]).
    pub abstract_: Option<String>,
}

/// Collects the [`CallRecord`]s of one job (thread-safe, append-only).
#[derive(Debug, Default)]
pub struct CallLog(Mutex<Vec<CallRecord>>);

impl CallLog {
    /// Appends one record.
    pub fn push(&self, r: CallRecord) {
        metrics::counter!("strata_llm_calls_total", "task" => r.task).increment(1);
        if r.error.is_some() {
            metrics::counter!("strata_llm_failures_total", "task" => r.task).increment(1);
        } else if r.attempt == 1 {
            metrics::counter!("strata_llm_first_try_valid_total", "task" => r.task).increment(1);
        }
        metrics::counter!("strata_llm_tokens_total", "task" => r.task, "direction" => "in")
            .increment(r.input_tokens as u64);
        metrics::counter!("strata_llm_tokens_total", "task" => r.task, "direction" => "out")
            .increment(r.output_tokens as u64);
        if let Ok(mut v) = self.0.lock() {
            v.push(r);
        }
    }
    /// Takes every record collected so far.
    pub fn take(&self) -> Vec<CallRecord> {
        self.0
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }
}

/// The chat-model role: the promotion tasks that need language understanding.
#[async_trait]
pub trait ChatModel: Send + Sync + 'static {
    /// A stable id such as `offline:extractive` or `openai:gpt-4o-mini`.
    fn id(&self) -> String;

    /// Summarises one finished session. `started_at` is the session's first
    /// message date (`YYYY-MM-DD`), for resolving relative dates. Every LLM
    /// request made, failed or not, is appended to `log`.
    ///
    /// # Errors
    /// [`crate::Error::Chat`] when the model fails after its retries; the caller
    /// retries the job and finally parks it in the dead-letter table.
    async fn summarize(
        &self,
        transcript: &[TranscriptTurn],
        started_at: &str,
        log: &CallLog,
    ) -> Result<Summary>;

    /// Extracts entities and relations from a session's turns
    /// (`prompts/extract_entities_relations`; the episode summary stands in
    /// when the turns are gone). `None` = this model does not extract; the
    /// offline extractor runs on the session's turns instead.
    ///
    /// # Errors
    /// [`crate::Error::Chat`] after the model's retries.
    async fn extract(
        &self,
        _summary: &str,
        _turns: &[TranscriptTurn],
        _speakers: &[String],
        _started_at: &str,
        _log: &CallLog,
    ) -> Result<Option<crate::model::graph::Extraction>> {
        Ok(None)
    }

    /// For each ambiguous pair, whether both entities are the same thing
    /// (`prompts/dedup_entities`). `None` = this model cannot judge; the pairs stay apart.
    ///
    /// # Errors
    /// [`crate::Error::Chat`] after the model's retries.
    async fn confirm_same(
        &self,
        _pairs: &[(crate::model::graph::Entity, crate::model::graph::Entity)],
        _log: &CallLog,
    ) -> Result<Option<Vec<bool>>> {
        Ok(None)
    }
}
