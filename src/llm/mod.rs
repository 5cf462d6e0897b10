//! How Strata talks to a chat model: transport only. The tasks that use a
//! model live with their tier and behind a trait each: summarising a
//! session ([`crate::summary::Summarizer`]) and extracting and de-duplicating
//! the graph ([`crate::graph::extract::GraphExtractor`]). Embeddings are
//! [`crate::embed`]'s.
//!
//! - [`openai::OpenAiChat`]: any OpenAI-compatible endpoint; one call runs
//!   one prompt file's task with retries and returns its schema-valid JSON
//!   (its client and retries are shared with [`crate::embed::remote`]).
//! - [`repair`]: near-JSON answers repaired and fitted to the schema.
//! - [`prompts`]: the versioned prompt files and their JSON schemas.
//! - [`CallLog`]: per-call cost records (tokens, latency, errors) that the
//!   workers persist in the `llm_calls` table.

pub mod load;
pub mod openai;
pub mod prompts;
pub mod repair;

use std::sync::Mutex;

pub use crate::model::{CallRecord, TranscriptTurn};


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
