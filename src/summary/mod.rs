//! The episodic tier's summariser: one finished session → the episode's
//! summary and abstract, behind [`Summarizer`] so an LLM can replace the
//! offline default.
//!
//! - [`extractive::ExtractiveSummarizer`]: picks the session's most
//!   informative sentences, no model (`llm.provider = "offline"`, the default).
//! - [`model::ModelSummarizer`]: an OpenAI-compatible chat model through
//!   [`crate::llm::openai::OpenAiChat`] (`prompts/summarize`, `prompts/merge_summaries`).
//!
//! This module sits below the runtime, which holds the summariser the
//! episodic worker calls; [`crate::episodic`] (the capability above the
//! runtime) reads what it wrote.

pub mod extractive;
pub mod model;

use std::sync::Arc;

use async_trait::async_trait;

use crate::config::Config;
use crate::error::Result;
use crate::llm::openai::OpenAiChat;
use crate::llm::CallLog;
use crate::model::{SummaryKind, TranscriptTurn};

/// A summary produced by a [`Summarizer`].
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

/// Summarises finished sessions (the episodic worker's task).
#[async_trait]
pub trait Summarizer: Send + Sync + 'static {
    /// A stable id such as `offline:extractive` or `openai:gpt-4o-mini`.
    fn id(&self) -> String;

    /// Summarises one finished session. `started_at` is the session's first
    /// message date (`YYYY-MM-DD`), for resolving relative dates. Every LLM
    /// request made, failed or not, is appended to `log`.
    ///
    /// # Errors
    /// [`crate::Error::Chat`] when the model fails after its retries; the caller
    /// retries the job and finally parks it in the dead-letter table.
    async fn summarize(&self, transcript: &[TranscriptTurn], started_at: &str, log: &CallLog) -> Result<Summary>;
}

/// The summariser for `config`: the model's when `chat` is a client
/// ([`crate::llm::load::chat`]), else the extractive one with the
/// `[episodes]` budget (`summary_max_sentences`, `summary_max_chars`).
pub fn load(config: &Config, chat: Option<Arc<OpenAiChat>>) -> Arc<dyn Summarizer> {
    match chat {
        Some(chat) => Arc::new(model::ModelSummarizer::new(chat)),
        None => Arc::new(extractive::ExtractiveSummarizer {
            options: extractive::ExtractiveOptions {
                max_sentences: config.episodes.summary_max_sentences,
                max_chars: config.episodes.summary_max_chars,
            },
        }),
    }
}
